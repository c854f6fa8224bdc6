// NormalizeImages on CUDA devices, as ops/normalize_images_op.cc defines it: uint8 images (N, H, W, C) to
// float (N, C, H, W) as (pixel - mean[c]) / std[c], with the same float operations as the input pipeline's
// ImageTransform, so the values equal the CPU's exactly.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

using cuda::BlocksFor;
using cuda::kThreads;

// x is (N, plane, C) uint8 with plane = H * W; parameters is (2, C): mean, then std; y is (N, C, plane),
// n = N * C * plane elements. Rounded subtraction and division, as on the CPU.
__global__ void NormalizeImagesKernel(const uint8_t* x, const float* parameters, int64_t channels,
                                      int64_t plane, int64_t n, float* y) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const int64_t image_channel = i / plane, position = i - image_channel * plane;
    const int64_t c = image_channel % channels, image = image_channel / channels;
    const float pixel = x[(image * plane + position) * channels + c];
    y[i] = __fdiv_rn(__fsub_rn(pixel, parameters[c]), parameters[channels + c]);
  }
}

class CudaNormalizeImagesOp : public Operator {
 public:
  CudaNormalizeImagesOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        schema_(*SchemaRegistry::Find("NormalizeImages")),
        mean_(FloatsArg("mean")),
        std_(FloatsArg("std")) {}

  void Run() override {
    const Tensor& x = Input(0);                                              // x is (N, H, W, C) uint8
    Tensor* y = Output(0);                                                   // y is (N, C, H, W) float
    y->Resize(schema_.InferShapes(def_, {{x.shape(), x.dtype()}})[0].dims);  // the CPU operator's checks
    if (y->numel() == 0) return;
    const int64_t channels = x.dim(3), plane = x.dim(1) * x.dim(2);
    if (!parameters_.defined() || parameters_.dim(1) != channels) UploadParameters(channels);
    NormalizeImagesKernel<<<BlocksFor(y->numel()), kThreads, 0, cuda::ContextFor(device().id).stream()>>>(
        x.data<uint8_t>(), parameters_.data<float>(), channels, plane, y->numel(), y->data<float>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  }

 private:
  // Only when the channel count changes (the first run): args mean and std, one value per channel.
  void UploadParameters(int64_t channels) {
    Tensor host({2, channels}, DataType::kFloat);
    for (int64_t c = 0; c < channels; ++c) {
      host.data<float>()[c] = mean_[mean_.size() == 1 ? 0 : c];
      host.data<float>()[channels + c] = std_[std_.size() == 1 ? 0 : c];
    }
    parameters_.PlaceOn(device());
    parameters_.CopyFrom(host);
  }

  const OpSchema& schema_;
  const std::vector<float> mean_, std_;  // one value per channel, or one for all
  Tensor parameters_;                    // (2, C) float in device memory: mean, then std
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(NormalizeImages, CudaNormalizeImagesOp);

}  // namespace lockstep
