// The image geometry file of a database and the check of --scale against the sizes of images.
#include "lockstep/data/image_geometry.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lockstep/core/atomic_file.h"
#include "lockstep/core/enforce.h"

namespace lockstep {

namespace fs = std::filesystem;

void ImageGeometry::Add(int height, int width, int image_channels) {
  ImageGeometry one;
  one.channels = image_channels;
  one.min_height = one.max_height = height;
  one.min_width = one.max_width = width;
  one.min_shortest_side = one.max_shortest_side = std::min(height, width);
  Merge(one);
}

void ImageGeometry::Merge(const ImageGeometry& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = other;
    return;
  }
  channels = std::max(channels, other.channels);
  min_height = std::min(min_height, other.min_height);
  max_height = std::max(max_height, other.max_height);
  min_width = std::min(min_width, other.min_width);
  max_width = std::max(max_width, other.max_width);
  min_shortest_side = std::min(min_shortest_side, other.min_shortest_side);
  max_shortest_side = std::max(max_shortest_side, other.max_shortest_side);
}

std::string ImageGeometry::SizeText() const {
  if (min_height == max_height && min_width == max_width) return fmt::format("{}x{}", max_height, max_width);
  return fmt::format("{}x{} to {}x{}", min_height, min_width, max_height, max_width);
}

void WriteImageGeometry(const std::string& db_path, const ImageGeometry& g) {
  const nlohmann::json json = {{"channels", g.channels},
                               {"height", {g.min_height, g.max_height}},
                               {"width", {g.min_width, g.max_width}},
                               {"shortest_side", {g.min_shortest_side, g.max_shortest_side}}};
  const fs::path path = fs::path(db_path) / kImageGeometryFile;
  WriteFileAtomically(path.string(), json.dump() + "\n", "image geometry file");
}

std::optional<ImageGeometry> ReadImageGeometry(const std::string& db_path) {
  const fs::path path = fs::path(db_path) / kImageGeometryFile;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json json = nlohmann::json::parse(in);
    ImageGeometry g;
    g.channels = json.at("channels").get<int>();
    g.min_height = json.at("height").at(0).get<int>();
    g.max_height = json.at("height").at(1).get<int>();
    g.min_width = json.at("width").at(0).get<int>();
    g.max_width = json.at("width").at(1).get<int>();
    g.min_shortest_side = json.at("shortest_side").at(0).get<int>();
    g.max_shortest_side = json.at("shortest_side").at(1).get<int>();
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidInput(fmt::format("{} is damaged ({}); remake the database with lockstep make-db",
                                   path.string(), e.what()));
  }
}

std::string ScaleWarning(const ImageGeometry& geometry, const std::string& images, int scale, int crop) {
  if (geometry.empty()) return "";
  const int resized = std::max(scale, crop);  // the shortest side after resizing, as ImageTransform takes it
  const int native = std::max(geometry.max_shortest_side, crop);
  if (resized <= native) return "";
  // Images smaller than the crop must grow to it; the advice is to grow them no further.
  const std::string advice =
      geometry.max_shortest_side >= crop
          ? fmt::format("pass --scale {} to crop them at their own size", native)
          : fmt::format(
                "pass --scale {} to enlarge them only to the crop, or --image_size {} to train at their "
                "own size",
                native, geometry.max_shortest_side);
  return fmt::format(
      "--scale {} enlarges {} ({}) to a shortest side of {} before the {}x{} crop, so the network sees a "
      "small part of each; {}",
      scale, images, geometry.SizeText(), resized, crop, crop, advice);
}

}  // namespace lockstep
