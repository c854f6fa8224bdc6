// Concat and Split on CUDA devices, as ops/concat_split_op.cc defines them, for tensors of any dtype: viewed
// as (outer, extent * inner), every piece is one run of bytes per outer index, so each input or output is a
// single strided copy on the device's stream. Shapes and arguments are checked by the CPU's shape functions.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep {
namespace {

// Arg axis counted from the front; the shape functions have checked it against `rank`.
int NormalizedAxis(const OperatorDef& def, int rank) {
  int axis = static_cast<int>(IntArg(def, "axis"));
  return axis < 0 ? axis + rank : axis;
}

// Copies `rows` runs of `width` bytes that lie `src_pitch` bytes apart in src to `dst_pitch` bytes apart in
// dst (device memory). Contiguous runs take a plain copy, which has no limit on the pitch.
void CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, int64_t rows,
              cudaStream_t stream) {
  if (width == 0 || rows == 0) return;
  if (rows == 1 || (dst_pitch == width && src_pitch == width)) {
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  LOCKSTEP_CUDA_CHECK(
      cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, stream));
}

class CudaConcatOp : public Operator {
 public:
  CudaConcatOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        schema_(*SchemaRegistry::Find("Concat")),
        inputs_(def.input_size()),
        input_shapes_(def.input_size()) {}

  void Run() override {
    for (int i = 0; i < InputSize(); ++i) {
      inputs_[i] = &Input(i);  // each x has y's shape except along axis
      input_shapes_[i] = {inputs_[i]->shape(), inputs_[i]->dtype()};
    }
    auto shapes = schema_.InferShapes(def_, input_shapes_);  // the CPU operator's checks
    Tensor* y = Output(0);                                   // y is the inputs joined along axis
    Tensor* split_info =
        Output(1);  // split_info is (number of inputs), int32: each input's extent along axis
    y->Resize(shapes[0].dims, shapes[0].dtype);
    const int axis = NormalizedAxis(def_, y->ndim());
    const int64_t outer = y->SizeToDim(axis);
    const size_t element = ElementSize(y->dtype());
    const size_t row_bytes = y->SizeFromDim(axis) * element;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    extents_.Resize(shapes[1].dims, DataType::kInt32);
    size_t offset = 0;  // bytes into each row of y
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& x = *inputs_[i];
      extents_.data<int32_t>()[i] = static_cast<int32_t>(x.dim(axis));
      const size_t piece_bytes = x.SizeFromDim(axis) * element;
      CopyRows(static_cast<uint8_t*>(y->raw_data()) + offset, row_bytes, x.raw_data(), piece_bytes,
               piece_bytes, outer, stream);
      offset += piece_bytes;
    }
    split_info->CopyFrom(extents_);
  }

 private:
  const OpSchema& schema_;
  std::vector<const Tensor*> inputs_;
  std::vector<TensorShape> input_shapes_;
  Tensor extents_;  // split_info's values, in host memory
};

// The extents along axis come from input 1 (split_info), from arg split, or are equal pieces; arg parts
// lists which pieces are outputs.
class CudaSplitOp : public Operator {
 public:
  CudaSplitOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        schema_(*SchemaRegistry::Find("Split")),
        split_arg_(IntsArg("split")),
        parts_(IntsArg("parts")),
        def_with_extents_(def) {
    if (InputSize() == 2 && !split_arg_.empty())
      FailOperator(def, "give the extents as input 1 or as arg split, not both");
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    const OperatorDef* def = &def_;
    if (InputSize() == 2) {
      const Tensor& split_info = Input(1);  // split_info is (pieces), int32
      if (split_info.dtype() != DataType::kInt32 || split_info.ndim() != 1)
        FailOperator(def_, fmt::format("split_info must be a 1-D int32 tensor, got {} {}",
                                       DataTypeName(split_info.dtype()), ShapeToString(split_info.shape())));
      // The host needs the extents to size the outputs, so this copy waits for the device.
      split_info_.CopyFrom(split_info);
      extents_.assign(split_info_.data<int32_t>(), split_info_.data<int32_t>() + split_info_.numel());
      // The shape function takes extents as arg split only.
      SetArgument(&def_with_extents_, Arg("split", extents_));
      def = &def_with_extents_;
    } else {
      extents_ = split_arg_;
    }
    auto shapes = schema_.InferShapes(*def, {{x.shape(), x.dtype()}});  // the CPU operator's checks
    const int axis = NormalizedAxis(def_, x.ndim());
    if (extents_.empty())  // equal pieces, one per output
      for (const TensorShape& shape : shapes) extents_.push_back(shape.dims[axis]);
    const int64_t outer = x.SizeToDim(axis);
    const size_t inner_bytes = x.SizeFromDim(axis + 1) * ElementSize(x.dtype());
    const size_t row_bytes = x.dim(axis) * inner_bytes;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    int64_t start = 0;  // where the current piece begins along axis
    int next_output = 0;
    for (size_t piece = 0; piece < extents_.size() && next_output < OutputSize(); ++piece) {
      const int64_t extent = extents_[piece];
      if (parts_.empty() || parts_[next_output] == static_cast<int64_t>(piece)) {
        Tensor* y = Output(next_output);  // y is x with `extent` along axis
        y->Resize(shapes[next_output].dims, x.dtype());
        ++next_output;
        const size_t piece_bytes = extent * inner_bytes;
        CopyRows(y->raw_data(), piece_bytes, static_cast<const uint8_t*>(x.raw_data()) + start * inner_bytes,
                 row_bytes, piece_bytes, outer, stream);
      }
      start += extent;
    }
  }

 private:
  const OpSchema& schema_;
  const std::vector<int64_t> split_arg_;
  const std::vector<int64_t> parts_;
  OperatorDef def_with_extents_;  // def_ with split_info's values as arg split
  Tensor split_info_;             // input 1 in host memory
  std::vector<int64_t> extents_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Concat, CudaConcatOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Split, CudaSplitOp);

}  // namespace lockstep
