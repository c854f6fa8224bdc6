// DB, Cursor and Transaction over LMDB and LevelDB: round trips in key order, map growth, cursors on other
// threads, one clear error per kind of bad path, and databases written by Python's lmdb and plyvel.
#include "lockstep/data/db.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/enforce.h"
#include "python_written_dbs.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

// Expects `body` to throw ErrorType with a message holding every fragment.
template <typename ErrorType, typename Body>
void ExpectError(Body body, const std::vector<std::string>& fragments) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one holding '" << fragments.front() << "'";
  } catch (const ErrorType& error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const auto& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

// Records whose keys are not written in key order, with an empty value and values of many sizes.
std::map<std::string, std::string> SampleRecords() {
  std::map<std::string, std::string> records;
  for (int i = 0; i < 50; ++i) {
    int n = (i * 37) % 50;  // a permutation of 0..49, so puts come out of order
    std::string value(static_cast<size_t>(n) * 97, '\0');
    for (size_t j = 0; j < value.size(); ++j) value[j] = static_cast<char>((j * 131 + n) & 0xFF);
    records[std::to_string(n * 11)] = value;
  }
  records["z-last"] = "";
  records[std::string("bin\0key\xff", 8)] = "binary key";
  return records;
}

void WriteRecords(DB* db, const std::map<std::string, std::string>& records, int commits) {
  std::vector<std::pair<std::string, std::string>> order(records.rbegin(), records.rend());
  auto transaction = db->NewTransaction();
  for (size_t i = 0; i < order.size(); ++i) {
    transaction->Put(order[i].first, order[i].second);
    if ((i + 1) % (order.size() / commits + 1) == 0) transaction->Commit();
  }
  transaction->Commit();
}

// Every record, in the cursor's order.
std::vector<std::pair<std::string, std::string>> ReadAll(Cursor* cursor) {
  std::vector<std::pair<std::string, std::string>> records;
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next())
    records.emplace_back(std::string(cursor->key()), std::string(cursor->value()));
  return records;
}

class DbTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string type() const { return GetParam(); }
  std::string other_type() const { return GetParam() == "lmdb" ? "leveldb" : "lmdb"; }

  std::string MakeDb(const std::string& name, const std::map<std::string, std::string>& records) {
    std::string path = dir_ / name;
    WriteRecords(OpenDB(type(), path, DbMode::kNew).get(), records, 3);
    return path;
  }

  TempDirectory dir_;
};

TEST_P(DbTest, RoundTripInKeyOrder) {
  auto records = SampleRecords();
  std::string path = MakeDb("db", records);
  auto db = OpenDB(type(), path, DbMode::kRead);
  EXPECT_EQ(db->type(), type());
  EXPECT_EQ(db->path(), path);
  EXPECT_EQ(db->Count(), static_cast<int64_t>(records.size()));
  auto cursor = db->NewCursor();
  std::vector<std::pair<std::string, std::string>> expected(records.begin(), records.end());
  EXPECT_EQ(ReadAll(cursor.get()), expected);
  // A second pass reads the same records.
  EXPECT_EQ(ReadAll(cursor.get()), expected);
}

TEST_P(DbTest, SeekFindsTheFirstKeyNotBefore) {
  auto records = SampleRecords();
  auto db = OpenDB(type(), MakeDb("db", records), DbMode::kRead);
  auto cursor = db->NewCursor();
  cursor->Seek("33");
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), "33");
  EXPECT_EQ(cursor->value(), records["33"]);
  cursor->Seek("331");  // no such key: the cursor stops at the next one
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), records.lower_bound("331")->first);
  cursor->Seek("zz");
  EXPECT_FALSE(cursor->valid());
  cursor->SeekToFirst();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), records.begin()->first);
}

TEST_P(DbTest, UncommittedPutsAreNotWritten) {
  std::string path = dir_ / "db";
  {
    auto db = OpenDB(type(), path, DbMode::kNew);
    auto transaction = db->NewTransaction();
    transaction->Put("kept", "1");
    transaction->Commit();
    transaction->Put("dropped", "2");
  }
  auto db = OpenDB(type(), path, DbMode::kRead);
  auto cursor = db->NewCursor();
  std::vector<std::pair<std::string, std::string>> expected{{"kept", "1"}};
  EXPECT_EQ(ReadAll(cursor.get()), expected);
  EXPECT_EQ(db->Count(), 1);
}

