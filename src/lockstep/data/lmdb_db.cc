// The LMDB backend. Readers open the environment read only, and with MDB_NOTLS so that each cursor owns its
// read transaction and may be handed to another thread; writers grow the map whenever it fills.
#include <fmt/format.h>
#include <lmdb.h>

#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"

namespace lockstep {
namespace {

// Writers start small and double the map on MDB_MAP_FULL, so a small database never reserves much.
constexpr size_t kInitialMapSize = size_t{64} << 20;

[[noreturn]] void ThrowLmdb(const std::string& path, const char* call, int rc) {
  std::string message = fmt::format("--db_type lmdb: {} failed on '{}': {}", call, path, mdb_strerror(rc));
  if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED)
    throw InvalidInput(message + "; is it an LMDB database written by a compatible LMDB?");
  if (rc == EACCES) throw IoError(message + "; LMDB readers need write access to the directory for lock.mdb");
  throw IoError(message);
}

MDB_val ValueOf(std::string_view bytes) { return MDB_val{bytes.size(), const_cast<char*>(bytes.data())}; }

std::string_view ViewOf(const MDB_val& value) {
  return std::string_view(static_cast<const char*>(value.mv_data), value.mv_size);
}

// The environment and its unnamed database, shared by the DB and every cursor and transaction it made.
struct LmdbEnv {
  LmdbEnv(const std::string& path, DbMode mode) : path(path) {
    if (mode == DbMode::kNew) {
      std::error_code error;
      if (!std::filesystem::create_directory(path, error))
        throw IoError(fmt::format("--db_type lmdb: cannot create directory '{}': {}", path, error.message()));
    }
    int rc = mdb_env_create(&env);
    if (rc != 0) ThrowLmdb(path, "mdb_env_create", rc);
    if (mode == DbMode::kNew) Check("mdb_env_set_mapsize", mdb_env_set_mapsize(env, kInitialMapSize));
    unsigned int flags = mode == DbMode::kRead ? MDB_RDONLY | MDB_NOTLS : 0;
    Check("mdb_env_open", mdb_env_open(env, path.c_str(), flags, 0664));
    MDB_txn* txn = nullptr;
    Check("mdb_txn_begin", mdb_txn_begin(env, nullptr, mode == DbMode::kRead ? MDB_RDONLY : 0, &txn));
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    if (rc != 0) {
      mdb_txn_abort(txn);
      Check("mdb_dbi_open", rc);
    }
    Check("mdb_txn_commit", mdb_txn_commit(txn));
  }
  ~LmdbEnv() { mdb_env_close(env); }
  LmdbEnv(const LmdbEnv&) = delete;
  LmdbEnv& operator=(const LmdbEnv&) = delete;

  void Check(const char* call, int rc) {
    if (rc == 0) return;
    mdb_env_close(env);  // the destructor does not run when the constructor throws
    ThrowLmdb(path, call, rc);
  }

  std::string path;
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  std::mutex commit_mutex;  // resizing the map needs every transaction of this process closed
};

class LmdbCursor : public Cursor {
 public:
  explicit LmdbCursor(std::shared_ptr<LmdbEnv> env) : env_(std::move(env)) {
    int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn_);
    if (rc != 0) ThrowLmdb(env_->path, "mdb_txn_begin", rc);
    rc = mdb_cursor_open(txn_, env_->dbi, &cursor_);
    if (rc != 0) {
      mdb_txn_abort(txn_);
      ThrowLmdb(env_->path, "mdb_cursor_open", rc);
    }
    SeekToFirst();
  }
  ~LmdbCursor() override {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }

  void SeekToFirst() override { Move(MDB_FIRST); }
  void Seek(std::string_view key) override {
    key_ = ValueOf(key);
    Move(MDB_SET_RANGE);
  }
  void Next() override {
    LOCKSTEP_ENFORCE(valid_, "Next() on a cursor past the end of '{}'", env_->path);
    Move(MDB_NEXT);
  }
  bool valid() const override { return valid_; }
  std::string_view key() const override { return ViewOf(key_); }
  std::string_view value() const override { return ViewOf(value_); }

