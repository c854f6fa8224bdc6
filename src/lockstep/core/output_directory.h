// Directories a run writes into are made ready before any work: a run that trains for hours must not fail at
// its first checkpoint or log row because a folder is missing or read-only.
#pragma once

#include <string>

namespace lockstep {

enum class IfMissing {
  kCreate,  // a folder of this process's own outputs: created with its parents, as `mkdir -p`
  kRefuse,  // a folder others share (a rendezvous on NFS): creating a local one would hide a missing mount
};

// Makes sure `directory` exists and this process may create files in it. When it cannot, throws one line that
// names `flag` (e.g. "--log_dir") and says what to do: InvalidInput for a path that is no writable directory
// (running again fails again), NoSpace, or IoError where the system failed; `missing_hint` follows "does not
// exist" in the refusal of a missing directory (kRefuse).
void PrepareOutputDirectory(const std::string& directory, const std::string& flag, IfMissing if_missing,
                            const std::string& missing_hint = "create it first");

// For a file this run writes: refuses a `path` that is a directory, and prepares the directory it goes in
// (created when missing), with the same errors as PrepareOutputDirectory, naming `flag`.
void PrepareOutputFile(const std::string& path, const std::string& flag);

// Takes an advisory lock (flock) on the open file `fd` for as long as it stays open: false when another
// process holds one, so that two runs do not write the same outputs. A filesystem without locks (ENOLCK)
// counts as free: the lock guards against a mistake, nothing depends on it.
bool LockForThisProcess(int fd);

// The directory a file path is in ("." for a bare name).
std::string DirectoryOf(const std::string& file_path);

}  // namespace lockstep