TEST_P(DbTest, EmptyDatabase) {
  auto db = OpenDB(type(), MakeDb("db", {}), DbMode::kRead);
  EXPECT_EQ(db->Count(), 0);
  EXPECT_FALSE(db->NewCursor()->valid());
}

// Readers are made on one thread and used on others, several at once, and may outlive the DB object.
TEST_P(DbTest, CursorsOnOtherThreads) {
  auto records = SampleRecords();
  std::vector<std::pair<std::string, std::string>> expected(records.begin(), records.end());
  auto db = OpenDB(type(), MakeDb("db", records), DbMode::kRead);
  std::vector<std::unique_ptr<Cursor>> cursors;
  for (int i = 0; i < 4; ++i) cursors.push_back(db->NewCursor());
  db.reset();
  std::vector<std::vector<std::pair<std::string, std::string>>> read(cursors.size());
  OnShards(4, [&](int shard) {
    for (int pass = 0; pass < 3; ++pass) read[shard] = ReadAll(cursors[shard].get());
    cursors[shard].reset();
  });
  for (const auto& records_read : read) EXPECT_EQ(records_read, expected);
}

TEST_P(DbTest, ModesAllowOnlyTheirUse) {
  std::string path = dir_ / "db";
  EXPECT_THROW(OpenDB(type(), path, DbMode::kNew)->NewCursor(), Error);
  EXPECT_THROW(OpenDB(type(), path, DbMode::kRead)->NewTransaction(), Error);
}

TEST_P(DbTest, NewRefusesAnExistingPath) {
  std::string path = MakeDb("db", {{"a", "1"}});
  ExpectError<InvalidInput>([&] { OpenDB(type(), path, DbMode::kNew); },
                            {"--db_type " + type(), "'" + path + "'", "already exists"});
  std::string empty = dir_ / "empty";
  std::filesystem::create_directory(empty);
  ExpectError<InvalidInput>([&] { OpenDB(type(), empty, DbMode::kNew); },
                            {"'" + empty + "'", "already exists"});
  // The database is untouched.
  EXPECT_EQ(OpenDB(type(), path, DbMode::kRead)->Count(), 1);
}

TEST_P(DbTest, NewNeedsTheParentDirectory) {
  std::string path = dir_ / "missing/db";
  ExpectError<IoError>([&] { OpenDB(type(), path, DbMode::kNew); }, {"'" + path + "'", "does not exist"});
}

TEST_P(DbTest, MissingPath) {
  std::string path = dir_ / "nothing";
  ExpectError<InvalidInput>([&] { OpenDB(type(), path, DbMode::kRead); },
                            {"--db_type " + type(), "'" + path + "'", "does not exist"});
}

TEST_P(DbTest, NotADatabase) {
  std::string empty = dir_ / "empty";
  std::filesystem::create_directory(empty);
  ExpectError<InvalidInput>([&] { OpenDB(type(), empty, DbMode::kRead); },
                            {"--db_type " + type(), "'" + empty + "'", "not a database of that type"});
  std::string file = dir_ / "file";
  std::ofstream(file) << "not a database";
  ExpectError<InvalidInput>([&] { OpenDB(type(), file, DbMode::kRead); }, {"'" + file + "'", "is a file"});
}

TEST_P(DbTest, WrongTypeNamesTheRightOne) {
  std::string path = dir_ / "db";
  WriteRecords(OpenDB(other_type(), path, DbMode::kNew).get(), {{"a", "1"}}, 1);
  EXPECT_EQ(GuessDbType(path), other_type());
  ExpectError<InvalidInput>([&] { OpenDB(type(), path, DbMode::kRead); },
                            {"--db_type " + type(), "'" + path + "'", "pass --db_type " + other_type()});
}

TEST_P(DbTest, CorruptMarkerFile) {
  std::string path = dir_ / "db";
  std::filesystem::create_directory(path);
  std::ofstream(dir_ / (type() == "lmdb" ? "db/data.mdb" : "db/CURRENT")) << "garbage that is no database";
  ExpectError<InvalidInput>([&] { OpenDB(type(), path, DbMode::kRead); }, {"--db_type " + type(), path});
}

