// CachingAllocator on host memory: freed blocks serve later requests of about their size, a full device gets
// its cache emptied before the allocator gives up, and an exhausted one is a clear error.
#include "lockstep/core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "lockstep/core/enforce.h"

namespace lockstep::testing {
namespace {

// Raw blocks from malloc, within `limit` bytes.
struct Host {
  size_t limit = SIZE_MAX, in_use = 0, frees = 0;
  std::map<void*, size_t> sizes;
  std::shared_ptr<CachingAllocator> allocator = CachingAllocator::Create(
      "host:0",
      [this](size_t bytes) -> void* {
        if (in_use + bytes > limit) return nullptr;
        in_use += bytes;
        void* p = std::malloc(bytes);
        sizes[p] = bytes;
        return p;
      },
      [this](void* p) {
        ++frees;
        in_use -= sizes.at(p);
        std::free(p);
      });
};

TEST(CachingAllocator, ReusesFreedBlocksOfAboutTheSameSize) {
  Host host;
  void* first = nullptr;
  {
    auto block = host.allocator->Allocate(1000);
    first = block.get();
    EXPECT_EQ(host.allocator->allocated_bytes(), 1024u);
  }
  EXPECT_EQ(host.allocator->cached_bytes(), 1024u);
  EXPECT_EQ(host.allocator->Allocate(900).get(), first) << "a 1024-byte block serves 900 bytes";
  auto small = host.allocator->Allocate(100);
  EXPECT_NE(small.get(), first) << "but not 100 (it would waste most of the block)";
  EXPECT_EQ(host.allocator->raw_allocations(), 2u);
  for (int step = 0; step < 10; ++step) auto again = host.allocator->Allocate(1024);
  EXPECT_EQ(host.allocator->raw_allocations(), 2u) << "the steady state allocates nothing new";
}

TEST(CachingAllocator, EmptiesItsCacheWhenTheDeviceIsFullThenFailsClearly) {
  Host host;
  host.limit = 4096;
  { auto a = host.allocator->Allocate(2048), b = host.allocator->Allocate(2048); }
  EXPECT_EQ(host.allocator->cached_bytes(), 4096u);
  auto big = host.allocator->Allocate(4096);  // fits only once the two cached blocks are freed
  EXPECT_EQ(host.frees, 2u);
  try {
    host.allocator->Allocate(512);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("out of memory on host:0: 512 bytes requested with 4096 bytes in use"),
        std::string::npos)
        << e.what();
  }
}

TEST(CachingAllocator, BlocksOutlivingTheAllocatorHandleStillReturn) {
  Host host;
  auto block = host.allocator->Allocate(10);
  std::weak_ptr<CachingAllocator> weak = host.allocator;
  host.allocator.reset();
  EXPECT_FALSE(weak.expired()) << "the block keeps its allocator alive";
  block.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(host.frees, 1u) << "and the allocator frees its cache when it goes";
}

}  // namespace
}  // namespace lockstep::testing
