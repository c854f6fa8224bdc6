// Schema registry and checks.
#include "lockstep/core/schema.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "lockstep/core/closest_names.h"
#include "lockstep/core/net_def.h"

namespace lockstep {

const char* ArgTypeName(ArgType type) {
  switch (type) {
    case ArgType::kInt:
      return "int";
    case ArgType::kFloat:
      return "float";
    case ArgType::kString:
      return "string";
    case ArgType::kInts:
      return "ints";
    case ArgType::kFloats:
      return "floats";
  }
  return "?";
}

namespace {

// Whether arg holds a value of `type` as the readers (IntArg, ...) take it.
bool Holds(ArgType type, const Argument& arg) {
  const bool scalar = arg.has_i() || arg.has_f() || arg.has_s();
  switch (type) {
    case ArgType::kInt:
      return arg.has_i();
    case ArgType::kFloat:
      return arg.has_f() || arg.has_i();
    case ArgType::kString:
      return arg.has_s();
    case ArgType::kInts:
      return !scalar && arg.floats_size() == 0 && arg.strings_size() == 0;
    case ArgType::kFloats:
      return !scalar && arg.strings_size() == 0;
  }
  return false;
}

// What arg holds, for messages: "the string \"2\"", "the int 3", "a list of 2 floats".
std::string DescribeValue(const Argument& arg) {
  if (arg.has_s()) return fmt::format("the string \"{}\"", arg.s());
  if (arg.has_i()) return fmt::format("the int {}", arg.i());
  if (arg.has_f()) return fmt::format("the float {}", arg.f());
  if (arg.floats_size()) return fmt::format("a list of {} floats", arg.floats_size());
  if (arg.strings_size()) return fmt::format("a list of {} strings", arg.strings_size());
  if (arg.ints_size()) return fmt::format("a list of {} ints", arg.ints_size());
  return "no value";
}

// The values of arg that the range bounds.
std::vector<double> Values(const Argument& arg) {
  if (arg.has_i()) return {static_cast<double>(arg.i())};
  if (arg.has_f()) return {arg.f()};
  std::vector<double> values(arg.ints().begin(), arg.ints().end());
  values.insert(values.end(), arg.floats().begin(), arg.floats().end());
  return values;
}

// 1 rather than 1.0: bounds and values of int arguments are integers.
std::string NumberText(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.0f}", value);
  return fmt::format("{}", value);
}

std::string RangeText(double min, double max, bool max_excluded) {
  const double inf = std::numeric_limits<double>::infinity();
  if (min > -inf && max < inf)
    return fmt::format("in [{}, {}{}", NumberText(min), NumberText(max), max_excluded ? ")" : "]");
  if (min > -inf) return fmt::format("at least {}", NumberText(min));
  if (max < inf) return fmt::format("{} {}", max_excluded ? "below" : "at most", NumberText(max));
  return "any value";
}

bool InRange(double value, double min, double max, bool max_excluded) {
  return value >= min && (max_excluded ? value < max : value <= max);
}

// Throws InvalidInput when arg is not of spec's type or a value lies outside its range.
void CheckValue(const OperatorDef& def, const ArgSpec& spec, const Argument& arg) {
  if (!Holds(spec.type, arg)) {
    const bool list = spec.type == ArgType::kInts || spec.type == ArgType::kFloats;
    throw InvalidInput(fmt::format("{}: argument '{}' must be {} {}, got {}", DescribeOperator(def),
                                   spec.name,
                                   list                         ? "a list of"
                                   : spec.type == ArgType::kInt ? "an"
                                                                : "a",
                                   ArgTypeName(spec.type), DescribeValue(arg)));
  }
  if (!spec.choices.empty() &&
      std::find(spec.choices.begin(), spec.choices.end(), arg.s()) == spec.choices.end())
    throw InvalidInput(fmt::format("{}: argument '{}' must be {}, got '{}'", DescribeOperator(def), spec.name,
                                   RangeText(spec), arg.s()));
  for (double value : Values(arg))
    if (std::isnan(value))
      throw InvalidInput(
          fmt::format("{}: argument '{}' must be a number, got nan", DescribeOperator(def), spec.name));
    else if (!InRange(value, spec.min, spec.max, spec.max_excluded))
      throw InvalidInput(fmt::format("{}: argument '{}' must be {}, got {}", DescribeOperator(def), spec.name,
                                     RangeText(spec.min, spec.max, spec.max_excluded), NumberText(value)));
}

}  // namespace

