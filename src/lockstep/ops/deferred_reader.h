// A database that CreateDB names without a batch size, as Caffe2's CreateDB does (db, db_type, num_shards,
// shard_id): Caffe2's ImageInput brings the batch size and the image geometry. The first ImageInput of the
// process to run opens the one BatchReader over it, which every other ImageInput reading the same CreateDB
// output then shares (LevelDB allows one open of a database at a time).
#pragma once

#include <memory>
#include <mutex>

#include "lockstep.pb.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/open_batch_source.h"

namespace lockstep {

class DeferredReader {
 public:
  // `source` names the database (name, db_type, num_labels, seed); ImageInput sets the rest.
  DeferredReader(SourceSpec source, int num_shards, int shard_id)
      : source_(std::move(source)), num_shards_(num_shards), shard_id_(shard_id) {}

  const SourceSpec& source() const { return source_; }
  int num_shards() const { return num_shards_; }
  int shard_id() const { return shard_id_; }

  // The reader over `spec` (source() with ImageInput's geometry) for `batch_per_replica` records per replica
  // and `replicas` replicas in the job: opened by the first call, shared by later ones, which must ask for
  // the same (InvalidInput naming `def` otherwise).
  std::shared_ptr<BatchReader> Open(const OperatorDef& def, const SourceSpec& spec, int64_t batch_per_replica,
                                    int replicas);

 private:
  SourceSpec source_;
  int num_shards_, shard_id_;
  std::mutex mutex_;  // the replicas' ImageInput ops run concurrently
  std::shared_ptr<BatchReader> reader_;
  std::string opened_by_;  // the operator that opened it, and what it asked for, for messages
  SourceSpec opened_spec_;
};

}  // namespace lockstep
