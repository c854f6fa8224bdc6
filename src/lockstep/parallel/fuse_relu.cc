#include "lockstep/parallel/fuse_relu.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"
#include "lockstep/ops/conv_pool_args.h"

namespace lockstep {
namespace {

bool Reads(const OperatorDef& op, const std::string& blob) {
  return std::find(op.input().begin(), op.input().end(), blob) != op.input().end();
}

bool Writes(const OperatorDef& op, const std::string& blob) {
  return std::find(op.output().begin(), op.output().end(), blob) != op.output().end();
}

bool OnCpu(const OperatorDef& op) { return DeviceOf(op).type == DeviceType::kCpu; }

// The net's ops with those already fused away skipped, and for each blob the ops that use it: the nets of
// many devices have tens of thousands of ops, too many to scan for every pair.
class Ops {
 public:
  explicit Ops(NetDef* net) : net_(net), removed_(net->op_size(), false) {
    for (int i = 0; i < size(); ++i) Index(i);
  }

  int size() const { return net_->op_size(); }
  OperatorDef& operator[](int i) { return *net_->mutable_op(i); }
  bool removed(int i) const { return removed_[i]; }
  void Remove(int i) { removed_[i] = true; }
  // Records the blobs op i reads and writes, after it was rewritten.
  void Index(int i) {
    for (const auto* names : {&net_->op(i).input(), &net_->op(i).output()})
      for (const auto& name : *names) {
        std::vector<int>& ops = uses_[name];
        auto at = std::lower_bound(ops.begin(), ops.end(), i);
        if (at == ops.end() || *at != i) ops.insert(at, i);
      }
  }

  // The first op after `from` that reads or writes `blob`, or -1.
  int NextUse(int from, const std::string& blob) const {
    for (int i : UsesAfter(from, blob))
      if (!removed_[i] && (Reads(net_->op(i), blob) || Writes(net_->op(i), blob))) return i;
    return -1;
  }

  // Whether an op after `from` reads the value `blob` holds there (before an op writes it again).
  bool ReadAfter(int from, const std::string& blob) const {
    for (int i : UsesAfter(from, blob)) {
      if (removed_[i]) continue;
      if (Reads(net_->op(i), blob)) return true;
      if (Writes(net_->op(i), blob)) return false;
    }
    return false;
  }

  // Whether an op strictly between `from` and `to` writes `blob` (or, with `or_reads`, reads it).
  bool TouchedBetween(int from, int to, const std::string& blob, bool or_reads) const {
    for (int i : UsesAfter(from, blob)) {
      if (i >= to) break;
      if (!removed_[i] && (Writes(net_->op(i), blob) || (or_reads && Reads(net_->op(i), blob)))) return true;
    }
    return false;
  }

  // The op after `from` that consumes blob `value` as `type`'s input `input`, with nothing else reading that
  // value: its index, or -1. The pair must share a device.
  int SoleConsumer(int from, const std::string& value, const std::string& type, int input,
                   const std::set<std::string>& keep) const {
    const int j = NextUse(from, value);
    if (j < 0) return -1;
    const OperatorDef& op = net_->op(j);
    if (op.type() != type || op.input_size() <= input || op.input(input) != value ||
        !(DeviceOf(op) == DeviceOf(net_->op(from))))
      return -1;
    // Read again later only as the consumer's own output (in place), which is what the reader wants.
    if (op.output(0) != value && (keep.count(value) || ReadAfter(j, value))) return -1;
    return j;
  }

  void Compact() {
    NetDef kept = *net_;
    kept.clear_op();
    for (int i = 0; i < size(); ++i)
      if (!removed_[i]) *kept.add_op() = net_->op(i);
    *net_ = std::move(kept);
  }

 private:
  // The ops after `from` that use or used `blob` (a rewritten op may no longer: callers check), in order.
  std::vector<int> UsesAfter(int from, const std::string& blob) const {
    auto it = uses_.find(blob);
    if (it == uses_.end()) return {};
    return {std::upper_bound(it->second.begin(), it->second.end(), from), it->second.end()};
  }

