// Slicing of the shared training stream among replicas, optionally filled ahead by one thread per replica.
#include "lockstep/data/batch_reader.h"

#include <fmt/format.h>

namespace lockstep {

BatchReader::BatchReader(std::shared_ptr<BatchSource> source, int64_t batch_per_replica, int replicas,
                         int prefetch)
    : source_(std::move(source)),
      batch_per_replica_(batch_per_replica),
      replicas_(replicas),
      prefetch_(prefetch),
      steps_(std::max(replicas, 0), 0) {
  LOCKSTEP_ENFORCE(source_ != nullptr, "BatchReader needs a source");
  if (batch_per_replica <= 0 || replicas <= 0 || prefetch < 0)
    throw InvalidInput(fmt::format(
        "a reader needs a positive batch per replica and replica count and a prefetch depth >= 0, got {}, {} "
        "and {}",
        batch_per_replica, replicas, prefetch));
}

BatchReader::~BatchReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& [replica, producer] : producers_) producer.thread.join();
}

int64_t BatchReader::First(int replica, int64_t step) const {
  return start_ + step * batch_per_replica_ * replicas_ + replica * batch_per_replica_;
}

void BatchReader::FillSlice(int64_t first, Slice* slice) {
  try {
    std::lock_guard<std::mutex> lock(fill_mutex_);
    source_->Fill(first, batch_per_replica_, &slice->data, &slice->label);
  } catch (...) {
    slice->error = std::current_exception();
  }
}

void BatchReader::Read(int replica, Tensor* data, Tensor* label) {
  LOCKSTEP_ENFORCE(replica >= 0 && replica < replicas_, "replica {} of a reader for {}", replica, replicas_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (prefetch_ == 0) {
    int64_t first = First(replica, steps_[replica]++);
    lock.unlock();
    std::lock_guard<std::mutex> fill(fill_mutex_);
    source_->Fill(first, batch_per_replica_, data, label);
    return;
  }
  Producer& producer = producers_[replica];
  if (!producer.thread.joinable()) producer.thread = std::thread(&BatchReader::Produce, this, replica);
  changed_.wait(lock, [&] { return !producer.ready.empty(); });
  Slice slice = std::move(producer.ready.front());
  producer.ready.pop_front();
  ++steps_[replica];
  lock.unlock();
  changed_.notify_all();  // room for the producer
  std::exception_ptr error = slice.error;
  if (!error) {
    data->CopyFrom(slice.data);
    label->CopyFrom(slice.label);
  }
  lock.lock();
  producer.spare.push_back(std::move(slice));
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

void BatchReader::Produce(int replica) {
  std::unique_lock<std::mutex> lock(mutex_);
  Producer& producer = producers_[replica];
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || static_cast<int>(producer.ready.size()) < prefetch_; });
    if (stopping_) return;
    const int64_t generation = generation_;
    const int64_t first = First(replica, producer.next_step++);
    Slice slice;
    if (!producer.spare.empty()) {
      slice = std::move(producer.spare.back());
      producer.spare.pop_back();
      slice.error = nullptr;
    }
    lock.unlock();
    FillSlice(first, &slice);
    lock.lock();
    if (generation != generation_) continue;  // a Seek came in between
    producer.ready.push_back(std::move(slice));
    changed_.notify_all();
  }
}

void BatchReader::Seek(int64_t position) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    start_ = position;
    ++generation_;
    std::fill(steps_.begin(), steps_.end(), 0);
    for (auto& [replica, producer] : producers_) {
      producer.ready.clear();
      producer.next_step = 0;
    }
  }
  changed_.notify_all();
}

std::string NoReaderMessage(const std::string& name) {
  return fmt::format(
      "no reader '{}' in the workspace; make it with CreateDB([], \"{}\", db=...) in the init net, "
      "and run that net first",
      name, name);
}

}  // namespace lockstep
