// Checkpoint save/load and the checkpoints of a directory, on top of the safetensors reader and writer.
#include "lockstep/train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <system_error>

#include "lockstep/core/version.h"
#include "lockstep/model/zoo.h"
#include "lockstep/train/safetensors.h"

namespace lockstep {

namespace {

constexpr const char* kExtension = ".safetensors";

std::string Directory(const std::string& directory) { return directory.empty() ? "." : directory; }

// N of a file named "{name}_{marker}N.safetensors", N decimal digits; -1 for any other name (a temporary file
// "....safetensors.tmp.PID" among them).
int64_t NumberInName(const std::string& file_name, const std::string& name, const std::string& marker) {
  const std::string prefix = name + "_" + marker, suffix = kExtension;
  if (file_name.size() <= prefix.size() + suffix.size() || file_name.compare(0, prefix.size(), prefix) != 0 ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const char* first = file_name.data() + prefix.size();
  const char* last = file_name.data() + file_name.size() - suffix.size();
  int64_t number = -1;
  auto [end, error] = std::from_chars(first, last, number);
  if (error != std::errc() || end != last || *first == '-' || *first == '+') return -1;
  return number;
}

// The names of the directory's entries, sorted; none when it does not exist.
std::vector<std::string> FileNames(const std::string& directory) {
  std::vector<std::string> names;
  std::error_code error;
  std::filesystem::directory_iterator it(directory, error);
  if (error == std::errc::no_such_file_or_directory) return names;
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error))
    names.push_back(it->path().filename().string());
  if (error)
    throw IoError(fmt::format("cannot list checkpoint directory {}: {}", directory, error.message()));
  std::sort(names.begin(), names.end());
  return names;
}

// A metadata entry as an integer, or -1 when it is missing or not one.
int64_t MetadataNumber(const std::map<std::string, std::string>& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) return -1;
  int64_t number = -1;
  const std::string& text = it->second;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  return error == std::errc() && end == text.data() + text.size() ? number : -1;
}

// Where in its run a checkpoint was taken, (iteration, epochs_done): an epoch's checkpoint comes after the
// mid-epoch one of the same step. Negative numbers where the metadata lacks them.
std::pair<int64_t, int64_t> RunPosition(const std::map<std::string, std::string>& metadata) {
  return {MetadataNumber(metadata, "iteration"), MetadataNumber(metadata, "epochs_done")};
}

}  // namespace

std::string CheckpointPath(const std::string& directory, const std::string& name, int64_t epoch) {
  return fmt::format("{}/{}_{}{}", Directory(directory), name, epoch, kExtension);
}

std::string IterationCheckpointPath(const std::string& directory, const std::string& name,
                                    int64_t iteration) {
  return fmt::format("{}/{}_iter{:010d}{}", Directory(directory), name, iteration, kExtension);
}

std::vector<std::pair<int64_t, std::string>> IterationCheckpoints(const std::string& directory,
                                                                  const std::string& name) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& file : FileNames(Directory(directory))) {
    const int64_t iteration = NumberInName(file, name, "iter");
    if (iteration >= 0) found.emplace_back(iteration, Directory(directory) + "/" + file);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> CheckpointsOf(const std::string& directory, const std::string& name) {
  const std::string folder = Directory(directory);
  std::vector<std::string> paths;
  for (const std::string& file : FileNames(folder)) {
    const std::string path = folder + "/" + file;
    std::error_code error;
    if ((NumberInName(file, name, "") >= 0 || NumberInName(file, name, "iter") >= 0) &&
        std::filesystem::is_regular_file(path, error))
      paths.push_back(path);
  }
  return paths;
}

std::vector<std::string> PartialCheckpointsOf(const std::string& directory, const std::string& name) {
  const std::string folder = Directory(directory);
  std::vector<std::string> paths;
  for (const std::string& file : FileNames(folder)) {
    const size_t tmp = file.rfind(".tmp.");  // AtomicFile's temporary: the checkpoint's name, .tmp.<pid>
    if (tmp == std::string::npos || file.find_first_not_of("0123456789", tmp + 5) != std::string::npos)
      continue;
    const std::string target = file.substr(0, tmp);
    if (NumberInName(target, name, "") >= 0 || NumberInName(target, name, "iter") >= 0)
      paths.push_back(folder + "/" + file);
  }
  return paths;
}

namespace {

// The lockstep training checkpoints of `name` in `directory` by where their run was, (iteration, epochs
// done): the epoch checkpoint after the mid-epoch one of the same step. `skip` hears why each other file of
// the name was passed over. Checksums are not read.
std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> CheckpointsInRunOrder(
    const std::string& directory, const std::string& name,
    const std::function<void(const std::string&)>& skip) {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> found;
  for (const std::string& path : CheckpointsOf(directory, name)) {
    std::map<std::string, std::string> metadata;
    try {
      metadata = ReadSafetensorsMetadata(path);
    } catch (const Error& e) {
      skip(e.what());
      continue;
    }
    auto format = metadata.find("format");
    const std::pair<int64_t, int64_t> position = RunPosition(metadata);
    if (format == metadata.end() || format->second != "lockstep" || position.first < 0 ||
        position.second < 0) {
      skip(fmt::format("{} is not a lockstep training checkpoint", path));
      continue;
    }
    found.emplace_back(position, path);
  }
  std::sort(found.begin(), found.end());  // the names sort epoch 10 before epoch 9
  return found;
}

}  // namespace

std::string LatestCheckpoint(const std::string& directory, const std::string& name,
                             std::vector<std::string>* skipped) {
  auto skip = [&](const std::string& why) {
    if (skipped) skipped->push_back(why);
  };
  const auto candidates = CheckpointsInRunOrder(directory, name, skip);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    try {
      VerifySafetensors(it->second);
      return it->second;
    } catch (const Error& e) {
      skip(e.what());
    }
  }
  return "";
}

