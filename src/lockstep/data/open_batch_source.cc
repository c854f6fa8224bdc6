// The sources behind the names that the trainer's --train_data / --test_data and CreateDB's `db` accept.
#include "lockstep/data/open_batch_source.h"

#include <algorithm>

#include "lockstep/data/db_source.h"
#include "lockstep/data/image.h"

namespace lockstep {

std::unique_ptr<BatchSource> OpenBatchSource(const SourceSpec& spec) {
  if (spec.name == "null")
    return std::make_unique<SyntheticSource>(spec.channels, spec.image_size, spec.num_labels, spec.seed);
  if (spec.name == "fashion-mnist") {
    auto dataset = std::make_shared<ImageDataset>(LoadFashionMnist(spec.train));
    return std::make_unique<DatasetSource>(dataset, spec.train, spec.seed);
  }
  DbSourceOptions options;
  options.db_type = spec.db_type;
  options.format = ParseRecordFormat(spec.record_format);
  options.channels = spec.channels;
  options.num_labels = spec.num_labels;
  options.transform.scale = ResizedSide(spec.scale, spec.image_size);
  options.transform.crop = spec.image_size;
  options.transform.random_crop = spec.train;
  options.transform.mirror = spec.train;
  options.transform.mean = {128.0f};
  options.transform.std = {128.0f};
  options.transform.color_order = ParseColorOrder(spec.color_order);
  options.decode_threads = spec.decode_threads;
  options.skip_bad_records = spec.skip_bad_records;
  options.leave_out_skipped = !spec.train;
  options.seed = spec.seed;
  options.warn_when_scale_enlarges = true;
  return std::make_unique<DbSource>(spec.name, options);
}

bool IsDatabase(const std::string& name) { return name != "null" && name != "fashion-mnist"; }

std::string InputScaling(const std::string& name) {
  if (name.empty() || name == "null") return "";
  return name == "fashion-mnist" ? "pixel / 255" : "(pixel - 128) / 128";
}

}  // namespace lockstep
