// Rounds' sizes, rosters and batches (roster.h).
#include "lockstep/launch/roster.h"

#include <algorithm>
#include <sstream>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

int ParseCount(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > 65536)
    throw InvalidInput(fmt::format("{} '{}' is not a count in [1, 65536]", what, text));
  return static_cast<int>(value);
}

}  // namespace

std::pair<int, int> ParseNodeRange(const std::string& text) {
  const size_t colon = text.find(':');
  const int low = ParseCount(text.substr(0, colon), "--nnodes");
  const int high = colon == std::string::npos ? low : ParseCount(text.substr(colon + 1), "--nnodes");
  if (low > high) throw InvalidInput(fmt::format("--nnodes {}: MIN must not exceed MAX", text));
  return {low, high};
}

int64_t BatchForShards(int64_t global_batch, int num_shards) {
  if (global_batch % num_shards == 0) return global_batch / num_shards;
  int64_t below = std::min<int64_t>(num_shards - 1, global_batch), above = num_shards + 1;
  while (global_batch % below != 0) --below;
  while (above < global_batch && global_batch % above != 0) ++above;
  const std::string nearest =
      above <= global_batch ? fmt::format("are {} and {}", below, above) : fmt::format("is {}", below);
  throw InvalidInput(
      fmt::format("the global batch {} of the first round does not divide among {} shards; the "
                  "nearest shard counts that keep it {}: change --nproc_per_node or the machines",
                  global_batch, num_shards, nearest));
}

int Roster::num_shards() const {
  int total = 0;
  for (const auto& agent : agents) total += agent.second;
  return total;
}

int Roster::FirstShard(const std::string& agent_id) const {
  int first = 0;
  for (const auto& [id, shards] : agents) {
    if (id == agent_id) return first;
    first += shards;
  }
  return -1;
}

std::string Roster::ToText() const {
  std::string text = fmt::format("global_batch {}\ncheckpoint {}\ncomplete {}\n", global_batch, checkpoint,
                                 complete ? 1 : 0);
  for (const auto& [id, shards] : agents) text += fmt::format("agent {} {}\n", id, shards);
  return text;
}

Roster Roster::Parse(const std::string& text) {
  Roster roster;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space),
                      value = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "global_batch") {
      roster.global_batch = std::stoll(value);
    } else if (key == "checkpoint") {
      roster.checkpoint = value;
    } else if (key == "complete") {
      roster.complete = value == "1";
    } else if (key == "agent") {
      std::istringstream fields(value);
      std::pair<std::string, int> agent;
      fields >> agent.first >> agent.second;
      roster.agents.push_back(agent);
    }
  }
  LOCKSTEP_ENFORCE(roster.global_batch > 0 && !roster.agents.empty(), "malformed roster: ", text);
  return roster;
}

}  // namespace lockstep
