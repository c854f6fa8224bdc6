// DbSource: the training stream over an image database (LMDB or LevelDB of Datum or TensorProtos records, as
// Caffe's convert_imageset and Caffe2's make_image_db write them). Stream position p is record p mod N in the
// database's key order: databases are shuffled when they are made, as Caffe's are, and every record is read
// once per pass. Each Fill reads its records with a cursor, then parses, decodes and transforms them on
// `decode_threads` threads into an NCHW float batch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lockstep/data/batch_source.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image_geometry.h"
#include "lockstep/data/image_record.h"
#include "lockstep/data/image_transform.h"

namespace lockstep {

struct DbSourceOptions {
  std::string db_type = "lmdb";
  RecordFormat format = RecordFormat::kAuto;
  int channels = 3;
  int num_labels = 1000;  // a label outside [0, num_labels) is an error
  // crop = the image size; random crop and mirror for training. Its color_order is the order of the batch's
  // colour channels, for raw and encoded records alike.
  ImageTransformOptions transform;
  int decode_threads = 1;
  bool skip_bad_records =
      false;  // skip records that do not parse or decode (and count them) instead of failing
  // Training fills a skipped record's place with the next good record after the batch; evaluation leaves it
  // out (kLeftOutLabel), so that every good record counts once.
  bool leave_out_skipped = false;
  uint64_t seed = 1;  // of the random crops and mirrors: position p always gets the same draws
  // Warn once on stderr when transform.scale enlarges every image before the crop (ScaleWarning): on opening,
  // from the sizes make-db recorded in the database, or else from the images of the first batch.
  bool warn_when_scale_enlarges = false;
};

class DbSource : public BatchSource {
 public:
  // Opens the database for reading; throws IoError / InvalidInput naming the path when it cannot.
  DbSource(const std::string& path, DbSourceOptions options);
  ~DbSource() override;

  // Calls are serialized by the caller (BatchReader does); the decoding inside runs in parallel.
  void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) override;
  int64_t size() const override { return size_; }
  // The database key.
  std::string KeyAt(int64_t position) override;
  int64_t skipped() const { return skipped_; }       // the bad records met so far, each counted once
  const std::string& name() const { return name_; }  // "lmdb /path/to/db"

 private:
  // Points a cursor at record `index` and returns it, reusing the cursor that is closest behind.
  Cursor* CursorAt(int64_t index);
  // Parses and transforms one record into `out`; returns the label.
  int32_t Decode(const std::string& key, const std::string& value, int64_t position, int worker, float* out);
  void CountBad(int64_t position);

  std::unique_ptr<DB> db_;
  DbSourceOptions options_;
  std::string name_;
  int64_t size_ = 0;
  std::vector<std::pair<std::unique_ptr<Cursor>, int64_t>> cursors_;  // each with the index it points at
  std::vector<std::unique_ptr<ImageTransform>> transforms_;           // one per decoding thread
  std::vector<ImageRecord> records_;                                  // one per decoding thread
  std::vector<std::string> keys_, values_;                            // the records of one Fill
  std::unordered_set<int64_t> bad_records_;  // their indices; a record met again in a later pass counts once
  std::atomic<int64_t> skipped_{0};          // bad_records_.size(), read from other threads
  std::string path_;
  // While the first batch is decoded for warn_when_scale_enlarges: the sizes each decoding thread saw.
  bool check_first_batch_ = false;
  std::vector<ImageGeometry> first_batch_sizes_;
};

}  // namespace lockstep
