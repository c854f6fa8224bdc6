// Reshape on CUDA devices, as ops/reshape_op.cc defines it: Y is a device copy of X's bytes under the new
// shape (in place only the shape changes), for tensors of any dtype; the new shape (input 1) and old_shape
// pass through host memory. Shapes and arguments are checked by the CPU's shape function. (Flatten and
// ResizeLike use the CPU classes, which copy through Tensor on any device.)
#include "lockstep/ops/reshape_op.h"

#include <algorithm>

#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

// Reshape(X[, new_shape]) -> Y[, old_shape]: the new shape comes from arg `shape` or from input 1 (int64 or
// int32); old_shape records X's dims (int64).
class CudaReshapeOp : public Operator {
 public:
  CudaReshapeOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), schema_(*SchemaRegistry::Find("Reshape")), def_with_shape_(def) {
    if (HasArgument(def, "shape") == (InputSize() == 2))
      throw InvalidInput(fmt::format("{}: give the new shape either as arg shape or as input 1, exactly once",
                                     DescribeOperator(def)));
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    const OperatorDef* def = &def_;
    if (InputSize() == 2) {
      ReadRequestedShape(Input(1));
      def = &def_with_shape_;
    }
    const Shape shape = schema_.InferShapes(*def, {{x.shape(), x.dtype()}})[0].dims;  // the CPU's checks
    if (OutputSize() == 2) {  // before Y, which may be X itself
      old_shape_.Resize({x.ndim()}, DataType::kInt64);
      std::copy(x.shape().begin(), x.shape().end(), old_shape_.data<int64_t>());
      Output(1)->CopyFrom(old_shape_);  // old_shape is (x's rank), int64
    }
    CopyWithShape(x, shape, Output(0));  // y is `shape`
  }

 private:
  // new_shape is (rank), int64 or int32. The shape function takes the shape as arg shape only, so it goes
  // into def_with_shape_.
  void ReadRequestedShape(const Tensor& new_shape) {
    if (new_shape.ndim() != 1 ||
        (new_shape.dtype() != DataType::kInt64 && new_shape.dtype() != DataType::kInt32))
      throw InvalidInput(fmt::format("{}: the new shape '{}' must be a 1-D int64 or int32 tensor, got {} {}",
                                     DescribeOperator(def_), InputName(1), DataTypeName(new_shape.dtype()),
                                     ShapeToString(new_shape.shape())));
    // The host needs the values to size Y, so this copy waits for the device.
    new_shape_.CopyFrom(new_shape);
    if (new_shape_.dtype() == DataType::kInt64)
      requested_.assign(new_shape_.data<int64_t>(), new_shape_.data<int64_t>() + new_shape_.numel());
    else
      requested_.assign(new_shape_.data<int32_t>(), new_shape_.data<int32_t>() + new_shape_.numel());
    SetArgument(&def_with_shape_, Arg("shape", requested_));
  }

  const OpSchema& schema_;
  OperatorDef def_with_shape_;  // def_ with input 1's values as arg shape
  Tensor new_shape_;            // input 1 in host memory
  std::vector<int64_t> requested_;
  Tensor old_shape_;  // output 1's values, in host memory
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Reshape, CudaReshapeOp);

}  // namespace lockstep