INSTANTIATE_TEST_SUITE_P(Backends, DbTest, ::testing::Values("lmdb", "leveldb"),
                         [](const auto& info) { return info.param; });

TEST(DbTypesTest, RegisteredTypesAndUnknownType) {
  EXPECT_EQ(DbTypes(), (std::vector<std::string>{"leveldb", "lmdb"}));
  ExpectError<InvalidInput>([] { OpenDB("rocksdb", "/data/train", DbMode::kRead); },
                            {"'rocksdb'", "'/data/train'", "leveldb, lmdb"});
  TempDirectory dir;
  EXPECT_EQ(GuessDbType(dir.path()), "");
  EXPECT_EQ(GuessDbType(dir / "missing"), "");
}

// A map that starts at 64 MiB grows when a commit fills it, and the commit is retried whole.
TEST(LmdbTest, CommitGrowsTheMap) {
  TempDirectory dir;
  std::string path = dir / "db";
  const int kRecords = 100;
  std::string value(1 << 20, '\0');
  {
    auto db = OpenDB("lmdb", path, DbMode::kNew);
    auto transaction = db->NewTransaction();
    for (int i = 0; i < kRecords; ++i) {
      std::fill(value.begin(), value.end(), static_cast<char>(i));
      transaction->Put(fmt::format("{:03d}", i), value);
      if (i % 40 == 39) transaction->Commit();
    }
    transaction->Commit();
  }
  auto db = OpenDB("lmdb", path, DbMode::kRead);
  EXPECT_EQ(db->Count(), kRecords);
  auto cursor = db->NewCursor();
  for (int i = 0; i < kRecords; ++i, cursor->Next()) {
    ASSERT_TRUE(cursor->valid());
    ASSERT_EQ(cursor->key(), fmt::format("{:03d}", i));
    ASSERT_EQ(cursor->value().size(), value.size());
    ASSERT_EQ(std::count(cursor->value().begin(), cursor->value().end(), static_cast<char>(i)), 1 << 20);
  }
  EXPECT_FALSE(cursor->valid());
}

TEST(LmdbTest, KeysOutsideLmdbLimits) {
  TempDirectory dir;
  auto db = OpenDB("lmdb", dir / "db", DbMode::kNew);
  auto transaction = db->NewTransaction();
  ExpectError<InvalidInput>([&] { transaction->Put("", "v"); }, {"key of 0 bytes", "1 to 511 bytes"});
  ExpectError<InvalidInput>([&] { transaction->Put(std::string(512, 'k'), "v"); }, {"key of 512 bytes"});
}

// LevelDB opens a database once at a time; the second open says so.
TEST(LeveldbTest, SecondOpenSaysWhy) {
  TempDirectory dir;
  std::string path = dir / "db";
  WriteRecords(OpenDB("leveldb", path, DbMode::kNew).get(), {{"a", "1"}}, 1);
  auto first = OpenDB("leveldb", path, DbMode::kRead);
  ExpectError<IoError>([&] { OpenDB("leveldb", path, DbMode::kRead); },
                       {"'" + path + "'", "one open of a database at a time"});
}

// Databases written by Python's lmdb and plyvel (tests/write_image_dbs.py) read back key by key.
class PythonWrittenDbTest : public PythonWrittenDbs {};

TEST_F(PythonWrittenDbTest, KeysAndValuesInKeyOrder) {
  ASSERT_EQ(manifest_["databases"].size(), 8u);
  for (const auto& database : manifest_["databases"]) {
    std::string type = database["db_type"], path = database["path"];
    SCOPED_TRACE(path);
    EXPECT_EQ(GuessDbType(path), type);
    auto db = OpenDB(type, path, DbMode::kRead);
    EXPECT_EQ(db->Count(), static_cast<int64_t>(database["records"].size()));
    auto cursor = db->NewCursor();
    for (const auto& record : database["records"]) {
      ASSERT_TRUE(cursor->valid());
      EXPECT_EQ(cursor->key(), record["key"].get<std::string>());
      auto value = record["value_bytes"].get<std::vector<uint8_t>>();
      EXPECT_EQ(cursor->value(), std::string(value.begin(), value.end()));
      cursor->Next();
    }
    EXPECT_FALSE(cursor->valid());
  }
}

}  // namespace
}  // namespace lockstep::testing
