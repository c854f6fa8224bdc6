// The LevelDB backend. LevelDB locks a database to one open at a time (one process, and one DB object in
// it), so several readers share one DB and make a cursor each.
#include <fmt/format.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"

namespace lockstep {
namespace {

[[noreturn]] void ThrowLeveldb(const std::string& path, const char* what, const leveldb::Status& status) {
  std::string message = fmt::format("--db_type leveldb: {} '{}' failed: {}", what, path, status.ToString());
  if (status.IsCorruption() || status.IsInvalidArgument())
    throw InvalidInput(message + "; is it a LevelDB database?");
  if (message.find("LOCK") != std::string::npos)
    throw IoError(
        message +
        "; LevelDB allows one open of a database at a time: share one DB between readers, or use LMDB");
  throw IoError(message);
}

std::string_view ViewOf(const leveldb::Slice& slice) { return std::string_view(slice.data(), slice.size()); }

class LeveldbCursor : public Cursor {
 public:
  LeveldbCursor(std::shared_ptr<leveldb::DB> db, const std::string& path) : db_(std::move(db)), path_(path) {
    leveldb::ReadOptions options;
    options.fill_cache = false;  // a pass over the data would only evict what other readers cached
    iterator_.reset(db_->NewIterator(options));
    SeekToFirst();
  }

  void SeekToFirst() override {
    iterator_->SeekToFirst();
    CheckStatus();
  }
  void Seek(std::string_view key) override {
    iterator_->Seek(leveldb::Slice(key.data(), key.size()));
    CheckStatus();
  }
  void Next() override {
    LOCKSTEP_ENFORCE(iterator_->Valid(), "Next() on a cursor past the end of '{}'", path_);
    iterator_->Next();
    CheckStatus();
  }
  bool valid() const override { return iterator_->Valid(); }
  std::string_view key() const override { return ViewOf(iterator_->key()); }
  std::string_view value() const override { return ViewOf(iterator_->value()); }

 private:
  // An iterator stops early (not Valid) on a read error; only its status tells that from the end.
  void CheckStatus() {
    if (!iterator_->Valid() && !iterator_->status().ok()) ThrowLeveldb(path_, "reading", iterator_->status());
  }

  std::shared_ptr<leveldb::DB> db_;  // declared before iterator_, so the iterator goes first
  std::string path_;
  std::unique_ptr<leveldb::Iterator> iterator_;
};

class LeveldbTransaction : public Transaction {
 public:
  LeveldbTransaction(std::shared_ptr<leveldb::DB> db, const std::string& path)
      : db_(std::move(db)), path_(path) {}

  void Put(std::string_view key, std::string_view value) override {
    batch_.Put(leveldb::Slice(key.data(), key.size()), leveldb::Slice(value.data(), value.size()));
  }
  void Commit() override {
    leveldb::Status status = db_->Write(leveldb::WriteOptions(), &batch_);
    if (!status.ok()) ThrowLeveldb(path_, "writing", status);
    batch_.Clear();
  }

 private:
  std::shared_ptr<leveldb::DB> db_;
  std::string path_;
  leveldb::WriteBatch batch_;
};

class LeveldbDB : public DB {
 public:
  LeveldbDB(const std::string& path, DbMode mode) : path_(path), mode_(mode) {
    leveldb::Options options;
    options.create_if_missing = mode == DbMode::kNew;
    options.error_if_exists = mode == DbMode::kNew;
    // Caffe's settings for image databases: large values, written in bulk.
    options.block_size = 65536;
    options.write_buffer_size = 256 << 20;
    options.max_open_files = 100;
    leveldb::DB* db = nullptr;
    leveldb::Status status = leveldb::DB::Open(options, path, &db);
    if (!status.ok()) ThrowLeveldb(path, "opening", status);
    db_.reset(db);
  }

  std::unique_ptr<Cursor> NewCursor() override {
    LOCKSTEP_ENFORCE(mode_ == DbMode::kRead, "cursors read databases opened with kRead; '{}' was created",
                     path_);
    return std::make_unique<LeveldbCursor>(db_, path_);
  }
  std::unique_ptr<Transaction> NewTransaction() override {
    LOCKSTEP_ENFORCE(mode_ == DbMode::kNew,
                     "transactions write databases opened with kNew; '{}' is read only", path_);
    return std::make_unique<LeveldbTransaction>(db_, path_);
  }
  int64_t Count() override {
    LeveldbCursor cursor(db_, path_);
    int64_t count = 0;
    for (; cursor.valid(); cursor.Next()) ++count;
    return count;
  }
  const std::string& type() const override { return type_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  DbMode mode_;
  std::shared_ptr<leveldb::DB> db_;
  std::string type_ = "leveldb";
};

}  // namespace

static const bool kLeveldbRegistered = RegisterDbBackend("leveldb", {"CURRENT", &OpenAs<LeveldbDB>});

}  // namespace lockstep
