// Operator schemas: declared once per type next to the operator, checked once when an operator is created.
// A schema states every fact about an operator that code outside ops/ relies on: its doc, inputs, outputs and
// arguments (name, type, default, accepted range, doc: the one home of argument defaults), arity, which
// outputs may overwrite which inputs, how output shapes follow from inputs, its cost and scratch, which
// inputs may be 16-bit, which GPU library options it takes, where it may read from, which inputs and outputs
// name workspace objects rather than tensors, and what the data-parallel planner must do with it. Passes read
// these facts; none of them matches an operator type by name.
#pragma once

#include <climits>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct TensorShape {
  Shape dims;
  DataType dtype = DataType::kFloat;
};

using ShapeInference =
    std::function<std::vector<TensorShape>(const OperatorDef& def, const std::vector<TensorShape>& inputs)>;
// Estimated work of one run (as Caffe2's CostInferenceFunction): multiply-adds where the op multiplies.
using CostInference = std::function<double(const OperatorDef& def, const std::vector<TensorShape>& inputs,
                                           const std::vector<TensorShape>& outputs)>;
// The bytes an op's CPU kernels take from their thread's scratch pool while it runs, by pool slot
// (ScratchMemory in ops/dnnl_utils.h): the copies and workspaces every run needs, such as a filter in the
// kernel's blocked layout. The memory plan counts each slot's largest request on a device.
using ScratchInference =
    std::function<std::vector<size_t>(const OperatorDef& def, const std::vector<TensorShape>& inputs)>;
// How an op is rewritten when the replicas of a data-parallel model share its statistics (Caffe2's combined
// SpatialBN): the ops that replace it, given the number of replicas. It may return the op unchanged.
using ReplicaRewrite = std::function<std::vector<OperatorDef>(const OperatorDef& def, int replicas)>;

// Options of the GPU libraries, passed as arguments to the ops whose schemas take them (and to their
// gradient ops, which copy their arguments).
struct GpuOptions {
  // Caffe2's default is 64 MiB; cuDNN's NCHW tensor-core algorithms need room to transpose, and within 64 MiB
  // ResNet-50 trains half as fast in 16 bits on an H100. One buffer per device serves every convolution.
  static constexpr int64_t kDefaultCudnnWorkspaceBytes = int64_t{1024} << 20;
  int64_t cudnn_workspace_bytes = kDefaultCudnnWorkspaceBytes;  // per convolution
  bool enable_tensor_core = false;                              // TF32 / tensor-core math where offered
  bool float16_compute = false;                                 // float16 data accumulates in float16
};
enum GpuOption : unsigned { kCudnnWorkspace = 1u, kTensorCore = 2u, kFloat16Compute = 4u };
// The arguments that carry the GPU options.
inline constexpr const char* kCudnnWorkspaceArg = "ws_nbytes_limit";
inline constexpr const char* kTensorCoreArg = "enable_tensor_core";
inline constexpr const char* kFloat16ComputeArg = "float16_compute";

// What code outside ops/ needs an op for when it adds one itself; one schema claims each role, so that code
// names the role and never the type.
enum class OpRole { kGradientSeed, kGradientSum };

// The value types of operator arguments, as Argument carries them: int (i; also 0/1 flags), float (f, or an
// int), string (s), ints and floats (lists; floats also takes ints).
enum class ArgType { kInt, kFloat, kString, kInts, kFloats };
const char* ArgTypeName(ArgType type);  // "int", "float", "string", "ints", "floats"

// One declared argument. Without a default, the op requires the argument or derives its value otherwise (a
// kernel from the filter); the doc says which. min and max bound each value, inclusive.
struct ArgSpec {
  std::string name;
  ArgType type;
  std::optional<Argument> default_value;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool max_excluded = false;         // [min, max)
  std::vector<std::string> choices;  // a string argument's accepted values; empty: any
  std::string doc;
};

// A documented input or output; an optional one may be left out, with every one after it.
struct BlobSpec {
  std::string name, doc;
  bool optional = false;
};

// The blob that holds the sum over all replicas of a blob that an op with SummedAcrossReplicas() writes.
std::string CombinedName(const std::string& blob);

class OpSchema {
 public:
  explicit OpSchema(std::string type) : type_(std::move(type)) {}

