// Gradient bucket planning.
#include "lockstep/ops/gradient_buckets.h"

namespace lockstep {

namespace {

size_t AlignedBytes(const Shape& shape) {
  constexpr size_t kAlignment = 64;
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

std::vector<GradientBucket> PlanGradientBuckets(const std::vector<std::pair<std::string, Shape>>& blobs,
                                                size_t bucket_bytes, size_t tail_bytes, DataType wire) {
  LOCKSTEP_ENFORCE(wire == DataType::kFloat || wire == DataType::kBFloat16 || wire == DataType::kFloat16,
                   "gradients travel as float, bfloat16 or float16, not {}", DataTypeName(wire));
  // The tail bucket takes blobs [tail_begin, end).
  size_t tail_begin = blobs.size();
  for (size_t held = 0; tail_bytes > 0 && tail_begin > 0 && held < tail_bytes;)
    held += AlignedBytes(blobs[--tail_begin].second);
  std::vector<GradientBucket> buckets;
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (buckets.empty() || (i < tail_begin && buckets.back().bytes >= bucket_bytes) || i == tail_begin)
      buckets.emplace_back();
    GradientBucket& bucket = buckets.back();
    bucket.params.push_back(blobs[i].first);
    bucket.shapes.push_back(blobs[i].second);
    bucket.offsets.push_back(bucket.bytes);
    bucket.bytes += AlignedBytes(blobs[i].second);
  }
  for (GradientBucket& bucket : buckets) {
    bucket.wire = wire;
    bucket.wire_bytes = bucket.bytes / sizeof(float) * ElementSize(wire);
  }
  return buckets;
}

}  // namespace lockstep
