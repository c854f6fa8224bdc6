// Deterministic record stream over in-memory and synthetic data.
#include "lockstep/data/batch_source.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

namespace lockstep {

DatasetSource::DatasetSource(std::shared_ptr<const ImageDataset> dataset, bool shuffle, uint64_t seed)
    : dataset_(std::move(dataset)), shuffle_(shuffle), seed_(seed) {
  LOCKSTEP_ENFORCE(dataset_->size() > 0, "empty dataset");
}

int64_t DatasetSource::RecordAt(int64_t position) {
  const int64_t n = dataset_->size();
  if (!shuffle_) return position % n;
  int64_t pass = position / n;
  if (pass != pass_) {
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(pass));
    // Fisher-Yates with our own index draw: std::shuffle's use of the engine is not fixed by the standard.
    for (int64_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[rng() % static_cast<uint64_t>(i + 1)]);
    pass_ = pass;
  }
  return order_[position % n];
}

void DatasetSource::Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) {
  const ImageDataset& d = *dataset_;
  data->Resize({count, d.channels, d.height, d.width});
  label->Resize({count}, DataType::kInt32);
  float* out = data->data<float>();
  int32_t* labels = label->data<int32_t>();
  const int64_t image_bytes = d.image_bytes();
  for (int64_t i = 0; i < count; ++i) {
    int64_t record = RecordAt(first + i);
    const uint8_t* pixels = d.pixels.data() + record * image_bytes;
    for (int64_t j = 0; j < image_bytes; ++j) out[i * image_bytes + j] = pixels[j] * (1.0f / 255.0f);
    labels[i] = d.labels[record];
  }
}

SyntheticSource::SyntheticSource(int channels, int image_size, int num_labels, uint64_t seed)
    : channels_(channels),
      image_size_(image_size),
      num_labels_(num_labels),
      seed_(seed),
      image_floats_(int64_t{channels} * image_size * image_size),
      pool_size_(std::clamp<int64_t>(
          (int64_t{256} << 20) / std::max<int64_t>(1, image_floats_ * sizeof(float)), 1, 64)) {}

void SyntheticSource::MakePool() {
  std::mt19937_64 rng(seed_);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  images_.resize(pool_size_ * image_floats_);
  for (float& value : images_) value = pixel(rng);
  for (int64_t i = 0; i < pool_size_; ++i) labels_.push_back(static_cast<int32_t>(rng() % num_labels_));
}

void SyntheticSource::Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) {
  std::call_once(made_, [this] { MakePool(); });
  data->Resize({count, channels_, image_size_, image_size_});
  label->Resize({count}, DataType::kInt32);
  for (int64_t i = 0; i < count; ++i) {
    int64_t record = (first + i) % pool_size_;
    std::memcpy(data->data<float>() + i * image_floats_, images_.data() + record * image_floats_,
                image_floats_ * sizeof(float));
    label->data<int32_t>()[i] = labels_[record];
  }
}

}  // namespace lockstep
