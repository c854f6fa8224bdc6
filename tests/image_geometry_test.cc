// The image geometry make-db records in a database, and the warning it gives when --scale would enlarge every
// image before the crop.
#include "lockstep/data/image_geometry.h"

#include <filesystem>
#include <optional>

#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

TEST(ImageGeometry, RangesOverTheImages) {
  ImageGeometry geometry;
  EXPECT_TRUE(geometry.empty());
  geometry.Add(28, 28, 1);
  EXPECT_EQ(geometry.SizeText(), "28x28");
  ImageGeometry other;
  other.Add(375, 500, 3);
  other.Add(90, 120, 3);
  geometry.Merge(other);
  EXPECT_EQ(geometry.SizeText(), "28x28 to 375x500");
  EXPECT_EQ(geometry.min_shortest_side, 28);
  EXPECT_EQ(geometry.max_shortest_side, 375);
  EXPECT_EQ(geometry.channels, 3);
}

TEST(ImageGeometry, RecordedInTheDatabase) {
  fs::path db = FreshDir("geometry_db");
  EXPECT_FALSE(ReadImageGeometry(db.string())) << "a database make-db did not write has none";
  ImageGeometry mixed;
  mixed.Add(200, 300, 3);
  mixed.Add(375, 500, 3);
  WriteImageGeometry(db.string(), mixed);
  std::optional<ImageGeometry> read = ReadImageGeometry(db.string());
  ASSERT_TRUE(read);
  EXPECT_EQ(read->SizeText(), "200x300 to 375x500");
  EXPECT_EQ(read->min_shortest_side, 200);
  EXPECT_EQ(read->max_shortest_side, 375);
  EXPECT_EQ(read->channels, 3);
}

TEST(ImageGeometry, ScaleWarningNamesTheScaleToPass) {
  EXPECT_EQ(ScaleWarning(ImageGeometry(), "no images", 256, 28), "") << "no sizes known: nothing to say";
  ImageGeometry small;
  small.Add(28, 28, 1);
  EXPECT_EQ(
      ScaleWarning(small, "every image of db", 256, 28),
      "--scale 256 enlarges every image of db (28x28) to a shortest side of 256 before the 28x28 crop, so "
      "the network sees a small part of each; pass --scale 28 to crop them at their own size");
  EXPECT_EQ(ScaleWarning(small, "db", 28, 28), "");
  EXPECT_EQ(ScaleWarning(small, "db", 0, 24), "") << "shrinking to the crop is not enlarging";
  // A crop larger than the images needs them enlarged to it, and no more.
  EXPECT_EQ(ScaleWarning(small, "db", 32, 32), "");
  EXPECT_EQ(
      ScaleWarning(small, "db", 256, 227),
      "--scale 256 enlarges db (28x28) to a shortest side of 256 before the 227x227 crop, so the network "
      "sees a small part of each; pass --scale 227 to enlarge them only to the crop, or --image_size 28 "
      "to train at their own size");

  ImageGeometry mixed;
  mixed.Add(200, 300, 3);
  mixed.Add(375, 500, 3);
  EXPECT_EQ(ScaleWarning(mixed, "db", 256, 224), "") << "some images are larger than --scale";
  EXPECT_NE(ScaleWarning(mixed, "db", 512, 224).find("(200x300 to 375x500)"), std::string::npos);
}

}  // namespace lockstep::testing
