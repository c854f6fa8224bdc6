// Limits: --memory_limit_gb for every memory, else host memory is the machine's physical memory or its
// cgroup's limit, whichever is lower, and a GPU's is its total. Host memory also holds what the process uses
// when the plan is made (libraries, oneDNN's kernel generators, the data set, the readers), so that the
// printed peak compares with what `time -v` reports.
#include "lockstep/train/memory_report.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

#include "lockstep/core/device_backend.h"
#include "lockstep/core/enforce.h"
#include "lockstep/data/source_options.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/parallel/fuse_relu.h"

namespace lockstep {
namespace {

// Resident bytes of this process now.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// The machine's memory: physical, or the cgroup's limit (cgroup v2 memory.max) when lower.
size_t MachineBytes(std::string* what) {
  size_t bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *what = "the machine's memory";
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  size_t limit = 0;
  if (cgroup >> limit && limit > 0 && limit < bytes) {
    bytes = limit;
    *what = "the cgroup's memory.max";
  }
  return bytes;
}

// One memory the plan must fit: host memory (with what the process already uses), or one GPU's.
struct Budget {
  std::string memory;  // "host memory", "gpu:0"
  size_t used = 0, limit = 0;
  std::string limit_what;
};

// With --save_model_name, the copy of one replica's state (parameters, optimizer state, statistics) that a
// checkpoint is written from while training goes on, in host memory whatever the devices.
size_t CheckpointCopyBytes(const TrainerConfig& config, const MemoryPlan& plan) {
  if (config.save_model_name.empty()) return 0;
  size_t state = 0;
  for (const auto& [device, use] : plan.devices) state += use.parameters + use.state;
  return state / (config.num_devices / config.model_parallel);
}

std::vector<Budget> Budgets(const TrainerConfig& config, const MemoryPlan& plan, size_t in_use) {
  const bool given = config.memory_limit_gb > 0;
  const size_t given_bytes = static_cast<size_t>(config.memory_limit_gb * double(1 << 30));
  Budget host{"host memory", in_use + CheckpointCopyBytes(config, plan), given_bytes, "--memory_limit_gb"};
  if (!given) host.limit = MachineBytes(&host.limit_what);
  std::vector<Budget> budgets;
  for (const auto& [device, use] : plan.devices) {
    if (device.compare(0, 4, "cpu:") == 0) {
      host.used += use.Total();
      continue;
    }
    Budget gpu{device, use.Total(), given_bytes, "--memory_limit_gb"};
    if (!given) {
      gpu.limit =
          GetDeviceBackend(DeviceType::kCuda).MemoryBytes(std::stoi(device.substr(device.find(':') + 1)));
      gpu.limit_what = "the GPU's memory";
    }
    budgets.push_back(gpu);
  }
  budgets.insert(budgets.begin(), host);
  return budgets;
}

}  // namespace

std::map<std::string, TensorShape> TrainingInputShapes(const TrainerConfig& config) {
  const int64_t batch = config.batch_size / (config.num_devices / config.model_parallel);
  return {{"data", {{batch, config.num_channels, config.image_size, config.image_size}, DataType::kFloat}},
          {"label", {{batch}, DataType::kInt32}}};
}

void ReportMemoryPlan(const TrainerConfig& config, const MemoryPlan& plan,
                      const std::function<MemoryPlan(int batch_size)>& plan_at) {
  if (!plan.unknown.empty()) {
    fmt::print("memory plan: sizes unknown ({}); buffers are shared without them\n", plan.unknown);
    return;
  }
  // oneDNN's kernel generators load at the first step of every CPU run (7 MiB of LeNet's 154 MiB peak on
  // AVX-512); loaded now, the baseline holds them.
  if (config.use_cpu) LoadKernelGenerators(ParseFloatType(config.dtype, "--dtype"));
  const size_t in_use = ResidentBytes();
  const std::vector<Budget> budgets = Budgets(config, plan, in_use);
  const size_t checkpoint = CheckpointCopyBytes(config, plan);
  fmt::print("memory plan: peak {} = tensors {}{} + {} in use before them; limit {} ({}){}\n",
             FormatBytes(budgets[0].used), FormatBytes(budgets[0].used - in_use - checkpoint),
             checkpoint ? fmt::format(" + checkpoint copy {}", FormatBytes(checkpoint)) : "",
             FormatBytes(in_use), FormatBytes(budgets[0].limit), budgets[0].limit_what,
             config.share_buffers ? "" : "; buffers not shared (--share_buffers=false)");
  for (size_t i = 1; i < budgets.size(); ++i)
    fmt::print("memory plan: {} peak {}; limit {} ({})\n", budgets[i].memory, FormatBytes(budgets[i].used),
               FormatBytes(budgets[i].limit), budgets[i].limit_what);
  std::string devices = DescribeMemoryPlan(plan);
  for (size_t start = 0, end; (end = devices.find('\n', start)) != std::string::npos; start = end + 1)
    fmt::print("  {}\n", devices.substr(start, end - start));

  // The largest batch whose plan fits every memory; -1 when the sizes are unknown. A memory's use is nearly
  // affine in the batch (parameters and state are fixed, the rest grows), but not quite (micro-batches,
  // scratch that oneDNN sizes per shape): the affine estimate from this batch and twice it is checked with
  // the plan itself and narrowed between a batch that fits and one that does not.
  auto largest_batch = [&]() -> int64_t {
    // A batch splits evenly into the replicas and each replica's into its micro-batches.
    const int64_t step = int64_t{config.num_devices / config.model_parallel} * config.micro_batches;
    const int64_t most = kMaxBatchSize / step * step;  // what --batch_size accepts
    int64_t fits = 0, fails = most + step;             // the largest batch known to fit, the smallest not
    // The most bytes by which a memory's plan at `batch` exceeds its limit (at most 0: it fits).
    auto excess = [&](int64_t batch) -> std::optional<double> {
      const MemoryPlan at = batch == config.batch_size ? plan : plan_at(static_cast<int>(batch));
      if (!at.unknown.empty()) return std::nullopt;
      double worst = -std::numeric_limits<double>::infinity();
      for (const Budget& budget : Budgets(config, at, in_use))
        worst = std::max(worst, double(budget.used) - double(budget.limit));
      if (worst <= 0)
        fits = std::max(fits, batch);
      else
        fails = std::min(fails, batch);
      return worst;
    };
    std::pair<int64_t, std::optional<double>> a{config.batch_size, excess(config.batch_size)};
    std::pair<int64_t, std::optional<double>> b{2 * a.first, excess(2 * a.first)};
    for (int round = 0; round < 16 && fails - fits > step; ++round) {
      if (!a.second || !b.second) return -1;
      // Where the line through the last two plans meets the limit, within what is known; every other round
      // halfway between what fits and what does not, once both are known, so that a curve the line follows
      // badly is still found in a few rounds.
      const double slope = (*b.second - *a.second) / double(b.first - a.first);
      const double crossing = slope > 0 ? double(b.first) - *b.second / slope : double(most);
      int64_t next = static_cast<int64_t>(std::min(crossing, double(most))) / step * step;
      if (round % 2 == 1 && fails <= most) next = (fits + fails) / 2 / step * step;
      next = std::clamp(next, fits + step, fails - step);
      a = b;
      b = {next, excess(next)};
    }
    return fits;
  };
  if (config.plan_memory) {
    const int64_t largest = largest_batch();
    if (largest >= 0) fmt::print("largest --batch_size within the limits: {}\n", largest);
  }
  for (const Budget& budget : budgets) {
    if (budget.used <= budget.limit) continue;
    const int64_t largest = largest_batch();
    throw InvalidInput(fmt::format(
        "the memory plan needs {} of {}, more than {} ({}); {}", FormatBytes(budget.used), budget.memory,
        FormatBytes(budget.limit), budget.limit_what,
        largest > 0
            ? fmt::format("use --batch_size {} or less, or raise the limit", largest)
            : std::string(
                  "the model does not fit at any batch size; use a smaller model or --image_size, split "
                  "it over devices with --model_parallel, or (on CPUs, whose devices share the host's "
                  "memory) fewer --num_gpus")));
  }
}

MemoryPlan PlanEvaluationNet(const TrainerConfig& config, const std::vector<std::string>& scopes,
                             const std::vector<TestReplica>& replicas, const NetDef& init_net, NetDef* net) {
  MemoryPlanOptions plan;
  plan.share = config.share_buffers;
  plan.scopes = scopes;
  const int64_t slice = config.batch_size / static_cast<int64_t>(replicas.size());
  for (const auto& replica : replicas) {
    plan.keep.insert(replica.logits);
    plan.given[replica.data] = {{slice, config.num_channels, config.image_size, config.image_size}};
  }
  if (plan.share) FuseRelus(net, plan.keep);  // as the training net's
  return PlanMemory(net, init_net, plan);
}

MemoryPlan WithEvaluation(MemoryPlan training, const MemoryPlan& evaluation) {
  if (!evaluation.unknown.empty()) {
    if (training.unknown.empty()) training.unknown = "the evaluation net's: " + evaluation.unknown;
    return training;
  }
  // The evaluation net runs on threads of its own, whose scratch pools live as long as it does.
  for (const auto& [device, use] : evaluation.devices)
    training.devices[device].evaluation += use.activations + use.scratch;
  return training;
}

}  // namespace lockstep
