// BatchReader: one training stream shared by the replicas of a data-parallel job. Global step t covers stream
// positions [p0 + t*B, p0 + (t+1)*B) with B = batch_per_replica * replicas; replica r reads its contiguous
// slice [r*b, (r+1)*b) of that range. So every record of a global batch is read exactly once, and a job with
// k replicas sees the same global batches as a job with one.
//
// With prefetch > 0, each replica that reads gets a producer thread that fills its next `prefetch` slices
// ahead of the step (decoding happens inside the source), so the replicas rarely wait for input.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/data/batch_source.h"

namespace lockstep {

class BatchReader {
 public:
  // The prefetch of the trainer's database readers and of CreateDB's, unless told otherwise.
  static constexpr int kDefaultPrefetch = 2;

  BatchReader(std::shared_ptr<BatchSource> source, int64_t batch_per_replica, int replicas, int prefetch = 0);
  ~BatchReader();
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // Fills replica's slice of its next global batch; replicas call it concurrently, each at its own pace. An
  // error of the source is rethrown here, for the step that would have read the slice.
  void Read(int replica, Tensor* data, Tensor* label);
  // Every replica continues from stream position `position` (where a checkpoint left off).
  void Seek(int64_t position);
  int64_t batch_per_replica() const { return batch_per_replica_; }
  int replicas() const { return replicas_; }
  int64_t records() const { return source_->size(); }  // in one pass over the data

 private:
  struct Slice {
    Tensor data, label;
    std::exception_ptr error;
  };
  struct Producer {
    std::thread thread;
    std::deque<Slice> ready;
    std::vector<Slice> spare;  // slices already read, whose buffers the next fills reuse
    int64_t next_step = 0;
  };

  int64_t First(int replica, int64_t step) const;
  void FillSlice(int64_t first, Slice* slice);
  void Produce(int replica);

  std::shared_ptr<BatchSource> source_;
  int64_t batch_per_replica_;
  int replicas_;
  int prefetch_;
  std::mutex fill_mutex_;  // sources keep per-pass state
  std::mutex mutex_;       // guards everything below
  std::condition_variable changed_;
  int64_t start_ = 0;
  int64_t generation_ = 0;  // bumped by Seek: slices filled before it are dropped
  bool stopping_ = false;
  std::vector<int64_t> steps_;  // global batches each replica has read since start_
  std::map<int, Producer> producers_;
};

// What to say where a reader is named that the workspace does not hold (ReadBatch, a checkpoint's load).
std::string NoReaderMessage(const std::string& name);

}  // namespace lockstep
