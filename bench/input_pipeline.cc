// Input pipeline throughput beside the training throughput it must feed: JPEGs (500x375 by default) in an
// LMDB of Caffe2 TensorProtos records are read, decoded, resized to shortest side 256, randomly cropped to
// 224x224, mirrored and normalized by DbSource with 1..T decoding threads; then ResNet-50 trains at batch 16
// on one device with T threads (synthetic input). Prints images/s of each, per decoding thread, and the
// ratio of input to training throughput. Best of --rounds for each figure.
//
//   build/input_pipeline [--images 256] [--rounds 3] [--train_steps 3] [--threads 0 (all cores)]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/db.h"
#include "lockstep/data/db_source.h"
#include "lockstep/data/image.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"

using namespace lockstep;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Smooth colour gradients with noise: compresses like a photograph, not like a flat test card.
Image PhotoLike(int height, int width, std::mt19937* rng) {
  Image image;
  image.height = height;
  image.width = width;
  image.channels = 3;
  image.pixels.resize(size_t(height) * width * 3);
  std::uniform_real_distribution<float> phase(0, 6.28f);
  std::uniform_int_distribution<int> noise(-12, 12);
  float p[3] = {phase(*rng), phase(*rng), phase(*rng)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        float v = 128 + 90 * std::sin(p[c] + x * 0.021f * (c + 1) + y * 0.017f * (3 - c)) + noise(*rng);
        image.pixels[(size_t(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
  return image;
}

void WriteJpegDb(const std::string& path, int images, int height, int width) {
  auto db = OpenDB("lmdb", path, DbMode::kNew);
  auto transaction = db->NewTransaction();
  std::mt19937 rng(1);
  for (int i = 0; i < images; ++i) {
    ImageRecord record;
    record.label = i % 1000;
    record.encoded = true;
    record.bytes = EncodeJpeg(PhotoLike(height, width, &rng), 90);
    transaction->Put(fmt::format("{:08d}", i), MakeTensorProtos(record));
  }
  transaction->Commit();
}

double InputImagesPerSecond(const std::string& path, int images, int threads, int rounds) {
  DbSourceOptions options;
  options.transform.scale = 256;
  options.transform.crop = 224;
  options.transform.random_crop = true;
  options.transform.mirror = true;
  options.transform.mean = {128.0f};
  options.transform.std = {128.0f};
  options.decode_threads = threads;
  auto source = std::make_shared<DbSource>(path, options);
  const int batch = 32;
  Tensor data, label;
  source->Fill(0, batch, &data, &label);  // warm-up: buffers
  double best = 0;
  for (int round = 0; round < rounds; ++round) {
    auto start = Clock::now();
    for (int first = 0; first + batch <= images; first += batch) source->Fill(first, batch, &data, &label);
    best = std::max(best, (images / batch) * batch / Seconds(start));
  }
  return best;
}

double TrainingImagesPerSecond(int threads, int steps, int rounds) {
  const int batch = 16;
  ModelHelper model("train");
  ParallelOptions o;
  o.devices = {0};
  o.threads_per_device = threads;
  o.max_threads = threads;
  o.input_builder = [](ModelHelper& m) { layers::ReadBatch(m, "reader", "data", "label"); };
  o.forward_builder = [](ModelHelper& m, float loss_scale) {
    std::string logits = BuildModel("resnet50", m, m.Scoped("data"), ModelConfig{3, 224, 1000, false});
    auto [softmax, loss] = layers::SoftmaxWithLoss(m, logits, m.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(m, loss, "scaled_loss", loss_scale)};
  };
  o.param_update_builder = [](ModelHelper& m) { AddMomentumSgd(m, SgdOptions{}); };
  Parallelize(model, o);
  Workspace ws;
  ws.SetObject("reader", std::make_shared<BatchReader>(std::make_shared<SyntheticSource>(3, 224, 1000, 1), batch, 1));
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  net->Run();  // warm-up
  double best = 0;
  for (int round = 0; round < rounds; ++round) {
    auto start = Clock::now();
    for (int i = 0; i < steps; ++i) net->Run();
    best = std::max(best, steps * batch / Seconds(start));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Input pipeline images/s (decode + augment, 224x224 crops from JPEGs) beside ResNet-50 training"};
  int images = 256, rounds = 3, train_steps = 3, threads = 0, height = 375, width = 500;
  app.add_option("--images", images, "JPEGs in the database")->capture_default_str();
  app.add_option("--height", height, "JPEG height")->capture_default_str();
  app.add_option("--width", width, "JPEG width")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds per figure; the best counts")->capture_default_str();
  app.add_option("--train_steps", train_steps, "ResNet-50 steps per round")->capture_default_str();
  app.add_option("--threads", threads, "Threads for each side (0: all cores)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (images < 32 || rounds < 1 || train_steps < 1) {
    std::fprintf(stderr, "input_pipeline: --images must be >= 32 and --rounds, --train_steps >= 1\n");
    return 2;
  }

  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("lockstep_input_pipeline_{}", getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "jpegs_lmdb").string();
  int status = 0;
  try {
    auto start = Clock::now();
    WriteJpegDb(path, images, height, width);
    fmt::print("{} JPEGs of {}x{} (quality 90) written in {:.1f} s; crops 224x224 after shortest side 256\n",
               images, width, height, Seconds(start));
    double input = 0;
    for (int t = 1; t <= threads; ++t) {
      input = InputImagesPerSecond(path, images, t, rounds);
      fmt::print("input pipeline, {} decoding thread(s): {:8.1f} images/s ({:.1f} per thread)\n", t, input,
                 input / t);
    }
    double training = TrainingImagesPerSecond(threads, train_steps, rounds);
    fmt::print("ResNet-50 training, batch 16, {} thread(s): {:8.2f} images/s\n", threads, training);
    fmt::print("input / training with {} thread(s) each: {:.1f}x\n", threads, input / training);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "input_pipeline: %s\n", e.what());
    status = 1;
  }
  fs::remove_all(dir);
  return status;
}
