// Caching allocator: best-fit free lists by size.
#include "lockstep/core/caching_allocator.h"

#include <algorithm>

#include "lockstep/core/enforce.h"

namespace lockstep {

std::shared_ptr<CachingAllocator> CachingAllocator::Create(std::string name, RawAllocate raw_allocate,
                                                           RawFree raw_free) {
  return std::shared_ptr<CachingAllocator>(
      new CachingAllocator(std::move(name), std::move(raw_allocate), std::move(raw_free)));
}

CachingAllocator::CachingAllocator(std::string name, RawAllocate raw_allocate, RawFree raw_free)
    : name_(std::move(name)), raw_allocate_(std::move(raw_allocate)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() { EmptyCacheLocked(); }

size_t CachingAllocator::RoundUp(size_t bytes) { return (std::max<size_t>(bytes, 1) + 511) / 512 * 512; }

std::shared_ptr<uint8_t> CachingAllocator::Allocate(size_t bytes) {
  const size_t size = RoundUp(bytes);
  void* block = nullptr;
  size_t block_size = size;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= size + size / 4) {
      block_size = it->first;
      block = it->second;
      free_.erase(it);
      cached_ -= block_size;
    } else {
      block = raw_allocate_(size);
      if (!block) {
        EmptyCacheLocked();
        block = raw_allocate_(size);
      }
      if (!block)
        throw Error(fmt::format(
            "out of memory on {}: {} bytes requested with {} bytes in use; use a smaller batch (or fewer "
            "logical devices per GPU)",
            name_, size, allocated_));
      ++raw_allocations_;
    }
    allocated_ += block_size;
  }
  // The deleter holds the allocator, so blocks outliving their workspace still come home.
  auto self = shared_from_this();
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(block),
                                  [self, block_size](uint8_t* p) { self->Release(p, block_size); });
}

void CachingAllocator::Release(void* pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocated_ -= bytes;
  cached_ += bytes;
  free_.emplace(bytes, pointer);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  EmptyCacheLocked();
}

void CachingAllocator::EmptyCacheLocked() {
  for (const auto& [size, block] : free_) raw_free_(block);
  free_.clear();
  cached_ = 0;
}

size_t CachingAllocator::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

size_t CachingAllocator::raw_allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raw_allocations_;
}

}  // namespace lockstep
