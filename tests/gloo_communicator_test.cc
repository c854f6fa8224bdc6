// GlooCommunicator: shards as threads over loopback sum exactly with every algorithm, shard count, device
// count and size, reuse their cached algorithms, broadcast bytes, split over two rails, run collectives on
// channels side by side, refuse bad options, blame the shard that went away and close when the store is gone
// at the end; the 16-bit wire stays within its stated bound of the float64 sum.
#include "lockstep/comm/gloo_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "lockstep/comm/wire_dtype.h"
#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"
#include "processes.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// Small integers, so that every sum is exact whatever order the algorithm adds in.
float Value(int shard, int device, size_t i, int round) {
  return static_cast<float>(static_cast<int>((i * 7 + shard * 13 + device * 5 + round * 3) % 19) - 9);
}

// Fills `devices` buffers of `count` floats with this shard's values, allreduces them and checks every
// element of every buffer against the sum over all shards and devices.
void AllreduceAndCheck(GlooCommunicator& communicator, std::vector<std::vector<float>>& buffers, int round) {
  const int shards = communicator.size(), shard = communicator.rank();
  const size_t count = buffers[0].size();
  std::vector<float*> pointers;
  for (size_t d = 0; d < buffers.size(); ++d) {
    for (size_t i = 0; i < count; ++i) buffers[d][i] = Value(shard, d, i, round);
    pointers.push_back(buffers[d].data());
  }
  communicator.Allreduce(pointers, count);
  for (size_t d = 0; d < buffers.size(); ++d)
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int s = 0; s < shards; ++s)
        for (size_t e = 0; e < buffers.size(); ++e) expected += Value(s, e, i, round);
      if (buffers[d][i] != expected) {  // one report per buffer, not one per element
        EXPECT_EQ(buffers[d][i], expected) << "shard " << shard << " device " << d << " element " << i
                                           << " of " << count << ", round " << round;
        break;
      }
    }
}

std::vector<std::string> AlgorithmsFor(int shards) {
  std::vector<std::string> algorithms;
  for (const auto& name : GlooAllreduceAlgorithms())
    if (name != "bcube" || shards % 2 == 0) algorithms.push_back(name);
  return algorithms;
}

class GlooSweep : public ::testing::TestWithParam<int> {};

