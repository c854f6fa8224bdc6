// NormalizeImages: uint8 images (N, H, W, C) to float (N, C, H, W) as (pixel - mean[c]) / std[c], the
// normalization of the input pipeline (data/image_transform.h) as an op, so that a device can do it.
#include <cmath>
#include <vector>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

// Arg `name` as one value per channel: it lists one value per channel or one for all, each finite.
std::vector<float> PerChannelArg(const OperatorDef& def, const char* name, int64_t channels) {
  std::vector<float> values = FloatsArg(def, name);
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != channels)
    FailOperator(def, fmt::format("arg {} has {} values; give 1 or one per channel ({})", name, values.size(),
                                  channels));
  for (float value : values)
    if (!std::isfinite(value)) FailOperator(def, fmt::format("arg {} value {} is not finite", name, value));
  if (values.size() == 1) values.assign(channels, values[0]);
  return values;
}

// Y's shape from X's, once X and the args are checked.
std::vector<TensorShape> NormalizedShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const Shape& x = in[0].dims;
  if (x.size() != 4 || in[0].dtype != DataType::kUInt8)
    FailOperator(def, fmt::format("X must be uint8 images (N, H, W, C), got {} {}", DataTypeName(in[0].dtype),
                                  ShapeToString(x)));
  PerChannelArg(def, "mean", x[3]);
  std::vector<float> std = PerChannelArg(def, "std", x[3]);
  for (size_t c = 0; c < std.size(); ++c)
    if (std[c] == 0.0f) FailOperator(def, fmt::format("std of channel {} is 0", c));
  return {{{x[0], x[3], x[1], x[2]}, DataType::kFloat}};
}

class NormalizeImagesOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, H, W, C) uint8
    Tensor* y = Output(0);       // y is (N, C, H, W) float
    y->Resize(NormalizedShapes(def_, {{x.shape(), x.dtype()}})[0].dims);
    const int64_t batch = x.dim(0), channels = x.dim(3), plane = x.dim(1) * x.dim(2);
    if (channels != static_cast<int64_t>(table_.size()) / 256) BuildTable(channels);
    const uint8_t* pixels = x.data<uint8_t>();
    float* out = y->data<float>();
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* table = &table_[c * 256];
        const uint8_t* source = pixels + n * plane * channels + c;
        float* target = out + (n * channels + c) * plane;
        for (int64_t i = 0; i < plane; ++i) target[i] = table[source[i * channels]];
      }
    }
  }

 private:
  // ImageTransform's table, with its arithmetic: (v - mean) / std in float for every byte value v.
  void BuildTable(int64_t channels) {
    std::vector<float> mean = PerChannelArg(def_, "mean", channels);
    std::vector<float> std = PerChannelArg(def_, "std", channels);
    table_.resize(channels * 256);
    for (int64_t c = 0; c < channels; ++c)
      for (int v = 0; v < 256; ++v) table_[c * 256 + v] = (static_cast<float>(v) - mean[c]) / std[c];
  }

  std::vector<float> table_;  // (C, 256)
};

}  // namespace

// The defaults are those of the trainer's input pipeline.
LOCKSTEP_OPERATOR_SCHEMA(NormalizeImages)
    .SetDoc("uint8 images (N, H, W, C) to float (N, C, H, W) as (pixel - mean[c]) / std[c].")
    .Input(0, "X", "(N, H, W, C) uint8")
    .Output(0, "Y", "(N, C, H, W) float")
    .Arg("mean", ArgType::kFloats, std::vector<float>{128.0f}, "subtracted: one value, or one per channel")
    .Arg("std", ArgType::kFloats, std::vector<float>{128.0f}, "divides: one value, or one per channel, not 0")
    .ShapeFunction(NormalizedShapes);
LOCKSTEP_REGISTER_CPU_OPERATOR(NormalizeImages, NormalizeImagesOp);
LOCKSTEP_NO_GRADIENT(NormalizeImages);

}  // namespace lockstep