std::string DefaultText(const ArgSpec& arg) {
  if (!arg.default_value) return "";
  const Argument& value = *arg.default_value;
  switch (arg.type) {
    case ArgType::kInt:
      return std::to_string(value.i());
    case ArgType::kFloat:
      return fmt::format("{}", value.f());
    case ArgType::kString:
      return value.s();
    case ArgType::kInts:
      return fmt::format("[{}]", fmt::join(value.ints(), ", "));
    case ArgType::kFloats:
      return fmt::format("[{}]", fmt::join(value.floats(), ", "));
  }
  return "";
}

std::string RangeText(const ArgSpec& arg) {
  if (!arg.choices.empty()) return fmt::format("one of {}", fmt::join(arg.choices, ", "));
  return RangeText(arg.min, arg.max, arg.max_excluded);
}

void DeclareNchwOrder(OpSchema& schema) {
  schema.Arg("order", ArgType::kString, "NCHW", "memory order of the images; lockstep's tensors are NCHW")
      .Choices({"NCHW"});
}

namespace {

// How many of the declared blobs an op must give (the required ones) and may give (all).
std::pair<int, int> DeclaredCount(const std::vector<BlobSpec>& blobs) {
  int required = 0;
  while (required < static_cast<int>(blobs.size()) && !blobs[required].optional) ++required;
  return {required, static_cast<int>(blobs.size())};
}

}  // namespace

OpSchema& OpSchema::SetDoc(std::string doc) {
  doc_ = std::move(doc);
  return *this;
}

OpSchema& OpSchema::Input(int index, std::string name, std::string doc) {
  return AddBlob(&inputs_, index, {std::move(name), std::move(doc)});
}

OpSchema& OpSchema::OptionalInput(int index, std::string name, std::string doc) {
  return AddBlob(&inputs_, index, {std::move(name), std::move(doc), true});
}

OpSchema& OpSchema::Output(int index, std::string name, std::string doc) {
  return AddBlob(&outputs_, index, {std::move(name), std::move(doc)});
}

OpSchema& OpSchema::OptionalOutput(int index, std::string name, std::string doc) {
  return AddBlob(&outputs_, index, {std::move(name), std::move(doc), true});
}

OpSchema& OpSchema::AddBlob(std::vector<BlobSpec>* blobs, int index, BlobSpec blob) {
  const char* kind = blobs == &inputs_ ? "input" : "output";
  if (static_cast<int>(blobs->size()) <= index) blobs->resize(index + 1);
  for (int i = 0; i < static_cast<int>(blobs->size()); ++i) {
    if (i == index || (*blobs)[i].name.empty()) continue;
    const BlobSpec& earlier = i < index ? (*blobs)[i] : blob;
    const BlobSpec& later = i < index ? blob : (*blobs)[i];
    LOCKSTEP_ENFORCE(!earlier.optional || later.optional,
                     "operator '{}': required {} '{}' comes after optional {} '{}'", type_, kind, later.name,
                     kind, earlier.name);
  }
  (*blobs)[index] = std::move(blob);
  return *this;
}

OpSchema& OpSchema::Arg(std::string name, ArgType type, std::string doc) {
  return AddArg(std::move(name), type, std::nullopt, std::move(doc));
}

OpSchema& OpSchema::AddArg(std::string name, ArgType type, std::optional<Argument> default_value,
                           std::string doc) {
  for (const auto& arg : args_)
    LOCKSTEP_ENFORCE(arg.name != name, "operator '{}' declares argument '{}' twice", type_, name);
  if (default_value) {
    default_value->set_name(name);
    // A float declared with an integer default (0 rather than 0.0f) holds it as the float it is.
    if (type == ArgType::kFloat && default_value->has_i()) {
      default_value->set_f(static_cast<float>(default_value->i()));
      default_value->clear_i();
    }
    LOCKSTEP_ENFORCE(Holds(type, *default_value), "default of argument '{}' of '{}' is not a {}: {}", name,
                     type_, ArgTypeName(type), DescribeValue(*default_value));
  }
  ArgSpec& arg = args_.emplace_back();
  arg.name = std::move(name);
  arg.type = type;
  arg.default_value = std::move(default_value);
  arg.doc = std::move(doc);
  return *this;
}

