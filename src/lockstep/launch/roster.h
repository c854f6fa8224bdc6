// Who runs in a round of `lockstep launch`: how many agents a round takes (--nnodes), the roster that the agent
// which formed the round writes into the store, and the per-shard batch that keeps the job's global batch on
// the round's shard count.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {

// "N" or "MIN:MAX"; throws InvalidInput naming --nnodes.
std::pair<int, int> ParseNodeRange(const std::string& text);

// The per-shard batch that keeps `global_batch` on `num_shards` shards; throws InvalidInput naming the
// nearest shard counts that divide it.
int64_t BatchForShards(int64_t global_batch, int num_shards);

// Who runs in a round, as the agent that formed it wrote it.
struct Roster {
  int64_t global_batch = 0;
  std::string checkpoint;                           // empty: start fresh
  bool complete = false;                            // the checkpoint has every epoch: the job is done
  std::vector<std::pair<std::string, int>> agents;  // (agent id, shards), sorted by id

  int num_shards() const;
  // The first shard id of `agent_id`, or -1 when the roster does not hold it.
  int FirstShard(const std::string& agent_id) const;
  std::string ToText() const;
  static Roster Parse(const std::string& text);
};

}  // namespace lockstep
