#include "lockstep/parallel/recompute.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"

namespace lockstep {

std::set<std::string> RecomputeNormalizedActivations(NetDef* net) {
  // The recomputations, and for each of their outputs the one that writes it. Only training SpatialBN+ReLU
  // ops on the CPU with 5 inputs (batch statistics of this replica alone) whose output does not overwrite
  // their input.
  std::vector<OperatorDef> recomputations;
  std::vector<std::string> forward_masks;  // per recomputation
  std::map<std::string, int> recomputation_of;
  for (const auto& op : net->op()) {
    if (op.is_gradient_op() || op.type() != "SpatialBN" || op.input_size() != 5 || op.output_size() != 6)
      continue;
    if (IntArg(op, "relu") == 0 || IntArg(op, "is_test") != 0 || op.input(0) == op.output(0) ||
        DeviceOf(op).type != DeviceType::kCpu)
      continue;
    const std::string& y = op.output(0);
    const std::string& mask = op.output(5);
    OperatorDef again = MakeOperatorDef(
        "SpatialBNReluAgain", {op.input(0), op.input(1), op.input(2), op.output(3), op.output(4)},
        {y + "_recomputed", mask + "_recomputed"}, {Arg("epsilon", FloatArg(op, "epsilon"))});
    if (op.has_device_option()) *again.mutable_device_option() = op.device_option();
    again.set_is_gradient_op(true);
    recomputation_of[y] = recomputation_of[mask] = static_cast<int>(recomputations.size());
    recomputations.push_back(std::move(again));
    forward_masks.push_back(mask);
  }
  if (recomputations.empty()) return {};

  NetDef rewritten = *net;
  rewritten.clear_op();
  std::set<int> inserted;
  for (OperatorDef op : net->op()) {
    if (op.is_gradient_op()) {
      for (auto& input : *op.mutable_input()) {
        auto it = recomputation_of.find(input);
        if (it == recomputation_of.end()) continue;
        if (inserted.insert(it->second).second) *rewritten.add_op() = recomputations[it->second];
        input += "_recomputed";
      }
    }
    *rewritten.add_op() = std::move(op);
  }
  *net = std::move(rewritten);
  std::set<std::string> read;
  for (const auto& op : net->op()) read.insert(op.input().begin(), op.input().end());
  std::set<std::string> unread_masks;
  for (int k : inserted)
    if (!read.count(forward_masks[k])) unread_masks.insert(forward_masks[k]);
  return unread_masks;
}

}  // namespace lockstep