  // What the operator computes, in a few lines (the catalogue's text; `lockstep ops TYPE`).
  OpSchema& SetDoc(std::string doc);
  // The inputs and outputs, in order: the required ones, then the optional ones. Together they state how
  // many an op takes (Conv: X and filter, then an optional bias: 2 or 3 inputs).
  OpSchema& Input(int index, std::string name, std::string doc);
  OpSchema& OptionalInput(int index, std::string name, std::string doc);
  OpSchema& Output(int index, std::string name, std::string doc);
  OpSchema& OptionalOutput(int index, std::string name, std::string doc);
  // Declares an argument with its default (a C++ value of the type: 1, 0.5f, "NCHW", std::vector<int64_t>{}).
  template <typename T>
  OpSchema& Arg(std::string name, ArgType type, const T& default_value, std::string doc) {
    return AddArg(std::move(name), type, ::lockstep::Arg("", default_value).proto, std::move(doc));
  }
  // Declares an argument without a default.
  OpSchema& Arg(std::string name, ArgType type, std::string doc);
  // The values the argument declared last accepts (of each element for lists), inclusive.
  OpSchema& Min(double min) { return Range(min, std::numeric_limits<double>::infinity()); }
  OpSchema& Range(double min, double max);
  // [min, max): e.g. a probability that must stay below 1.
  OpSchema& RangeBelow(double min, double max);
  // The values the string argument declared last accepts.
  OpSchema& Choices(std::vector<std::string> choices);
  // Also declares every argument of operator `type` (gradient ops copy their forward op's arguments);
  // resolved when first needed, so the order in which schemas register does not matter.
  OpSchema& ArgsOf(std::string type);
  // Adds declarations that several schemas share (the window arguments of Conv and pooling, the schema of
  // the Conv and FC gradients).
  OpSchema& Include(const std::function<void(OpSchema&)>& declare) {
    declare(*this);
    return *this;
  }

  // How many inputs (outputs) an op takes where the declarations cannot say it: ops whose last declared
  // input (output) stands for any number of blobs (Sum's X..., max INT_MAX). Without the call, the declared
  // ones.
  OpSchema& NumInputs(int min, int max);
  OpSchema& NumOutputs(int min, int max);
  // Output `output` may be the same blob as input `input` (computed in place).
  OpSchema& AllowInplace(std::set<std::pair<int, int>> pairs);
  // Output i may be the same blob as input i + shift, for every i (ops with any number of inputs after
  // `shift` fixed ones).
  OpSchema& AllowInplaceShifted(int shift) {
    inplace_shift_ = shift;
    return *this;
  }
  // Output `output` must be the same blob as input `input` (e.g. parameter updates).
  OpSchema& EnforceInplace(std::set<std::pair<int, int>> pairs);
  OpSchema& ShapeFunction(ShapeInference function);
  // Output i has the shape and dtype of input i.
  OpSchema& IdentityShape();
  // One output, with the dims of input `input` and the dtype of input 0 (ResizeLike: A's data in B's shape).
  OpSchema& DimsOfInput(int input);
  // The op reads and writes the blobs of several devices (a gradient allreduce, a broadcast): executors run
  // it on a communication thread of its own so that it overlaps with the devices' compute.
  OpSchema& Collective();
  bool collective() const { return collective_; }
  // The op may read blobs that live on other devices than its own (a copy, a collective).
  OpSchema& ReadsAnyDevice();
  bool reads_any_device() const { return reads_any_device_ || collective_; }

  OpSchema& CostFunction(CostInference function);
  // The op's cost; without a cost function, the elements it writes.
  double Cost(const OperatorDef& def, const std::vector<TensorShape>& inputs,
              const std::vector<TensorShape>& outputs) const;

  OpSchema& ScratchFunction(ScratchInference function);
  // The op's scratch by pool slot; empty without a scratch function.
  std::vector<size_t> Scratch(const OperatorDef& def, const std::vector<TensorShape>& inputs) const;

  // Only these inputs may be given in 16 bits under mixed precision (the rest stay float32, e.g. BN's
  // scale, bias and statistics); without the call, every input may.
  OpSchema& LowPrecisionInputs(std::set<int> inputs);
  bool AllowsLowPrecisionInput(int input) const;
  // Of those, the ones the op's CPU kernel takes in float32 and converts itself, as it brings them into its
  // own layout anyway (a convolution's filter and bias): mixed precision casts them on other devices only.
  OpSchema& CpuConvertsInputs(std::set<int> inputs);
  bool CpuConvertsInput(int input) const { return cpu_converts_inputs_.count(input) > 0; }

  // The GpuOption bits of the options the op takes as arguments; declares those arguments.
  OpSchema& TakesGpuOptions(unsigned options);
  unsigned gpu_options() const { return gpu_options_; }

  // Each output is this replica's part of a sum over the replicas: a data-parallel model allreduces it into
  // CombinedName(output) right after the op.
  OpSchema& SummedAcrossReplicas();
  bool summed_across_replicas() const { return summed_across_replicas_; }
  OpSchema& CombineAcrossReplicas(ReplicaRewrite rewrite);
  const ReplicaRewrite& combine_across_replicas() const { return combine_; }

  OpSchema& Role(OpRole role);
  // The first `count` inputs (outputs) name workspace objects (Workspace::SetObject), not tensors: a
  // communicator that one op creates and others use. Executors order ops by them as by any blob; the passes
  // that copy, share or shape tensors leave them alone.
  OpSchema& ObjectInputs(int count) {
    object_inputs_ = count;
    return *this;
  }
  OpSchema& ObjectOutputs(int count) {
    object_outputs_ = count;
    return *this;
  }
  bool IsObjectInput(int i) const { return i < object_inputs_; }
  bool IsObjectOutput(int i) const { return i < object_outputs_; }

  const std::string& doc() const { return doc_; }
  const std::vector<BlobSpec>& inputs() const { return inputs_; }
  const std::vector<BlobSpec>& outputs() const { return outputs_; }
  // Every declared argument: the schema's own, then those of ArgsOf's type.
  std::vector<const ArgSpec*> args() const;
  const ArgSpec* FindArg(const std::string& name) const;

