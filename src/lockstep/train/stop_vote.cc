#include "lockstep/train/stop_vote.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/stop_signals.h"

namespace lockstep {

StopVote::StopVote(Communicator* shards, int channel) : shards_(shards), channel_index_(channel) {}

StopVote::~StopVote() { Finish(); }

int StopVote::Agreed() {
  if (!shards_) return StopRequested();
  if (--checks_left_ > 0) return 0;
  const auto now = std::chrono::steady_clock::now();
  if (!channel_) {
    channel_ = shards_->Channel(channel_index_);
    LOCKSTEP_ENFORCE(channel_, "the shards' communicator has no channel {} for the stop vote",
                     channel_index_);
    worker_ = std::thread([this] { Sum(); });
  }
  const int checks_since_vote = checks_apart_;  // the spacing the sum read next may change
  std::unique_lock<std::mutex> lock(mutex_);
  int agreed = in_flight_ ? TakeSum(lock) : 0;
  if (agreed == 0) {
    // Shard 0 proposes how the next votes run, from the time per check since the last vote: as many checks
    // apart as fit in kVoteSeconds, or, when one check takes kSynchronousSeconds or more, one vote per check
    // that the check waits for (a negative proposal), so that a slow step is the last one.
    float propose = 0;
    if (last_vote_ && shards_->rank() == 0) {
      const double per_check = std::chrono::duration<double>(now - *last_vote_).count() / checks_since_vote;
      propose = per_check >= kSynchronousSeconds
                    ? -1.0f
                    : static_cast<float>(
                          std::clamp(std::ceil(kVoteSeconds / std::max(per_check, 1e-6)), 1.0, 1000.0));
    }
    const int requested = StopRequested();
    votes_[0] = requested == SIGINT ? 1.0f : 0.0f;
    votes_[1] = requested == SIGTERM ? 1.0f : 0.0f;
    votes_[2] = propose;
    pending_ = in_flight_ = true;
    changed_.notify_all();
    if (synchronous_) agreed = TakeSum(lock);
  }
  checks_left_ = checks_apart_;
  last_vote_ = now;
  return agreed;
}

int StopVote::TakeSum(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !pending_; });
  in_flight_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  synchronous_ = votes_[2] < 0;
  checks_apart_ = std::max(1, static_cast<int>(votes_[2]));
  return votes_[0] > 0 ? SIGINT : votes_[1] > 0 ? SIGTERM : 0;
}

void StopVote::Finish() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void StopVote::Sum() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return pending_ || quit_; });
    if (!pending_) return;  // the other shards sum a started vote too: it runs before the worker ends
    lock.unlock();
    std::exception_ptr error;
    try {
      channel_->Allreduce({votes_}, 3);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    pending_ = false;
    changed_.notify_all();
  }
}

}  // namespace lockstep
