#include "lockstep/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

// Makes a rename or link durable. Some filesystems cannot sync a folder; the rename is atomic regardless.
void SyncParentDirectory(const std::string& path) {
  auto slash = path.find_last_of('/');
  std::string directory = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)),
      temporary_(fmt::format("{}.tmp.{}", path_, ::getpid())),
      what_(std::move(what)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowErrno(fmt::format("cannot create {} {}", what_, temporary_));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::Write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) ThrowErrno(fmt::format("cannot write {} {}", what_, temporary_));
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFile::Close() {
  if (::fsync(fd_) != 0) ThrowErrno(fmt::format("cannot sync {} {}", what_, temporary_));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) ThrowErrno(fmt::format("cannot close {} {}", what_, temporary_));
}

void AtomicFile::Commit() {
  Close();
  if (::rename(temporary_.c_str(), path_.c_str()) != 0)
    ThrowErrno(fmt::format("cannot rename {} {} to {}", what_, temporary_, path_));
  committed_ = true;
  SyncParentDirectory(path_);
}

bool AtomicFile::CommitIfAbsent() {
  Close();
  const bool created = ::link(temporary_.c_str(), path_.c_str()) == 0;
  const int error = errno;
  ::unlink(temporary_.c_str());  // the link, if made, holds the data
  committed_ = true;
  if (!created && error != EEXIST) {
    errno = error;
    ThrowErrno(fmt::format("cannot create {} {}", what_, path_));
  }
  if (created) SyncParentDirectory(path_);
  return created;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes, const std::string& what) {
  AtomicFile file(path, what);
  file.Write(bytes);
  file.Commit();
}

}  // namespace lockstep
