// Sequential and DAG executors.
#include "lockstep/core/net.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <thread>

#include "lockstep/core/atomic_file.h"
#include "lockstep/core/device_backend.h"

namespace lockstep {

Net::Net(const NetDef& def, Workspace* ws) : def_(def) {
  for (const auto& op : def.op()) {
    operators_.push_back(CreateOperator(op, ws));
    Device device = DeviceOf(op);
    if (device.type == DeviceType::kCuda &&
        std::find(cuda_devices_.begin(), cuda_devices_.end(), device.id) == cuda_devices_.end())
      cuda_devices_.push_back(device.id);
  }
  const char* profile = std::getenv("LOCKSTEP_PROFILE");
  profile_ = profile && std::string(profile) == "1";
  seconds_.assign(operators_.size(), 0.0);
  if (const char* trace = std::getenv("LOCKSTEP_TRACE")) {
    trace_path_ = trace;
    tracing_ = !trace_path_.empty();
  }
}

std::vector<Net::OpEvent> Net::TakeEvents() {
  std::lock_guard<std::mutex> lock(events_mutex_);
  return std::move(events_);
}

void Net::WriteTrace(const std::string& path) const {
  // Chrome's trace event format: complete events ("ph": "X") with microsecond times; one row per thread.
  nlohmann::json events = nlohmann::json::array();
  for (const auto& event : events_)
    events.push_back({{"name", def_.op(event.op).type()},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", event.thread},
                      {"ts", event.start * 1e6},
                      {"dur", (event.end - event.start) * 1e6},
                      {"args", {{"op", DescribeOperator(def_.op(event.op))}}}});
  try {  // from the destructor: a trace that cannot be written is reported, not thrown
    WriteFileAtomically(path, nlohmann::json{{"traceEvents", events}}.dump() + "\n", "trace");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: %s\n", e.what());
  }
}

Net::~Net() {
  if (!trace_path_.empty()) WriteTrace(fmt::format("{}.{}.json", trace_path_, def_.name()));
  if (!profile_) return;
  std::map<std::string, double> by_type;
  double total = 0;
  for (size_t i = 0; i < operators_.size(); ++i) {
    by_type[def_.op(i).type()] += seconds_[i];
    total += seconds_[i];
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [type, seconds] : by_type) rows.push_back({seconds, type});
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "profile of net '%s' (%.3f s in operators):\n", def_.name().c_str(), total);
  for (const auto& [seconds, type] : rows)
    std::fprintf(stderr, "  %-28s %10.3f s %6.1f%%\n", type.c_str(), seconds,
                 total > 0 ? 100 * seconds / total : 0);
}

namespace {
int ThreadNumber() {
  static std::atomic<int> next{0};
  thread_local int number = next++;
  return number;
}
}  // namespace

void Net::RunOperatorAt(size_t i) {
  if (!profile_ && !tracing_) return RunOperator(operators_[i].get());
  auto start = std::chrono::steady_clock::now();
  RunOperator(operators_[i].get());
  auto end = std::chrono::steady_clock::now();
  seconds_[i] += std::chrono::duration<double>(end - start).count();
  if (!tracing_) return;
  std::lock_guard<std::mutex> lock(events_mutex_);
  events_.push_back({static_cast<int>(i), ThreadNumber(),
                     std::chrono::duration<double>(start - created_).count(),
                     std::chrono::duration<double>(end - created_).count()});
}

void RunOperator(Operator* op) {
  try {
    op->Run();
  } catch (const InvalidInput& e) {
    ThrowNamingOperator(op->def(), e);
  } catch (const IoError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{} failed: {}", DescribeOperator(op->def()), e.what()));
  }
}

void Net::SynchronizeDevices() {
  for (int device : cuda_devices_) GetDeviceBackend(DeviceType::kCuda).Synchronize(device);
}

void SequentialNet::Run() {
  for (size_t i = 0; i < operators_.size(); ++i) RunOperatorAt(i);
  SynchronizeDevices();
}

// A fixed pool of workers per lane that live as long as the net; Run() hands them the ready operators and
// waits. One mutex guards everything: operators are coarse (milliseconds), the bookkeeping is not.
struct DagNet::State {
  struct Lane {
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;  // earliest operator first
    std::condition_variable work_ready;
  };
  std::mutex mutex;
  std::condition_variable run_done;
  std::vector<Lane> lanes;
  std::vector<int> pending_parents;
  int remaining = 0;
  bool running = false, stopping = false;
  std::exception_ptr error;
  std::vector<std::thread> workers;

  void MakeReady(int op, int lane) {
    lanes[lane].ready.push(op);
    lanes[lane].work_ready.notify_one();
  }
};

