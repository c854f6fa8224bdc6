// In-process reduction. Buffers are summed in a fixed order (0, 1, ..., k-1) so every run gives the same
// bits.
#include "lockstep/comm/local_communicator.h"

#include <algorithm>
#include <cstring>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

constexpr size_t kBlock = 4096;

void SumBlock(const std::vector<float*>& buffers, size_t begin, size_t n) {
  float* sum = buffers[0] + begin;
  for (size_t b = 1; b < buffers.size(); ++b) {
    const float* other = buffers[b] + begin;
    for (size_t i = 0; i < n; ++i) sum[i] += other[i];
  }
}

}  // namespace

void SumIntoFirst(const std::vector<float*>& buffers, size_t count) {
  for (size_t begin = 0; begin < count; begin += kBlock) SumBlock(buffers, begin, std::min(kBlock, count - begin));
}

void LocalCommunicator::Allreduce(const std::vector<float*>& buffers, size_t count) {
  LOCKSTEP_ENFORCE(!buffers.empty(), "Allreduce needs at least one buffer");
  // Block by block, so that the sum is still in cache when it is copied to the other buffers.
  for (size_t begin = 0; begin < count; begin += kBlock) {
    size_t n = std::min(kBlock, count - begin);
    SumBlock(buffers, begin, n);
    for (size_t b = 1; b < buffers.size(); ++b) std::memcpy(buffers[b] + begin, buffers[0] + begin, n * sizeof(float));
  }
}

void LocalCommunicator::Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) {
  LOCKSTEP_ENFORCE(!buffers.empty(), "Broadcast needs at least one buffer");
  LOCKSTEP_ENFORCE_EQ(root_rank, 0, "a single process is rank 0");
  if (bytes == 0) return;  // empty buffers may be null, and memcpy wants valid pointers even for no bytes
  // A device that reads the first one's copy (shared parameters) passes that same buffer.
  for (size_t b = 1; b < buffers.size(); ++b)
    if (buffers[b] != buffers[0]) std::memcpy(buffers[b], buffers[0], bytes);
}

}  // namespace lockstep
