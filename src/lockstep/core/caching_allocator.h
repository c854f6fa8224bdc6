// A caching allocator for device memory, as Caffe2's and PyTorch's: a freed block goes to a free list and
// serves the next request of about its size, so the steady-state training step never calls the driver
// (cudaMalloc and cudaFree synchronize the device). One allocator serves one stream: a block is reused only
// by work queued after the work that last used it. Generic over the raw allocation, so it is tested on the
// host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace lockstep {

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  // raw_allocate returns nullptr when the device is out of memory; `name` ("gpu:0") is for errors.
  using RawAllocate = std::function<void*(size_t bytes)>;
  using RawFree = std::function<void(void* pointer)>;
  static std::shared_ptr<CachingAllocator> Create(std::string name, RawAllocate raw_allocate,
                                                  RawFree raw_free);
  ~CachingAllocator();

  // A block of at least `bytes`: a cached one at most 25% larger, else a new one (after emptying the cache
  // if the device is full). Throws Error when the device has no room even then.
  std::shared_ptr<uint8_t> Allocate(size_t bytes);
  // Frees every cached block.
  void EmptyCache();

  size_t allocated_bytes() const;  // in blocks handed out
  size_t cached_bytes() const;     // in free blocks kept
  size_t raw_allocations() const;  // calls to raw_allocate so far

  static size_t RoundUp(size_t bytes);  // block sizes are multiples of 512 bytes

 private:
  CachingAllocator(std::string name, RawAllocate raw_allocate, RawFree raw_free);
  void Release(void* pointer, size_t bytes);
  void EmptyCacheLocked();

  std::string name_;
  RawAllocate raw_allocate_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // size -> block
  size_t allocated_ = 0, cached_ = 0, raw_allocations_ = 0;
};

}  // namespace lockstep
