// Executors. A Net owns the operators of one NetDef. SequentialNet runs them in order; DagNet runs
// independent operators (for example the replicas of a data-parallel model) concurrently on worker threads.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
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

  // One operator run: the operator's index, the thread it ran on (numbered from 0 in order of first use)
  // and its start and end in seconds since the net was created.
  struct OpEvent {
    int op;
    int thread;
    double start, end;
  };
  // While tracing, every operator run is recorded. LOCKSTEP_TRACE=<file> in the environment turns it on and
  // writes the events as a Chrome trace (chrome://tracing, Perfetto) when the net is destroyed.
  void set_tracing(bool on) { tracing_ = on; }
  std::vector<OpEvent> TakeEvents();

 protected:
  // Waits for the work the operators queued on devices with streams of their own (CUDA), so that a run has
  // finished when Run() returns.
  void SynchronizeDevices();
  // Runs operator i; with LOCKSTEP_PROFILE=1 in the environment its time is added to a per-type table that is
  // printed to stderr when the net is destroyed.
  void RunOperatorAt(size_t i);

  NetDef def_;
  std::vector<std::unique_ptr<Operator>> operators_;

 private:
  void WriteTrace(const std::string& path) const;

  std::vector<int> cuda_devices_;
  bool profile_ = false;
  std::vector<double> seconds_;
  bool tracing_ = false;
  std::string trace_path_;
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  std::mutex events_mutex_;
  std::vector<OpEvent> events_;
};

class SequentialNet : public Net {
 public:
  using Net::Net;
  void Run() override;
};

// Runs each operator once all operators it depends on (through a blob it reads, or a blob it overwrites that
// an earlier operator reads or writes) have finished. Operators run on lanes, each with its own workers:
//   - the operators of the i-th device (in order of first appearance) run on lane i % `device_lanes` (net
//     arg, default 1), so each replica of a data-parallel model keeps to its own threads;
//   - collective operators (OpSchema::Collective) run on lanes of their own with one worker each, one lane
//     per communicator (input 0, as found in the workspace when the net is created), in list order: a
//     gradient allreduce overlaps with the rest of the backward pass, and the collectives of different
//     communicators (channels) with each other.
// A device lane has net.num_workers workers (default 2), each using `intra_op_threads` OpenMP threads for
// oneDNN (net arg; 0 keeps the process default). Among its ready operators a lane runs the earliest in list
// order first, so a replica follows the order the net was written in.
class DagNet : public Net {
 public:
  DagNet(const NetDef& def, Workspace* ws);
  ~DagNet() override;
  void Run() override;
  // parents[i]: the operators that must finish before operator i starts.
  const std::vector<std::vector<int>>& parents() const { return parents_; }

 private:
  struct State;
  void Work(int lane, int intra_op_threads);
  std::vector<std::vector<int>> parents_, children_;
  std::vector<int> lane_of_;
  std::unique_ptr<State> state_;
};

// "simple" (or empty) -> SequentialNet, "dag" -> DagNet.
std::unique_ptr<Net> CreateNetExecutor(const NetDef& def, Workspace* ws);

// Runs op with a clear error naming the operator when it fails.
void RunOperator(Operator* op);

}  // namespace lockstep
