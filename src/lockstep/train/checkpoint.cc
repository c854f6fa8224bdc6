// Checkpoint save/load on top of the safetensors reader and writer.
#include "lockstep/train/checkpoint.h"

#include <map>
#include <set>

#include "lockstep/core/version.h"
#include "lockstep/train/safetensors.h"

namespace lockstep {

std::string CheckpointPath(const std::string& directory, const std::string& name, int64_t epoch) {
  return fmt::format("{}/{}_{}.safetensors", directory.empty() ? "." : directory, name, epoch);
}

void SaveCheckpoint(const std::string& path, const Workspace& ws, const std::string& scope,
                    const std::vector<std::string>& names, const TrainerState& state) {
  std::map<std::string, const Tensor*> tensors;
  std::map<std::string, Tensor> host;  // blobs in a backend layout or in device memory: row-major host copies
  for (const auto& name : names) {
    const Tensor& blob = ws.Blob(scope + name);
    const bool as_is = blob.is_plain() && blob.on_host();
    if (!as_is) blob.ToPlain(&host[name]);
    tensors[name] = as_is ? &blob : &host[name];
  }
  std::map<std::string, std::string> metadata = {
      {"format", "lockstep"},
      {"lockstep_version", Version()},
      {"model", state.model},
      {"epochs_done", std::to_string(state.epochs_done)},
      {"iteration", std::to_string(state.iteration)},
      {"reader_position", std::to_string(state.reader_position)},
      {"seed", std::to_string(state.seed)},
      {"images_trained", std::to_string(state.images_trained)},
      {"training_milliseconds", std::to_string(state.training_milliseconds)},
  };
  WriteSafetensors(path, tensors, metadata);
}

namespace {
int64_t MetadataInt(const std::string& path, const std::map<std::string, std::string>& metadata,
                    const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end())
    throw InvalidInput(fmt::format(
        "checkpoint {} has no '{}' in its metadata: not a lockstep training checkpoint", path, key));
  try {
    size_t used = 0;
    long long value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  throw InvalidInput(
      fmt::format("checkpoint {}: metadata '{}' is not an integer: '{}'", path, key, it->second));
}

// Copies `names` from the file into `scope + name` after checking that each is there with the model's shape.
void LoadTensors(const std::string& path, const SafetensorsFile& file, Workspace* ws,
                 const std::string& scope, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end())
      throw InvalidInput(
          fmt::format("checkpoint {} lacks '{}': was it saved from another model?", path, name));
    Tensor* blob = ws->GetBlob(scope + name);
    LOCKSTEP_ENFORCE(blob != nullptr, "blob '{}' must exist before loading a checkpoint", scope + name);
    if (blob->shape() != it->second.shape() || blob->dtype() != it->second.dtype())
      throw InvalidInput(fmt::format("checkpoint {}: '{}' is {} {} but the model has {} {}", path, name,
                                     DataTypeName(it->second.dtype()), ShapeToString(it->second.shape()),
                                     DataTypeName(blob->dtype()), ShapeToString(blob->shape())));
  }
  for (const auto& name : names) ws->GetBlob(scope + name)->CopyFrom(file.tensors.at(name));
}

TrainerState StateOf(const std::string& path, const SafetensorsFile& file) {
  TrainerState state;
  auto model = file.metadata.find("model");
  state.model = model == file.metadata.end() ? "" : model->second;
  state.epochs_done = MetadataInt(path, file.metadata, "epochs_done");
  state.iteration = MetadataInt(path, file.metadata, "iteration");
  state.reader_position = MetadataInt(path, file.metadata, "reader_position");
  state.seed = static_cast<uint64_t>(MetadataInt(path, file.metadata, "seed"));
  state.images_trained = MetadataInt(path, file.metadata, "images_trained");
  state.training_milliseconds = MetadataInt(path, file.metadata, "training_milliseconds");
  return state;
}

}  // namespace

TrainerState LoadCheckpoint(const std::string& path, Workspace* ws, const std::string& scope,
                            const std::vector<std::string>& names) {
  SafetensorsFile file = ReadSafetensors(path);
  std::set<std::string> expected(names.begin(), names.end());
  for (const auto& entry : file.tensors)
    if (!expected.count(entry.first))
      throw InvalidInput(
          fmt::format("checkpoint {} holds '{}', which this model does not have: was it saved from "
                      "another model?",
                      path, entry.first));
  LoadTensors(path, file, ws, scope, names);
  return StateOf(path, file);
}

TrainerState LoadCheckpointParameters(const std::string& path, const std::string& model, Workspace* ws,
                                      const std::string& scope, const std::vector<std::string>& names) {
  SafetensorsFile file = ReadSafetensors(path);
  auto saved = file.metadata.find("model");
  if (saved != file.metadata.end() && saved->second != model)
    throw InvalidInput(
        fmt::format("checkpoint {} was saved from model '{}', not --model {}", path, saved->second, model));
  LoadTensors(path, file, ws, scope, names);
  return StateOf(path, file);
}

}  // namespace lockstep
