// Print: one line on stderr with the blob's name, dtype, shape and values; limit, every_n, and to_file
// refused.
#include "test_util.h"

namespace lockstep::testing {
namespace {

std::string PrintedBy(Net* net, int runs) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < runs; ++i) net->Run();
  return ::testing::internal::GetCapturedStderr();
}

TEST(PrintOp, WritesOneLineWithNameDtypeShapeAndValues) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {1.5f, -2.f, 0.25f, 3.f}));
  Feed(&ws, "label", Int32Tensor({3}, {7, 0, 2}));
  NetDef net;
  net.set_name("print");
  *net.add_op() = MakeOperatorDef("Print", {"x"}, {});
  *net.add_op() = MakeOperatorDef("Print", {"label"}, {}, {Arg("limit", 2)});
  EXPECT_EQ(PrintedBy(ws.CreateNet(net), 1),
            "x (float32 (2, 2)): 1.5 -2 0.25 3\nlabel (int32 (3)): 7 0 ... (1 more)\n");
}

TEST(PrintOp, EveryNthRun) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({1}, {4.f}));
  NetDef net;
  net.set_name("print");
  *net.add_op() = MakeOperatorDef("Print", {"x"}, {}, {Arg("every_n", 3)});
  const std::string line = "x (float32 (1)): 4\n";
  EXPECT_EQ(PrintedBy(ws.CreateNet(net), 7), line + line + line) << "runs 1, 4 and 7";
}

TEST(PrintOp, ToFileIsRefusedInOneLine) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({1}, {4.f}));
  try {
    RunOp(&ws, MakeOperatorDef("Print", {"x"}, {}, {Arg("to_file", 1)}));
    FAIL() << "to_file=1 was accepted";
  } catch (const InvalidInput& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("to_file=1 is not supported"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace lockstep::testing
