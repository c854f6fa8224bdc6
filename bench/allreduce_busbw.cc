// Allreduce bus bandwidth across N processes on 127.0.0.1: lockstep's GlooCommunicator against raw Gloo with
// the same algorithm, alternated over rounds in one invocation (best round counts), per buffer size.
//
//   build/allreduce_busbw [--ranks 2] [--sizes 64K,1M,8M,64M] [--algorithm halving_doubling|all] [--rounds 5]
//                         [--iters 0] [--devices 1] [--timeout 60]
//
// The first process is rank 0: it starts ranks 1..N-1 as copies of itself (hidden flags --rank, --store),
// prints the results and reaps them. busbw = algbw * 2(n-1)/n as nccl-tests define it, so that ring-optimal
// traffic reads as the link's bandwidth whatever n is.
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"

extern char** environ;

using namespace lockstep;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int ranks = 2, rounds = 5, iters = 0, devices = 1, timeout = 60;
  std::vector<std::string> sizes{"64K", "1M", "8M", "64M"};
  std::string algorithm = "halving_doubling";
  int rank = 0;       // hidden: set for the started copies
  std::string store;  // hidden: the file store directory rank 0 made
};

// "64K", "1M", "2G" (K = 1024) or plain bytes; a positive multiple of 4 (floats).
size_t ParseSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  size_t scale = unit.empty()  ? 1
                 : unit == "K" ? 1u << 10
                 : unit == "M" ? 1u << 20
                 : unit == "G" ? 1u << 30
                               : 0;
  if (digits == 0 || scale == 0)
    throw InvalidInput(fmt::format("--sizes: '{}' is not a size; write e.g. 4096, 64K, 8M or 1G", text));
  size_t bytes = std::stoull(text.substr(0, digits)) * scale;
  if (bytes == 0 || bytes % sizeof(float) != 0)
    throw InvalidInput(fmt::format("--sizes: {} is not a positive multiple of 4 bytes (one float)", text));
  return bytes;
}

std::string SizeName(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return fmt::format("{} GB", bytes >> 30);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string Duration(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.1f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.3f} s", seconds);
}

std::vector<std::string> Algorithms(const Options& o) {
  std::vector<std::string> names;
  if (o.algorithm == "all") {
    names = {"ring", "ring_chunked", "halving_doubling"};
    if (o.ranks % 2 == 0) names.push_back("bcube");
  } else {
    const auto& known = GlooAllreduceAlgorithms();
    if (std::find(known.begin(), known.end(), o.algorithm) == known.end())
      throw InvalidInput(
          fmt::format("unknown --algorithm '{}'; choose ring, ring_chunked, halving_doubling, "
                      "bcube or all",
                      o.algorithm));
    names.push_back(o.algorithm == "auto" ? "halving_doubling" : o.algorithm);
    if (names[0] == "bcube" && o.ranks % 2 != 0)
      throw InvalidInput(fmt::format("--algorithm bcube needs an even --ranks, got {}", o.ranks));
  }
  return names;
}

std::unique_ptr<gloo::Algorithm> RawAllreduce(const std::string& algorithm,
                                              const std::shared_ptr<gloo::Context>& context, float* data,
                                              int count) {
  if (algorithm == "ring")
    return std::make_unique<gloo::AllreduceRing<float>>(context, std::vector{data}, count);
  if (algorithm == "ring_chunked")
    return std::make_unique<gloo::AllreduceRingChunked<float>>(context, std::vector{data}, count);
  if (algorithm == "bcube")
    return std::make_unique<gloo::AllreduceBcube<float>>(context, std::vector{data}, count);
  return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, std::vector{data}, count);
}

// Replica k of `replicas` holds k + 1 + (i mod 1021) at element i, so the sum is exact in float and a chunk
// landing at the wrong offset shows.
void Fill(float* data, size_t count, int replica) {
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(replica + 1 + static_cast<int>(i % 1021));
}

void CheckSum(const float* data, size_t count, int replicas, const std::string& what) {
  const double base = replicas * (replicas + 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    const double expected = base + replicas * static_cast<double>(i % 1021);
    if (data[i] != expected)
      throw Error(fmt::format("{}: element {} of {} is {}, expected {}", what, i, count, data[i], expected));
  }
}

double TimeRuns(const std::function<void()>& run, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) run();
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) run();
  return std::chrono::duration<double>(Clock::now() - start).count() / iters;
}

// Enough iterations to move about 256 MB per round, within [5, 1000].
int Iterations(const Options& o, size_t bytes) {
  if (o.iters > 0) return o.iters;
  return static_cast<int>(std::clamp<size_t>((256u << 20) / bytes, 5, 1000));
}

