// The background checkpoint writer: one snapshot in flight at a time, so memory stays at one copy of the
// state and a checkpoint is never skipped; the step that would take the next one waits instead.
#include "lockstep/train/checkpoint_writer.h"

#include <filesystem>
#include <system_error>
#include <utility>

namespace lockstep {

CheckpointWriter::CheckpointWriter(std::string directory, std::string name, int keep)
    : directory_(std::move(directory)), name_(std::move(name)), keep_(keep), thread_([this] { Run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();  // Run writes a pending snapshot before it returns
}

void CheckpointWriter::WaitForWrite(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [this] { return !pending_; });
  if (error_) std::rethrow_exception(error_);
}

void CheckpointWriter::SaveInBackground(const Workspace& ws, const std::string& scope,
                                        const std::vector<std::string>& names, const TrainerState& state) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The previous checkpoint is still being written when the disk is slower than --checkpoint_every_iters
  // steps: the step waits for it rather than drop a checkpoint or hold a second copy of the state.
  WaitForWrite(lock);
  snapshot_.Take(ws, scope, names, state);
  pending_ = true;
  lock.unlock();
  changed_.notify_all();
}

void CheckpointWriter::SaveNow(const std::string& path, const Workspace& ws, const std::string& scope,
                               const std::vector<std::string>& names, const TrainerState& state) {
  std::unique_lock<std::mutex> lock(mutex_);
  WaitForWrite(lock);
  snapshot_.Take(ws, scope, names, state);
  snapshot_.Write(path);
}

void CheckpointWriter::SaveMidEpochNow(const Workspace& ws, const std::string& scope,
                                       const std::vector<std::string>& names, const TrainerState& state) {
  std::unique_lock<std::mutex> lock(mutex_);
  WaitForWrite(lock);
  snapshot_.Take(ws, scope, names, state);
  WriteMidEpoch();
}

void CheckpointWriter::WriteMidEpoch() {
  const int64_t iteration = snapshot_.state().iteration;
  snapshot_.Write(IterationCheckpointPath(directory_, name_, iteration));
  RemoveOldCheckpoints(iteration);
}

void CheckpointWriter::ThrowIfFailed() {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::rethrow_exception(error_);
}

void CheckpointWriter::Finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  WaitForWrite(lock);
}

void CheckpointWriter::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return pending_ || stopping_; });
    if (!pending_) return;
    lock.unlock();
    std::exception_ptr error;
    try {
      WriteMidEpoch();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    pending_ = false;
    if (error) {
      error_ = error;
      failed_.store(true, std::memory_order_release);
    }
    changed_.notify_all();
  }
}

// Only checkpoints up to the one just written count: a later one left by another run (resumed from an earlier
// point into the same directory) is not this run's to remove, and must not push this run's newest out.
void CheckpointWriter::RemoveOldCheckpoints(int64_t written_iteration) const {
  if (keep_ == 0) return;
  std::vector<std::pair<int64_t, std::string>> older;
  for (auto& checkpoint : IterationCheckpoints(directory_, name_))
    if (checkpoint.first <= written_iteration) older.push_back(std::move(checkpoint));
  for (size_t i = 0; i + static_cast<size_t>(keep_) < older.size(); ++i) {
    std::error_code error;
    if (!std::filesystem::remove(older[i].second, error) && error)
      throw IoError(fmt::format("cannot remove old checkpoint {} (--keep_checkpoints {}): {}",
                                older[i].second, keep_, error.message()));
  }
}

}  // namespace lockstep
