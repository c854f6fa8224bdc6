// The sizes of a database's images. make-db keeps them in a file inside the database directory (LMDB and
// LevelDB ignore files they did not write, and so do the readers of Caffe and Caffe2), so that the trainer
// can tell before the first step that --scale would enlarge every image (for another database it tells from
// the images of the first batch).
#pragma once

#include <optional>
#include <string>

namespace lockstep {

inline constexpr const char* kImageGeometryFile = "lockstep_image_geometry.json";

struct ImageGeometry {
  int channels = 0;
  // Each a [smallest, largest] range over the images.
  int min_height = 0, max_height = 0, min_width = 0, max_width = 0;
  int min_shortest_side = 0, max_shortest_side = 0;

  void Add(int height, int width, int image_channels);
  void Merge(const ImageGeometry& other);
  bool empty() const { return max_height == 0; }
  std::string SizeText() const;  // "28x28", or "90x120 to 375x500": the smallest and largest height x width
};

// Writes `geometry` into the database directory `db_path`; throws IoError when it cannot.
void WriteImageGeometry(const std::string& db_path, const ImageGeometry& geometry);
// What make-db wrote into `db_path`, or nothing for a database made elsewhere.
std::optional<ImageGeometry> ReadImageGeometry(const std::string& db_path);

// A one-line warning when resizing to `scale` (the shortest side, at least `crop`) enlarges all of `images`
// (e.g. "every image of fashion_train_lmdb", whose sizes `geometry` holds) before the crop, naming the
// --scale to pass instead; "" when it does not.
std::string ScaleWarning(const ImageGeometry& geometry, const std::string& images, int scale, int crop);

}  // namespace lockstep
