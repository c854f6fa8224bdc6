// Opening a training or evaluation stream by name: "null" (synthetic), "fashion-mnist" or a database path.
// The trainer and the CreateDB operator both open their data here, so a name means the same stream to both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/core/seed.h"
#include "lockstep/data/batch_source.h"

namespace lockstep {

// What opening a source needs. The defaults are those of `lockstep train`'s flags (TrainerConfig takes them
// from here).
struct SourceSpec {
  std::string name;  // "null", "fashion-mnist" or a database path
  // Databases only: the backend ("lmdb", "leveldb"), the record format ("auto", "datum", "tensorprotos") and
  // the order of colour channels the network sees ("bgr", "rgb").
  std::string db_type = "lmdb", record_format = "auto", color_order = "bgr";
  // The input geometry: synthetic data is made in it and database images are brought to it (resized so their
  // shortest side is max(scale, image_size), cropped to image_size, normalized with (x - 128) / 128).
  // fashion-mnist has its own (kFashionMnist* below). 64 bits, so that CheckSourceOptions refuses a value
  // past int as given rather than a truncated one.
  int64_t channels = 3, image_size = 227, num_labels = 1000, scale = 256;
  // Training: a shuffled stream (fashion-mnist's training set) and, for databases, random crops and mirrors.
  // Evaluation: records in file order (fashion-mnist's test set) and centre crops.
  bool train = true;
  int64_t decode_threads = 2;     // databases: threads that decode and augment images
  bool skip_bad_records = false;  // databases: skip records that do not parse or decode, and count them
  uint64_t seed = kDefaultSeed;   // data order and augmentation
};

// fashion-mnist's input geometry: 1 x 28 x 28 images of 10 classes, whatever a spec says.
inline constexpr int kFashionMnistChannels = 1, kFashionMnistImageSize = 28, kFashionMnistLabels = 10;

// Throws InvalidInput / IoError naming the database when it cannot be opened or its options are wrong
// (CheckSourceOptions, in source_options.h, checks them first with the name of each option).
std::unique_ptr<BatchSource> OpenBatchSource(const SourceSpec& spec);

// True when `name` is a database path rather than "null" or "fashion-mnist".
bool IsDatabase(const std::string& name);

// How `name`'s images become a model's input: "pixel / 255" for fashion-mnist, "(pixel - 128) / 128" for a
// database; "" for synthetic data (and no data), which stands in for either. A model trained on one reads the
// other wrongly.
std::string InputScaling(const std::string& name);

// The shortest side a database's images are resized to before the crop: --scale, at least --image_size.
inline int64_t ResizedSide(int64_t scale, int64_t image_size) { return std::max(scale, image_size); }

}  // namespace lockstep
