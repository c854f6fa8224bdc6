// Flags of `lockstep make-db`, named after convert_imageset's where it has them.
#include "make_db_command.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "lockstep/data/db.h"
#include "lockstep/train/progress.h"
#include "train_command.h"

namespace lockstep {

void AddMakeDbFlags(CLI::App* app, MakeDbFlags* flags) {
  MakeDbOptions& o = flags->options;
  app->add_option("--image_folder", o.image_folder,
                  "Input: folder of JPEG/PNG images; the paths in --list are relative to it");
  app->add_option("--list", o.list, "With --image_folder: a text file of 'relative/path label' lines");
  app->add_option("--idx_images", o.idx_images,
                  "Input: idx3 image file (MNIST, Fashion-MNIST), gzip-compressed or not");
  app->add_option("--idx_labels", o.idx_labels, "With --idx_images: the idx1 label file");
  app->add_option("--cifar10", o.cifar10,
                  "Input: CIFAR-10 binary batch files, comma-separated (data_batch_1.bin,...)")
      ->delimiter(',');
  app->add_option("--output", o.output, "Database directory to create")->required();
  app->add_option("--db", o.db_type, "Database type: lmdb or leveldb")
      ->check(CLI::IsMember(DbTypes()))
      ->capture_default_str();
  app->add_option("--format", flags->format,
                  "Record format: datum (Caffe's, as convert_imageset writes) or tensorprotos (Caffe2's, as "
                  "make_image_db writes)")
      ->check(CLI::IsMember({"datum", "tensorprotos"}))
      ->capture_default_str();
  CLI::Option* encoded = app->add_flag(
      "--encoded", o.encoded,
      "Store encoded images: folder images as their original files unless --resize, --channels 1 or "
      "--encoding asks for re-encoding; idx and CIFAR-10 images as JPEG unless --encoding png");
  CLI::Option* raw =
      app->add_flag("--raw", flags->raw,
                    "Store raw decoded pixels (the default), colour in BGR order as convert_imageset "
                    "and make_image_db store it; Datum holds them as CHW planes, TensorProtos as HWC");
  encoded->excludes(raw);
  app->add_option("--encoding", o.encoding, "With --encoded: the format of re-encoded images, jpg or png")
      ->check(CLI::IsMember({"jpg", "png"}));
  app->add_option(
         "--resize", o.resize,
         "Resize each image so its shortest side is this many pixels (bilinear, antialiased); 0 keeps "
         "the size")
      ->check(InRange(0, HUGE_VAL))
      ->capture_default_str();
  app->add_option(
         "--channels", o.channels,
         "1 (gray) or 3 (colour); default: 3 for folder images, the input's own for idx and CIFAR-10")
      ->check(CLI::IsMember({1, 3}));
  app->add_flag("--shuffle", o.shuffle,
                "Write the records in a random order drawn from --seed (keys keep it)");
  app->add_option("--seed", o.seed, "Seed of --shuffle; the same seed gives the same order")
      ->capture_default_str();
  app->add_flag("--overwrite", o.overwrite, "Replace an existing database at --output");
  app->add_option("--threads", o.threads, "Threads that read, decode and encode images (0: one per core)")
      ->check(InRange(0, HUGE_VAL))
      ->capture_default_str();
}

namespace {

// Redraws "written/total records" on stderr after each commit, and ends the line however the run ends.
class MakeDbProgress {
 public:
  explicit MakeDbProgress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  ~MakeDbProgress() {
    if (drawn_) std::fputs("\n", stderr);
  }
  void Update(int64_t written, int64_t total) {
    if (!enabled_) return;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fputs(fmt::format("\rmake-db: {}/{} records ({:.0f}%)  {:.0f} records/s\x1b[K", written, total,
                           100.0 * written / total, seconds > 0 ? written / seconds : 0.0)
                   .c_str(),
               stderr);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

int RunMakeDb(const MakeDbFlags& flags) {
  MakeDbOptions options = flags.options;
  options.format = ParseRecordFormat(flags.format);
  MakeDbResult result;
  {
    MakeDbProgress progress(StderrIsTerminal());
    options.progress = [&](int64_t written, int64_t total) { progress.Update(written, total); };
    result = MakeDb(options);
  }
  fmt::print("wrote {} record{} of {} images with {} channel{} to {} {}\n", result.records,
             result.records == 1 ? "" : "s", result.geometry.SizeText(), result.geometry.channels,
             result.geometry.channels == 1 ? "" : "s", options.db_type, options.output);
  return 0;
}

}  // namespace lockstep
