// The shards of a job agree on the step after which a stop request (core/stop_signals.h) stops them: their
// requests are summed over all of them while training goes on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace lockstep {

class Communicator;

// The stop request of a whole job, the same on every shard: SIGINT where any shard got one, else SIGTERM
// where any did, else 0. With shards, a check sums the shards' requests on connections of its own (`shards`'
// channel `channel`, opened at the first check) while training goes on, and answers with the sum of the
// check before; the checks between run no collective, as many as fit in kVoteSeconds of shard 0's steps. So
// the job stops within about that time after the signal, every shard after the same step, at no measurable
// cost to a step. Where one check takes kSynchronousSeconds or more (a slow step), each check waits for its
// own sum instead, which costs one small collective a step: the job stops after the step in flight, not the
// one after it. Every shard must check at the same steps. Without shards (nullptr), this process's own
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
  static constexpr double kSynchronousSeconds = 0.5;
  int TakeSum(std::unique_lock<std::mutex>& lock);  // waits for the sum in flight; the signal it agrees on
  void Sum();                                       // the worker thread: one allreduce per vote

  Communicator* shards_;
  const int channel_index_;
  std::shared_ptr<Communicator> channel_;
  // SIGINTs, SIGTERMs, and shard 0's proposal of the checks between the next two votes; kept in place, so
  // the channel reuses its algorithm
  float votes_[3] = {0, 0, 0};
  int checks_left_ = 1, checks_apart_ = 1;
  bool synchronous_ = false;  // each check waits for its own sum (shard 0's proposal)
  std::optional<std::chrono::steady_clock::time_point> last_vote_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pending_ = false;    // a sum the worker has yet to finish
  bool in_flight_ = false;  // a sum started and not yet read by a check
  bool quit_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace lockstep