OpSchema& OpSchema::Choices(std::vector<std::string> choices) {
  LOCKSTEP_ENFORCE(!args_.empty() && args_.back().type == ArgType::kString,
                   "operator '{}': Choices() of an argument that is no string", type_);
  ArgSpec& arg = args_.back();
  arg.choices = std::move(choices);
  LOCKSTEP_ENFORCE(!arg.default_value || std::find(arg.choices.begin(), arg.choices.end(),
                                                   arg.default_value->s()) != arg.choices.end(),
                   "default '{}' of argument '{}' of '{}' is not {}", arg.default_value->s(), arg.name, type_,
                   RangeText(arg));
  return *this;
}

OpSchema& OpSchema::Range(double min, double max) {
  LOCKSTEP_ENFORCE(!args_.empty(), "operator '{}': Range() before any Arg()", type_);
  ArgSpec& arg = args_.back();
  arg.min = min;
  arg.max = max;
  if (arg.default_value)
    for (double value : Values(*arg.default_value))
      LOCKSTEP_ENFORCE(InRange(value, min, max, arg.max_excluded),
                       "default {} of argument '{}' of '{}' is not {}", value, arg.name, type_,
                       RangeText(arg));
  return *this;
}

OpSchema& OpSchema::RangeBelow(double min, double max) {
  LOCKSTEP_ENFORCE(!args_.empty(), "operator '{}': RangeBelow() before any Arg()", type_);
  args_.back().max_excluded = true;
  return Range(min, max);
}

OpSchema& OpSchema::ArgsOf(std::string type) {
  args_of_ = std::move(type);
  return *this;
}

// The schema whose arguments `type` also takes (OpSchema::ArgsOf), or nullptr.
static const OpSchema* ArgsOfSchema(const std::string& type, const std::string& args_of) {
  if (args_of.empty()) return nullptr;
  const OpSchema* other = SchemaRegistry::Find(args_of);
  LOCKSTEP_ENFORCE(other != nullptr, "'{}' takes the arguments of '{}', which has no schema", type, args_of);
  return other;
}

std::vector<const ArgSpec*> OpSchema::args() const {
  std::vector<const ArgSpec*> all;
  for (const auto& arg : args_) all.push_back(&arg);
  if (const OpSchema* other = ArgsOfSchema(type_, args_of_))
    for (const ArgSpec* arg : other->args())
      if (!FindOwnArg(arg->name)) all.push_back(arg);
  return all;
}

const ArgSpec* OpSchema::FindOwnArg(const std::string& name) const {
  for (const auto& arg : args_)
    if (arg.name == name) return &arg;
  return nullptr;
}

const ArgSpec* OpSchema::FindArg(const std::string& name) const {
  if (const ArgSpec* own = FindOwnArg(name)) return own;
  const OpSchema* other = ArgsOfSchema(type_, args_of_);
  return other ? other->FindArg(name) : nullptr;
}

OpSchema& OpSchema::NumInputs(int min, int max) {
  num_inputs_ = {min, max};
  return *this;
}

OpSchema& OpSchema::NumOutputs(int min, int max) {
  num_outputs_ = {min, max};
  return *this;
}

OpSchema& OpSchema::AllowInplace(std::set<std::pair<int, int>> pairs) {
  allow_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::EnforceInplace(std::set<std::pair<int, int>> pairs) {
  enforce_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::ShapeFunction(ShapeInference function) {
  infer_ = std::move(function);
  return *this;
}

OpSchema& OpSchema::IdentityShape() {
  return ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
    std::vector<TensorShape> out;
    for (int i = 0; i < def.output_size(); ++i) out.push_back(in.at(i));
    return out;
  });
}

