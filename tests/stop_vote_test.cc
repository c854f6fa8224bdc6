// StopVote: shards that check after every step agree on the stop request of any of them; after slow steps
// they agree at the first check after the request, so the step in flight is the last one.
#include "lockstep/train/stop_vote.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>
#include <vector>

#include "lockstep/core/stop_signals.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

constexpr int kVoteChannel = 1;

TEST(StopVote, AfterSlowStepsTheFirstCheckAfterARequestAgreesOnIt) {
  StopOnSignals guard;  // the request is the process's, as with shards that run on one machine
  std::vector<std::vector<int>> agreed(2);
  OnConnectedShards(2, Loopback(), [&](int shard, GlooCommunicator& communicator) {
    StopVote vote(&communicator, kVoteChannel);
    for (int check = 1; check <= 4; ++check) {
      if (check > 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a step of 0.6 s
      if (check == 4 && shard == 0) raise(SIGINT);  // Ctrl-C during shard 0's fourth step
      agreed[shard].push_back(vote.Agreed());
    }
  });
  // Checks 1 and 2 measure the steps; from check 3 on each check waits for its own sum.
  const std::vector<int> expected = {0, 0, 0, SIGINT};
  EXPECT_EQ(agreed[0], expected);
  EXPECT_EQ(agreed[1], expected);
}

TEST(StopVote, WithoutShardsEachCheckAnswersThisProcesssRequest) {
  StopOnSignals guard;
  StopVote vote;
  EXPECT_EQ(vote.Agreed(), 0);
  raise(SIGTERM);
  EXPECT_EQ(vote.Agreed(), SIGTERM);
  EXPECT_EQ(StopRequested(), SIGTERM);
}

}  // namespace
}  // namespace lockstep::testing
