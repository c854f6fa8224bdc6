// The checks of a data source's options that the trainer and the CreateDB operator share.
#include "lockstep/data/source_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "lockstep/data/image_record.h"

namespace lockstep {

namespace {

struct NumericOption {
  const char* name;
  int64_t value, min, max;
};

// Worded as the trainer's option table words every other flag's range.
void CheckRange(const NumericOption& option, const std::string& prefix) {
  if (option.value >= option.min && option.value <= option.max) return;
  const std::string why = option.value > option.max ? fmt::format("must be at most {}", option.max)
                          : option.min == 0         ? std::string("must be >= 0")
                                                    : fmt::format("must be at least {}", option.min);
  throw InvalidInput(fmt::format("{}{} {}, got {}; accepted range [{}, {}]", prefix, option.name, why,
                                 option.value, option.min, option.max));
}

// fashion-mnist has its own geometry; a given option that contradicts it would be ignored silently.
void CheckFashionMnistGeometry(const SourceSpec& spec, const std::set<std::string>& given,
                               const std::string& prefix) {
  struct {
    const char* name;
    int64_t value, expected;
  } const geometry[] = {{"num_channels", spec.channels, kFashionMnistChannels},
                        {"image_size", spec.image_size, kFashionMnistImageSize},
                        {"num_labels", spec.num_labels, kFashionMnistLabels}};
  for (const auto& option : geometry)
    if (given.count(option.name) && option.value != option.expected)
      throw InvalidInput(fmt::format("{}{} {} does not match fashion-mnist ({}); leave it out", prefix,
                                     option.name, option.value, option.expected));
  // (Caffe2's programs pass the default to every reader.)
  if (given.count("scale") && spec.scale != SourceSpec{}.scale)
    throw InvalidInput(fmt::format(
        "{}scale {} does not apply to fashion-mnist, whose 28x28 images are used whole; leave it out", prefix,
        spec.scale));
}

}  // namespace

void CheckSourceOptions(const SourceSpec& spec, int64_t batch_size, int64_t prefetch,
                        const std::set<std::string>& given, const std::string& prefix) {
  if (spec.name == "fashion-mnist") CheckFashionMnistGeometry(spec, given, prefix);
  const NumericOption numbers[] = {
      {"scale", spec.scale, 0, kMaxImageSize},
      {"decode_threads", spec.decode_threads, 1, kMaxDecodeThreads},
      {"num_channels", spec.channels, 1, kMaxChannels},
      {"image_size", spec.image_size, 1, kMaxImageSize},
      {"num_labels", spec.num_labels, kMinLabels, kMaxLabels},
      {"batch_size", batch_size, 1, kMaxBatchSize},
      {"prefetch", prefetch, 0, kMaxPrefetch},
  };
  for (const NumericOption& option : numbers) CheckRange(option, prefix);
  const std::vector<std::string> db_types = DbTypes();
  if (std::find(db_types.begin(), db_types.end(), spec.db_type) == db_types.end())
    throw InvalidInput(fmt::format("{}db_type '{}' is not a database type; use one of: {}", prefix,
                                   spec.db_type, fmt::join(db_types, ", ")));
  try {
    ParseRecordFormat(spec.record_format);
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{}record_format: {}", prefix, e.what()));
  }
  try {
    ParseColorOrder(spec.color_order);
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{}color_order: {}", prefix, e.what()));
  }
}

}  // namespace lockstep
