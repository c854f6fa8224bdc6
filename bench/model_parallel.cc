// Model parallelism on CPU devices: ResNet-50 split into 2 stages of balanced cost on 2 devices x 1 thread,
// without micro-batches (each stage waits for the other) and with M pipelined micro-batches (GPipe), next to
// the unsplit network on 1 device x 1 thread, alternated over rounds (best round counts). From an operator
// trace it prints each split's bubble fraction: the share of stage-time the stages sat idle during a step,
// against GPipe's (S - 1) / (M + S - 1).
//
//   build-bench/model_parallel [--batch 16] [--image_size 224] [--micro_batches 4] [--steps 2] [--rounds 3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/placement.h"

using namespace lockstep;

namespace {

struct Workload {
  std::string model = "resnet50";
  int batch = 16, image_size = 224, labels = 1000, steps = 2;
};

struct Job {
  std::string name;
  int stages = 1, micro_batches = 1;
  ModelHelper model{"train"};
  Workspace ws;
  Net* net = nullptr;
};

std::unique_ptr<Job> MakeJob(const Workload& w, int stages, int micro_batches) {
  auto job = std::make_unique<Job>();
  job->stages = stages;
  job->micro_batches = micro_batches;
  job->name = stages == 1 ? "1 stage"
                          : fmt::format("{} stages, {} micro-batch{}", stages, micro_batches,
                                        micro_batches == 1 ? "" : "es");
  ParallelOptions o;
  for (int d = 0; d < stages; ++d) o.devices.push_back(d);
  o.devices_per_replica = stages;
  o.micro_batches = micro_batches;
  o.threads_per_device = 1;
  o.max_threads = stages;
  o.input_builder = [](ModelHelper& m) { layers::ReadBatch(m, "reader", "data", "label"); };
  o.forward_builder = [&](ModelHelper& m, float loss_scale) {
    const int first_op = m.net().op_size();
    ModelConfig config{3, w.image_size, w.labels, false};
    std::string logits = BuildModel(w.model, m, m.Scoped("data"), config);
    auto [softmax, loss] = layers::SoftmaxWithLoss(m, logits, m.Scoped("label"), "softmax", "loss");
    std::string scaled = layers::Scale(m, loss, "scaled_loss", loss_scale);
    if (stages > 1) {
      const int64_t batch = w.batch / micro_batches;
      auto starts = BalancedStageStarts(m, first_op, stages,
                                        {{m.Scoped("data"), {{batch, 3, w.image_size, w.image_size}}},
                                         {m.Scoped("label"), {{batch}, DataType::kInt32}}});
      PlaceStages(m, starts, m.replica().devices);
    }
    return std::vector<std::string>{scaled};
  };
  o.param_update_builder = [](ModelHelper& m) { AddMomentumSgd(m, SgdOptions{}); };
  Parallelize(job->model, o);
  auto source = std::make_shared<SyntheticSource>(3, w.image_size, w.labels, 1);
  job->ws.SetObject("reader", std::make_shared<BatchReader>(source, w.batch, 1));
  job->ws.RunNetOnce(job->model.param_init_net());
  job->net = job->ws.CreateNet(job->model.net());
  job->net->Run();  // warm-up: buffers and primitives
  return job;
}

double SecondsPerStep(Job& job, const Workload& w) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < w.steps; ++i) job.net->Run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / w.steps;
}

// 1 - (time the devices spent in operators) / (devices x wall time of the traced steps).
double BubbleFraction(Job& job, const Workload& w) {
  job.net->set_tracing(true);
  for (int i = 0; i < w.steps; ++i) job.net->Run();
  job.net->set_tracing(false);
  double busy = 0, first = 1e30, last = 0;
  for (const auto& e : job.net->TakeEvents()) {
    busy += e.end - e.start;
    first = std::min(first, e.start);
    last = std::max(last, e.end);
  }
  return 1 - busy / (job.stages * (last - first));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Model parallelism: ResNet-50 in 2 stages on 2 CPU devices, with and without micro-batches"};
  Workload w;
  int micro_batches = 4, rounds = 3;
  app.add_option("--model", w.model, "Model zoo network")->capture_default_str();
  app.add_option("--batch", w.batch, "Batch size")->capture_default_str();
  app.add_option("--image_size", w.image_size, "Image height and width")->capture_default_str();
  app.add_option("--micro_batches", micro_batches, "Micro-batches of the pipelined split")
      ->capture_default_str();
  app.add_option("--steps", w.steps, "Steps per round")->capture_default_str();
  app.add_option("--rounds", rounds, "Alternated rounds; the best counts")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (w.batch % micro_batches != 0) {
    std::fprintf(stderr, "--batch %d does not divide into --micro_batches %d\n", w.batch, micro_batches);
    return 1;
  }

  std::printf("%s, batch %d, %dx%d, 1 thread per device, %d steps x %d rounds\n", w.model.c_str(), w.batch,
              w.image_size, w.image_size, w.steps, rounds);
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.push_back(MakeJob(w, 1, 1));
  jobs.push_back(MakeJob(w, 2, 1));
  jobs.push_back(MakeJob(w, 2, micro_batches));
  std::vector<double> best(jobs.size(), 1e30);
  for (int round = 0; round < rounds; ++round) {
    std::printf("  round %d:", round + 1);
    for (size_t j = 0; j < jobs.size(); ++j) {
      double seconds = SecondsPerStep(*jobs[j], w);
      best[j] = std::min(best[j], seconds);
      std::printf("  %s %.3f s", jobs[j]->name.c_str(), seconds);
    }
    std::printf("\n");
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::printf("  %-28s %7.3f s/step  %6.1f img/s", jobs[j]->name.c_str(), best[j], w.batch / best[j]);
    if (jobs[j]->stages > 1) {
      const int s = jobs[j]->stages, m = jobs[j]->micro_batches;
      std::printf("  bubble %.1f%% (GPipe's (S-1)/(M+S-1): %.1f%%)", 100 * BubbleFraction(*jobs[j], w),
                  100.0 * (s - 1) / (m + s - 1));
    }
    std::printf("\n");
  }
  std::printf("  pipelined / unpipelined 2-stage step time: %.3f (speed-up %.2fx)\n", best[2] / best[1],
              best[1] / best[2]);
  return 0;
}
