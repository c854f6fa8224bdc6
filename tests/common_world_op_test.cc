// CreateCommonWorld: its output is the communicator that the collectives read as input 0, so one net can
// create it and reduce through it (the DAG executor orders them by that name); a collective whose
// communicator no op created, and a missing shards' communicator, are one-line errors saying what to do.
#include "lockstep/comm/local_communicator.h"
#include "lockstep/core/schema.h"
#include "lockstep/ops/op_defs.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

OperatorDef Allreduce(const std::string& world, const std::vector<std::string>& blobs) {
  return AllreduceDef(world, blobs, blobs, static_cast<int>(blobs.size()));
}

// The message of the InvalidInput that running `def` throws.
std::string ErrorOf(Workspace* ws, const NetDef& def) {
  try {
    ws->RunNetOnce(def);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "net '" << def.name() << "' ran without an error";
  return "";
}

}  // namespace

TEST(CommonWorld, CreateCommonWorldThenAllreduceInOneNetSums) {
  Workspace ws;
  Feed(&ws, "a0", TensorFromValues({2}, {1, 2}));
  Feed(&ws, "a1", TensorFromValues({2}, {10, 20}));
  NetDef def;
  def.set_name("reduce");
  def.set_type("dag");  // ordered by the name "world" alone
  *def.add_op() = CreateCommonWorldDef("world", {0, 1});
  *def.add_op() = Allreduce("world", {"a0", "a1"});
  ws.RunNetOnce(def);
  EXPECT_EQ(Values(ws.Blob("a0")), (std::vector<float>{11, 22}));
  EXPECT_EQ(Values(ws.Blob("a1")), (std::vector<float>{11, 22}));
  EXPECT_NE(ws.FindObject<Communicator>("world"), nullptr);
  EXPECT_FALSE(ws.HasBlob("world")) << "an object, not a tensor";

  auto shapes = InferNetShapes(def, {{"a0", {{2}}}, {"a1", {{2}}}});
  EXPECT_EQ(shapes.at("a1").dims, (Shape{2}));
  EXPECT_EQ(shapes.at("world").dtype, DataType::kUndefined);
}

TEST(CommonWorld, AllreduceWithoutItsCommonWorldSaysWhichBlobAndWhatToDo) {
  Workspace ws;
  Feed(&ws, "a0", TensorFromValues({2}, {1, 2}));
  Feed(&ws, "a1", TensorFromValues({2}, {10, 20}));
  NetDef def;
  def.set_name("reduce");
  *def.add_op() = Allreduce("train/common_world", {"a0", "a1"});
  const std::string error = ErrorOf(&ws, def);
  EXPECT_NE(error.find("no communicator 'train/common_world'"), std::string::npos) << error;
  EXPECT_NE(error.find("run the net whose CreateCommonWorld writes it first"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  EXPECT_EQ(Values(ws.Blob("a0")), (std::vector<float>{1, 2})) << "nothing reduced";
}

TEST(CommonWorld, TheShardsCommunicatorIsTheCallersObject) {
  Workspace ws;
  NetDef def;
  def.set_name("init");
  *def.add_op() = CreateCommonWorldDef("world", {0, 1}, "shards");
  const std::string error = ErrorOf(&ws, def);
  EXPECT_NE(error.find("no communicator 'shards'"), std::string::npos) << error;
  EXPECT_NE(error.find("ws.SetObject<Communicator>(\"shards\", gloo)"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;

  // On the CPU, the communicator that spans the shards sums each shard's devices too: it is the world.
  auto shards = std::make_shared<LocalCommunicator>();
  ws.SetObject<Communicator>("shards", shards);
  ws.RunNetOnce(def);
  EXPECT_EQ(ws.FindObject<Communicator>("world"), shards);
}

}  // namespace lockstep::testing