  NetDef* net_;
  std::vector<bool> removed_;
  std::unordered_map<std::string, std::vector<int>> uses_;
};

// Add(A, B) -> S, Relu(S) -> Y  =>  Add(A, B, relu=1) -> Y, where the Add stood; Conv likewise.
bool FuseReluIntoProducer(Ops& ops, int i, const std::set<std::string>& keep) {
  OperatorDef& producer = ops[i];
  if ((producer.type() != "Add" && producer.type() != "Conv") || IntArg(producer, "relu") != 0) return false;
  const std::string& before_relu = producer.output(0);
  const int j = ops.SoleConsumer(i, before_relu, "Relu", 0, keep);
  if (j < 0) return false;
  const std::string y = ops[j].output(0);
  // Y is written earlier now: nothing in between may see it, and the producer must not overwrite its input.
  if (Reads(producer, y) || ops.TouchedBetween(i, j, y, /*or_reads=*/true)) return false;
  producer.set_output(0, y);
  SetArgument(&producer, Arg("relu", 1));
  ops.Index(i);
  ops.Remove(j);
  return true;
}

// Sum(dY0, dY1, ...) -> G, ReluGradient(Y, G) -> dX  =>  SumReluGradient(Y, dY0, dY1, ...) -> dX, where the
// ReluGradient stood.
bool FuseSumReluGradient(Ops& ops, int i, const std::set<std::string>& keep) {
  const OperatorDef& sum = ops[i];
  if (sum.type() != "Sum") return false;
  const std::string& total = sum.output(0);
  const int j = ops.SoleConsumer(i, total, "ReluGradient", 1, keep);
  if (j < 0 || ops[j].input(0) == total) return false;
  const std::string dx = ops[j].output(0);
  // The dYs are read later now: nothing in between may change them; dX may overwrite only the first.
  for (int k = 0; k < sum.input_size(); ++k)
    if (ops.TouchedBetween(i, j, sum.input(k), /*or_reads=*/false) || (k > 0 && sum.input(k) == dx))
      return false;
  OperatorDef& gradient = ops[j];
  const std::string y = gradient.input(0);
  gradient.set_type("SumReluGradient");
  gradient.clear_input();
  gradient.add_input(y);
  for (const auto& part : sum.input()) gradient.add_input(part);
  ops.Index(j);
  ops.Remove(i);
  return true;
}

// AveragePoolGradient(X, Y, dY) -> G, ReluGradient(X, G) -> dX  =>  AveragePoolReluGradient(X, dY) -> dX,
// where the ReluGradient stood, for windows that tile the plane (X is the Relu's output the pool read).
bool FuseAveragePoolReluGradient(Ops& ops, int i, const std::set<std::string>& keep) {
  const OperatorDef& pool = ops[i];
  if (pool.type() != "AveragePoolGradient" || !PoolWindowsTile(ParsePoolArgs(pool))) return false;
  const std::string& x = pool.input(0);
  const std::string& dy = pool.input(2);
  const int j = ops.SoleConsumer(i, pool.output(0), "ReluGradient", 1, keep);
  if (j < 0 || ops[j].input(0) != x) return false;
  const std::string dx = ops[j].output(0);
  // X and dY are read later now: nothing in between may change them, nor may dX be one of them.
  if (ops.TouchedBetween(i, j, x, /*or_reads=*/false) || ops.TouchedBetween(i, j, dy, /*or_reads=*/false) ||
      dx == x || dx == dy)
    return false;
  OperatorDef& gradient = ops[j];
  gradient.set_type("AveragePoolReluGradient");
  gradient.clear_input();
  gradient.add_input(x);
  gradient.add_input(dy);
  *gradient.mutable_arg() = pool.arg();
  ops.Index(j);
  ops.Remove(i);
  return true;
}

}  // namespace

int FuseRelus(NetDef* net, const std::set<std::string>& keep) {
  Ops ops(net);
  int fused = 0;
  for (int i = 0; i < ops.size(); ++i) {
    if (ops.removed(i) || !OnCpu(ops[i])) continue;
    if (FuseReluIntoProducer(ops, i, keep) || FuseSumReluGradient(ops, i, keep) ||
        FuseAveragePoolReluGradient(ops, i, keep))
      ++fused;
  }
  ops.Compact();
  return fused;
}

}  // namespace lockstep
