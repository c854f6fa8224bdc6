// A file that appears whole or not at all: every file lockstep writes for others to read (checkpoints,
// predictions, nets, the launcher's store entries) goes through this.
#pragma once

#include <string>

namespace lockstep {

// Writes go to "<path>.tmp.<pid>" beside `path`; Commit syncs them and renames the temporary over `path`
// (then syncs the folder, so that the rename survives a crash). Destroyed uncommitted, the temporary is
// removed. Errors are IoError, or NoSpace when the disk is full, naming `what` and the file. One process
// writes a path through one AtomicFile at a time (the temporary's name is the path's and the pid).
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(const void* data, size_t size);
  void Write(const std::string& bytes) { Write(bytes.data(), bytes.size()); }
  void Commit();
  // Commits only where `path` does not exist yet (a hard link, not a rename); false when it does.
  bool CommitIfAbsent();

 private:
  void Close();

  std::string path_, temporary_, what_;
  int fd_ = -1;
  bool committed_ = false;
};

// `bytes` as the whole of `path`, atomically (AtomicFile).
void WriteFileAtomically(const std::string& path, const std::string& bytes, const std::string& what);

}  // namespace lockstep
