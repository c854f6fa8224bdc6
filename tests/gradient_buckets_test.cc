// PlanGradientBuckets: slices start 64-byte aligned, a bucket closes once it holds bucket_bytes, and without
// a limit everything shares one bucket (the Allreduce operators' layout).
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

}  // namespace lockstep::testing
