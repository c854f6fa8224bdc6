// Layer helpers (Caffe2's brew): each adds its parameters to the model and its operators to the net, and
// returns the name of its output blob. They compute nothing. Blob names get the model's name scope.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/schema.h"
#include "lockstep/model/model_helper.h"

namespace lockstep::layers {

// Caffe2's per-side spellings of a window that is not square: kernel_h and kernel_w, stride_h and stride_w,
// pad_t, pad_l, pad_b and pad_r, dilation_h and dilation_w (Conv), or the lists kernels, strides, pads and
// dilations. Each replaces the square argument of its role; the operator checks the values.
using WindowSides = std::vector<Arg>;

// The operators' arguments default to their schemas' defaults.
struct ConvOptions {
  int stride = DefaultIntArg("Conv", "stride");
  int pad = DefaultIntArg("Conv", "pad");
  int dilation = DefaultIntArg("Conv", "dilation");
  int group = DefaultIntArg("Conv", "group");
  bool bias = true;
  FillSpec weight_init = FillSpec::Xavier();
  FillSpec bias_init = FillSpec::Constant(0.0f);
  WindowSides sides;  // e.g. {Arg("kernel_h", 1), Arg("kernel_w", 7)} for a 1x7 window
};

// Parameters "<out>_w" (dim_out, dim_in/group, kh, kw) and "<out>_b" (dim_out); kh = kw = kernel unless
// options.sides spells the kernel.
std::string Conv(ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
                 int kernel, const ConvOptions& options = {});
// Parameters "<out>_w" (dim_out, dim_in) and "<out>_b" (dim_out); `in` is flattened from `axis`: its dims
// from there on multiply to dim_in.
std::string FC(ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
               const FillSpec& weight_init = FillSpec::Xavier(),
               const FillSpec& bias_init = FillSpec::Constant(0), int axis = DefaultIntArg("FC", "axis"));
std::string Relu(ModelHelper& model, const std::string& in, const std::string& out);
std::string MaxPool(ModelHelper& model, const std::string& in, const std::string& out, int kernel, int stride,
                    int pad = DefaultIntArg("MaxPool", "pad"), const WindowSides& sides = {});
std::string AveragePool(ModelHelper& model, const std::string& in, const std::string& out, int kernel,
                        int stride, int pad = DefaultIntArg("AveragePool", "pad"),
                        const WindowSides& sides = {});
std::string GlobalAveragePool(ModelHelper& model, const std::string& in, const std::string& out);
// Parameters "<out>_s", "<out>_b" (trained) and "<out>_rm", "<out>_riv" (running mean / variance, computed).
// relu = true fuses a following Relu: the output is relu(BN(in)), and training keeps the ReLU mask in
// "<out>_relu_mask" for the gradient.
// init_scale and init_bias are the trained parameters' first values (Caffe2's brew.spatial_bn).
std::string SpatialBN(ModelHelper& model, const std::string& in, const std::string& out, int channels,
                      bool is_test, bool relu = false,
                      float epsilon = DefaultFloatArg("SpatialBN", "epsilon"),
                      float momentum = DefaultFloatArg("SpatialBN", "momentum"), float init_scale = 1.0f,
                      float init_bias = 0.0f);
std::string Dropout(ModelHelper& model, const std::string& in, const std::string& out, float ratio,
                    bool is_test);
std::string Add(ModelHelper& model, const std::string& a, const std::string& b, const std::string& out);
// out = scale * in (a data-parallel forward builder scales its loss by the loss_scale it is given).
std::string Scale(ModelHelper& model, const std::string& in, const std::string& out, float scale);
std::string Flatten(ModelHelper& model, const std::string& in, const std::string& out);
// Reads the model's replica's slice of the next global batch from the BatchReader the workspace holds under
// `reader` (see data/batch_reader.h). Returns {data, label}.
std::pair<std::string, std::string> ReadBatch(ModelHelper& model, const std::string& reader,
                                              const std::string& data, const std::string& label);
// Returns {softmax, loss}.
std::pair<std::string, std::string> SoftmaxWithLoss(ModelHelper& model, const std::string& logits,
                                                    const std::string& label, const std::string& softmax,
                                                    const std::string& loss);
std::string Accuracy(ModelHelper& model, const std::string& predictions, const std::string& label,
                     const std::string& out, int top_k = DefaultIntArg("Accuracy", "top_k"));

}  // namespace lockstep::layers
