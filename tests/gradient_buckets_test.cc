// PlanGradientBuckets: slices start 64-byte aligned, a bucket closes once it holds bucket_bytes, without a
// limit everything shares one bucket (the Allreduce operators' layout), and a tail limit makes the last
// bucket small.
#include "lockstep/ops/gradient_buckets.h"

#include "test_util.h"

namespace lockstep::testing {

TEST(GradientBuckets, SlicesAreAlignedAndBucketsCloseAtTheLimit) {
  // 20 bytes, 64 bytes, 12 bytes.
  const std::vector<std::pair<std::string, Shape>> blobs{{"a", {5}}, {"b", {4, 4}}, {"c", {3}}};
  auto buckets = PlanGradientBuckets(blobs, 100);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(buckets[0].shapes, (std::vector<Shape>{{5}, {4, 4}}));
  EXPECT_EQ(buckets[0].offsets, (std::vector<size_t>{0, 64}));
  EXPECT_EQ(buckets[0].bytes, 128u);
  EXPECT_EQ(buckets[1].params, (std::vector<std::string>{"c"}));
  EXPECT_EQ(buckets[1].bytes, 64u);

  auto one = PlanGradientBuckets(blobs);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].offsets, (std::vector<size_t>{0, 64, 128}));
  EXPECT_EQ(one[0].bytes, 192u);
  EXPECT_EQ(PlanGradientBuckets(blobs, 0).size(), 3u) << "a limit of 0 bytes: one blob per bucket";
  EXPECT_TRUE(PlanGradientBuckets({}).empty());
}

// A 16-bit wire sends half a bucket's bytes; the buckets themselves stay the same.
TEST(GradientBuckets, TheWireDtypeHalvesTheBytesSentButNotTheBuckets) {
  const std::vector<std::pair<std::string, Shape>> blobs{{"a", {5}}, {"b", {4, 4}}, {"c", {3}}};
  auto float32 = PlanGradientBuckets(blobs, 100);
  EXPECT_EQ(float32[0].wire, DataType::kFloat);
  EXPECT_EQ(float32[0].wire_bytes, 128u);
  for (DataType wire : {DataType::kBFloat16, DataType::kFloat16}) {
    auto halved = PlanGradientBuckets(blobs, 100, 0, wire);
    ASSERT_EQ(halved.size(), float32.size());
    for (size_t b = 0; b < halved.size(); ++b) {
      EXPECT_EQ(halved[b].params, float32[b].params);
      EXPECT_EQ(halved[b].offsets, float32[b].offsets);
      EXPECT_EQ(halved[b].bytes, float32[b].bytes);
      EXPECT_EQ(halved[b].wire, wire);
      EXPECT_EQ(halved[b].wire_bytes, float32[b].bytes / 2);
    }
  }
}

TEST(GradientBuckets, TheTailBucketIsFormedFromTheEnd) {
  // 64 bytes each after alignment.
  const std::vector<std::pair<std::string, Shape>> blobs{
      {"a", {16}}, {"b", {16}}, {"c", {16}}, {"d", {16}}, {"e", {16}}};
  auto names = [](const std::vector<GradientBucket>& buckets) {
    std::vector<std::vector<std::string>> out;
    for (const auto& bucket : buckets) out.push_back(bucket.params);
    return out;
  };
  using Names = std::vector<std::vector<std::string>>;
  EXPECT_EQ(names(PlanGradientBuckets(blobs, 192)), (Names{{"a", "b", "c"}, {"d", "e"}}));
  EXPECT_EQ(names(PlanGradientBuckets(blobs, 192, 64)), (Names{{"a", "b", "c"}, {"d"}, {"e"}}));
  EXPECT_EQ(names(PlanGradientBuckets(blobs, 64, 100)), (Names{{"a"}, {"b"}, {"c"}, {"d", "e"}}))
      << "the tail closes at its own limit, larger or smaller than the others'";
  EXPECT_EQ(names(PlanGradientBuckets(blobs, SIZE_MAX, 1)), (Names{{"a", "b", "c", "d"}, {"e"}}));
  EXPECT_EQ(names(PlanGradientBuckets(blobs, 128, 1000)), (Names{{"a", "b", "c", "d", "e"}}))
      << "a tail limit above the total: one bucket";
  auto tail = PlanGradientBuckets(blobs, 128, 100).back();
  EXPECT_EQ(tail.offsets, (std::vector<size_t>{0, 64}));
  EXPECT_EQ(tail.bytes, 128u);
}

}  // namespace lockstep::testing
