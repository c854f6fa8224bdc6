// Micro-batch cloning of a forward pass.
#include "lockstep/parallel/micro_batches.h"

#include <algorithm>
#include <set>

#include "lockstep/core/net_def.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

std::string MicroBatchName(const std::string& blob, int micro_batch) {
  return fmt::format("{}_mb{}", blob, micro_batch);
}

std::vector<std::string> SplitIntoMicroBatches(NetDef* net, int first_op,
                                               const std::vector<std::string>& batch_inputs,
                                               const std::vector<std::string>& losses, int micro_batches,
                                               const NetDef& init_net) {
  if (micro_batches < 1)
    throw InvalidInput(fmt::format("micro_batches must be at least 1, got {}", micro_batches));
  if (micro_batches == 1) return losses;
  LOCKSTEP_ENFORCE(first_op >= 0 && first_op <= net->op_size(), "first op {} of a net of {} ops", first_op,
                   net->op_size());
  std::set<std::string> state;
  for (const auto& op : init_net.op()) state.insert(op.output().begin(), op.output().end());
  std::set<std::string> renamed(batch_inputs.begin(), batch_inputs.end());
  for (int i = first_op; i < net->op_size(); ++i)
    for (const auto& blob : net->op(i).output())
      if (!state.count(blob)) renamed.insert(blob);
  for (const auto& loss : losses)
    if (!renamed.count(loss))
      throw InvalidInput(fmt::format("loss '{}' is not computed by the forward pass being split", loss));

  NetDef split = *net;
  split.clear_op();
  for (int i = 0; i < first_op; ++i) *split.add_op() = net->op(i);
  // Each batch input is cut where it is made (where it is first read, when the net does not make it).
  for (const auto& input : batch_inputs) {
    const OperatorDef* maker = nullptr;
    for (int i = 0; i < net->op_size(); ++i) {
      const auto& op = net->op(i);
      bool writes = std::find(op.output().begin(), op.output().end(), input) != op.output().end();
      bool reads = std::find(op.input().begin(), op.input().end(), input) != op.input().end();
      if ((i < first_op && writes) || (!maker && i >= first_op && reads)) maker = &op;
    }
    if (!maker) throw InvalidInput(fmt::format("batch input '{}' is not read by the forward pass", input));
    std::vector<std::string> pieces;
    for (int j = 0; j < micro_batches; ++j) pieces.push_back(MicroBatchName(input, j));
    OperatorDef* cut = split.add_op();
    *cut = SplitDef(input, pieces);
    *cut->mutable_device_option() = maker->device_option();
  }
  auto rename = [&](const std::string& blob, int j) {
    return renamed.count(blob) ? MicroBatchName(blob, j) : blob;
  };
  for (int j = 0; j < micro_batches; ++j)
    for (int i = first_op; i < net->op_size(); ++i) {
      OperatorDef* op = split.add_op();
      *op = net->op(i);
      for (auto& blob : *op->mutable_input()) blob = rename(blob, j);
      for (auto& blob : *op->mutable_output()) blob = rename(blob, j);
    }
  *net = split;

  std::vector<std::string> split_losses;
  for (int j = 0; j < micro_batches; ++j)
    for (const auto& loss : losses) split_losses.push_back(MicroBatchName(loss, j));
  return split_losses;
}

}  // namespace lockstep
