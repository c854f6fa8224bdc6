// Iter increments an int64 counter in place.
#include "test_util.h"

namespace lockstep::testing {
namespace {

Tensor Int64(const Shape& shape, int64_t value) {
  Tensor t(shape, DataType::kInt64);
  *t.data<int64_t>() = value;
  return t;
}

}  // namespace

TEST(IterOp, IncrementsOncePerRun) {
  for (const Shape& shape : {Shape{}, Shape{1}}) {
    Workspace ws;
    Feed(&ws, "iter", Int64(shape, 0));
    auto op = CreateOperator(MakeOperatorDef("Iter", {"iter"}, {"iter"}), &ws);
    for (int i = 0; i < 3; ++i) op->Run();
    EXPECT_EQ(*ws.Blob("iter").data<int64_t>(), 3);
    EXPECT_EQ(ws.Blob("iter").shape(), shape);
  }
}

TEST(IterOp, ContinuesFromAResumedValue) {
  Workspace ws;
  Feed(&ws, "iter", Int64({}, int64_t{1} << 40));
  RunOp(&ws, MakeOperatorDef("Iter", {"iter"}, {"iter"}));
  EXPECT_EQ(*ws.Blob("iter").data<int64_t>(), (int64_t{1} << 40) + 1);
}

TEST(IterOp, RejectsMisuse) {
  Workspace ws;
  Feed(&ws, "iter", Int64({}, 0));
  Feed(&ws, "f", TensorFromValues({}, {0.0f}));
  EXPECT_THROW(CreateOperator(MakeOperatorDef("Iter", {"iter"}, {"other"}), &ws), InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Iter", {"f"}, {"f"})), InvalidInput);
}

}  // namespace lockstep::testing
