// NormalizeImages: hand-computed values, the same floats as the input pipeline's ImageTransform, shape
// inference, and the checks of X and of args mean and std.
#include <limits>
#include <random>

#include "lockstep/data/image_transform.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

Tensor Images(const Shape& shape, const std::vector<uint8_t>& pixels) {
  Tensor images(shape, DataType::kUInt8);
  std::copy(pixels.begin(), pixels.end(), images.data<uint8_t>());
  return images;
}

Tensor RandomImages(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor images(shape, DataType::kUInt8);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(rng() >> 24);
  return images;
}

const Tensor& Normalize(Workspace* ws, const std::vector<Arg>& args) {
  RunOp(ws, MakeOperatorDef("NormalizeImages", {"images"}, {"data"}, args));
  return ws->Blob("data");
}

}  // namespace

TEST(NormalizeImagesOp, HandComputedPerChannel) {
  Workspace ws;
  // Two images of 1x2 pixels with 3 channels; pixel (n, w) is (r, g, b).
  Feed(&ws, "images", Images({2, 1, 2, 3}, {0, 10, 255, 4, 2, 1, 128, 30, 6, 64, 18, 0}));
  const Tensor& data = Normalize(&ws, {Arg("mean", std::vector<float>{0.0f, 10.0f, 1.0f}),
                                       Arg("std", std::vector<float>{2.0f, 4.0f, 0.5f})});
  ASSERT_EQ(data.shape(), (Shape{2, 3, 1, 2}));
  ASSERT_EQ(data.dtype(), DataType::kFloat);
  std::vector<float> expected{0.0f,  2.0f,  0.0f, -2.0f, 508.0f, 0.0f,    // image 0: channel r, g, b
                              64.0f, 32.0f, 5.0f, 2.0f,  10.0f,  -2.0f};  // image 1
  EXPECT_EQ(Values(data), expected);
}

TEST(NormalizeImagesOp, DefaultsAreTheTrainersMeanAndStd) {
  Workspace ws;
  Feed(&ws, "images", Images({1, 2, 2, 1}, {0, 64, 128, 255}));
  EXPECT_EQ(Values(Normalize(&ws, {})), (std::vector<float>{-1.0f, -0.5f, 0.0f, 127.0f / 128.0f}));
  Feed(&ws, "images", Images({1, 1, 1, 2}, {32, 192}));
  EXPECT_EQ(Values(Normalize(&ws, {Arg("mean", std::vector<float>{64.0f})})),
            (std::vector<float>{-0.25f, 1.0f}));
}

TEST(NormalizeImagesOp, MatchesImageTransformExactly) {
  const int batch = 3, size = 5, channels = 3;
  for (bool per_channel : {true, false}) {
    ImageTransformOptions options;
    options.crop = size;  // the whole image: no resize, no random crop, no mirror
    options.mean = per_channel ? std::vector<float>{123.675f, 116.28f, 103.53f} : std::vector<float>{127.5f};
    options.std = per_channel ? std::vector<float>{58.395f, 57.12f, 57.375f} : std::vector<float>{58.0f};
    ImageTransform transform(channels, options);
    Tensor images = RandomImages({batch, size, size, channels}, 7);
    Workspace ws;
    Feed(&ws, "images", images);
    const Tensor& data = Normalize(&ws, {Arg("mean", options.mean), Arg("std", options.std)});
    ASSERT_EQ(data.shape(), (Shape{batch, channels, size, size}));
    std::vector<float> expected(transform.output_size());
    for (int n = 0; n < batch; ++n) {
      transform.ApplyHwc(images.data<uint8_t>() + n * transform.output_size(), size, size, ColorOrder::kBgr,
                         nullptr, expected.data());
      const float* actual = data.data<float>() + n * transform.output_size();
      for (int64_t i = 0; i < transform.output_size(); ++i)
        ASSERT_EQ(actual[i], expected[i])
            << "per_channel " << per_channel << ", image " << n << ", value " << i;
    }
  }
}

TEST(NormalizeImagesOp, ShapeInferenceAndNoGradient) {
  EXPECT_TRUE(GradientRegistry::IsNonDifferentiable("NormalizeImages"));
  NetDef net;
  *net.add_op() = MakeOperatorDef("NormalizeImages", {"images"}, {"data"});
  auto shapes = InferNetShapes(net, {{"images", {{8, 32, 24, 3}, DataType::kUInt8}}});
  EXPECT_EQ(shapes["data"].dims, (Shape{8, 3, 32, 24}));
  EXPECT_EQ(shapes["data"].dtype, DataType::kFloat);
}

TEST(NormalizeImagesOp, BadInputsAreInvalidInput) {
  Workspace ws;
  Feed(&ws, "images", RandomTensor({1, 2, 2, 3}, 1));  // float, not uint8
  EXPECT_THROW(Normalize(&ws, {}), InvalidInput);
  Feed(&ws, "images", RandomImages({2, 2, 3}, 1));  // no batch dim
  EXPECT_THROW(Normalize(&ws, {}), InvalidInput);
  Feed(&ws, "images", RandomImages({1, 2, 2, 3}, 1));
  EXPECT_THROW(Normalize(&ws, {Arg("mean", std::vector<float>{1.0f, 2.0f})}), InvalidInput);
  EXPECT_THROW(Normalize(&ws, {Arg("std", std::vector<float>{1.0f, 0.0f, 1.0f})}), InvalidInput);
  EXPECT_THROW(Normalize(&ws, {Arg("std", std::vector<float>{std::numeric_limits<float>::infinity()})}),
               InvalidInput);
  EXPECT_THROW(Normalize(&ws, {Arg("mean", std::vector<float>{})}), InvalidInput);
}

}  // namespace lockstep::testing
