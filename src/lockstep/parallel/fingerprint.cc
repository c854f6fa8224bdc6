#include "lockstep/parallel/fingerprint.h"

#include <map>
#include <sstream>

#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out;
}

// One "entry\tvalue" line per entry; names of blobs and flags hold neither tabs nor newlines.
std::string Serialize(const Fingerprint& fingerprint) {
  std::string out;
  for (const auto& [entry, value] : fingerprint) out += entry + "\t" + value + "\n";
  return out;
}

Fingerprint Parse(const std::string& text) {
  Fingerprint fingerprint;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t tab = line.find('\t');
    fingerprint.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return fingerprint;
}

}  // namespace

Fingerprint ModelFingerprint(const ModelHelper& model, const DataParallelModel& parallel) {
  const std::string& scope = parallel.scopes.at(0);
  Fingerprint fingerprint{{"lockstep version", LOCKSTEP_VERSION},
                          {"devices per shard", std::to_string(parallel.scopes.size())}};
  for (const auto& name : model.GetParams(scope))
    fingerprint.emplace_back("parameter " + name.substr(scope.size()),
                             ShapeToString(model.Param(name).shape));
  fingerprint.emplace_back("state blobs", Join(parallel.state_blobs));
  for (size_t i = 0; i < parallel.buckets.size(); ++i)
    fingerprint.emplace_back(fmt::format("gradient bucket {}", i), Join(parallel.buckets[i].params));
  // Shards that sent different dtypes would read each other's bytes as garbage.
  if (!parallel.buckets.empty())
    fingerprint.emplace_back("gradient wire dtype", DataTypeName(parallel.buckets[0].wire));
  return fingerprint;
}

std::string FirstDifference(const Fingerprint& first, const Fingerprint& other, int other_shard) {
  std::map<std::string, std::string> theirs(other.begin(), other.end());
  for (const auto& [entry, value] : first) {
    auto it = theirs.find(entry);
    if (it == theirs.end())
      return fmt::format("{} exists on shard 0 but not on shard {}", entry, other_shard);
    if (it->second != value)
      return fmt::format("{} is {} on shard 0 but {} on shard {}", entry, value, it->second, other_shard);
  }
  std::map<std::string, std::string> ours(first.begin(), first.end());
  for (const auto& [entry, value] : other)
    if (!ours.count(entry))
      return fmt::format("{} exists on shard {} but not on shard 0", entry, other_shard);
  return "";
}

void AgreeOnModel(Rendezvous* rendezvous, const Fingerprint& mine) {
  std::vector<std::string> all = rendezvous->AllGather("fingerprint", Serialize(mine));
  Fingerprint first = Parse(all[0]);
  for (size_t shard = 1; shard < all.size(); ++shard) {
    std::string difference = FirstDifference(first, Parse(all[shard]), static_cast<int>(shard));
    if (!difference.empty())
      throw InvalidInput(
          fmt::format("shard {}: the shards of {} differ: {}; start every shard with the same model "
                      "and flags",
                      rendezvous->shard(), rendezvous->description(), difference));
  }
}

}  // namespace lockstep
