#include "lockstep/data/db_source.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>

#include "lockstep/core/enforce.h"
#include "lockstep/data/image.h"

namespace lockstep {
namespace {

// A generator seeded by (seed, position) alone, so a record's crop and mirror do not depend on which thread
// decodes it or on where a resumed run started.
std::mt19937 GeneratorFor(uint64_t seed, int64_t position) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(position) + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return std::mt19937(static_cast<uint32_t>(z ^ (z >> 31)));
}

constexpr size_t kMaxCursors = 16;

// A warning, not a refusal: enlarging may be meant; but small images at the default --scale 256 are a mistake
// that trains badly without failing.
void WarnIfAny(const std::string& warning) {
  if (!warning.empty()) std::fprintf(stderr, "lockstep: warning: %s\n", warning.c_str());
}

}  // namespace

DbSource::DbSource(const std::string& path, DbSourceOptions options)
    : db_(OpenDB(options.db_type, path, DbMode::kRead)),
      options_(std::move(options)),
      name_(fmt::format("{} {}", db_->type(), path)),
      path_(path) {
  size_ = db_->Count();
  if (size_ == 0) throw InvalidInput(fmt::format("{} holds no records", name_));
  if (options_.decode_threads < 1)
    throw InvalidInput(fmt::format("--decode_threads must be at least 1, got {}", options_.decode_threads));
  if (options_.num_labels < 1) throw InvalidInput("--num_labels must be positive");
  if (options_.format == RecordFormat::kAuto) {
    Cursor* first = CursorAt(0);
    options_.format = DetectRecordFormat(first->value());
  }
  for (int t = 0; t < options_.decode_threads; ++t) {
    transforms_.push_back(std::make_unique<ImageTransform>(options_.channels, options_.transform));
    records_.emplace_back();
  }
  if (options_.warn_when_scale_enlarges) {
    if (std::optional<ImageGeometry> recorded = ReadImageGeometry(path)) {
      WarnIfAny(ScaleWarning(*recorded, "every image of " + path, options_.transform.scale,
                             options_.transform.crop));
    } else {
      check_first_batch_ = true;
      first_batch_sizes_.resize(options_.decode_threads);
    }
  }
}

DbSource::~DbSource() = default;

Cursor* DbSource::CursorAt(int64_t index) {
  // The cursor closest behind `index`: replicas read slices that follow each other, so it is usually a few
  // records back. Walking forward is cheap (keys are not decoded); the start of the database is the fallback.
  std::pair<std::unique_ptr<Cursor>, int64_t>* best = nullptr;
  for (auto& entry : cursors_)
    if (entry.second <= index && (!best || entry.second > best->second)) best = &entry;
  if (!best) {
    if (cursors_.size() < kMaxCursors) {
      cursors_.emplace_back(db_->NewCursor(), 0);
      best = &cursors_.back();
    } else {
      best = &cursors_.front();
      for (auto& entry : cursors_)
        if (entry.second > best->second)
          best = &entry;  // the one furthest ahead is least likely to be needed
    }
    best->first->SeekToFirst();
    best->second = 0;
  }
  for (; best->second < index; ++best->second) best->first->Next();
  LOCKSTEP_ENFORCE(best->first->valid(),
                   "{}: record {} of {} is missing; was the database changed while open?", name_, index,
                   size_);
  return best->first.get();
}

std::string DbSource::KeyAt(int64_t position) { return std::string(CursorAt(position % size_)->key()); }

