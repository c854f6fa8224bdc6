// Key-value databases of training records (LMDB, LevelDB) behind three small interfaces, in the manner of
// Caffe's db.hpp: a DB hands out Cursors that walk the keys in the database's order, and Transactions that
// batch writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

enum class DbMode {
  kRead,  // open an existing database, read only; several processes may read one LMDB at once
  kNew,   // create a database at a path that must not exist yet
};

// Walks the records in key order (bytewise, the order both LMDB and LevelDB keep). One cursor is used by one
// thread at a time, but need not be used by the thread that created it.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual void SeekToFirst() = 0;
  // Moves to the first record whose key is >= `key` (random access for shuffled or sharded reading).
  virtual void Seek(std::string_view key) = 0;
  virtual void Next() = 0;  // requires valid()
  virtual bool valid() const = 0;
  // The current record, valid() required. The views stay valid until the cursor moves or is destroyed.
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
};

// Puts are held until Commit, which writes them all at once. A transaction destroyed before Commit writes
// nothing.
class Transaction {
 public:
  virtual ~Transaction() = default;
  virtual void Put(std::string_view key, std::string_view value) = 0;
  virtual void Commit() = 0;
};

// An open database. Cursors and transactions keep what they need of it alive, so they may outlive the DB
// object. NewCursor may be called from several threads at once. Open a database once per process and share
// the DB: LevelDB refuses a second open, and LMDB's locks go wrong when one process opens a file twice.
class DB {
 public:
  virtual ~DB() = default;
  virtual std::unique_ptr<Cursor> NewCursor() = 0;            // kRead only
  virtual std::unique_ptr<Transaction> NewTransaction() = 0;  // kNew only
  // Records in the database: LMDB keeps the number; LevelDB does not, so there it walks every record.
  virtual int64_t Count() = 0;
  virtual const std::string& type() const = 0;  // "lmdb" or "leveldb"
  virtual const std::string& path() const = 0;
};

// Opens the database at `path` of a registered `type` ("lmdb", "leveldb"). Throws IoError when the path is
// missing or cannot be read or created, InvalidInput for an unknown type, for a path that is not a database
// of that type (naming the type it looks like), or when kNew finds the path taken.
std::unique_ptr<DB> OpenDB(const std::string& type, const std::string& path, DbMode mode);

// The registered type whose marker file the directory `path` holds (data.mdb: lmdb, CURRENT: leveldb), or ""
// when none does.
std::string GuessDbType(const std::string& path);

// A backend: how to open it, and the file every database of its kind holds in its directory. Registered once
// per type, at the bottom of the backend's own file; OpenDB checks the path before calling `open`.
struct DbBackend {
  std::string marker_file;
  std::unique_ptr<DB> (*open)(const std::string& path, DbMode mode) = nullptr;
};
// The `open` of a backend whose DB class is constructed from (path, mode).
template <class Db>
std::unique_ptr<DB> OpenAs(const std::string& path, DbMode mode) {
  return std::make_unique<Db>(path, mode);
}
bool RegisterDbBackend(const std::string& type, DbBackend backend);  // throws on a duplicate type
std::vector<std::string> DbTypes();                                  // registered types, sorted

}  // namespace lockstep
