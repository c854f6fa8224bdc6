// Gradient bucket planning.
#include "lockstep/ops/gradient_buckets.h"

namespace lockstep {

std::vector<GradientBucket> PlanGradientBuckets(const std::vector<std::pair<std::string, Shape>>& blobs,
                                                size_t bucket_bytes) {
  constexpr size_t kAlignment = 64;
  std::vector<GradientBucket> buckets;
  for (const auto& [name, shape] : blobs) {
    if (buckets.empty() || buckets.back().bytes >= bucket_bytes) buckets.emplace_back();
    GradientBucket& bucket = buckets.back();
    const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
    bucket.params.push_back(name);
    bucket.shapes.push_back(shape);
    bucket.offsets.push_back(bucket.bytes);
    bucket.bytes += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  return buckets;
}

}  // namespace lockstep
