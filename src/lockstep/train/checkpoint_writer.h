// Checkpoints that do not stop training: the training thread copies the state into host buffers (the same
// buffers every time) and a background thread writes the file, then removes the oldest mid-epoch checkpoints
// beyond the number to keep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/train/checkpoint.h"

namespace lockstep {

class CheckpointWriter {
 public:
  // Mid-epoch checkpoints go to IterationCheckpointPath(directory, name, iteration); the newest `keep` of
  // them stay (0: all).
  CheckpointWriter(std::string directory, std::string name, int keep);
  // Finishes the write in progress. Call Finish() first to hear of its error.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Copies the blobs `scope + name` and the state (at state.iteration) and returns; the file is written in
  // the background. Waits first for the previous write to end, and throws its error.
  void SaveInBackground(const Workspace& ws, const std::string& scope, const std::vector<std::string>& names,
                        const TrainerState& state);
  // Writes `path` on this thread through the same buffers, after the write in progress (an epoch's
  // checkpoint, which the caller waits for).
  void SaveNow(const std::string& path, const Workspace& ws, const std::string& scope,
               const std::vector<std::string>& names, const TrainerState& state);
  // SaveInBackground's mid-epoch checkpoint, written on this thread (where a stopped run stopped).
  void SaveMidEpochNow(const Workspace& ws, const std::string& scope, const std::vector<std::string>& names,
                       const TrainerState& state);
  // Throws the IoError of a background write that failed, without waiting: cheap enough after every step.
  void ThrowIfFailed();
  // Waits for the write in progress and throws its error.
  void Finish();

 private:
  void WaitForWrite(std::unique_lock<std::mutex>& lock);  // then throws a failed write's error
  void Run();                                             // the writer thread
  // Writes the snapshot as its iteration's checkpoint, then removes the oldest beyond `keep`.
  void WriteMidEpoch();
  void RemoveOldCheckpoints(int64_t written_iteration) const;

  const std::string directory_, name_;
  const int keep_;
  CheckpointSnapshot snapshot_;  // owned by the writer thread while pending_
  std::mutex mutex_;             // guards everything below
  std::condition_variable changed_;
  bool pending_ = false;  // a snapshot waits to be written or is being written
  bool stopping_ = false;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};  // error_ is set: read without the lock after every step
  std::thread thread_;
};

}  // namespace lockstep
