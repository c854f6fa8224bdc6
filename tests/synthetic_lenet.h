// The trainer configuration several tests start from: LeNet on synthetic images.
#pragma once

#include <string>

#include "lockstep/train/trainer_config.h"

namespace lockstep::testing {

// LeNet on synthetic images, 12 steps of batch 8 an epoch, 2 epochs, checkpoints "m" in `dir`.
inline TrainerConfig SyntheticLeNet(const std::string& dir) {
  TrainerConfig config;
  config.model = "lenet";
  config.train_data = "null";
  config.num_channels = 1;
  config.image_size = 28;
  config.num_labels = 10;
  config.batch_size = 8;
  config.epoch_size = 96;
  config.num_epochs = 2;
  config.threads = 1;
  config.log_dir = dir;
  config.file_store_path = dir;
  config.save_model_name = "m";
  config.arguments = "test run";
  return config;
}

}  // namespace lockstep::testing
