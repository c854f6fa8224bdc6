// Gradients as graph: each differentiable operator type registers a maker that emits ordinary gradient
// operators. AddGradientOperators appends the whole backward pass to a net, so it can be inspected,
// serialized and planned (bucketing, memory sharing) like the forward pass.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/net_def.h"

namespace lockstep {

// What a gradient maker sees: the forward op, the gradient blob of each output (GO, "" when that output
// receives no gradient) and the name to write each input's gradient to (GI, "" when it is not needed).
struct GradientContext {
  const OperatorDef& def;
  std::vector<std::string> output_grads;
  std::vector<std::string> input_grads;

  const std::string& I(int i) const { return def.input(i); }
  const std::string& O(int i) const { return def.output(i); }
  const std::string& GO(int i) const { return output_grads.at(i); }
  const std::string& GI(int i) const { return input_grads.at(i); }
  bool NeedsGI(int i) const { return !input_grads.at(i).empty(); }
  // Declares that input i's gradient is the existing blob `gradient` (e.g. Add's dA is dY): no op, no copy.
  void PassThrough(int i, const std::string& gradient) {
    if (NeedsGI(i)) input_grads.at(i) = gradient;
  }
  // Copies every argument of the forward op (gradient ops mostly share them).
  std::vector<Arg> Args() const;
};

using GradientMaker = std::function<std::vector<OperatorDef>(GradientContext&)>;

class GradientRegistry {
 public:
  static void Register(const std::string& type, GradientMaker maker);
  // Marks a type as having no gradient on purpose (Accuracy, Iter, fills): backward passes through it
  // silently.
  static void RegisterNoGradient(const std::string& type);
  static const GradientMaker* Find(const std::string& type);
  static bool IsNonDifferentiable(const std::string& type);
};

// Appends the backward pass of `net` for `losses` (each seeded with a gradient of 1) and returns the
// gradient blob of every blob in `wrt` that the losses depend on. Only blobs in `wrt` and what is computed
// from them get gradients; partial gradients of a blob read by several operators are summed.
std::map<std::string, std::string> AddGradientOperators(NetDef* net, const std::vector<std::string>& losses,
                                                        const std::set<std::string>& wrt);

std::string GradientName(const std::string& blob);  // "x" -> "x_grad"

}  // namespace lockstep

#define LOCKSTEP_REGISTER_GRADIENT(type, maker)                                               \
  static const bool LOCKSTEP_SCHEMA_NAME_(gradient_##type##_, __COUNTER__) [[maybe_unused]] = \
      (::lockstep::GradientRegistry::Register(#type, maker), true)
#define LOCKSTEP_NO_GRADIENT(type)                                                               \
  static const bool LOCKSTEP_SCHEMA_NAME_(no_gradient_##type##_, __COUNTER__) [[maybe_unused]] = \
      (::lockstep::GradientRegistry::RegisterNoGradient(#type), true)
