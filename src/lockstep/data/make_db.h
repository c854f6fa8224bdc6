// Writes an image database (LMDB or LevelDB of Caffe Datum or Caffe2 TensorProtos records) from a folder of
// JPEG/PNG files with a list of labels, an idx pair (MNIST, Fashion-MNIST) or CIFAR-10 binary batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/data/image_geometry.h"
#include "lockstep/data/image_record.h"

namespace lockstep {

struct MakeDbOptions {
  // The input, exactly one of three:
  // - image_folder + list: the list's lines are "relative/path label" (the path may hold spaces; the label
  //   is the last word), paths relative to image_folder; blank lines are skipped.
  std::string image_folder, list;
  // - idx_images + idx_labels: an idx3 image file and its idx1 labels, gzip-compressed or not.
  std::string idx_images, idx_labels;
  // - cifar10: CIFAR-10 binary batches, each record 1 label byte then 32x32 R, G and B planes.
  std::vector<std::string> cifar10;

  std::string output;                          // the database directory to create
  std::string db_type = "lmdb";                // "lmdb" or "leveldb"
  RecordFormat format = RecordFormat::kDatum;  // kDatum or kTensorProtos
  // Encoded records hold a JPEG or PNG file; raw records hold decoded pixels, colour in BGR order as
  // convert_imageset and make_image_db store them (kRawColorOrder), CIFAR-10's RGB planes included.
  bool encoded = false;
  // Format of re-encoded images: "jpg" or "png"; "" keeps a folder image's own format and uses JPEG for idx
  // and CIFAR-10 images. A folder image is stored as its original file, unchanged, unless resize is set,
  // channels is 1, or encoding names another format.
  std::string encoding;
  int resize = 0;    // > 0: resize each image so its shortest side is this many pixels (Pillow's bilinear)
  int channels = 0;  // 1 (gray) or 3 (colour); 0: the input's own (3 for folders, 1 for idx, 3 for CIFAR-10)
  // Records are written in input order, or in an order drawn from seed. Keys are the position, zero-padded
  // to 8 digits, then "_" and the source (list path, or "file:index"), as convert_imageset writes them, so
  // the database's key order is the written order.
  bool shuffle = false;
  uint64_t seed = 1;
  bool overwrite = false;       // replace an existing database at output (else it is an error)
  int threads = 0;              // threads that read, decode and encode images; 0: one per core
  int64_t commit_every = 1000;  // records per transaction
  // Called after each commit with the records written so far and the total.
  std::function<void(int64_t written, int64_t total)> progress;
};

struct MakeDbResult {
  int64_t records = 0;
  ImageGeometry geometry;  // of the stored images, also written into the database (image_geometry.h)
};

// Writes the database into output + ".tmp-<pid>" and renames it to output once every record is committed,
// so a failure leaves no partial database (and, with overwrite, the old one in place). Throws InvalidInput
// or IoError with one line naming the list line, file or record at fault.
MakeDbResult MakeDb(const MakeDbOptions& options);

}  // namespace lockstep
