// A training run's TensorBoard events.
#include "lockstep/train/training_events.h"

#include <fmt/format.h>

#include <utility>

#include "lockstep/train/trainer_options.h"

namespace lockstep {

std::string TensorBoardRunDir(const TrainerConfig& config) {
  if (config.tensorboard_dir.empty()) return "";
  if (config.num_shards == 1) return config.tensorboard_dir;
  if (config.tensorboard_shard0_only) return config.shard_id == 0 ? config.tensorboard_dir : "";
  return fmt::format("{}/shard{}", config.tensorboard_dir, config.shard_id);
}

std::unique_ptr<EventFile> OpenTrainingEvents(const TrainerConfig& config) {
  const std::string directory = TensorBoardRunDir(config);
  if (directory.empty()) return nullptr;
  auto events = std::make_unique<EventFile>(directory);
  events->Text("options", 0, OptionsMarkdown(config));
  return events;
}

std::string OptionsMarkdown(const TrainerConfig& config) {
  std::string table = "| option | value |\n|---|---|\n";
  for (const TrainerOption& option : TrainerOptions())
    table += fmt::format("| {} | {} |\n", option.name, OptionText(config, option));
  return table;
}

void WriteEpochEvents(EventFile* events, const EpochRecord& record, int64_t step) {
  for (const auto& [tag, value] :
       {std::pair<const char*, double>{"epoch/loss", record.loss},
        {"epoch/accuracy", record.accuracy},
        {"epoch/images_per_sec", record.time_spent > 0 ? record.input_count / record.time_spent : 0},
        {"epoch/learning_rate", record.learning_rate}})
    events->Scalar(tag, step, value);
  if (record.test_accuracy >= 0) events->Scalar("epoch/test_accuracy", step, record.test_accuracy);
}

}  // namespace lockstep
