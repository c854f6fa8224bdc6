// Limits: --memory_limit_gb, else the machine's physical memory or its cgroup's limit, whichever is lower.
// The process's resident memory when the plan is made (libraries, the data set, the readers) counts too,
// so that the printed peak compares with what `time -v` reports.
#include "lockstep/train/memory_report.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "lockstep/core/enforce.h"

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

}  // namespace

std::map<std::string, TensorShape> TrainingInputShapes(const TrainerConfig& config) {
  if (config.micro_batches > 1) return {};
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
  std::string limit_what;
  const size_t limit = config.memory_limit_gb > 0
                           ? static_cast<size_t>(config.memory_limit_gb * double(1 << 30))
                           : MachineBytes(&limit_what);
  if (config.memory_limit_gb > 0) limit_what = "--memory_limit_gb";
  const size_t in_use = ResidentBytes();
  const size_t peak = plan.Total() + in_use;
  fmt::print("memory plan: peak {} = tensors {} + {} in use before them; limit {} ({}){}\n",
             FormatBytes(peak), FormatBytes(plan.Total()), FormatBytes(in_use), FormatBytes(limit),
             limit_what, config.share_buffers ? "" : "; buffers not shared (--share_buffers=false)");
  std::string devices = DescribeMemoryPlan(plan);
  for (size_t start = 0, end; (end = devices.find('\n', start)) != std::string::npos; start = end + 1)
    fmt::print("  {}\n", devices.substr(start, end - start));

  // Tensor memory is (nearly) affine in the batch: the parameters and the state are fixed, the rest grows.
  auto largest_batch = [&]() -> int64_t {
    const int replicas = config.num_devices / config.model_parallel;
    const MemoryPlan doubled = plan_at(2 * config.batch_size);
    if (!doubled.unknown.empty() || doubled.Total() <= plan.Total()) return -1;
    const double per_image = double(doubled.Total() - plan.Total()) / config.batch_size;
    const double fixed = double(plan.Total()) - per_image * config.batch_size + double(in_use);
    if (fixed >= double(limit)) return 0;
    const int64_t images = static_cast<int64_t>((double(limit) - fixed) / per_image);
    return images / replicas * replicas;
  };
  if (config.plan_memory) {
    const int64_t largest = largest_batch();
    if (largest >= 0)
      fmt::print("largest --batch_size within {} ({}): {}\n", FormatBytes(limit), limit_what, largest);
  }
  if (peak > limit) {
    const int64_t largest = largest_batch();
    throw InvalidInput(fmt::format(
        "the memory plan needs {} ({} of tensors), more than {} ({}); {}", FormatBytes(peak),
        FormatBytes(plan.Total()), FormatBytes(limit), limit_what,
        largest > 0
            ? fmt::format("use --batch_size {} or less, or raise the limit", largest)
            : std::string("the model does not fit at any batch size; use more devices or a smaller model")));
  }
}

}  // namespace lockstep