void PrintHeader(const Options& o, const std::string& algorithm) {
  std::printf("\nallreduce %s, %d ranks on 127.0.0.1 (lo), best of %d alternated rounds\n", algorithm.c_str(),
              o.ranks, o.rounds);
  std::printf(
      "sums checked exactly before timing; algbw = bytes/time, busbw = algbw * 2(n-1)/n, in GB/s (1e9 "
      "bytes/s); KB, MB = 2^10, 2^20 bytes\n");
  if (o.devices > 1)
    std::printf(
        "lockstep: %d buffers per rank (summed locally, allreduced across ranks, copied back); raw Gloo: 1 "
        "buffer per rank.\nThis compares the cross-shard part only: busbw counts one buffer per rank.\n",
        o.devices);
  std::printf("%9s %6s | %10s %8s %8s | %10s %8s %8s | %s\n", "size", "iters", "lockstep", "algbw", "busbw",
              "raw gloo", "algbw", "busbw", "busbw lockstep/raw");
}

// One rank's part for one algorithm: every rank runs the same sequence; rank 0 prints.
void RunAlgorithm(const Options& o, const std::string& algorithm, const std::vector<size_t>& sizes) {
  const std::chrono::milliseconds timeout(o.timeout * 1000);
  RendezvousOptions meet;
  meet.num_shards = o.ranks;
  meet.shard_id = o.rank;
  meet.run_id = "lockstep_" + algorithm;
  meet.file_store_path = o.store;
  meet.timeout = timeout;
  GlooOptions gloo_options;
  gloo_options.interfaces = {"lo"};
  gloo_options.algorithm = algorithm;
  gloo_options.timeout = timeout;
  gloo_options.first_iter_timeout = timeout;
  GlooCommunicator lockstep_comm(std::make_shared<Rendezvous>(meet), gloo_options);
  lockstep_comm.EndFirstIteration();  // the steady-state contexts from here on

  gloo::rendezvous::FileStore files(o.store);
  gloo::rendezvous::PrefixStore raw_store("raw_" + algorithm, files);
  gloo::transport::tcp::attr attr;
  attr.iface = "lo";
  auto raw_context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.ranks);
  raw_context->setTimeout(timeout);
  std::shared_ptr<gloo::transport::Device> raw_device = gloo::transport::tcp::CreateDevice(attr);
  raw_context->connectFullMesh(raw_store, raw_device);

  if (o.rank == 0) PrintHeader(o, algorithm);
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    LOCKSTEP_ENFORCE(count <= static_cast<size_t>(INT_MAX), "Gloo allreduces at most {} floats at once",
                     INT_MAX);
    std::vector<std::vector<float>> device_buffers(o.devices, std::vector<float>(count));
    std::vector<float*> device_ptrs;
    for (auto& buffer : device_buffers) device_ptrs.push_back(buffer.data());
    std::vector<float> raw_buffer(count);
    auto raw = RawAllreduce(algorithm, raw_context, raw_buffer.data(), static_cast<int>(count));
    auto lockstep_run = [&] { lockstep_comm.Allreduce(device_ptrs, count); };
    auto raw_run = [&] { raw->run(); };

    for (int d = 0; d < o.devices; ++d) Fill(device_ptrs[d], count, o.rank * o.devices + d);
    Fill(raw_buffer.data(), count, o.rank);
    lockstep_run();
    raw_run();
    const std::string what = fmt::format("rank {}: {} allreduce of {}", o.rank, algorithm, SizeName(bytes));
    for (int d = 0; d < o.devices; ++d)
      CheckSum(device_ptrs[d], count, o.ranks * o.devices, fmt::format("lockstep {}, buffer {}", what, d));
    CheckSum(raw_buffer.data(), count, o.ranks, "raw Gloo " + what);
    // Timed runs sum zeros: repeated sums of the check pattern would grow to infinity.
    for (auto& buffer : device_buffers) std::fill(buffer.begin(), buffer.end(), 0.0f);
    std::fill(raw_buffer.begin(), raw_buffer.end(), 0.0f);

    const int iters = Iterations(o, bytes), warmup = std::max(1, iters / 5);
    double best_lockstep = 1e30, best_raw = 1e30;
    for (int round = 0; round < o.rounds; ++round) {
      best_lockstep = std::min(best_lockstep, TimeRuns(lockstep_run, warmup, iters));
      best_raw = std::min(best_raw, TimeRuns(raw_run, warmup, iters));
    }
    if (o.rank != 0) continue;
    const double bus_factor = 2.0 * (o.ranks - 1) / o.ranks;
    const double algbw_lockstep = bytes / best_lockstep / 1e9, algbw_raw = bytes / best_raw / 1e9;
    std::printf("%9s %6d | %10s %8.3f %8.3f | %10s %8.3f %8.3f | %.3f\n", SizeName(bytes).c_str(), iters,
                Duration(best_lockstep).c_str(), algbw_lockstep, algbw_lockstep * bus_factor,
                Duration(best_raw).c_str(), algbw_raw, algbw_raw * bus_factor, algbw_lockstep / algbw_raw);
    std::fflush(stdout);
  }
}