TEST_P(GlooSweep, AllreduceSumsExactlyForEveryAlgorithmDeviceCountAndSize) {
  const int shards = GetParam();
  for (const auto& algorithm : AlgorithmsFor(shards)) {
    SCOPED_TRACE(algorithm);
    OnConnectedShards(shards, Loopback(algorithm), [&](int, GlooCommunicator& communicator) {
      // Every buffer lives as long as the communicator: it keeps an algorithm per buffer address.
      std::vector<std::vector<std::vector<float>>> sets;
      for (int devices : {1, 2, 3})
        for (size_t count : {0, 1, 17, 100003}) sets.emplace_back(devices, std::vector<float>(count));
      for (size_t round = 0; round < sets.size(); ++round)
        AllreduceAndCheck(communicator, sets[round], round);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, GlooSweep, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Shards"; });

TEST(GlooCommunicator, AutoTakesHalvingDoublingOnlyForAPowerOfTwoShardCount) {
  for (int shards : {1, 2, 3, 4})
    for (const std::string algorithm : {"auto", "halving_doubling"}) {
      const std::string expected = algorithm == "auto" && shards == 3 ? "ring_chunked" : "halving_doubling";
      OnConnectedShards(shards, Loopback(algorithm), [&](int, GlooCommunicator& communicator) {
        EXPECT_EQ(communicator.algorithm(), expected) << shards << " shards, " << algorithm;
      });
    }
}

TEST(GlooCommunicator, RepeatedAllreduceOnTheSameBuffersStaysExact) {
  for (const auto& algorithm : AlgorithmsFor(4)) {
    SCOPED_TRACE(algorithm);
    OnConnectedShards(4, Loopback(algorithm), [&](int, GlooCommunicator& communicator) {
      std::vector<std::vector<float>> small(2, std::vector<float>(33)), large(2, std::vector<float>(5001));
      int round = 0;
      for (; round < 3; ++round) {
        AllreduceAndCheck(communicator, small, round);
        AllreduceAndCheck(communicator, large, round);
      }
      communicator.EndFirstIteration();
      for (; round < 6; ++round) {
        AllreduceAndCheck(communicator, large, round);
        AllreduceAndCheck(communicator, small, round);
      }
    });
  }
}

// Gradient-like values for the 16-bit wire: both signs, magnitudes spread over 2^-20 .. 2^0 times
// `magnitude`, none of them sums of small integers.
float WireValue(int shard, int device, size_t i, float magnitude) {
  uint32_t h = static_cast<uint32_t>(i * 2654435761u + shard * 40503u + device * 9973u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  const float fraction = 1.0f + static_cast<float>(h & 0xffffu) / 65536.0f;
  const int exponent = -static_cast<int>((h >> 16) % 21);
  return ((h >> 31) ? -1.0f : 1.0f) * std::ldexp(fraction, exponent) * magnitude;
}

// The 16-bit allreduce of `devices` buffers of `count` values against the float64 sum over all shards and
// devices. The bound (wire_dtype.h): the shards' k sums are narrowed once each and pass k - 1 float32
// additions rounded to the wire, each rounding at most u (2^-8 bfloat16, 2^-11 float16) times the sum of |x|
// so far, so |result - exact| <= k u (1 + u)^k sum|x|; plus float32's rounding of the local devices' sum, and
// for float16 half its smallest subnormal (2^-25, over the scale) per rounding. Returns device 0's result.
std::vector<float> WireAllreduceAndCheck(GlooCommunicator& communicator, DataType wire, int devices,
                                         size_t count, float magnitude) {
  const int shards = communicator.size(), shard = communicator.rank();
  std::vector<std::vector<float>> buffers(devices, std::vector<float>(count));
  std::vector<float*> pointers;
  for (int d = 0; d < devices; ++d) {
    for (size_t i = 0; i < count; ++i) buffers[d][i] = WireValue(shard, d, i, magnitude);
    pointers.push_back(buffers[d].data());
  }
  communicator.AllreduceOverWire(pointers, count, wire);
  const double u = wire == DataType::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  float largest = 0;  // over every shard's local sum, as the shards agree on it
  std::vector<double> exact(count), sum_abs(count);
  for (size_t i = 0; i < count; ++i) {
    for (int s = 0; s < shards; ++s) {
      float local = 0;
      for (int d = 0; d < devices; ++d) {
        const float x = WireValue(s, d, i, magnitude);
        local += x;
        exact[i] += x;
        sum_abs[i] += std::fabs(x);
      }
      largest = std::max(largest, std::fabs(local));
    }
  }
  const double scale = wire == DataType::kFloat16 ? Float16WireScale(largest, shards) : 1.0;
  for (int d = 0; d < devices; ++d)
    for (size_t i = 0; i < count; ++i) {
      const double bound = shards * u * std::pow(1 + u, shards) * sum_abs[i] +
                           devices * std::ldexp(1.0, -24) * sum_abs[i] +
                           2 * shards * std::ldexp(1.0, -25) / scale;
      if (std::fabs(buffers[d][i] - exact[i]) > bound) {  // one report per buffer, not one per element
        ADD_FAILURE() << DataTypeName(wire) << " wire, shard " << shard << " device " << d << " element " << i
                      << " of " << count << ": " << buffers[d][i] << " vs the exact " << exact[i]
                      << ", beyond " << bound;
        break;
      }
    }
  return buffers[0];
}

class GlooWireSweep : public ::testing::TestWithParam<int> {};

// The algorithms that carry 16 bits (CheckAllreduceAlgorithm): not the plain ring, bcube on powers of two
// only.
std::vector<std::string> WireAlgorithmsFor(int shards) {
  std::vector<std::string> algorithms;
  for (const auto& name : AlgorithmsFor(shards))
    if (name != "ring" && (name != "bcube" || (shards & (shards - 1)) == 0)) algorithms.push_back(name);
  return algorithms;
}

TEST_P(GlooWireSweep, SixteenBitAllreduceStaysWithinItsBoundOfTheFloat64Sum) {
  const int shards = GetParam();
  for (const auto& algorithm : WireAlgorithmsFor(shards)) {
    SCOPED_TRACE(algorithm);
    std::vector<std::vector<float>> results(shards);
    OnConnectedShards(shards, Loopback(algorithm), [&](int shard, GlooCommunicator& communicator) {
      for (DataType wire : {DataType::kBFloat16, DataType::kFloat16})
        for (int devices : {1, 2})
          for (size_t count : {0, 1, 17, 1001, 100003})
            WireAllreduceAndCheck(communicator, wire, devices, count, 1.0f);
      // float16's scale keeps gradient-sized values (1e-6 and below) out of its subnormals, and large ones
      // below its 65504.
      WireAllreduceAndCheck(communicator, DataType::kFloat16, 1, 4099, 1e-6f);
      WireAllreduceAndCheck(communicator, DataType::kFloat16, 1, 4099, 3e4f);
      results[shard] = WireAllreduceAndCheck(communicator, DataType::kBFloat16, 1, 4099, 1e-6f);
    });
    for (int shard = 1; shard < shards; ++shard)
      EXPECT_EQ(results[shard], results[0]) << "every shard gets the same sums: shard " << shard;
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, GlooWireSweep, ::testing::Values(1, 2, 3, 4, 5, 6, 7),
                         [](const auto& info) { return std::to_string(info.param) + "Shards"; });

TEST(GlooCommunicator, AlgorithmsThatCannotCarry16BitsAreRefusedInOneLine) {
  EXPECT_NO_THROW(CheckAllreduceAlgorithm("ring", 3, DataType::kFloat));
  EXPECT_NO_THROW(CheckAllreduceAlgorithm("auto", 6, DataType::kBFloat16));
  EXPECT_NO_THROW(CheckAllreduceAlgorithm("bcube", 4, DataType::kFloat16));
  try {
    CheckAllreduceAlgorithm("ring", 2, DataType::kBFloat16);
    ADD_FAILURE() << "ring was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "--allreduce_algorithm ring cannot send a bfloat16 wire: every shard sums in its own order, so the "
        "shards' 16-bit sums would differ; use ring_chunked or halving_doubling (or auto)");
  }
  EXPECT_THROW(CheckAllreduceAlgorithm("bcube", 6, DataType::kFloat16), InvalidInput);
  OnConnectedShards(2, Loopback("ring"), [&](int, GlooCommunicator& communicator) {
    std::vector<float> buffer(5, 1.0f);
    EXPECT_THROW(communicator.AllreduceOverWire({buffer.data()}, buffer.size(), DataType::kBFloat16),
                 InvalidInput);
  });
}

TEST(GlooCommunicator, SixteenBitWireReusesItsBuffersAcrossStepsAndRails) {
  for (DataType wire : {DataType::kBFloat16, DataType::kFloat16})
    OnConnectedShards(3, Loopback("auto", {"lo", "lo"}), [&](int, GlooCommunicator& communicator) {
      for (int step = 0; step < 3; ++step) {
        WireAllreduceAndCheck(communicator, wire, 2, 100003, 1.0f);
        if (step == 0) communicator.EndFirstIteration();
      }
    });
}

// Broadcasts `bytes` bytes from `root` to both devices of every shard.
void BroadcastAndCheck(int shards, const GlooOptions& options, size_t bytes, int root) {
  auto pattern = [](size_t i) { return static_cast<char>(i * 31 + 7); };
  OnConnectedShards(shards, options, [&](int shard, GlooCommunicator& communicator) {
    std::vector<std::vector<char>> buffers(2, std::vector<char>(bytes, static_cast<char>(0xEE)));
    if (shard == root)
      for (size_t i = 0; i < bytes; ++i) buffers[0][i] = pattern(i);
    communicator.Broadcast({buffers[0].data(), buffers[1].data()}, bytes, root);
    for (size_t d = 0; d < buffers.size(); ++d)
      for (size_t i = 0; i < bytes; ++i)
        if (buffers[d][i] != pattern(i)) {
          ADD_FAILURE() << "shard " << shard << " device " << d << " byte " << i << " of " << bytes
                        << " is not the root's";
          break;
        }
  });
}

TEST(GlooCommunicator, BroadcastReachesEveryDeviceOfEveryShard) {
  for (int root : {0, 2}) {
    SCOPED_TRACE(fmt::format("root {}", root));
    BroadcastAndCheck(3, Loopback(), 1001, root);
  }
}

TEST(GlooCommunicator, TwoRailsSplitTheBufferAndSumExactly) {
  for (int shards : {2, 3})
    for (const std::string algorithm : {"ring", "auto"}) {
      SCOPED_TRACE(fmt::format("{} shards, {}", shards, algorithm));
      OnConnectedShards(shards, Loopback(algorithm, {"lo", "lo"}), [&](int, GlooCommunicator& communicator) {
        for (size_t count : {1, 17, 100003}) {
          std::vector<std::vector<float>> buffers(2, std::vector<float>(count));
          AllreduceAndCheck(communicator, buffers, 0);
          communicator.EndFirstIteration();
          AllreduceAndCheck(communicator, buffers, 1);
        }
      });
    }
  BroadcastAndCheck(2, Loopback("auto", {"lo", "lo"}), 100001, 0);
}

TEST(GlooCommunicator, ChannelsRunTheirCollectivesSideBySide) {
  OnConnectedShards(3, Loopback("ring_chunked"), [&](int shard, GlooCommunicator& communicator) {
    std::shared_ptr<Communicator> one = communicator.Channel(1), two = communicator.Channel(2);
    ASSERT_NE(one, nullptr);
    EXPECT_EQ(communicator.Channel(1), one) << "a channel is made once";
    EXPECT_EQ(one->rank(), shard);
    EXPECT_EQ(two->size(), 3);
    EXPECT_THROW(communicator.Channel(0), Error);
    // Shard 0 issues channel 2's collective before channel 1's, the others issue both at once: that completes
    // only if each channel goes its own way.
    std::vector<std::vector<float>> first(2, std::vector<float>(30001)), second(2, std::vector<float>(777));
    auto run = [&](Communicator* channel, std::vector<std::vector<float>>& buffers, int round) {
      auto& gloo = static_cast<GlooCommunicator&>(*channel);
      AllreduceAndCheck(gloo, buffers, round);
    };
    for (int round = 0; round < 3; ++round) {
      if (round == 1) communicator.EndFirstIteration();  // the channels' too
      if (shard == 0) {
        run(two.get(), second, round);
        run(one.get(), first, round);
      } else {
        std::thread other([&] { run(one.get(), first, round); });
        run(two.get(), second, round);
        other.join();
      }
    }
  });
}

// The message of the InvalidInput that opening a communicator for `shards` shards with `options` throws.
std::string Refusal(const GlooOptions& options, int shards = 1) {
  try {
    GlooCommunicator communicator(options, shards);
  } catch (const InvalidInput& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not InvalidInput: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "opened with bad options";
  return "";
}

TEST(GlooCommunicator, BadOptionsAreRefusedBeforeConnecting) {
  std::string message = Refusal(Loopback("bcube"), 3);
  EXPECT_NE(message.find("even number of shards, got 3"), std::string::npos) << message;

  message = Refusal(Loopback("tree"));
  EXPECT_NE(message.find("'tree'"), std::string::npos) << message;
  for (const auto& name : GlooAllreduceAlgorithms())
    EXPECT_NE(message.find(name), std::string::npos) << name << " is not listed: " << message;

  GlooOptions options = Loopback();
  options.transport = "udp";
  message = Refusal(options);
  EXPECT_NE(message.find("'udp'"), std::string::npos) << message;

  message = Refusal(Loopback("auto", {"lo", "nosuchif0"}));
  EXPECT_NE(message.find("'nosuchif0'"), std::string::npos) << message;

  options = Loopback();
  options.timeout = seconds(0);
  message = Refusal(options);
  EXPECT_NE(message.find("--timeout"), std::string::npos) << message;
}

TEST(GlooCommunicator, BadOptionsAreRefusedWhenJoiningToo) {
  OnJoinedShards(3, [](int, std::shared_ptr<Rendezvous> rendezvous) {
    EXPECT_THROW(GlooCommunicator(rendezvous, Loopback("bcube")), InvalidInput);
  });
}

// Shard 1 goes away (optionally saying why on the failure board) while shard 0 runs an Allreduce; returns
// shard 0's error.
std::string ErrorWhenShardOneLeaves(const std::string& reason) {
  GlooOptions options = Loopback("ring");
  options.timeout = seconds(2);
  options.first_iter_timeout = seconds(2);
  std::string error;
  OnJoinedShards(2, [&](int shard, std::shared_ptr<Rendezvous> rendezvous) {
    auto communicator = std::make_unique<GlooCommunicator>(rendezvous, options);
    if (shard == 1) {
      if (!reason.empty()) rendezvous->ReportFailure(-1, reason);
      communicator.reset();  // closes its connections
      return;
    }
    std::vector<float> buffer(1000, 1.0f);
    try {
      communicator->Allreduce({buffer.data()}, buffer.size());
      ADD_FAILURE() << "the Allreduce completed without shard 1";
    } catch (const IoError& e) {
      error = e.what();
    }
  });
  return error;
}

// A store that is gone when the run ends cannot hold the last wait, but the run's collectives are done: each
// shard closes, saying so, instead of failing the finished run.
TEST(GlooCommunicator, ShardsCloseWhenTheStoreIsGoneAtTheEnd) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer server;
  const std::string run_id = "store_gone";  // a server of its own
  std::promise<void> paused;
  std::shared_future<void> store_gone = paused.get_future().share();
  std::atomic<int> done{0};  // shards past their last collective and the store's last answer to them
  OnShards(2, [&](int shard) {
    RendezvousOptions options;
    options.num_shards = 2, options.shard_id = shard, options.run_id = run_id;
    options.redis_host = "127.0.0.1", options.redis_port = server.port();
    options.timeout = std::chrono::seconds(20);
    options.redis_reconnect = std::chrono::seconds(1);
    auto rendezvous = std::make_shared<Rendezvous>(options);
    GlooCommunicator communicator(rendezvous, Loopback());
    std::vector<std::vector<float>> buffers(1, std::vector<float>(64));
    AllreduceAndCheck(communicator, buffers, 0);
    rendezvous->AllGather("done", "");
    ++done;
    if (shard == 0) {
      while (done < 2) std::this_thread::yield();
      server.Pause();
      paused.set_value();
    }
    store_gone.wait();
    EXPECT_NO_THROW(communicator.Close());
  });
  server.Resume();
}

TEST(GlooCommunicator, ShardThatClosesItsConnectionsIsBlamed) {
  std::string message = ErrorWhenShardOneLeaves("");
  EXPECT_NE(message.find("shard 1"), std::string::npos) << message;
  EXPECT_NE(message.find("Allreduce"), std::string::npos) << message;
}

TEST(GlooCommunicator, ShardThatStoppedOnAnErrorIsBlamedWithItsReason) {
  std::string message = ErrorWhenShardOneLeaves("out of memory in conv_w's gradient");
  EXPECT_NE(message.find("shard 1 stopped on an error: out of memory in conv_w's gradient"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Allreduce"), std::string::npos) << message;
}

}  // namespace
}  // namespace lockstep::testing