OpSchema& OpSchema::DimsOfInput(int input) {
  return ShapeFunction([input](const OperatorDef&, const std::vector<TensorShape>& in) {
    return std::vector<TensorShape>{{in.at(input).dims, in.at(0).dtype}};
  });
}

OpSchema& OpSchema::Collective() {
  collective_ = true;
  return *this;
}

OpSchema& OpSchema::ReadsAnyDevice() {
  reads_any_device_ = true;
  return *this;
}

OpSchema& OpSchema::TakesGpuOptions(unsigned options) {
  gpu_options_ = options;
  const GpuOptions defaults;
  if (options & kCudnnWorkspace)
    Arg(kCudnnWorkspaceArg, ArgType::kInt, defaults.cudnn_workspace_bytes,
        "cuDNN workspace limit of one convolution, in bytes (the trainer's --cudnn_workspace_limit_mb)")
        .Min(0);
  if (options & kTensorCore)
    Arg(kTensorCoreArg, ArgType::kInt, defaults.enable_tensor_core,
        "1: TF32 tensor-core math where cuDNN or cuBLAS offers it (--enable_tensor_core)")
        .Range(0, 1);
  if (options & kFloat16Compute)
    Arg(kFloat16ComputeArg, ArgType::kInt, defaults.float16_compute,
        "1: float16 data also accumulates in float16 (--float16_compute)")
        .Range(0, 1);
  return *this;
}

OpSchema& OpSchema::SummedAcrossReplicas() {
  summed_across_replicas_ = true;
  return *this;
}

OpSchema& OpSchema::CostFunction(CostInference function) {
  cost_ = std::move(function);
  return *this;
}

double OpSchema::Cost(const OperatorDef& def, const std::vector<TensorShape>& inputs,
                      const std::vector<TensorShape>& outputs) const {
  if (cost_) return cost_(def, inputs, outputs);
  double written = 0;
  for (const auto& out : outputs) written += static_cast<double>(NumElements(out.dims));
  return written;
}

OpSchema& OpSchema::ScratchFunction(ScratchInference function) {
  scratch_ = std::move(function);
  return *this;
}

std::vector<size_t> OpSchema::Scratch(const OperatorDef& def, const std::vector<TensorShape>& inputs) const {
  return scratch_ ? scratch_(def, inputs) : std::vector<size_t>{};
}

OpSchema& OpSchema::LowPrecisionInputs(std::set<int> inputs) {
  low_precision_inputs_ = std::move(inputs);
  any_low_precision_input_ = false;
  return *this;
}

bool OpSchema::AllowsLowPrecisionInput(int input) const {
  return any_low_precision_input_ || low_precision_inputs_.count(input) > 0;
}

OpSchema& OpSchema::CpuConvertsInputs(std::set<int> inputs) {
  cpu_converts_inputs_ = std::move(inputs);
  return *this;
}

OpSchema& OpSchema::CombineAcrossReplicas(ReplicaRewrite rewrite) {
  combine_ = std::move(rewrite);
  return *this;
}

static std::map<OpRole, std::string>& Roles() {
  static std::map<OpRole, std::string> roles;
  return roles;
}

OpSchema& OpSchema::Role(OpRole role) {
  auto [entry, added] = Roles().emplace(role, type_);
  LOCKSTEP_ENFORCE(added, "operators '{}' and '{}' claim the same role", entry->second, type_);
  return *this;
}

const std::string& SchemaRegistry::TypeFor(OpRole role) {
  auto it = Roles().find(role);
  LOCKSTEP_ENFORCE(it != Roles().end(), "no operator claims role {}", static_cast<int>(role));
  return it->second;
}

std::string CombinedName(const std::string& blob) { return blob + "_combined"; }

void SetGpuOptions(const GpuOptions& options, NetDef* net) {
  for (auto& op : *net->mutable_op()) {
    const unsigned takes = SchemaRegistry::Of(op).gpu_options();
    if (takes & kCudnnWorkspace) SetArgument(&op, Arg(kCudnnWorkspaceArg, options.cudnn_workspace_bytes));
    if (takes & kTensorCore) SetArgument(&op, Arg(kTensorCoreArg, options.enable_tensor_core));
    if (takes & kFloat16Compute) SetArgument(&op, Arg(kFloat16ComputeArg, options.float16_compute));
  }
}

