// Where a restarted job resumes: the newest complete checkpoint the trainer wrote. This is the one place that
// chooses it, so that it can give way to the trainer's own `--load_model_path latest`.
#pragma once

#include <optional>
#include <string>

namespace lockstep {

// The checkpoint `{directory}/{name}_*.safetensors` with the highest `iteration` in its metadata (the later
// `epochs_done` on a tie), or nothing when there is none. Files that cannot be read are skipped with a line
// on stderr: the trainer writes atomically, so only a foreign file can be partial.
std::optional<std::string> NewestCheckpoint(const std::string& directory, const std::string& name);

}  // namespace lockstep
