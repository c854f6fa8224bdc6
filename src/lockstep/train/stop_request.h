// Ctrl-C and SIGTERM as a request to stop training between two steps, so that the run can write a checkpoint
// of where it stopped instead of dying mid-step with an epoch's work lost. The shards of a job agree on the
// step: their requests are summed over all of them while training goes on (StopVote).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace lockstep {

class Communicator;

// While alive, SIGINT and SIGTERM set the stop request instead of ending the process; a second one ends it
// at once, as without the guard. The previous handlers come back when it is destroyed.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

// The signal that asked this process to stop, or 0; cheap enough to read after every step.
int StopRequested();

// The stop request of a whole job, the same on every shard: SIGINT where any shard got one, else SIGTERM
// where any did, else 0. With shards, a check sums the shards' requests on connections of its own (`shards`'
// channel `channel`, opened at the first check) while training goes on, and answers with the sum of the
// check before; the checks between run no collective, as many as fit in kVoteSeconds of shard 0's steps. So
// the job stops within about that time after the signal, every shard after the same step, at no measurable
// cost to a step. Every shard must check at the same steps. Without shards (nullptr), this process's own
// request at every check.
class StopVote {
 public:
  explicit StopVote(Communicator* shards = nullptr, int channel = 0);
  ~StopVote();  // Finish()
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  int Agreed();
  // Waits for the sum in flight, so that the shards' collectives can end (GlooCommunicator::Close).
  void Finish();

 private:
  static constexpr double kVoteSeconds = 0.05;
  void Sum();  // the worker thread: one allreduce per vote

  Communicator* shards_;
  const int channel_index_;
  std::shared_ptr<Communicator> channel_;
  // SIGINTs, SIGTERMs, and shard 0's proposal of the checks between the next two votes; kept in place, so
  // the channel reuses its algorithm
  float votes_[3] = {0, 0, 0};
  int checks_left_ = 1, checks_apart_ = 1;
  std::chrono::steady_clock::time_point last_vote_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pending_ = false, started_ = false, quit_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace lockstep