std::vector<std::string> CheckpointsAfter(const std::string& directory, const std::string& name,
                                          const std::string& path) {
  const std::pair<int64_t, int64_t> start = RunPosition(ReadSafetensorsMetadata(path));
  std::vector<std::string> later;
  // A file that cannot be read tells nothing of where its run was, and a corrupt one is no run's progress,
  // as `latest` passes over it too.
  for (const auto& [position, other] : CheckpointsInRunOrder(directory, name, [](const std::string&) {})) {
    if (position <= start) continue;
    try {
      VerifySafetensors(other);
      later.push_back(other);
    } catch (const Error&) {
    }
  }
  return later;
}

void CheckpointSnapshot::Take(const Workspace& ws, const std::string& scope,
                              const std::vector<std::string>& names, const TrainerState& state) {
  // A blob in a backend layout or in device memory becomes a row-major host copy; so does a plain host blob,
  // which training goes on changing while the copy is written.
  for (const auto& name : names) ws.Blob(scope + name).ToPlain(&tensors_[name]);
  LOCKSTEP_ENFORCE_EQ(tensors_.size(), names.size(), "a snapshot is taken of the same blobs every time");
  state_ = state;
}

void CheckpointSnapshot::Write(const std::string& path) const {
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [name, tensor] : tensors_) tensors[name] = &tensor;
  std::map<std::string, std::string> metadata = {
      {"format", "lockstep"},
      {"lockstep_version", Version()},
      {"model", state_.model.name},
      {"epochs_done", std::to_string(state_.epochs_done)},
      {"iteration", std::to_string(state_.iteration)},
      {"epoch_iteration", std::to_string(state_.epoch_iteration)},
      {"reader_position", std::to_string(state_.reader_position)},
      {"seed", std::to_string(state_.seed)},
      {"images_trained", std::to_string(state_.images_trained)},
      {"training_milliseconds", std::to_string(state_.training_milliseconds)},
  };
  for (const auto& [key, field] : kModelGeometry)
    if (state_.model.*field > 0) metadata[key] = std::to_string(state_.model.*field);
  if (!state_.model.input_scaling.empty()) metadata["input_scaling"] = state_.model.input_scaling;
  if (!state_.model.color_order.empty()) metadata["color_order"] = state_.model.color_order;
  if (state_.global_batch > 0) metadata["global_batch"] = std::to_string(state_.global_batch);
  if (state_.epoch_steps > 0) metadata["epoch_steps"] = std::to_string(state_.epoch_steps);
  if (state_.shard_images_trained > 0)
    metadata["shard_images_trained"] = std::to_string(state_.shard_images_trained);
  WriteSafetensors(path, tensors, metadata);
}

