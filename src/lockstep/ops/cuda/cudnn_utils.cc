// cuDNN types and tensor descriptors for lockstep tensors.
#include "lockstep/ops/cuda/cudnn_utils.h"

#include <algorithm>
#include <climits>
#include <vector>

namespace lockstep::cuda {

cudnnDataType_t CudnnDataType(const OperatorDef& def, const char* what, DataType type) {
  switch (type) {
    case DataType::kFloat:
      return CUDNN_DATA_FLOAT;
    case DataType::kFloat16:
      return CUDNN_DATA_HALF;
    case DataType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      FailOperator(def, fmt::format("{} is {}; on CUDA devices it must be float32, float16 or bfloat16", what,
                                    DataTypeName(type)));
  }
}

void SetTensorDescriptor(const OperatorDef& def, cudnnTensorDescriptor_t desc, DataType type,
                         const Shape& shape) {
  LOCKSTEP_ENFORCE(shape.size() >= 2 && shape.size() <= 5, "cuDNN tensors here are 2-D to 5-D, got {}",
                   ShapeToString(shape));
  if (NumElements(shape) > INT_MAX)
    FailOperator(def, fmt::format("the tensor {} has more than {} elements, which cuDNN cannot index; use a "
                                  "smaller batch",
                                  ShapeToString(shape), INT_MAX));
  std::vector<int> dims(shape.begin(), shape.end());
  dims.resize(std::max<size_t>(dims.size(), 4), 1);
  std::vector<int> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  LOCKSTEP_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc, CudnnDataType(def, "the tensor", type),
                                                  static_cast<int>(dims.size()), dims.data(),
                                                  strides.data()));
}

}  // namespace lockstep::cuda
