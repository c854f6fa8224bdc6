// Slicing of the shared training stream among replicas.
#include "lockstep/data/batch_reader.h"

namespace lockstep {

BatchReader::BatchReader(std::shared_ptr<BatchSource> source, int64_t batch_per_replica, int replicas)
    : source_(std::move(source)), batch_per_replica_(batch_per_replica), steps_(replicas, 0) {
  LOCKSTEP_ENFORCE(source_ != nullptr, "BatchReader needs a source");
  if (batch_per_replica <= 0 || replicas <= 0)
    throw InvalidInput(
        fmt::format("a reader needs a positive batch per replica and replica count, got {} and {}",
                    batch_per_replica, replicas));
}

void BatchReader::Read(int replica, Tensor* data, Tensor* label) {
  LOCKSTEP_ENFORCE(replica >= 0 && replica < replicas(), "replica {} of a reader for {}", replica,
                   replicas());
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t global_batch = batch_per_replica_ * replicas();
  int64_t first = start_ + steps_[replica]++ * global_batch + replica * batch_per_replica_;
  source_->Fill(first, batch_per_replica_, data, label);
}

void BatchReader::Seek(int64_t position) {
  std::lock_guard<std::mutex> lock(mutex_);
  start_ = position;
  std::fill(steps_.begin(), steps_.end(), 0);
}

}  // namespace lockstep