 private:
  void Move(MDB_cursor_op op) {
    int rc = mdb_cursor_get(cursor_, &key_, &value_, op);
    if (rc != 0 && rc != MDB_NOTFOUND) ThrowLmdb(env_->path, "mdb_cursor_get", rc);
    valid_ = rc == 0;
  }

  std::shared_ptr<LmdbEnv> env_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{}, value_{};
  bool valid_ = false;
};

// Holds the puts in memory so that a commit that fills the map can be retried whole in a larger one.
class LmdbTransaction : public Transaction {
 public:
  explicit LmdbTransaction(std::shared_ptr<LmdbEnv> env) : env_(std::move(env)) {}

  void Put(std::string_view key, std::string_view value) override {
    size_t max_key = static_cast<size_t>(mdb_env_get_maxkeysize(env_->env));
    if (key.empty() || key.size() > max_key)
      throw InvalidInput(fmt::format("--db_type lmdb: key of {} bytes for '{}'; LMDB keys hold 1 to {} bytes",
                                     key.size(), env_->path, max_key));
    puts_.emplace_back(key, value);
  }

  void Commit() override {
    std::lock_guard<std::mutex> lock(env_->commit_mutex);
    while (true) {
      int rc = TryCommit();
      if (rc == 0) break;
      if (rc != MDB_MAP_FULL) ThrowLmdb(env_->path, "commit", rc);
      MDB_envinfo info;
      mdb_env_info(env_->env, &info);
      rc = mdb_env_set_mapsize(env_->env, 2 * info.me_mapsize);
      if (rc != 0) ThrowLmdb(env_->path, "mdb_env_set_mapsize", rc);
    }
    puts_.clear();
  }

 private:
  int TryCommit() {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_->env, nullptr, 0, &txn);
    if (rc != 0) return rc;
    for (const auto& [key, value] : puts_) {
      MDB_val key_value = ValueOf(key), data_value = ValueOf(value);
      rc = mdb_put(txn, env_->dbi, &key_value, &data_value, 0);
      if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
      }
    }
    return mdb_txn_commit(txn);  // frees txn whether or not it succeeds
  }

  std::shared_ptr<LmdbEnv> env_;
  std::vector<std::pair<std::string, std::string>> puts_;
};

class LmdbDB : public DB {
 public:
  LmdbDB(const std::string& path, DbMode mode) : env_(std::make_shared<LmdbEnv>(path, mode)), mode_(mode) {}

  std::unique_ptr<Cursor> NewCursor() override {
    LOCKSTEP_ENFORCE(mode_ == DbMode::kRead, "cursors read databases opened with kRead; '{}' was created",
                     env_->path);
    return std::make_unique<LmdbCursor>(env_);
  }
  std::unique_ptr<Transaction> NewTransaction() override {
    LOCKSTEP_ENFORCE(mode_ == DbMode::kNew,
                     "transactions write databases opened with kNew; '{}' is read only", env_->path);
    return std::make_unique<LmdbTransaction>(env_);
  }
  int64_t Count() override {
    std::lock_guard<std::mutex> lock(env_->commit_mutex);
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) ThrowLmdb(env_->path, "mdb_txn_begin", rc);
    MDB_stat stat;
    rc = mdb_stat(txn, env_->dbi, &stat);
    mdb_txn_abort(txn);
    if (rc != 0) ThrowLmdb(env_->path, "mdb_stat", rc);
    return static_cast<int64_t>(stat.ms_entries);
  }
  const std::string& type() const override { return type_; }
  const std::string& path() const override { return env_->path; }

 private:
  std::shared_ptr<LmdbEnv> env_;
  DbMode mode_;
  std::string type_ = "lmdb";
};

}  // namespace

static const bool kLmdbRegistered = RegisterDbBackend("lmdb", {"data.mdb", &OpenAs<LmdbDB>});

}  // namespace lockstep