static std::string CountText(int min, int max) {
  if (min == max) return std::to_string(min);
  if (max == INT_MAX) return fmt::format("at least {}", min);
  return fmt::format("{} to {}", min, max);
}

bool IsCollective(const OperatorDef& op) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->collective();
}

bool IsObjectInput(const OperatorDef& op, int i) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->IsObjectInput(i);
}

bool IsObjectOutput(const OperatorDef& op, int i) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->IsObjectOutput(i);
}

void OpSchema::Verify(const OperatorDef& def) const {
  auto fail = [&](const std::string& what) {
    throw InvalidInput(fmt::format("{}: {}", DescribeOperator(def), what));
  };
  const auto [min_inputs, max_inputs] = num_inputs_.value_or(DeclaredCount(inputs_));
  if (def.input_size() < min_inputs || def.input_size() > max_inputs)
    fail(fmt::format("takes {} inputs, got {}", CountText(min_inputs, max_inputs), def.input_size()));
  const auto [min_outputs, max_outputs] = num_outputs_.value_or(DeclaredCount(outputs_));
  if (def.output_size() < min_outputs || def.output_size() > max_outputs)
    fail(fmt::format("takes {} outputs, got {}", CountText(min_outputs, max_outputs), def.output_size()));
  for (auto [in, out] : enforce_inplace_) {
    if (in < def.input_size() && out < def.output_size() && def.input(in) != def.output(out))
      fail(fmt::format("output {} must be the same blob as input {} (in-place)", out, in));
  }
  for (int in = 0; in < def.input_size(); ++in) {
    for (int out = 0; out < def.output_size(); ++out) {
      if (def.input(in) != def.output(out) || (inplace_shift_ >= 0 && in == out + inplace_shift_)) continue;
      if (!allow_inplace_.count({in, out}) && !enforce_inplace_.count({in, out}))
        fail(fmt::format("output {} may not overwrite input {} ('{}'): use another blob name", out, in,
                         def.input(in)));
    }
  }
  std::set<std::string> given;
  for (const auto& arg : def.arg()) {
    if (!given.insert(arg.name()).second)
      throw InvalidInput(fmt::format("{}: argument '{}' is given twice", DescribeOperator(def), arg.name()));
    const ArgSpec* spec = FindArg(arg.name());
    if (!spec) throw InvalidInput(UnknownArgument(def, arg.name()));
    CheckValue(def, *spec, arg);
  }
}

std::string OpSchema::UnknownArgument(const OperatorDef& def, const std::string& name) const {
  std::vector<std::string> declared;
  for (const ArgSpec* arg : args()) declared.push_back(arg->name);
  const std::string start = fmt::format("{}: unknown argument '{}'", DescribeOperator(def), name);
  if (declared.empty()) return fmt::format("{}; {} takes no arguments", start, type_);
  const std::vector<std::string> closest = ClosestNames(name, declared);
  if (closest.empty()) return fmt::format("{}; declared: {}", start, fmt::join(declared, ", "));
  return fmt::format("{}; did you mean '{}'? (declared: {})", start, closest[0], fmt::join(declared, ", "));
}

std::vector<TensorShape> OpSchema::InferShapes(const OperatorDef& def,
                                               const std::vector<TensorShape>& in) const {
  if (!infer_) throw InvalidInput(fmt::format("operator {} has no shape function", type_));
  return infer_(def, in);
}

static std::map<std::string, std::unique_ptr<OpSchema>>& Schemas() {
  static std::map<std::string, std::unique_ptr<OpSchema>> schemas;
  return schemas;
}

OpSchema& SchemaRegistry::Register(const std::string& type) {
  auto& schemas = Schemas();
  LOCKSTEP_ENFORCE(!schemas.count(type), "schema for operator '{}' registered twice", type);
  return *(schemas[type] = std::make_unique<OpSchema>(type));
}

const OpSchema* SchemaRegistry::Find(const std::string& type) {
  auto it = Schemas().find(type);
  return it == Schemas().end() ? nullptr : it->second.get();
}

std::vector<std::string> SchemaRegistry::Types() {
  std::vector<std::string> types;
  for (const auto& entry : Schemas()) types.push_back(entry.first);
  return types;
}

