// A small image database whose records say where they are, for the tests of the readers over databases.
#pragma once

#include <fmt/format.h>

#include <set>
#include <string>

#include "lockstep/data/db.h"
#include "lockstep/data/image_record.h"
#include "shards.h"

namespace lockstep::testing {

// A database of `count` one-pixel gray records whose pixel is the record's index and whose label is
// index % 10, as raw Datums under zero-padded keys; `bad` records hold garbage instead.
inline std::string MakeIndexDb(const TempDirectory& dir, const std::string& type, int count,
                               const std::set<int>& bad = {}) {
  std::string path = dir / ("index_" + type);
  auto db = OpenDB(type, path, DbMode::kNew);
  auto transaction = db->NewTransaction();
  for (int i = 0; i < count; ++i) {
    ImageRecord record;
    record.label = i % 10;
    record.channels = record.height = record.width = 1;
    record.bytes = std::string(1, static_cast<char>(i));
    transaction->Put(fmt::format("{:05d}", i),
                     bad.count(i) ? std::string("not a record") : MakeDatum(record));
  }
  transaction->Commit();
  return path;
}

}  // namespace lockstep::testing
