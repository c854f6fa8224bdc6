// Executors. A Net owns the operators of one NetDef. SequentialNet runs them in order; DagNet runs
// independent operators (for example the replicas of a data-parallel model) concurrently on worker threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/operator.h"

namespace lockstep {

class Net {
 public:
  Net(const NetDef& def, Workspace* ws);
  virtual ~Net();
  virtual void Run() = 0;
  const NetDef& def() const { return def_; }

 protected:
  // Runs operator i; with LOCKSTEP_PROFILE=1 in the environment its time is added to a per-type table that is
  // printed to stderr when the net is destroyed.
  void RunOperatorAt(size_t i);

  NetDef def_;
  std::vector<std::unique_ptr<Operator>> operators_;

 private:
  bool profile_ = false;
  std::vector<double> seconds_;
};

class SequentialNet : public Net {
 public:
  using Net::Net;
  void Run() override;
};

// Runs each operator once all operators it depends on (through a blob it reads, or a blob it overwrites that
// an earlier operator reads or writes) have finished. net.num_workers threads (default 2).
class DagNet : public Net {
 public:
  DagNet(const NetDef& def, Workspace* ws);
  ~DagNet() override;
  void Run() override;
  // parents[i]: the operators that must finish before operator i starts.
  const std::vector<std::vector<int>>& parents() const { return parents_; }

 private:
  struct State;
  std::vector<std::vector<int>> parents_, children_;
  std::unique_ptr<State> state_;
};

// "simple" (or empty) -> SequentialNet, "dag" -> DagNet.
std::unique_ptr<Net> CreateNetExecutor(const NetDef& def, Workspace* ws);

// Runs op with a clear error naming the operator when it fails.
void RunOperator(Operator* op);

}  // namespace lockstep