void SaveCheckpoint(const std::string& path, const Workspace& ws, const std::string& scope,
                    const std::vector<std::string>& names, const TrainerState& state) {
  CheckpointSnapshot snapshot;
  snapshot.Take(ws, scope, names, state);
  snapshot.Write(path);
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
    if (!blob)
      throw InvalidInput(
          fmt::format("checkpoint {}: the workspace has no blob '{}' to load it into; run the "
                      "model's param_init_net first",
                      path, scope + name));
    if (blob->shape() != it->second.shape() || blob->dtype() != it->second.dtype()) {
      // A checkpoint that records its geometry had it checked before the model was built; one of a zoo model
      // without it (an older version's, or one saved from Python without it) needs the flags it was trained
      // with; any other was saved from another model.
      const bool has_geometry =
          std::any_of(std::begin(kModelGeometry), std::end(kModelGeometry),
                      [&](const GeometryField& entry) { return file.metadata.count(entry.name) > 0; });
      const auto model = file.metadata.find("model");
      const bool zoo_model = model != file.metadata.end() && IsKnownModel(model->second);
      throw InvalidInput(fmt::format("checkpoint {}: '{}' is {} {} but the model has {} {}{}", path, name,
                                     DataTypeName(it->second.dtype()), ShapeToString(it->second.shape()),
                                     DataTypeName(blob->dtype()), ShapeToString(blob->shape()),
                                     has_geometry || !zoo_model
                                         ? ": was it saved from another model?"
                                         : "; the checkpoint records no geometry: pass the --num_channels, "
                                           "--image_size and --num_labels "
                                           "(or --test_data) it was trained with"));
    }
  }
  for (const auto& name : names) ws->GetBlob(scope + name)->CopyFrom(file.tensors.at(name));
}

// The entries a checkpoint lacks stay empty: older checkpoints have no geometry.
ModelDescription DescriptionOf(const std::string& path, const std::map<std::string, std::string>& metadata) {
  ModelDescription model;
  auto name = metadata.find("model");
  if (name != metadata.end()) model.name = name->second;
  auto scaling = metadata.find("input_scaling");
  if (scaling != metadata.end()) model.input_scaling = scaling->second;
  auto color_order = metadata.find("color_order");
  if (color_order != metadata.end()) model.color_order = color_order->second;
  for (const auto& [key, field] : kModelGeometry) {
    if (!metadata.count(key)) continue;
    const int64_t value = MetadataInt(path, metadata, key);
    if (value < 1 || value > std::numeric_limits<int>::max())
      throw InvalidInput(fmt::format("checkpoint {}: metadata '{}' is not a positive integer: '{}'", path,
                                     key, metadata.at(key)));
    model.*field = static_cast<int>(value);
  }
  return model;
}

TrainerState StateOf(const std::string& path, const SafetensorsFile& file) {
  TrainerState state;
  state.model = DescriptionOf(path, file.metadata);
  state.epochs_done = MetadataInt(path, file.metadata, "epochs_done");
  state.iteration = MetadataInt(path, file.metadata, "iteration");
  // Checkpoints from before mid-epoch checkpoints were all taken at an epoch's end.
  if (file.metadata.count("epoch_iteration"))
    state.epoch_iteration = MetadataInt(path, file.metadata, "epoch_iteration");
  state.reader_position = MetadataInt(path, file.metadata, "reader_position");
  state.seed = static_cast<uint64_t>(MetadataInt(path, file.metadata, "seed"));
  state.images_trained = MetadataInt(path, file.metadata, "images_trained");
  state.training_milliseconds = MetadataInt(path, file.metadata, "training_milliseconds");
  for (auto [key, field] : {std::pair{"global_batch", &TrainerState::global_batch},
                            std::pair{"epoch_steps", &TrainerState::epoch_steps},
                            std::pair{"shard_images_trained", &TrainerState::shard_images_trained}})
    if (file.metadata.count(key)) state.*field = MetadataInt(path, file.metadata, key);
  return state;
}

}  // namespace

ModelDescription ReadModelDescription(const std::string& path) {
  ModelDescription model = DescriptionOf(path, ReadSafetensorsMetadata(path));
  if (!model.name.empty() && !IsKnownModel(model.name))
    throw InvalidInput(fmt::format(
        "checkpoint {} holds model '{}', which this build does not know (it knows {}): load a checkpoint "
        "of one of those",
        path, model.name, KnownModelsText()));
  return model;
}

int64_t CheckpointEpochsDone(const std::string& path) {
  return MetadataInt(path, ReadSafetensorsMetadata(path), "epochs_done");
}

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

TrainerState LoadCheckpointParameters(const std::string& path, Workspace* ws, const std::string& scope,
                                      const std::vector<std::string>& names) {
  SafetensorsFile file = ReadSafetensors(path);
  LoadTensors(path, file, ws, scope, names);
  return StateOf(path, file);
}

}  // namespace lockstep
