// Data-parallel overhead on one machine: the same global batch trained by 1 device x T threads and by
// T devices x 1 thread, alternated over rounds (best round counts), for LeNet (batch 256, 28x28) and
// ResNet-50 (batch 16, 224x224) on synthetic data; then, from an operator trace of the T-device run, how much
// of the gradient allreduce time ran while some replica was still computing (hidden behind backward).
//
//   build-bench/data_parallel_overhead [--threads 2] [--rounds 3] [--steps_lenet 20] [--steps_resnet50 3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"

using namespace lockstep;

namespace {

struct Workload {
  std::string model;
  int batch, channels, image_size, labels, steps;
};

// A trained replica set ready to step: the model, its workspace and its net.
struct Job {
  ModelHelper model{"train"};
  Workspace ws;
  Net* net = nullptr;
};

std::unique_ptr<Job> MakeJob(const Workload& w, int devices, int threads_per_device) {
  auto job = std::make_unique<Job>();
  ParallelOptions o;
  for (int d = 0; d < devices; ++d) o.devices.push_back(d);
  o.threads_per_device = threads_per_device;
  o.max_threads = devices * threads_per_device;
  o.input_builder = [](ModelHelper& m) { layers::ReadBatch(m, "reader", "data", "label"); };
  o.forward_builder = [&](ModelHelper& m, float loss_scale) {
    ModelConfig config{w.channels, w.image_size, w.labels, false};
    std::string logits = BuildModel(w.model, m, m.Scoped("data"), config);
    auto [softmax, loss] = layers::SoftmaxWithLoss(m, logits, m.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(m, loss, "scaled_loss", loss_scale)};
  };
  o.param_update_builder = [](ModelHelper& m) { AddMomentumSgd(m, SgdOptions{}); };
  Parallelize(job->model, o);
  auto source = std::make_shared<SyntheticSource>(w.channels, w.image_size, w.labels, 1);
  job->ws.SetObject("reader", std::make_shared<BatchReader>(source, w.batch / devices, devices));
  job->ws.RunNetOnce(job->model.param_init_net());
  job->net = job->ws.CreateNet(job->model.net());
  job->net->Run();  // warm-up: buffers and primitives
  return job;
}

double ImagesPerSecond(Job& job, const Workload& w) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < w.steps; ++i) job.net->Run();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return w.steps * w.batch / seconds;
}

// Length of [start, end) covered by the sorted, disjoint intervals.
double Covered(double start, double end, const std::vector<std::pair<double, double>>& intervals) {
  double covered = 0;
  for (const auto& [a, b] : intervals) covered += std::max(0.0, std::min(end, b) - std::max(start, a));
  return covered;
}

void ReportOverlap(Job& job, const Workload& w) {
  job.net->set_tracing(true);
  for (int i = 0; i < w.steps; ++i) job.net->Run();
  job.net->set_tracing(false);
  auto events = job.net->TakeEvents();
  std::vector<std::pair<double, double>> compute, merged;
  double allreduce = 0, hidden = 0, step_seconds = 0;
  for (const auto& e : events)
    if (job.net->def().op(e.op).type() != "Allreduce") compute.push_back({e.start, e.end});
  std::sort(compute.begin(), compute.end());
  for (const auto& interval : compute) {
    if (!merged.empty() && interval.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, interval.second);
    else
      merged.push_back(interval);
  }
  double first = 1e30, last = 0;
  for (const auto& e : events) {
    first = std::min(first, e.start);
    last = std::max(last, e.end);
    if (job.net->def().op(e.op).type() != "Allreduce") continue;
    allreduce += e.end - e.start;
    hidden += Covered(e.start, e.end, merged);
  }
  step_seconds = (last - first) / w.steps;
  std::printf("  allreduce %.1f ms/step (%.1f%% of a %.0f ms step), %.1f%% of it hidden behind backward\n",
              1e3 * allreduce / w.steps, 100 * allreduce / w.steps / step_seconds, 1e3 * step_seconds,
              allreduce > 0 ? 100 * hidden / allreduce : 100.0);
}

void Compare(const Workload& w, int threads, int rounds) {
  std::printf("%s, batch %d, %dx%d: 1 device x %d threads vs %d devices x 1 thread, %d steps x %d rounds\n",
              w.model.c_str(), w.batch, w.image_size, w.image_size, threads, threads, w.steps, rounds);
  auto one = MakeJob(w, 1, threads);
  auto many = MakeJob(w, threads, 1);
  double best_one = 0, best_many = 0;
  for (int round = 0; round < rounds; ++round) {
    double a = ImagesPerSecond(*one, w), b = ImagesPerSecond(*many, w);
    std::printf("  round %d: %.1f vs %.1f img/s\n", round + 1, a, b);
    best_one = std::max(best_one, a);
    best_many = std::max(best_many, b);
  }
  std::printf("  best: %.1f vs %.1f img/s, ratio %.3f (%d devices / 1 device)\n", best_one, best_many,
              best_many / best_one, threads);
  ReportOverlap(*many, w);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel overhead: 1 device x T threads vs T CPU devices x 1 thread"};
  int threads = 2, rounds = 3, steps_lenet = 20, steps_resnet = 3;
  app.add_option("--threads", threads, "Threads (and devices)")->capture_default_str();
  app.add_option("--rounds", rounds, "Alternated rounds; the best counts")->capture_default_str();
  app.add_option("--steps_lenet", steps_lenet, "LeNet steps per round")->capture_default_str();
  app.add_option("--steps_resnet50", steps_resnet, "ResNet-50 steps per round (0 skips)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  Compare({"lenet", 256, 1, 28, 10, steps_lenet}, threads, rounds);
  if (steps_resnet > 0) Compare({"resnet50", 16, 3, 224, 1000, steps_resnet}, threads, rounds);
  return 0;
}
