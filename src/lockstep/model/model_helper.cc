// ModelHelper: scopes, parameter registry and backward-pass construction.
#include "lockstep/model/model_helper.h"

#include <algorithm>
#include <set>

#include "lockstep/core/gradient.h"
#include "lockstep/core/schema.h"

namespace lockstep {
namespace {

// FNV-1a of the name, mixed with the model's seed.
uint32_t FillSeed(uint64_t seed, const std::string& name) {
  uint64_t hash = 14695981039346656037ull ^ seed;
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<uint32_t>(hash ^ (hash >> 32));
}

}  // namespace

ModelHelper::ModelHelper(const std::string& name, bool init_params) : init_params_(init_params), name_(name) {
  net_.set_name(name);
  param_init_net_.set_name(name + "_init");
}

ModelHelper::NameScope::NameScope(ModelHelper& model, const std::string& scope)
    : model_(model), saved_(model.name_scope_) {
  model_.name_scope_ += scope.empty() || scope.back() == '/' ? scope : scope + "/";
}
ModelHelper::NameScope::~NameScope() { model_.name_scope_ = saved_; }

ModelHelper::DeviceScope::DeviceScope(ModelHelper& model, const Device& device)
    : model_(model), saved_(model.device_) {
  model_.device_ = device;
}
ModelHelper::DeviceScope::~DeviceScope() { model_.device_ = saved_; }

OperatorDef* ModelHelper::AddOp(const std::string& type, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs, const std::vector<Arg>& args) {
  return AddOp(MakeOperatorDef(type, inputs, outputs, args));
}

OperatorDef* ModelHelper::AddOp(OperatorDef op) {
  SetDevice(&op, device_);
  OperatorDef* added = net_.add_op();
  *added = std::move(op);
  return added;
}

std::string ModelHelper::CreateParam(const std::string& name, const Shape& shape, const FillSpec& fill,
                                     ParamTag tag) {
  std::string scoped = Scoped(name);
  if (param_index_.count(scoped))
    throw InvalidInput(fmt::format(
        "parameter '{}' is created twice in model '{}'; give each layer its own name", scoped, name_));
  std::vector<Arg> args = fill.args;
  args.emplace_back("shape", std::vector<int64_t>(shape.begin(), shape.end()));
  OperatorDef op = MakeOperatorDef(fill.type, {}, {scoped}, args);
  // A misspelled fill or fill argument fails here, where the layer is built, not at the first run.
  SchemaRegistry::Of(op).Verify(op);
  param_index_[scoped] = params_.size();
  params_.push_back({scoped, shape, tag, device_});
  if (init_params_) {
    SetDevice(&op, device_);
    op.mutable_device_option()->set_random_seed(FillSeed(seed_, name));
    *param_init_net_.add_op() = std::move(op);
  }
  return scoped;
}

std::vector<std::string> ModelHelper::GetParams(const std::string& scope, std::vector<ParamTag> tags) const {
  std::vector<std::string> names;
  for (const auto& param : params_) {
    if (param.name.compare(0, scope.size(), scope) != 0) continue;
    if (!tags.empty() && std::find(tags.begin(), tags.end(), param.tag) == tags.end()) continue;
    names.push_back(param.name);
  }
  return names;
}

const ParamInfo& ModelHelper::Param(const std::string& name) const {
  auto it = param_index_.find(name);
  if (it != param_index_.end()) return params_[it->second];
  throw InvalidInput(fmt::format("model '{}' has no parameter '{}'", name_, name));
}

void ModelHelper::SetParamDevice(const std::string& name, const Device& device) {
  const_cast<ParamInfo&>(Param(name)).device = device;
  for (auto& op : *param_init_net_.mutable_op())
    for (const auto& output : op.output())
      if (output == name) SetDevice(&op, device);
}

std::map<std::string, std::string> ModelHelper::AddGradientOperators(const std::vector<std::string>& losses,
                                                                     const std::set<std::string>& also) {
  if (has_backward_pass_)
    throw InvalidInput(fmt::format(
        "model '{}' has its backward pass already: call AddGradientOperators once, with every loss", name_));
  const std::vector<std::string> trainable = GetTrainableParams();
  std::set<std::string> wrt(trainable.begin(), trainable.end());
  wrt.insert(also.begin(), also.end());
  std::map<std::string, std::string> gradients = lockstep::AddGradientOperators(&net_, losses, wrt);
  param_to_grad_.clear();
  for (const auto& param : trainable)
    if (gradients.count(param)) param_to_grad_[param] = gradients.at(param);
  for (const auto& loss : losses) gradients[loss] = GradientName(loss);
  has_backward_pass_ = true;
  return gradients;
}

}  // namespace lockstep
