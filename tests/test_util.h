// Shared test helpers: random tensors, feeding blobs, tolerant comparison, and a finite-difference gradient
// checker in the manner of Caffe's GradientChecker.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/gradient.h"
#include "lockstep/core/net.h"
#include "lockstep/core/workspace.h"

namespace lockstep::testing {

// Uniform values in [low, high) from a fixed seed.
Tensor RandomTensor(const Shape& shape, unsigned seed, float low = -1.0f, float high = 1.0f);
Tensor TensorFromValues(const Shape& shape, const std::vector<float>& values);
Tensor Int32Tensor(const Shape& shape, const std::vector<int32_t>& values);  // labels
void Feed(Workspace* ws, const std::string& name, const Tensor& value);
std::vector<float> Values(const Tensor& tensor);  // row-major, whatever the tensor's layout
// A row-major copy of a tensor in any layout.
Tensor Plain(const Tensor& tensor);
// plain is (N, C, H, W); returns it in oneDNN's nChw16c layout (channels in zero-padded blocks of 16), the
// layout Conv leaves its outputs in.
Tensor Blocked(const Tensor& plain);
// Likewise in NHWC order (oneDNN's acdb), the layout of Conv's outputs whose channels do not fill its blocks.
Tensor ChannelsLast(const Tensor& plain);
// |a - b| <= tolerance * max(1, |a|, |b|) element-wise, with the first mismatch reported.
void ExpectNear(const Tensor& actual, const Tensor& expected, float tolerance);
void RunOp(Workspace* ws, const OperatorDef& def);
// Where the tests find the lockstep CLI, the source tree (for tests/*.py) and Fashion-MNIST: the environment
// (LOCKSTEP_CLI_PATH, LOCKSTEP_SOURCE_DIR, LOCKSTEP_FASHION_MNIST_DIR) first, so that a bundled test binary
// runs on another machine, else this build's paths.
std::string CliPath();
// The whole file's bytes ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);
// Runs the lockstep CLI with its stdout and stderr in files of `dir` (so stderr is not a terminal).
struct CliOutput {
  int code;
  std::string out, err;
};
CliOutput RunCliWithFiles(const std::filesystem::path& dir, const std::string& arguments);
// An empty directory TempDir()/lockstep_<name>, made afresh.
std::filesystem::path FreshDir(const std::string& name);
std::string SourceDir();
bool HaveFashionMnist();
// ||a - b|| / ||b|| (Euclidean norms).
double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b);

struct GradientCheckOptions {
  std::vector<int> inputs_to_check;    // default: every float input
  std::vector<int> outputs_with_grad;  // default: output 0
  float step = 1e-2f;
  float tolerance = 1e-2f;
};

// Checks the registered gradient of `op` against central finite differences of
// L = sum_k <output_k, random weights_k>, for every element of the checked inputs.
void CheckGradient(const OperatorDef& op, const std::map<std::string, Tensor>& inputs,
                   GradientCheckOptions options = {});

}  // namespace lockstep::testing