  // Throws InvalidInput naming the operator when the def breaks this schema: its arity or in-place rules,
  // or an argument that is not declared (naming the closest declared one), of another type or out of range.
  void Verify(const OperatorDef& def) const;
  bool HasShapeFunction() const { return static_cast<bool>(infer_); }
  std::vector<TensorShape> InferShapes(const OperatorDef& def, const std::vector<TensorShape>& inputs) const;
  const std::string& type() const { return type_; }

 private:
  OpSchema& AddArg(std::string name, ArgType type, std::optional<Argument> default_value, std::string doc);
  // Declares input or output `index` of `blobs`; the optional ones come after all the required ones.
  OpSchema& AddBlob(std::vector<BlobSpec>* blobs, int index, BlobSpec blob);
  const ArgSpec* FindOwnArg(const std::string& name) const;
  std::string UnknownArgument(const OperatorDef& def, const std::string& name) const;

  std::string type_;
  std::string doc_;
  std::vector<BlobSpec> inputs_, outputs_;
  std::vector<ArgSpec> args_;
  std::string args_of_;
  std::optional<std::pair<int, int>> num_inputs_, num_outputs_;  // NumInputs, NumOutputs: min and max
  std::set<std::pair<int, int>> allow_inplace_, enforce_inplace_;
  ShapeInference infer_;
  CostInference cost_;
  ScratchInference scratch_;
  ReplicaRewrite combine_;
  std::set<int> low_precision_inputs_;
  bool any_low_precision_input_ = true;
  std::set<int> cpu_converts_inputs_;
  unsigned gpu_options_ = 0;
  bool collective_ = false;
  bool reads_any_device_ = false;
  bool summed_across_replicas_ = false;
  int inplace_shift_ = -1;  // none
  int object_inputs_ = 0, object_outputs_ = 0;
};

class SchemaRegistry {
 public:
  static OpSchema& Register(const std::string& type);  // refuses duplicates
  static const OpSchema* Find(const std::string& type);
  static std::vector<std::string> Types();  // sorted
  // The schema of a def's type; throws InvalidInput naming the unknown type.
  static const OpSchema& Of(const OperatorDef& def);
  // The type that claims the role; throws when none does.
  static const std::string& TypeFor(OpRole role);
};

// True when the op's type is registered with OpSchema::Collective().
bool IsCollective(const OperatorDef& op);
// True when input (output) i of the op names a workspace object (OpSchema::ObjectInputs).
bool IsObjectInput(const OperatorDef& op, int i);
bool IsObjectOutput(const OperatorDef& op, int i);

// For messages and the catalogue: the default ("1", "1e-05", "NCHW", "[0, 1, 2]"; "" when none) and the
// accepted values ("in [0, 1]", "at least 1", "one of NCHW", "any value").
std::string DefaultText(const ArgSpec& arg);
std::string RangeText(const ArgSpec& arg);

// Caffe2's `order` of the ops on images, NCHW or NHWC: lockstep's tensors are NCHW, the one value it takes.
void DeclareNchwOrder(OpSchema& schema);

// Argument `name` of an operator, or its schema's default when the def does not give it: the readers of
// operator implementations, shape functions and gradient makers. A value of the wrong type or out of range is
// an InvalidInput naming the operator; reading an undeclared argument, or a missing one without default, is a
// bug (enforce).
int64_t IntArg(const OperatorDef& def, const std::string& name);
float FloatArg(const OperatorDef& def, const std::string& name);
std::string StringArg(const OperatorDef& def, const std::string& name);
std::vector<int64_t> IntsArg(const OperatorDef& def, const std::string& name);
std::vector<float> FloatsArg(const OperatorDef& def, const std::string& name);
// The default that operator `type` declares for argument `name`, for code that spells arguments out (layers).
int64_t DefaultIntArg(const std::string& type, const std::string& name);
float DefaultFloatArg(const std::string& type, const std::string& name);

// Sets the GPU options as arguments on every op of the net whose schema takes them.
void SetGpuOptions(const GpuOptions& options, NetDef* net);

// Runs the shape functions of a whole net from the shapes of its external inputs; every blob the net writes
// gets an entry (an object: DataType::kUndefined). Throws if an op has no shape function or its inputs are
// unknown; object inputs have no shape to know.
std::map<std::string, TensorShape> InferNetShapes(const NetDef& net,
                                                  std::map<std::string, TensorShape> shapes);

}  // namespace lockstep

#define LOCKSTEP_SCHEMA_CONCAT_(a, b) a##b
#define LOCKSTEP_SCHEMA_NAME_(a, b) LOCKSTEP_SCHEMA_CONCAT_(a, b)
#define LOCKSTEP_OPERATOR_SCHEMA(type)                                                                 \
  static ::lockstep::OpSchema& LOCKSTEP_SCHEMA_NAME_(schema_##type##_, __COUNTER__) [[maybe_unused]] = \
      ::lockstep::SchemaRegistry::Register(#type)