DagNet::DagNet(const NetDef& def, Workspace* ws) : Net(def, ws), state_(std::make_unique<State>()) {
  int n = static_cast<int>(operators_.size());
  parents_.resize(n);
  children_.resize(n);
  // By name, whether a name is a tensor or a workspace object (a communicator that CreateCommonWorld writes).
  std::map<std::string, int> last_writer;
  std::map<std::string, std::vector<int>> readers_since_write;
  for (int i = 0; i < n; ++i) {
    std::set<int> parents;
    const auto& op = def.op(i);
    for (const auto& name : op.input()) {
      auto it = last_writer.find(name);
      if (it != last_writer.end()) parents.insert(it->second);
    }
    // An output, and a control input (a blob whose memory the op's outputs reuse, see memonger.h), waits for
    // the earlier ops that write or read that name.
    auto overwrites = [&](const std::string& name) {
      auto it = last_writer.find(name);
      if (it != last_writer.end()) parents.insert(it->second);
      for (int reader : readers_since_write[name]) parents.insert(reader);
    };
    for (const auto& name : op.output()) overwrites(name);
    for (const auto& name : op.control_input()) overwrites(name);
    parents.erase(i);
    for (const auto& name : op.input()) readers_since_write[name].push_back(i);
    for (const auto& name : op.output()) {
      last_writer[name] = i;
      readers_since_write[name].clear();
    }
    parents_[i].assign(parents.begin(), parents.end());
    for (int parent : parents) children_[parent].push_back(i);
  }

  int device_lanes = static_cast<int>(GetIntArgument(def, "device_lanes", 1));
  int intra_op_threads = static_cast<int>(GetIntArgument(def, "intra_op_threads", 0));
  int workers = def.has_num_workers() && def.num_workers() > 0 ? def.num_workers() : 2;
  if (device_lanes < 1 || intra_op_threads < 0)
    throw InvalidInput(
        fmt::format("net '{}': device_lanes must be >= 1 and intra_op_threads >= 0, got {} and {}",
                    def.name(), device_lanes, intra_op_threads));
  std::map<std::pair<int, int>, int> device_order;  // devices in order of first appearance
  // A communicator runs one collective at a time, and every process of a job must issue them in the same
  // order: the collectives on one communicator are chained in list order on a lane of their own. Those whose
  // communicator is not in the workspace yet share one lane.
  std::map<const void*, int> comm_lane_of;  // by the communicator's address
  std::vector<int> last_collective;         // per communicator lane
  lane_of_.resize(n);
  for (int i = 0; i < n; ++i) {
    if (IsCollective(def.op(i))) {
      const void* communicator = ws->ObjectAddress(def.op(i).input(0));
      auto lane = comm_lane_of.emplace(communicator, device_lanes + static_cast<int>(comm_lane_of.size()));
      if (lane.second) last_collective.push_back(-1);
      lane_of_[i] = lane.first->second;
      int& last = last_collective[lane_of_[i] - device_lanes];
      if (last >= 0 && std::find(parents_[i].begin(), parents_[i].end(), last) == parents_[i].end()) {
        parents_[i].push_back(last);
        children_[last].push_back(i);
      }
      last = i;
      continue;
    }
    Device device = DeviceOf(def.op(i));
    auto key = std::make_pair(static_cast<int>(device.type), device.id);
    auto found = device_order.emplace(key, static_cast<int>(device_order.size())).first;
    lane_of_[i] = found->second % device_lanes;
  }
  const int comm_lanes = static_cast<int>(comm_lane_of.size());
  state_->lanes = std::vector<State::Lane>(device_lanes + comm_lanes);
  for (int lane = 0; lane < device_lanes; ++lane)
    for (int w = 0; w < workers; ++w) state_->workers.emplace_back([=] { Work(lane, intra_op_threads); });
  for (int lane = device_lanes; lane < device_lanes + comm_lanes; ++lane)
    state_->workers.emplace_back([=] { Work(lane, 1); });
}

void DagNet::Work(int lane, int intra_op_threads) {
  // OpenMP's thread count is per calling thread: this worker's oneDNN calls use its own budget.
  if (intra_op_threads > 0) omp_set_num_threads(intra_op_threads);
  State& s = *state_;
  State::Lane& queue = s.lanes[lane];
  std::unique_lock<std::mutex> lock(s.mutex);
  while (true) {
    queue.work_ready.wait(lock, [&] { return s.stopping || (s.running && !queue.ready.empty()); });
    if (s.stopping) return;
    int index = queue.ready.top();
    queue.ready.pop();
    lock.unlock();
    std::exception_ptr error;
    try {
      if (!s.error) RunOperatorAt(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !s.error) s.error = error;
    for (int child : children_[index])
      if (--s.pending_parents[child] == 0) s.MakeReady(child, lane_of_[child]);
    if (--s.remaining == 0) {
      s.running = false;
      s.run_done.notify_all();
    }
  }
}

DagNet::~DagNet() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  for (auto& lane : state_->lanes) lane.work_ready.notify_all();
  for (auto& worker : state_->workers) worker.join();
}

void DagNet::Run() {
  State& s = *state_;
  if (operators_.empty()) return;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.pending_parents.resize(operators_.size());
  s.remaining = static_cast<int>(operators_.size());
  s.error = nullptr;
  s.running = true;
  for (size_t i = 0; i < operators_.size(); ++i) {
    s.pending_parents[i] = static_cast<int>(parents_[i].size());
    if (parents_[i].empty()) s.MakeReady(static_cast<int>(i), lane_of_[i]);
  }
  s.run_done.wait(lock, [&] { return !s.running; });
  if (s.error) std::rethrow_exception(s.error);
  lock.unlock();
  SynchronizeDevices();
}

std::unique_ptr<Net> CreateNetExecutor(const NetDef& def, Workspace* ws) {
  if (def.type().empty() || def.type() == "simple") return std::make_unique<SequentialNet>(def, ws);
  if (def.type() == "dag") return std::make_unique<DagNet>(def, ws);
  throw InvalidInput(
      fmt::format("net '{}' has unknown executor type '{}'; use 'simple' or 'dag'", def.name(), def.type()));
}

}  // namespace lockstep
