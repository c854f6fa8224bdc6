// Checking and creating the directories of a run's outputs.
#include "lockstep/core/output_directory.h"

#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "lockstep/core/enforce.h"

namespace lockstep {

namespace fs = std::filesystem;

void PrepareOutputDirectory(const std::string& directory, const std::string& flag, IfMissing if_missing,
                            const std::string& missing_hint) {
  // What the user named wrongly fails again on a restart (InvalidInput); what the system failed at may not.
  std::error_code error;
  const fs::file_status status = fs::status(directory, error);
  if (status.type() == fs::file_type::not_found) {
    if (if_missing == IfMissing::kRefuse)
      throw InvalidInput(fmt::format("{} '{}' does not exist: {}", flag, directory, missing_hint));
    fs::create_directories(directory, error);
    if (error) {
      const std::string what =
          fmt::format("{} '{}': cannot create it ({}); pass a directory this user can write", flag, directory,
                      error.message());
      const int code = error.value();
      if (code == ENOSPC || code == EDQUOT) throw NoSpace(what);
      if (code == EACCES || code == EPERM || code == EROFS || code == ENOTDIR || code == EEXIST ||
          code == ENOENT)
        throw InvalidInput(what);
      throw IoError(what);
    }
  } else if (status.type() == fs::file_type::none) {
    throw IoError(fmt::format("{} '{}': cannot look at it ({})", flag, directory, error.message()));
  } else if (status.type() != fs::file_type::directory) {
    throw InvalidInput(fmt::format("{} '{}' is not a directory; pass a directory", flag, directory));
  }
  if (access(directory.c_str(), W_OK | X_OK) != 0)
    throw InvalidInput(
        fmt::format("{} '{}' is not writable; pass a directory this user can write", flag, directory));
}

void PrepareOutputFile(const std::string& path, const std::string& flag) {
  std::error_code error;
  if (fs::is_directory(path, error))
    throw InvalidInput(fmt::format("{} '{}' is a directory; name the file to write", flag, path));
  const std::string folder = DirectoryOf(path);
  if (fs::exists(folder, error) && !fs::is_directory(folder, error))
    throw InvalidInput(
        fmt::format("{} '{}': '{}' is a file, not a folder; name a file in a folder", flag, path, folder));
  PrepareOutputDirectory(folder, flag, IfMissing::kCreate);
}

bool LockForThisProcess(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK; }

std::string DirectoryOf(const std::string& file_path) {
  const fs::path parent = fs::path(file_path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace lockstep
