// BatchReader: one training stream shared by the replicas of a data-parallel job. Global step t covers stream
// positions [p0 + t*B, p0 + (t+1)*B) with B = batch_per_replica * replicas; replica r reads its contiguous
// slice [r*b, (r+1)*b) of that range. So every record of a global batch is read exactly once, and a job with
// k replicas sees the same global batches as a job with one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "lockstep/data/batch_source.h"

namespace lockstep {

class BatchReader {
 public:
  BatchReader(std::shared_ptr<BatchSource> source, int64_t batch_per_replica, int replicas);

  // Fills replica's slice of its next global batch; replicas call it concurrently, each at its own pace.
  void Read(int replica, Tensor* data, Tensor* label);
  // Every replica continues from stream position `position` (where a checkpoint left off).
  void Seek(int64_t position);
  int64_t batch_per_replica() const { return batch_per_replica_; }
  int replicas() const { return static_cast<int>(steps_.size()); }

 private:
  std::shared_ptr<BatchSource> source_;
  int64_t batch_per_replica_;
  std::mutex mutex_;  // sources keep per-pass state
  int64_t start_ = 0;
  std::vector<int64_t> steps_;  // global batches each replica has read since start_
};

}  // namespace lockstep