const OpSchema& SchemaRegistry::Of(const OperatorDef& def) {
  const OpSchema* schema = Find(def.type());
  if (schema) return *schema;
  const std::vector<std::string> closest = ClosestNames(def.type(), Types());
  if (closest.empty())
    throw InvalidInput(fmt::format("unknown operator type '{}'; `lockstep ops` lists them", def.type()));
  throw InvalidInput(
      fmt::format("unknown operator type '{}'; did you mean {}?", def.type(), fmt::join(closest, ", ")));
}

namespace {

// The argument as given, else the declared default (see IntArg).
const Argument& DeclaredArgument(const OperatorDef& def, const std::string& name) {
  const ArgSpec* spec = SchemaRegistry::Of(def).FindArg(name);
  LOCKSTEP_ENFORCE(spec != nullptr, "{} reads argument '{}', which its schema does not declare", def.type(),
                   name);
  if (const Argument* given = FindArgument(def, name)) {
    CheckValue(def, *spec, *given);
    return *given;
  }
  LOCKSTEP_ENFORCE(spec->default_value.has_value(),
                   "{} reads argument '{}', which has no default, without checking that it is given",
                   def.type(), name);
  return *spec->default_value;
}

const ArgSpec& DeclaredSpec(const std::string& type, const std::string& name) {
  const OpSchema* schema = SchemaRegistry::Find(type);
  LOCKSTEP_ENFORCE(schema != nullptr, "no schema for operator '{}'", type);
  const ArgSpec* spec = schema->FindArg(name);
  LOCKSTEP_ENFORCE(spec && spec->default_value, "operator '{}' declares no default for argument '{}'", type,
                   name);
  return *spec;
}

float AsFloat(const Argument& arg) { return arg.has_f() ? arg.f() : static_cast<float>(arg.i()); }

}  // namespace

int64_t IntArg(const OperatorDef& def, const std::string& name) { return DeclaredArgument(def, name).i(); }

float FloatArg(const OperatorDef& def, const std::string& name) {
  return AsFloat(DeclaredArgument(def, name));
}

std::string StringArg(const OperatorDef& def, const std::string& name) {
  return DeclaredArgument(def, name).s();
}

std::vector<int64_t> IntsArg(const OperatorDef& def, const std::string& name) {
  const Argument& arg = DeclaredArgument(def, name);
  return {arg.ints().begin(), arg.ints().end()};
}

std::vector<float> FloatsArg(const OperatorDef& def, const std::string& name) {
  const Argument& arg = DeclaredArgument(def, name);
  std::vector<float> values(arg.floats().begin(), arg.floats().end());
  for (int64_t value : arg.ints()) values.push_back(static_cast<float>(value));
  return values;
}

int64_t DefaultIntArg(const std::string& type, const std::string& name) {
  return DeclaredSpec(type, name).default_value->i();
}

float DefaultFloatArg(const std::string& type, const std::string& name) {
  return AsFloat(*DeclaredSpec(type, name).default_value);
}

std::map<std::string, TensorShape> InferNetShapes(const NetDef& net,
                                                  std::map<std::string, TensorShape> shapes) {
  for (const auto& op : net.op()) {
    const OpSchema* schema = &SchemaRegistry::Of(op);
    std::vector<TensorShape> inputs;
    for (int i = 0; i < op.input_size(); ++i) {
      const std::string& name = op.input(i);
      if (schema->IsObjectInput(i)) {
        inputs.push_back({{}, DataType::kUndefined});
        continue;
      }
      auto it = shapes.find(name);
      if (it == shapes.end())
        throw InvalidInput(fmt::format("{}: shape of input '{}' is unknown", DescribeOperator(op), name));
      inputs.push_back(it->second);
    }
    auto outputs = schema->InferShapes(op, inputs);
    LOCKSTEP_ENFORCE_EQ(outputs.size(), static_cast<size_t>(op.output_size()), "shape function of {}",
                        op.type());
    for (int i = 0; i < op.output_size(); ++i) shapes[op.output(i)] = outputs[i];
  }
  return shapes;
}

}  // namespace lockstep
