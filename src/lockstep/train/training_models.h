// The nets one training run builds from its configuration: the data-parallel training model (the reader's
// input, the zoo's network in the run's precision, loss, accuracy and the SGD update) and the evaluation
// replicas on its parameters, with the memory plan of both. `lockstep train` and `lockstep eval` share them.
#pragma once

#include <string>
#include <vector>

#include "lockstep/model/model_helper.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/train/evaluate.h"
#include "lockstep/train/trainer_config.h"

namespace lockstep {

// The workspace object the training net's ReadBatch reads from (a BatchReader).
inline constexpr const char* kTrainReader = "train_reader";

struct TrainingModels {
  ModelHelper train{"train"};
  ModelHelper test{"test", /*init_params=*/false};
  DataParallelModel parallel;
  // Replica 0's figures, as the log reports them (one blob per micro-batch); the loss is the unscaled one.
  std::vector<std::string> train_loss, train_accuracy;
  std::string lr;
  std::vector<TestReplica> test_replicas;  // one per replica, in test mode, each on its replica's parameters
};

// Replicas of the model on this shard: its devices over the devices each replica spans.
inline int TrainingReplicas(const TrainerConfig& c) { return c.num_devices / c.model_parallel; }

// Builds the models of `config` into *m; the shards' Gloo communicator is the workspace object
// `shard_communicator` ("" for one process). The learning rate's steps (--lr_step_epochs) count epochs of
// `steps_per_epoch` steps; 0 for models that are not trained (eval, other batch sizes' memory plans) keeps
// the rate fixed. Throws InvalidInput for a model that cannot be built so.
void BuildTrainingModels(const TrainerConfig& config, const std::string& shard_communicator,
                         TrainingModels* m, int64_t steps_per_epoch = 0);

}  // namespace lockstep
