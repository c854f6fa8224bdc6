// Backward-pass construction.
//
// The forward ops are visited in reverse. Each blob keeps the list of partial gradients produced so far for
// its current value. When the op that wrote the blob is reached, that list is final: one partial is used as
// is, several are summed into "<blob>_grad". The op's gradient maker then writes the gradients of its inputs;
// an input that already has a partial gradient (it is read by a later op too) gets a fresh
// "<blob>_grad_autosplit_<k>" name so that no partial is overwritten before the sum.
#include "lockstep/core/gradient.h"

#include "lockstep/core/schema.h"

namespace lockstep {

namespace {
std::map<std::string, GradientMaker>& Makers() {
  static std::map<std::string, GradientMaker> makers;
  return makers;
}
std::set<std::string>& NonDifferentiable() {
  static std::set<std::string> types;
  return types;
}
}  // namespace

std::vector<Arg> GradientContext::Args() const {
  std::vector<Arg> args;
  for (const auto& arg : def.arg()) {
    Arg copy("", 0);
    copy.proto = arg;
    args.push_back(copy);
  }
  return args;
}

void GradientRegistry::Register(const std::string& type, GradientMaker maker) {
  LOCKSTEP_ENFORCE(!Makers().count(type) && !NonDifferentiable().count(type),
                   "gradient of '{}' registered twice", type);
  Makers()[type] = std::move(maker);
}

void GradientRegistry::RegisterNoGradient(const std::string& type) {
  LOCKSTEP_ENFORCE(!Makers().count(type), "gradient of '{}' registered twice", type);
  NonDifferentiable().insert(type);
}

const GradientMaker* GradientRegistry::Find(const std::string& type) {
  auto it = Makers().find(type);
  return it == Makers().end() ? nullptr : &it->second;
}

bool GradientRegistry::IsNonDifferentiable(const std::string& type) {
  return NonDifferentiable().count(type) > 0;
}

std::string GradientName(const std::string& blob) { return blob + "_grad"; }

std::map<std::string, std::string> AddGradientOperators(NetDef* net, const std::vector<std::string>& losses,
                                                        const std::set<std::string>& wrt) {
  LOCKSTEP_ENFORCE(!losses.empty(), "AddGradientOperators needs at least one loss blob");
  const int forward_size = net->op_size();

  // Which blobs depend on a blob in `wrt` (only those need gradients).
  std::set<std::string> requires_grad(wrt.begin(), wrt.end());
  std::set<std::string> written;
  for (int i = 0; i < forward_size; ++i) {
    const auto& op = net->op(i);
    bool depends = false;
    for (const auto& in : op.input()) depends |= requires_grad.count(in) > 0;
    // A non-differentiable op's outputs need no gradient even where they overwrite a blob that did
    // (StopGradient in place).
    const bool differentiable = !GradientRegistry::IsNonDifferentiable(op.type());
    for (const auto& out : op.output()) {
      if (depends && differentiable)
        requires_grad.insert(out);
      else if (!differentiable)
        requires_grad.erase(out);
    }
    for (const auto& out : op.output()) written.insert(out);
  }

  std::map<std::string, std::vector<std::string>> partials;
  std::map<std::string, DeviceOption> partial_device;  // where each partial gradient was computed
  std::map<std::string, int> autosplit_count;
  std::vector<OperatorDef> backward;
  for (const auto& loss : losses) {
    if (!written.count(loss))
      throw InvalidInput(
          fmt::format("loss '{}' is not computed by net '{}': name a blob one of its operators "
                      "writes (the forward pass's loss)",
                      loss, net->name()));
    auto seed = MakeOperatorDef(SchemaRegistry::TypeFor(OpRole::kGradientSeed), {loss}, {GradientName(loss)},
                                {Arg("value", 1.0f)});
    for (int i = 0; i < forward_size; ++i)
      for (const auto& out : net->op(i).output())
        if (out == loss) *seed.mutable_device_option() = net->op(i).device_option();
    seed.set_is_gradient_op(true);
    partial_device[GradientName(loss)] = seed.device_option();
    backward.push_back(seed);
    partials[loss].push_back(GradientName(loss));
  }

  // Turns the partial gradients of a blob's current value into one blob name ("" when there are none). The
  // sum runs where the first partial was computed: it accumulates into that blob when it is "<blob>_grad".
  auto finalize = [&](const std::string& blob) -> std::string {
    auto it = partials.find(blob);
    if (it == partials.end() || it->second.empty()) return "";
    std::vector<std::string> parts = std::move(it->second);
    partials.erase(it);
    if (parts.size() == 1) return parts[0];
    std::string total = GradientName(blob);
    auto sum = MakeOperatorDef(SchemaRegistry::TypeFor(OpRole::kGradientSum), parts, {total});
    *sum.mutable_device_option() = partial_device.at(parts[0]);
    sum.set_is_gradient_op(true);
    backward.push_back(sum);
    return total;
  };

  for (int i = forward_size - 1; i >= 0; --i) {
    const OperatorDef op = net->op(i);
    GradientContext context{op, {}, {}};
    bool any_output_grad = false;
    for (const auto& out : op.output()) {
      context.output_grads.push_back(finalize(out));
      any_output_grad |= !context.output_grads.back().empty();
    }
    bool any_input_grad = false;
    std::set<std::string> named_here;  // an op reading a blob twice writes two partials
    for (const auto& in : op.input()) {
      std::string name;
      if (requires_grad.count(in)) {
        bool taken = !partials[in].empty() || named_here.count(in);
        name = taken ? fmt::format("{}_autosplit_{}", GradientName(in), autosplit_count[in]++)
                     : GradientName(in);
        named_here.insert(in);
        any_input_grad = true;
      }
      context.input_grads.push_back(name);
    }
    if (!any_output_grad || !any_input_grad || GradientRegistry::IsNonDifferentiable(op.type())) continue;
    const GradientMaker* maker = GradientRegistry::Find(op.type());
    if (!maker)
      throw InvalidInput(
          fmt::format("operator {} has no gradient; mark it non-differentiable or keep it off the "
                      "path from the parameters to the loss",
                      DescribeOperator(op)));
    for (auto grad_op : (*maker)(context)) {
      *grad_op.mutable_device_option() = op.device_option();
      if (op.has_engine() && !grad_op.has_engine()) grad_op.set_engine(op.engine());
      grad_op.set_is_gradient_op(true);
      backward.push_back(std::move(grad_op));
    }
    for (int k = 0; k < op.input_size(); ++k) {
      if (!context.NeedsGI(k)) continue;
      partials[op.input(k)].push_back(context.GI(k));
      partial_device[context.GI(k)] = op.device_option();
    }
  }

  std::map<std::string, std::string> gradient_of;
  for (const auto& blob : wrt) {
    std::string grad = finalize(blob);
    if (!grad.empty()) gradient_of[blob] = grad;
  }
  for (auto& op : backward) *net->add_op() = std::move(op);
  return gradient_of;
}

}  // namespace lockstep
