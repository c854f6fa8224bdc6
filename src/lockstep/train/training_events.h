// What a training run shows in TensorBoard (--tensorboard_dir): the options as a table under the "options"
// text tag at the start, the progress rows of IntervalLog (train/...) and each epoch's figures (epoch/...) as
// scalars, at the job's step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/train/csv_log.h"
#include "lockstep/train/event_file.h"
#include "lockstep/train/trainer_config.h"

namespace lockstep {

// This shard's run folder: --tensorboard_dir itself with one shard or --tensorboard_shard0_only, else
// <dir>/shard<k>, so that TensorBoard lists each shard as a run; "" when this shard writes none.
std::string TensorBoardRunDir(const TrainerConfig& config);
// The shard's event file with the options written, or null where TensorBoardRunDir is "".
std::unique_ptr<EventFile> OpenTrainingEvents(const TrainerConfig& config);
// Every trainer option and its value, as a Markdown table.
std::string OptionsMarkdown(const TrainerConfig& config);
// epoch/loss, epoch/accuracy, epoch/images_per_sec, epoch/learning_rate, and epoch/test_accuracy when the
// record has one.
void WriteEpochEvents(EventFile* events, const EpochRecord& record, int64_t step);

}  // namespace lockstep
