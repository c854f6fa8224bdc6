// Sequential and DAG executors.
#include "lockstep/core/net.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace lockstep {

Net::Net(const NetDef& def, Workspace* ws) : def_(def) {
  for (const auto& op : def.op()) operators_.push_back(CreateOperator(op, ws));
  const char* profile = std::getenv("LOCKSTEP_PROFILE");
  profile_ = profile && std::string(profile) == "1";
  seconds_.assign(operators_.size(), 0.0);
}

Net::~Net() {
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

void Net::RunOperatorAt(size_t i) {
  if (!profile_) return RunOperator(operators_[i].get());
  auto start = std::chrono::steady_clock::now();
  RunOperator(operators_[i].get());
  seconds_[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void RunOperator(Operator* op) {
  try {
    op->Run();
  } catch (const InvalidInput&) {
    throw;
  } catch (const IoError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{} failed: {}", DescribeOperator(op->def()), e.what()));
  }
}

void SequentialNet::Run() {
  for (size_t i = 0; i < operators_.size(); ++i) RunOperatorAt(i);
}

// A fixed pool of workers that live as long as the net; Run() hands them the ready operators and waits.
struct DagNet::State {
  std::mutex mutex;
  std::condition_variable work_ready, run_done;
  std::vector<int> ready;
  std::vector<int> pending_parents;
  int remaining = 0;
  bool running = false, stopping = false;
  std::exception_ptr error;
  std::vector<std::thread> workers;
};

DagNet::DagNet(const NetDef& def, Workspace* ws) : Net(def, ws), state_(std::make_unique<State>()) {
  int n = static_cast<int>(operators_.size());
  parents_.resize(n);
  children_.resize(n);
  std::map<std::string, int> last_writer;
  std::map<std::string, std::vector<int>> readers_since_write;
  for (int i = 0; i < n; ++i) {
    std::set<int> parents;
    const auto& op = def.op(i);
    for (const auto& name : op.input()) {
      auto it = last_writer.find(name);
      if (it != last_writer.end()) parents.insert(it->second);
    }
    for (const auto& name : op.output()) {
      auto it = last_writer.find(name);
      if (it != last_writer.end()) parents.insert(it->second);
      for (int reader : readers_since_write[name]) parents.insert(reader);
    }
    parents.erase(i);
    for (const auto& name : op.input()) readers_since_write[name].push_back(i);
    for (const auto& name : op.output()) {
      last_writer[name] = i;
      readers_since_write[name].clear();
    }
    parents_[i].assign(parents.begin(), parents.end());
    for (int parent : parents) children_[parent].push_back(i);
  }
  int workers = def.has_num_workers() && def.num_workers() > 0 ? def.num_workers() : 2;
  for (int w = 0; w < workers; ++w) {
    state_->workers.emplace_back([this] {
      State& s = *state_;
      std::unique_lock<std::mutex> lock(s.mutex);
      while (true) {
        s.work_ready.wait(lock, [&] { return s.stopping || (s.running && !s.ready.empty()); });
        if (s.stopping) return;
        int index = s.ready.back();
        s.ready.pop_back();
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
          if (--s.pending_parents[child] == 0) s.ready.push_back(child);
        if (--s.remaining == 0) {
          s.running = false;
          s.run_done.notify_all();
        } else {
          s.work_ready.notify_all();
        }
      }
    });
  }
}

DagNet::~DagNet() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->work_ready.notify_all();
  for (auto& worker : state_->workers) worker.join();
}

void DagNet::Run() {
  State& s = *state_;
  if (operators_.empty()) return;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.pending_parents.resize(operators_.size());
  s.ready.clear();
  for (size_t i = 0; i < operators_.size(); ++i) {
    s.pending_parents[i] = static_cast<int>(parents_[i].size());
    if (parents_[i].empty()) s.ready.push_back(static_cast<int>(i));
  }
  s.remaining = static_cast<int>(operators_.size());
  s.error = nullptr;
  s.running = true;
  s.work_ready.notify_all();
  s.run_done.wait(lock, [&] { return !s.running; });
  if (s.error) std::rethrow_exception(s.error);
}

std::unique_ptr<Net> CreateNetExecutor(const NetDef& def, Workspace* ws) {
  if (def.type().empty() || def.type() == "simple") return std::make_unique<SequentialNet>(def, ws);
  if (def.type() == "dag") return std::make_unique<DagNet>(def, ws);
  throw InvalidInput(
      fmt::format("net '{}' has unknown executor type '{}'; use 'simple' or 'dag'", def.name(), def.type()));
}

}  // namespace lockstep
