// The training loop behind `lockstep train` / `resnet50_trainer`: builds the model, runs epochs, evaluates,
// logs a CSV row per epoch and checkpoints.
#pragma once

#include <string>

#include "lockstep/train/evaluate.h"
#include "lockstep/train/trainer_config.h"

namespace lockstep {

// `lockstep launch` sets this variable to 1 for the shards it starts: it puts "[shard i] " before every line
// they write, so the trainer leaves out the "shard i: " that marks its lines under mpirun, srun or by hand.
inline constexpr char kLinesPrefixedVariable[] = "LOCKSTEP_LINES_PREFIXED";

struct TrainerResult {
  bool complete = false;  // the checkpoint resumed from had all --num_epochs: nothing was trained or logged
  std::string log_path;
  double last_test_accuracy = -1;
  double last_loss = 0;
  int stopped_by = 0;           // the signal that stopped training early (StopOnSignals), else 0
  std::string stopped_message;  // then: where it stopped and how to resume
};

// Validates the configuration, then trains; throws lockstep::Error with a one-line message on bad input.
TrainerResult Train(const TrainerConfig& config);

// Evaluates the checkpoint config.load_model_path on every record of config.test_data once, on the devices
// and with the batch size of the configuration (BN in test mode, on the running statistics); the checkpoint
// is only read. With a predictions_path, writes a row per record there (PredictionsCsv), with_logits with the
// record's logits. Throws
// lockstep::Error with a one-line message on bad input.
EvaluationResult EvaluateCheckpoint(const TrainerConfig& config, const std::string& predictions_path = "",
                                    bool with_logits = false);

}  // namespace lockstep