// What every rank measures, checked before any rank starts.
struct Plan {
  std::vector<std::string> algorithms;
  std::vector<size_t> sizes;
};

void RunRank(const Options& o, const Plan& plan) {
  for (const auto& algorithm : plan.algorithms) RunAlgorithm(o, algorithm, plan.sizes);
}

// Waits for the started ranks until the deadline, then ends those still running; returns false when one
// failed or had to be ended.
bool Reap(std::vector<pid_t>& children, Clock::time_point deadline) {
  bool all_ok = true;
  while (!children.empty()) {
    for (size_t i = 0; i < children.size();) {
      int status = 0;
      pid_t done = waitpid(children[i], &status, WNOHANG);
      if (done == 0) {
        ++i;
        continue;
      }
      if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        all_ok = false;
        std::string how = done < 0              ? "could not be waited for"
                          : WIFSIGNALED(status) ? fmt::format("died of signal {}", WTERMSIG(status))
                                                : fmt::format("exited with status {}", WEXITSTATUS(status));
        std::fprintf(stderr, "error: rank process %d %s\n", children[i], how.c_str());
      }
      children.erase(children.begin() + i);
    }
    if (children.empty()) break;
    if (Clock::now() >= deadline) {
      for (pid_t child : children) {
        std::fprintf(stderr, "error: rank process %d did not exit in time; ending it\n", child);
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return all_ok;
}

int RunAll(int argc, char** argv, const Options& o, const Plan& plan) {
  std::string pattern = (std::filesystem::temp_directory_path() / "allreduce_busbw.XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw IoError(fmt::format("cannot create a temporary directory {}", pattern));
  Options mine = o;
  mine.store = pattern;

  std::vector<pid_t> children;
  int status = 0;
  try {
    for (int r = 1; r < o.ranks; ++r) {
      std::vector<std::string> args(argv, argv + argc);
      args.insert(args.end(), {"--rank", std::to_string(r), "--store", mine.store});
      std::vector<char*> child_argv;
      for (auto& arg : args) child_argv.push_back(arg.data());
      child_argv.push_back(nullptr);
      pid_t pid = 0;
      if (int error = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child_argv.data(), environ))
        throw IoError(fmt::format("cannot start rank {}: {}", r, std::strerror(error)));
      children.push_back(pid);
    }
    RunRank(mine, plan);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank 0: %s\n", e.what());
    for (pid_t child : children) kill(child, SIGTERM);
    status = 1;
  }
  if (!Reap(children, Clock::now() + std::chrono::seconds(status ? 5 : o.timeout + 5))) status = 1;
  std::error_code ignored;
  std::filesystem::remove_all(mine.store, ignored);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Allreduce bus bandwidth across processes on 127.0.0.1: lockstep's GlooCommunicator vs raw Gloo"};
  Options o;
  app.add_option("--ranks", o.ranks, "Processes")->capture_default_str();
  app.add_option("--sizes", o.sizes, "Buffer sizes, comma-separated (K = 1024 bytes)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--algorithm", o.algorithm, "ring, ring_chunked, halving_doubling, bcube or all")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "Alternated lockstep/raw rounds; the best of each counts")
      ->capture_default_str();
  app.add_option("--iters", o.iters, "Timed allreduces per round (0: about 256 MB per round, 5 to 1000)")
      ->capture_default_str();
  app.add_option("--devices", o.devices, "lockstep buffers per rank (the hierarchical path)")
      ->capture_default_str();
  app.add_option("--timeout", o.timeout, "Seconds a rank waits for the others")->capture_default_str();
  app.add_option("--rank", o.rank)->group("");
  app.add_option("--store", o.store)->group("");
  CLI11_PARSE(app, argc, argv);
  if (o.ranks < 2 || o.rounds < 1 || o.iters < 0 || o.devices < 1 || o.timeout < 1) {
    std::fprintf(stderr,
                 "error: need --ranks >= 2, --rounds >= 1, --iters >= 0, --devices >= 1, --timeout >= 1\n");
    return 2;
  }
  Plan plan;
  try {
    plan.algorithms = Algorithms(o);
    for (const auto& size : o.sizes) plan.sizes.push_back(ParseSize(size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (o.rank == 0 && o.algorithm == "all" && o.ranks % 2 != 0)
    std::printf("bcube left out: it needs an even number of ranks\n");
  if (o.rank == 0) return RunAll(argc, argv, o, plan);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a started rank never outlives rank 0
  try {
    RunRank(o, plan);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
  return 0;
}
