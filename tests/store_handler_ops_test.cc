// FileStoreHandlerCreate and RedisStoreHandlerCreate, as Caffe2's rendezvous uses them: shards as threads,
// each with its own workspace, create a store handler, connect through it with CreateCommonWorld(size, rank)
// and allreduce, on a directory and on a real redis-server; later common worlds share the connection; a
// missing store is a one-line error; a missing run id (Caffe2's prefix) is "default".
#include <memory>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/core/enforce.h"
#include "lockstep/ops/op_defs.h"
#include "processes.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

class StoreHandlerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis") {
      if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
      redis_ = std::make_unique<RedisServer>();
    }
  }

  // No run id: no prefix argument, as Caffe2 allows.
  OperatorDef CreateHandler(const std::string& run_id) const {
    std::vector<Arg> args;
    if (!run_id.empty()) args.push_back(Arg("prefix", run_id));
    if (redis_) {
      args.insert(args.end(), {Arg("host", "127.0.0.1"), Arg("port", int64_t{redis_->port()})});
      return MakeOperatorDef("RedisStoreHandlerCreate", {}, {"store_handler"}, args);
    }
    args.push_back(Arg("path", directory_.path()));
    return MakeOperatorDef("FileStoreHandlerCreate", {}, {"store_handler"}, args);
  }

  TempDirectory directory_;
  std::unique_ptr<RedisServer> redis_;
};

// Every shard closes its connection once all have finished, as a successful run does.
void Close(const Workspace& ws, const std::string& world) {
  std::dynamic_pointer_cast<GlooCommunicator>(ws.FindObject<Communicator>(world))->Close();
}

OperatorDef CommonWorld(const std::string& world, int size, int rank) {
  return MakeOperatorDef(
      "CreateCommonWorld", {"store_handler"}, {world},
      {Arg("size", int64_t{size}), Arg("rank", int64_t{rank}), Arg("timeout_ms", int64_t{30000})});
}

TEST_P(StoreHandlerTest, ShardsConnectThroughTheHandlerAndAllreduce) {
  constexpr int kShards = 3;
  OnShards(kShards, [&](int shard) {
    Workspace ws;
    NetDef init;
    init.set_name("init");
    *init.add_op() = CreateHandler("run1");
    *init.add_op() = CommonWorld("world", kShards, shard);
    *init.add_op() = CommonWorld("world_again", kShards, shard);
    ws.RunNetOnce(init);
    EXPECT_EQ(ws.FindObject<Communicator>("world"), ws.FindObject<Communicator>("world_again"))
        << "a shard joins a run once; later common worlds share its connection";
    EXPECT_EQ(ws.FindObject<Communicator>("world")->rank(), shard);
    Feed(&ws, "x", TensorFromValues({2}, {1.f + shard, 10.f * shard}));
    NetDef reduce;
    reduce.set_name("reduce");
    *reduce.add_op() = AllreduceDef("world", {"x"}, {"x"}, 1);
    ws.RunNetOnce(reduce);
    EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{6.f, 30.f})) << "shard " << shard;
    Close(ws, "world");
  });
}

TEST_P(StoreHandlerTest, ShardsWithoutAPrefixMeetAsInCaffe2) {
  OnShards(2, [&](int shard) {
    Workspace ws;
    RunOp(&ws, CreateHandler(""));
    RunOp(&ws, CommonWorld("world", 2, shard));
    Feed(&ws, "x", TensorFromValues({1}, {1.f + shard}));
    RunOp(&ws, AllreduceDef("world", {"x"}, {"x"}, 1));
    EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{3.f})) << "shard " << shard;
    Close(ws, "world");
  });
}

TEST_P(StoreHandlerTest, ASecondRankThroughOneHandlerIsRefused) {
  OnShards(2, [&](int shard) {
    Workspace ws;
    RunOp(&ws, CreateHandler("run2"));
    RunOp(&ws, CommonWorld("world", 2, shard));
    try {
      RunOp(&ws, CommonWorld("other", 2, 1 - shard));
      ADD_FAILURE() << "a second rank was accepted";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("already connected shard"), std::string::npos) << e.what();
    }
    Close(ws, "world");
  });
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreHandlerTest, ::testing::Values("file", "redis"),
                         [](const auto& info) { return info.param == "file" ? "FileStore" : "Redis"; });

// The message of the error of type E that running `def` throws.
template <class E>
std::string ErrorOf(const OperatorDef& def) {
  Workspace ws;
  try {
    RunOp(&ws, def);
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "ran without an error";
  return "";
}

TEST(StoreHandlerOps, MissingStoresAndRunIdsAreOneLineErrors) {
  TempDirectory temp;
  EXPECT_NE(ErrorOf<InvalidInput>(MakeOperatorDef("FileStoreHandlerCreate", {}, {"h"},
                                                  {Arg("path", temp / "nowhere"), Arg("prefix", "run")}))
                .find("does not exist"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf<InvalidInput>(MakeOperatorDef("FileStoreHandlerCreate", {}, {"h"}, {Arg("prefix", "run")}))
          .find("argument path is required"),
      std::string::npos);
  const int port = FreeLoopbackPort();
  const std::string unreachable = ErrorOf<IoError>(
      MakeOperatorDef("RedisStoreHandlerCreate", {}, {"h"},
                      {Arg("host", "127.0.0.1"), Arg("port", int64_t{port}), Arg("prefix", "run")}));
  EXPECT_NE(unreachable.find("RedisStoreHandlerCreate() -> h: cannot reach Redis at 127.0.0.1:" +
                             std::to_string(port)),
            std::string::npos)
      << unreachable;
}

TEST(StoreHandlerOps, CommonWorldNeedsSizeAndRank) {
  TempDirectory temp;
  Workspace ws;
  RunOp(&ws, MakeOperatorDef("FileStoreHandlerCreate", {}, {"store_handler"},
                             {Arg("path", temp.path()), Arg("prefix", "run")}));
  try {
    RunOp(&ws, MakeOperatorDef("CreateCommonWorld", {"store_handler"}, {"world"}));
    FAIL() << "no size was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 must be in [0, size 0)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::testing
