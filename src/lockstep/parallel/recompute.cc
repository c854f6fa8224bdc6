#include "lockstep/parallel/recompute.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"

namespace lockstep {

int RecomputeNormalizedActivations(NetDef* net) {
  // The forward SpatialBN+ReLU ops worth recomputing, by their output: training, 5 inputs (batch
  // statistics of this replica alone) and an output that does not overwrite its input.
  std::map<std::string, OperatorDef> recompute_of;
  for (const auto& op : net->op()) {
    if (op.is_gradient_op() || op.type() != "SpatialBN" || op.input_size() != 5 || op.output_size() != 6)
      continue;
    if (IntArg(op, "relu") == 0 || IntArg(op, "is_test") != 0 || op.input(0) == op.output(0)) continue;
    OperatorDef again = MakeOperatorDef(
        "SpatialBN", {op.input(0), op.input(1), op.input(2), op.output(3), op.output(4)},
        {op.output(0) + "_recomputed"},
        {Arg("is_test", 1), Arg("relu", 1), Arg("epsilon", FloatArg(op, "epsilon"))});
    if (op.has_device_option()) *again.mutable_device_option() = op.device_option();
    again.set_is_gradient_op(true);
    recompute_of.emplace(op.output(0), std::move(again));
  }
  if (recompute_of.empty()) return 0;

  NetDef rewritten = *net;
  rewritten.clear_op();
  std::set<std::string> inserted;
  for (OperatorDef op : net->op()) {
    if (op.is_gradient_op()) {
      for (auto& input : *op.mutable_input()) {
        auto it = recompute_of.find(input);
        if (it == recompute_of.end()) continue;
        if (inserted.insert(input).second) *rewritten.add_op() = it->second;
        input = it->second.output(0);
      }
    }
    *rewritten.add_op() = std::move(op);
  }
  *net = std::move(rewritten);
  return static_cast<int>(inserted.size());
}

}  // namespace lockstep
