#include "lockstep/train/stop_request.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

volatile sig_atomic_t requested = 0;  // 0, or the signal that asked to stop
struct sigaction previous_int, previous_term;

void OnSignal(int signal) {
  if (requested != 0) {  // the second request: as if there were no guard
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  requested = signal;
}

}  // namespace

StopOnSignals::StopOnSignals() {
  requested = 0;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  action.sa_flags = SA_RESTART;  // the step in progress goes on undisturbed
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

int StopRequested() { return requested; }

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
  std::unique_lock<std::mutex> lock(mutex_);
  int agreed = 0;
  int next_apart = 1;
  if (started_) {
    changed_.wait(lock, [&] { return !pending_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    agreed = votes_[0] > 0 ? SIGINT : votes_[1] > 0 ? SIGTERM : 0;
    next_apart = std::max(1, static_cast<int>(votes_[2]));
  }
  if (agreed == 0) {    // the next sum, while training goes on
    float propose = 0;  // shard 0's: as many checks as fit in kVoteSeconds, from the time since the last vote
    if (started_ && shards_->rank() == 0) {
      const double per_check = std::chrono::duration<double>(now - last_vote_).count() / checks_apart_;
      propose =
          static_cast<float>(std::clamp(std::ceil(kVoteSeconds / std::max(per_check, 1e-6)), 1.0, 1000.0));
    }
    votes_[0] = requested == SIGINT ? 1.0f : 0.0f;
    votes_[1] = requested == SIGTERM ? 1.0f : 0.0f;
    votes_[2] = propose;
    pending_ = started_ = true;
    changed_.notify_all();
  }
  checks_left_ = checks_apart_ = next_apart;
  last_vote_ = now;
  return agreed;
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
