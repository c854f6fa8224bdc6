// The cross-backend operator table (in the manner of ggml's test-backend-ops): each case runs one operator
// on the CPU in float32, the oracle, and on a CUDA device (or on the CPU in bfloat16) from the same inputs,
// and says which outputs must agree and how closely. cuda/cuda_ops_test.cc and low_precision_ops_test.cc run
// the table.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace lockstep::testing {

// Tensors by blob name: a case's inputs, or one backend's outputs brought to host memory in plain layout.
using Blobs = std::map<std::string, Tensor>;

struct OpCase {
  std::string name;  // the test's name: letters, digits and underscores
  // Operators run before `op`, on the same device, to make inputs that each backend must make itself (a
  // pooling's Y, which cuDNN compares with X; SpatialBN's ReLU mask, whose format is the backend's own).
  std::vector<OperatorDef> setup;
  OperatorDef op;
  Blobs inputs;  // host tensors; each backend's workspace gets them in its own memory
  // How many times the one instance of `op` runs: more than once where state carries over between runs
  // (random generators, counters, momentum, a reader's position).
  int runs = 1;
  std::vector<std::string> compare;  // the blobs compared; empty: every output of `op`
  // |cuda - cpu| <= tolerance * max(1, |cuda|, |cpu|) per element; non-float blobs always compare exactly.
  float tolerance = 0;
  std::function<void(Workspace*)> prepare;  // puts the objects `op` looks up (a reader) in a workspace
  // For outputs that are random draws, which the backends make differently: checks one backend's outputs
  // against the inputs, in place of comparing the two backends.
  std::function<void(const Blobs& inputs, const Blobs& outputs)> check;
  // The inputs the device gets in `narrow_to` (float16 or bfloat16) instead of float32; their values are
  // exactly representable in it, so the CPU computes in float32 from the same numbers. The device's 16-bit
  // outputs are widened to float32 to be compared.
  std::vector<std::string> narrowed;
  DataType narrow_to = DataType::kFloat;
};

std::vector<OpCase> OpCases();

// Prints a case by name in gtest's messages.
void PrintTo(const OpCase& c, std::ostream* os);

// Runs the case on the CPU in float32 and on `device` with the narrowed inputs in 16 bits, and compares the
// two (or, for random outputs, checks each). A failure is recorded as a gtest failure.
void ExpectSameOnCpuAnd(const OpCase& c, const Device& device);

// The float32 cases of the operators a float16 or bfloat16 pass runs (mixed precision: convolution, FC,
// pooling, ReLU, batch normalization, the element-wise sums and the data movement between them, with their
// gradients), once per 16-bit type: each input the operator's schema lets be 16-bit is rounded to that type.
std::vector<OpCase> LowPrecisionCases();

// x (float32) rounded to float16 or bfloat16 on the host, and back: x in float32 when it is float16 or
// bfloat16 (exactly), x itself otherwise.
Tensor Narrowed(const Tensor& x, DataType type);
Tensor Widened(const Tensor& x);

// CPU operator types with no case in the table, each with the reason.
const std::map<std::string, std::string>& OperatorsWithoutCases();
// CPU operator types that have no CUDA implementation on purpose, each with the reason (a CUDA device
// refuses them in one line naming the type); OperatorsWithoutCases includes them.
const std::map<std::string, std::string>& CpuOnlyOperators();
// Operator types that tests register for themselves; they are not part of the library.
const std::vector<std::string>& TestOnlyOperators();

// A trainable operator whose registered gradient is checked against finite differences on the device.
struct GradientCase {
  std::string name;
  OperatorDef op;
  Blobs inputs;
  GradientCheckOptions options;
};

std::vector<GradientCase> GradientCases();
void PrintTo(const GradientCase& c, std::ostream* os);

}  // namespace lockstep::testing