int32_t DbSource::Decode(const std::string& key, const std::string& value, int64_t position, int worker,
                         float* out) {
  ImageRecord& record = records_[worker];
  ParseImageRecord(value, options_.format, name_, key, &record);
  if (record.label < 0 || record.label >= options_.num_labels)
    throw InvalidInput(fmt::format("record '{}' of {} has label {}, outside [0, --num_labels {})", key, name_,
                                   record.label, options_.num_labels));
  std::mt19937 rng = GeneratorFor(options_.seed, position);
  ImageTransform& transform = *transforms_[worker];
  // Raw and encoded records of one database hold the same images in different colour orders (raw ones as
  // the Caffe tools store them, encoded ones as they decode); the transform brings both to the output order.
  try {
    if (record.encoded) {
      Image image = DecodeImage(reinterpret_cast<const uint8_t*>(record.bytes.data()), record.bytes.size(),
                                options_.channels);
      if (check_first_batch_) first_batch_sizes_[worker].Add(image.height, image.width, image.channels);
      transform.Apply(image, kDecodedColorOrder, &rng, out);
    } else {
      if (record.channels != options_.channels)
        throw InvalidInput(fmt::format(
            "its image has {} channel{} where --num_channels is {}; pass --num_channels {}", record.channels,
            record.channels == 1 ? "" : "s", options_.channels, record.channels));
      if (check_first_batch_) first_batch_sizes_[worker].Add(record.height, record.width, record.channels);
      const auto* pixels = reinterpret_cast<const uint8_t*>(record.bytes.data());
      if (record.layout == PixelLayout::kCHW)
        transform.ApplyChw(pixels, record.height, record.width, kRawColorOrder, &rng, out);
      else
        transform.ApplyHwc(pixels, record.height, record.width, kRawColorOrder, &rng, out);
    }
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("record '{}' of {}: {}", key, name_, e.what()));
  }
  return record.label;
}

void DbSource::CountBad(int64_t position) {
  if (bad_records_.insert(position % size_).second) skipped_ = static_cast<int64_t>(bad_records_.size());
}

void DbSource::Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) {
  const int crop = options_.transform.crop;
  data->Resize({count, options_.channels, crop, crop});
  label->Resize({count}, DataType::kInt32);
  const int64_t image_size = int64_t{options_.channels} * crop * crop;
  float* images = data->data<float>();
  int32_t* labels = label->data<int32_t>();

  // Read the records in order with one cursor (a step forward each); wrap around at the end of a pass.
  keys_.resize(count);
  values_.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    Cursor* cursor = CursorAt((first + i) % size_);
    keys_[i].assign(cursor->key());
    values_[i].assign(cursor->value());
  }

  std::vector<std::exception_ptr> errors(count);
#pragma omp parallel for num_threads(options_.decode_threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < count; ++i) {
    try {
      labels[i] = Decode(keys_[i], values_[i], first + i, omp_get_thread_num(), images + i * image_size);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }

  // A bad record fails the step, or, with skip_bad_records, gives its place to the next good record after
  // this batch (drawn with its own position, so the substitute is reproducible too), or is left out.
  int64_t spare = first + count;
  for (int64_t i = 0; i < count; ++i) {
    if (errors[i] && options_.skip_bad_records) CountBad(first + i);
    if (errors[i] && options_.skip_bad_records && options_.leave_out_skipped) {
      errors[i] = nullptr;
      labels[i] = kLeftOutLabel;
      std::fill_n(images + i * image_size, image_size, 0.0f);
    }
    for (int64_t tried = 1; errors[i]; ++tried) {
      if (!options_.skip_bad_records) std::rethrow_exception(errors[i]);
      if (tried > size_) {  // every record of the database, one after the other
        std::string last;   // why the last one failed, which is likely why every one did
        try {
          std::rethrow_exception(errors[i]);
        } catch (const std::exception& e) {
          last = e.what();
        }
        throw InvalidInput(fmt::format(
            "{}: no record can be used (the last: {}); check --db_type, --num_channels and the records",
            name_, last));
      }
      Cursor* cursor = CursorAt(spare % size_);
      std::string key(cursor->key()), value(cursor->value());
      errors[i] = nullptr;
      try {
        labels[i] = Decode(key, value, spare, 0, images + i * image_size);
      } catch (...) {
        errors[i] = std::current_exception();
        CountBad(spare);
      }
      ++spare;
    }
  }

  if (check_first_batch_) {
    check_first_batch_ = false;
    ImageGeometry seen;
    for (const ImageGeometry& sizes : first_batch_sizes_) seen.Merge(sizes);
    WarnIfAny(
        ScaleWarning(seen, "the images of the first batch of " + path_, options_.transform.scale, crop));
  }
}

}  // namespace lockstep
