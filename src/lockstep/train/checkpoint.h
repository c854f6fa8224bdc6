// Training checkpoints: the parameters and optimizer state of one replica with its name scope stripped, and
// the trainer's position in the metadata, as a safetensors file that numpy/PyTorch/JAX can read.
//
// Names in the checkpoint directory (--file_store_path), for --save_model_name NAME:
//   NAME_{epoch}.safetensors         after each epoch (epoch 1, 2, ...); never removed
//   NAME_iter{iteration}.safetensors every --checkpoint_every_iters optimizer steps within an epoch, the
//                                    iteration zero-padded to 10 digits so that a listing sorts them; the
//                                    oldest beyond --keep_checkpoints are removed
// Both hold the same tensors and metadata; "iteration" (global optimizer steps) orders them. The metadata
// also describes the network ("model", "num_channels", "image_size", "num_labels"), so that eval, resume and
// export build it again without being told.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/workspace.h"

namespace lockstep {

// The network a checkpoint holds: what building it again takes. A checkpoint written before lockstep recorded
// the geometry has 0 there, and one without a model name (a hand-made file) has "".
struct ModelDescription {
  std::string name;  // of the model zoo: lenet, resnet50, wrn-28-10, ...
  int num_channels = 0, image_size = 0, num_labels = 0;
  int scale = 0;              // the shortest side database images were resized to before the crop
  std::string input_scaling;  // InputScaling() of its training data; "" where not recorded
  std::string color_order;    // of its training database's color images (bgr, rgb); "" where not recorded
};

// The geometry of a ModelDescription by name: the metadata's keys, which are also the trainer's options.
struct GeometryField {
  const char* name;
  int ModelDescription::*field;
};
inline constexpr GeometryField kModelGeometry[] = {
    {"num_channels", &ModelDescription::num_channels},
    {"image_size", &ModelDescription::image_size},
    {"num_labels", &ModelDescription::num_labels},
    {"scale", &ModelDescription::scale},
};

struct TrainerState {
  ModelDescription model;
  int64_t epochs_done = 0;      // completed epochs
  int64_t iteration = 0;        // optimizer steps taken
  int64_t epoch_iteration = 0;  // steps taken in epoch epochs_done + 1: 0 at an epoch's end
  int64_t reader_position = 0;  // next record of the training stream
  uint64_t seed = 0;            // the data order and initialisation derive from it
  // The job's batch (every shard's) and steps per epoch, which a mid-epoch resume must keep; 0: not recorded
  // (checkpoints of older versions, or of the Python front-end).
  int64_t global_batch = 0;
  int64_t epoch_steps = 0;
  // The log's running totals continue from these. Images count the whole job (every shard); a machine's log
  // counts its share, which stays its own when a job resumes on another number of shards (0: not recorded).
  int64_t images_trained = 0;
  int64_t shard_images_trained = 0;
  int64_t training_milliseconds = 0;
};

std::string CheckpointPath(const std::string& directory, const std::string& name, int64_t epoch);
// The mid-epoch checkpoint after optimizer step `iteration`.
std::string IterationCheckpointPath(const std::string& directory, const std::string& name, int64_t iteration);

// The mid-epoch checkpoints of `name` in `directory` as (iteration, path), by iteration; the iteration is
// read from the file name. Throws IoError when the directory cannot be listed (a missing one has none).
std::vector<std::pair<int64_t, std::string>> IterationCheckpoints(const std::string& directory,
                                                                  const std::string& name);

// The regular files of `directory` named as epoch or mid-epoch checkpoints of `name`, as paths, sorted; none
// when the directory does not exist. Throws IoError when it cannot be listed.
std::vector<std::string> CheckpointsOf(const std::string& directory, const std::string& name);

// The temporaries of checkpoints of `name` in `directory` that a process left when it was killed while
// writing one (`{checkpoint}.tmp.{pid}`).
std::vector<std::string> PartialCheckpointsOf(const std::string& directory, const std::string& name);

// The checkpoints of `name` in `directory` taken later in the run than the checkpoint `path` (a larger
// iteration, or the epoch's checkpoint of the same step) whose checksums hold, in run order: what a run
// resumed from `path` would write over.
std::vector<std::string> CheckpointsAfter(const std::string& directory, const std::string& name,
                                          const std::string& path);

// Where a run of `name` resumes: of the epoch and mid-epoch checkpoints of `name` in `directory`, the one
// with the largest "iteration" in its metadata (an epoch checkpoint on a tie) whose checksums hold; "" when
// there is none. Temporary files of an unfinished write are not considered; files that are corrupt or not
// lockstep's training checkpoints are passed over, each with one line saying why in `skipped`.
std::string LatestCheckpoint(const std::string& directory, const std::string& name,
                             std::vector<std::string>* skipped = nullptr);

// The network the checkpoint at `path` describes; reads only the header. Throws IoError when the file cannot
// be read, InvalidInput when its model is one this build does not know or a geometry entry is not a positive
// integer.
ModelDescription ReadModelDescription(const std::string& path);

// The epochs the checkpoint at `path` has trained ("epochs_done" in its metadata); reads only the header.
// Throws as LoadCheckpoint.
int64_t CheckpointEpochsDone(const std::string& path);

// A checkpoint's contents in host memory, in plain row-major layout: taken from a workspace, written to a
// file. Taking it again reuses the buffers of the same tensors.
class CheckpointSnapshot {
 public:
  // Copies the blobs `scope + name` for each name, to be saved under their unscoped names, and the state.
  void Take(const Workspace& ws, const std::string& scope, const std::vector<std::string>& names,
            const TrainerState& state);
  // Writes the file atomically; throws IoError when it cannot.
  void Write(const std::string& path) const;
  const TrainerState& state() const { return state_; }

 private:
  std::map<std::string, Tensor> tensors_;
  TrainerState state_;
};

// Saves blobs `scope + name` for each name under their unscoped names, atomically.
void SaveCheckpoint(const std::string& path, const Workspace& ws, const std::string& scope,
                    const std::vector<std::string>& names, const TrainerState& state);

// Loads every name into `scope + name`; the checkpoint must hold exactly these tensors with the shapes the
// workspace already has (it was initialised from the same model). Returns the trainer state.
TrainerState LoadCheckpoint(const std::string& path, Workspace* ws, const std::string& scope,
                            const std::vector<std::string>& names);

// Loads only `names` (the parameters and statistics a test net reads) and ignores the checkpoint's other
// tensors (the optimizer's state).
TrainerState LoadCheckpointParameters(const std::string& path, Workspace* ws, const std::string& scope,
                                      const std::vector<std::string>& names);

}  // namespace lockstep
