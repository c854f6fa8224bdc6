// The backend registry and OpenDB's checks of the path, shared by every backend so that each kind of
// mistake (missing path, wrong --db_type, path taken) reads the same whatever the backend.
#include "lockstep/data/db.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::map<std::string, DbBackend>& Backends() {
  static std::map<std::string, DbBackend> backends;
  return backends;
}

std::mutex& BackendsMutex() {
  static std::mutex mutex;
  return mutex;
}

bool HoldsFile(const std::string& directory, const std::string& name) {
  std::error_code error;
  return fs::is_regular_file(fs::path(directory) / name, error);
}

// Whether the folder, or a folder in it (a class per folder, as ImageNet's), holds JPEG or PNG files. Looks
// at a bounded number of entries: a folder of a million images answers as fast as a small one.
bool HoldsImages(const std::string& directory) {
  constexpr int kEntriesToLook = 1000;
  std::error_code error;
  fs::recursive_directory_iterator it(directory, error), end;
  for (int looked = 0; !error && it != end && looked < kEntriesToLook; it.increment(error), ++looked) {
    if (it.depth() > 0) it.disable_recursion_pending();
    std::string extension = it->path().extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (extension == ".jpg" || extension == ".jpeg" || extension == ".png") return true;
  }
  return false;
}

// The checks of an existing database directory that need no backend.
void CheckReadable(const std::string& type, const DbBackend& backend, const std::string& path) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found)
    throw InvalidInput(fmt::format("--db_type {}: '{}' does not exist; check the path", type, path));
  if (error) throw IoError(fmt::format("--db_type {}: cannot read '{}': {}", type, path, error.message()));
  if (status.type() != fs::file_type::directory)
    throw InvalidInput(
        fmt::format("--db_type {}: '{}' is a file, not a database directory; pass the "
                    "directory that holds {}",
                    type, path, backend.marker_file));
  if (HoldsFile(path, backend.marker_file)) return;
  std::string guess = GuessDbType(path);
  if (!guess.empty())
    throw InvalidInput(
        fmt::format("--db_type {}: '{}' has no {}, so it is not a database of that type; it "
                    "looks like {}: pass --db_type {}",
                    type, path, backend.marker_file, guess, guess));
  if (HoldsImages(path))
    throw InvalidInput(
        fmt::format("'{}' is a folder of images, not a database: make one with `lockstep make-db "
                    "--image_folder {} --list LIST --output DB` (LIST: 'relative/path label' lines) and "
                    "train on DB",
                    path, path));
  throw InvalidInput(
      fmt::format("--db_type {}: '{}' has no {}, so it is not a database of that type; check "
                  "the path",
                  type, path, backend.marker_file));
}

void CheckCreatable(const std::string& type, const std::string& path) {
  std::error_code error;
  if (fs::symlink_status(path, error).type() != fs::file_type::not_found)
    throw InvalidInput(
        fmt::format("--db_type {}: '{}' already exists; remove it or choose a new path", type, path));
  fs::path parent = fs::absolute(fs::path(path), error).parent_path();
  if (!fs::is_directory(parent, error))
    throw IoError(fmt::format("--db_type {}: cannot create '{}': directory '{}' does not exist", type, path,
                              parent.string()));
}

}  // namespace

bool RegisterDbBackend(const std::string& type, DbBackend backend) {
  std::lock_guard<std::mutex> lock(BackendsMutex());
  LOCKSTEP_ENFORCE(Backends().emplace(type, std::move(backend)).second, "database type '{}' registered twice",
                   type);
  return true;
}

std::vector<std::string> DbTypes() {
  std::lock_guard<std::mutex> lock(BackendsMutex());
  std::vector<std::string> types;
  for (const auto& [type, backend] : Backends()) types.push_back(type);
  return types;
}

std::string GuessDbType(const std::string& path) {
  std::lock_guard<std::mutex> lock(BackendsMutex());
  for (const auto& [type, backend] : Backends())
    if (HoldsFile(path, backend.marker_file)) return type;
  return "";
}

std::unique_ptr<DB> OpenDB(const std::string& type, const std::string& path, DbMode mode) {
  DbBackend backend;
  {
    std::lock_guard<std::mutex> lock(BackendsMutex());
    auto found = Backends().find(type);
    if (found != Backends().end()) backend = found->second;
  }
  if (!backend.open)
    throw InvalidInput(fmt::format("unknown --db_type '{}' for '{}'; known types: {}", type, path,
                                   fmt::join(DbTypes(), ", ")));
  if (mode == DbMode::kRead)
    CheckReadable(type, backend, path);
  else
    CheckCreatable(type, path);
  return backend.open(path, mode);
}

}  // namespace lockstep
