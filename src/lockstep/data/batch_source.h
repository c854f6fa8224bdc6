// Where training batches come from. Records form one deterministic stream: pass k over the data is a
// permutation that depends only on (seed, k), and stream position p is record perm_{p / N}[p % N]. Global
// step t reads stream positions [t*B, (t+1)*B); a replica reads its contiguous slice of that range.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/core/tensor.h"
#include "lockstep/data/idx_dataset.h"

namespace lockstep {

// The label of a record that an evaluation source leaves out (a bad record, with skip_bad_records): its
// place in the batch holds zeros, and evaluation counts it nowhere.
inline constexpr int32_t kLeftOutLabel = -1;

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills data (count, C, H, W) float and label (count) int32 with stream positions [first, first + count).
  virtual void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) = 0;
  virtual int64_t size() const = 0;  // records in one pass
  // What names the record at a stream position in the outside world (a database key, an index in the file).
  virtual std::string KeyAt(int64_t position) { return std::to_string(position % size()); }
};

// An in-memory dataset, pixels scaled to [0, 1]. shuffle=false reads records in file order (evaluation).
class DatasetSource : public BatchSource {
 public:
  DatasetSource(std::shared_ptr<const ImageDataset> dataset, bool shuffle, uint64_t seed);
  void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) override;
  int64_t size() const override { return dataset_->size(); }
  std::string KeyAt(int64_t position) override { return std::to_string(RecordAt(position)); }  // file index
  const ImageDataset& dataset() const { return *dataset_; }

 private:
  int64_t RecordAt(int64_t position);

  std::shared_ptr<const ImageDataset> dataset_;
  bool shuffle_;
  uint64_t seed_;
  int64_t pass_ = -1;
  std::vector<int64_t> order_;
};

// Random images and labels for --train_data null (throughput runs): a fixed pool of generated records, made
// at the first Fill (after the memory plan has refused a batch that cannot fit); 64 of them, fewer where
// they would pass 256 MiB.
class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(int channels, int image_size, int num_labels, uint64_t seed);
  void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) override;
  int64_t size() const override { return pool_size_; }

 private:
  void MakePool();

  int channels_, image_size_, num_labels_;
  uint64_t seed_;
  int64_t image_floats_, pool_size_;
  std::once_flag made_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
};

}  // namespace lockstep
