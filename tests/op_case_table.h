// What the two files of the operator table share: the tolerances, the table being filled, and the input
// helpers of both. Internal to op_cases.cc and op_layer_cases.cc.
#pragma once

#include <string>
#include <vector>

#include "op_cases.h"

namespace lockstep::testing {

// Tolerances, relative to max(1, |value|) as ExpectNear reads them.
// Data movement (Copy, Concat, reshapes, fills, Cast, a reader) and counting (Accuracy, Iter) must agree
// exactly: the CUDA fills run the CPU fill, and Cast rounds to nearest even on both backends.
constexpr float kExact = 0;
// One or a few roundings per element; the GPU may contract a multiply and an add into one FMA, or divide
// where the CPU multiplies by a reciprocal, which moves a result by an ulp or two.
constexpr float kElementwise = 1e-5f;
// Sums over many elements in another order and, for softmax and normalization, exp, rsqrt and division
// that the two libraries compute differently: SpatialBN, channel statistics, softmax, pooling averages.
constexpr float kReduction = 1e-4f;
// cuDNN and cuBLAS in float32: other algorithms (implicit GEMM, Winograd, FFT) and summation orders. TF32
// tensor cores, which would need about 1e-2, are used only under enable_tensor_core, which no case sets.
constexpr float kMatmul = 1e-4f;

class Table {
 public:
  OpCase& Add(const std::string& name, const OperatorDef& op, Blobs inputs, float tolerance) {
    OpCase c;
    c.name = name;
    c.op = op;
    c.inputs = std::move(inputs);
    c.tolerance = tolerance;
    cases_.push_back(std::move(c));
    return cases_.back();
  }
  std::vector<OpCase> Take() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
};

using Ints = std::vector<int>;

// Values 0.05 apart in shuffled order, so that no pooling window holds a tie and both backends pick the same
// maximum.
Tensor Distinct(const Shape& shape, unsigned seed);

// Output extent of a window sweep: floor((size + 2 * pad - kernel) / stride) + 1.
int64_t Swept(int64_t size, int64_t kernel, int64_t stride, int64_t pad);

// The cases of the network layers (op_layer_cases.cc).
void AddConv(Table& t);
void AddFc(Table& t);
void AddPooling(Table& t);
void AddBatchNorm(Table& t);

}  // namespace lockstep::testing
