// Training checkpoints: the parameters and optimizer state of one replica with its name scope stripped, and
// the trainer's position in the metadata, as a safetensors file that numpy/PyTorch/JAX can read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/core/workspace.h"

namespace lockstep {

struct TrainerState {
  std::string model;
  int64_t epochs_done = 0;
  int64_t iteration = 0;        // optimizer steps taken
  int64_t reader_position = 0;  // next record of the training stream
  uint64_t seed = 0;            // the data order and initialisation derive from it
  // The log's running totals continue from these. Images count the whole job (every shard); a machine's log
  // counts its share.
  int64_t images_trained = 0;
  int64_t training_milliseconds = 0;
};

std::string CheckpointPath(const std::string& directory, const std::string& name, int64_t epoch);

// Saves blobs `scope + name` for each name under their unscoped names, atomically.
void SaveCheckpoint(const std::string& path, const Workspace& ws, const std::string& scope,
                    const std::vector<std::string>& names, const TrainerState& state);

// Loads every name into `scope + name`; the checkpoint must hold exactly these tensors with the shapes the
// workspace already has (it was initialised from the same model). Returns the trainer state.
TrainerState LoadCheckpoint(const std::string& path, Workspace* ws, const std::string& scope,
                            const std::vector<std::string>& names);

// Loads only `names` (the parameters and statistics a test net reads) and ignores the checkpoint's other
// tensors (the optimizer's state); the checkpoint must have been saved from `model`.
TrainerState LoadCheckpointParameters(const std::string& path, const std::string& model, Workspace* ws,
                                      const std::string& scope, const std::vector<std::string>& names);

}  // namespace lockstep
