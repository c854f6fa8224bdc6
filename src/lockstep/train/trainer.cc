// The training loop, one named step after another: open the data, build and install the models, restore a
// checkpoint, then per epoch train (saving mid-epoch checkpoints in the background), test, log and save.
#include "lockstep/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <memory>
#include <optional>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/net.h"
#include "lockstep/core/output_directory.h"
#include "lockstep/core/stop_signals.h"
#include "lockstep/core/version.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/batch_source.h"
#include "lockstep/data/db_source.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/fingerprint.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/checkpoint_writer.h"
#include "lockstep/train/csv_log.h"
#include "lockstep/train/evaluate.h"
#include "lockstep/train/interval_log.h"
#include "lockstep/train/memory_report.h"
#include "lockstep/train/progress.h"
#include "lockstep/train/resume.h"
#include "lockstep/train/run_outputs.h"
#include "lockstep/train/safetensors.h"
#include "lockstep/train/stop_vote.h"
#include "lockstep/train/trainer_options.h"
#include "lockstep/train/training_events.h"
#include "lockstep/train/training_models.h"

namespace lockstep {

namespace {

constexpr const char* kShardCommunicator = "shards";  // the workspace object of the Gloo communicator

// "6 buckets, 47.2 MB in all, the last 1.1 MB, on 2 channels with halving_doubling"
std::string GradientPlan(const TrainerConfig& c, const DataParallelModel& parallel,
                         const GlooCommunicator& gloo) {
  size_t total = 0, wire_total = 0;
  for (const auto& bucket : parallel.buckets) {
    total += bucket.bytes;
    wire_total += bucket.wire_bytes;
  }
  const size_t n = parallel.buckets.size();
  std::string buckets = n == 1 ? fmt::format("1 bucket of {:.1f} MB", total / 1e6)
                               : fmt::format("{} buckets, {:.1f} MB in all, the last {:.1f} MB", n,
                                             total / 1e6, n == 0 ? 0.0 : parallel.buckets.back().bytes / 1e6);
  const int channels = AllreduceChannels(c);
  const DataType wire = parallel.buckets.empty() ? DataType::kFloat : parallel.buckets[0].wire;
  const std::string sent = wire == DataType::kFloat ? ""
                                                    : fmt::format(", sent as {} ({:.1f} MB)",
                                                                  DataTypeName(wire), wire_total / 1e6);
  return fmt::format("{}, on {} channel{} with {}{}", buckets, channels, channels == 1 ? "" : "s",
                     gloo.algorithm(), sent);
}

int64_t Skipped(const BatchSource* source) {
  auto* db = dynamic_cast<const DbSource*>(source);
  return db ? db->skipped() : 0;
}

float ScalarOf(const Workspace& ws, const std::string& name) {
  const Tensor& blob = ws.Blob(name);
  if (blob.on_host()) return blob.data<float>()[0];
  Tensor host;  // a GPU's scalar: the copy waits for the step that wrote it
  host.CopyFrom(blob);
  return host.data<float>()[0];
}

// The mean over micro-batches of equal size.
float MeanOf(const Workspace& ws, const std::vector<std::string>& names) {
  float sum = 0;
  for (const auto& name : names) sum += ScalarOf(ws, name);
  return sum / static_cast<float>(names.size());
}

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// A multi-machine run opens its network devices (so a bad flag fails before any shard waits), meets the other
// shards and connects to them; a single machine needs none of it.
std::shared_ptr<GlooCommunicator> OpenNetwork(const TrainerConfig& c) {
  if (c.num_shards == 1) return nullptr;
  GlooOptions gloo;
  gloo.transport = c.distributed_transport;
  gloo.interfaces = c.distributed_interfaces;
  gloo.algorithm = c.allreduce_algorithm;
  gloo.timeout = Milliseconds(c.timeout);
  gloo.first_iter_timeout = Milliseconds(c.first_iter_timeout);
  return std::make_shared<GlooCommunicator>(gloo, c.num_shards);
}

std::shared_ptr<Rendezvous> MeetShards(const TrainerConfig& c) {
  if (c.num_shards == 1) return nullptr;
  RendezvousOptions meet;
  meet.num_shards = c.num_shards;
  meet.shard_id = c.shard_id;
  meet.run_id = c.run_id;
  meet.redis_host = c.redis_host;
  meet.redis_port = c.redis_port;
  meet.file_store_path = c.file_store_path;
  meet.timeout = Milliseconds(c.first_iter_timeout);
  return std::make_shared<Rendezvous>(meet);
}

// Every shard must run the same model with the same hyper-parameters (the options marked so in the table),
// from the same point: shards that found different checkpoints (--load_model_path latest on directories that
// differ) would train on different batches.
Fingerprint TrainingFingerprint(const TrainerConfig& c, const TrainingModels& m) {
  Fingerprint fingerprint = ModelFingerprint(m.train, m.parallel);
  for (auto& entry : ShardAgreementEntries(c)) fingerprint.push_back(std::move(entry));
  std::string start = "a fresh start";
  if (!c.load_model_path.empty()) {
    auto metadata = ReadSafetensorsMetadata(c.load_model_path);
    start = "the checkpoint of iteration " + (metadata.count("iteration") ? metadata["iteration"] : "?");
  }
  fingerprint.emplace_back("the starting point", start);
  return fingerprint;
}

// The data a shard trains and tests on.
struct Sources {
  std::shared_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> test;  // null without --test_data
};

Sources OpenSources(const TrainerConfig& config) {
  Sources sources;
  sources.train = OpenBatchSource(DataSpec(config.train_data, config, true));
  if (!config.test_data.empty()) sources.test = OpenBatchSource(DataSpec(config.test_data, config, false));
  return sources;
}

// --batch_size is per machine; a step of the job trains on the batches of every shard.
int64_t GlobalBatch(const TrainerConfig& config) { return int64_t{config.batch_size} * config.num_shards; }

int64_t IterationsPerEpoch(const TrainerConfig& config, const BatchSource& train) {
  const int64_t epoch_size = config.epoch_size > 0 ? config.epoch_size : train.size();
  const int64_t iterations = epoch_size / GlobalBatch(config);
  if (iterations == 0)
    throw InvalidInput(fmt::format(
        "{} is smaller than the global batch {} (--batch_size x --num_shards): an epoch would have no step",
        config.epoch_size > 0
            ? fmt::format("--epoch_size {}", epoch_size)
            : fmt::format("one pass over {} ({} records, --epoch_size 0)", config.train_data, epoch_size),
        GlobalBatch(config)));
  return LimitStepsPerEpoch(iterations);
}

// The stop vote's connections: beyond the gradient allreduces' channels, so that it runs beside them.
constexpr int kStopVoteChannel = kMaxAllreduceChannels + 1;

// What a shard trains with once it is built: the models, their blobs, the reader, the nets and the state that
// a checkpoint keeps.
struct Session {
  TrainingModels models;
  Workspace ws;
  std::shared_ptr<BatchReader> reader;
  Net* train_net = nullptr;
  Net* test_net = nullptr;  // null without test data
  TrainerState state;
  std::unique_ptr<CheckpointWriter> checkpoints;  // shard 0's, with --save_model_name
  std::optional<StopVote> stop_vote;              // over the shards' communicator, if any
  int stop_signal = 0;                            // the signal the job agreed to stop on, or 0
};

// Prints the memory plan (with --test_data the evaluation net's too) and checks it against the limits; the
// plan at another --batch_size is built on request.
void ReportMemoryPlan(const TrainerConfig& config, const TrainingModels& models) {
  ReportMemoryPlan(config, models.parallel.memory_plan, [&](int batch_size) {
    TrainerConfig other = config;
    other.batch_size = batch_size;
    TrainingModels at;
    BuildTrainingModels(other, "", &at);
    return at.parallel.memory_plan;
  });
}

// Builds the models, checks that every shard built the same, puts the shards' communicator and the training
// reader into the workspace and initialises the parameters.
void BuildAndInstall(const TrainerConfig& config, std::shared_ptr<GlooCommunicator> gloo,
                     Rendezvous* rendezvous, const Sources& sources, int64_t steps_per_epoch,
                     Session* session) {
  TrainingModels& models = session->models;
  Workspace& ws = session->ws;
  BuildTrainingModels(config, gloo ? kShardCommunicator : "", &models, steps_per_epoch);
  ReportMemoryPlan(config, models);
  if (rendezvous) AgreeOnModel(rendezvous, TrainingFingerprint(config, models));
  if (gloo) {
    ws.SetObject<Communicator>(kShardCommunicator, gloo);
    fmt::print("gradients across shards: {}\n", GradientPlan(config, models.parallel, *gloo));
  }
  const int replicas = TrainingReplicas(config) * config.num_shards;
  session->reader =
      std::make_shared<BatchReader>(sources.train, config.batch_size / TrainingReplicas(config), replicas,
                                    IsDatabase(config.train_data) ? config.prefetch : 0);
  ws.SetObject(kTrainReader, session->reader);
  ws.RunNetOnce(models.train.param_init_net());
  ModelDescription& model = session->state.model;  // what its checkpoints record of it
  model.name = config.model;
  model.num_channels = config.num_channels, model.image_size = config.image_size;
  model.num_labels = config.num_labels;
  // The shortest side its images were resized to: what eval and export must resize to (a database's only).
  model.scale = IsDatabase(config.train_data) ? ResizedSide(config.scale, config.image_size) : 0;
  model.input_scaling = InputScaling(config.train_data);
  if (IsDatabase(config.train_data) && config.num_channels == 3) model.color_order = config.color_order;
  session->state.seed = config.seed;
}

// With --load_model_path: the parameters, optimizer state and trainer state of the checkpoint, on every
// device of every shard, and the reader where the checkpoint left it (within an epoch for a mid-epoch one).
void RestoreCheckpoint(const TrainerConfig& config, int64_t iterations, Session* session) {
  if (config.load_model_path.empty()) return;
  const std::string& scope = session->models.parallel.scopes[0];
  TrainerState& state = session->state;
  // What this run built: its model, which Train checked against the checkpoint's description, and its batch
  // and epoch; a run resumed from a checkpoint without them writes checkpoints with them.
  const TrainerState built = state;
  state = LoadCheckpoint(config.load_model_path, &session->ws, scope, session->models.parallel.state_blobs);
  if (state.seed != config.seed)
    throw InvalidInput(fmt::format("checkpoint {} was saved with --seed {}; pass the same seed to resume",
                                   config.load_model_path, state.seed));
  // Within an epoch the reader's position counts the batches taken: another batch or epoch would mix them.
  const bool other_batch = state.global_batch > 0 && state.global_batch != built.global_batch;
  const bool other_epoch =
      state.epoch_steps > 0 ? state.epoch_steps != iterations : state.epoch_iteration >= iterations;
  if (state.epoch_iteration > 0 && (other_batch || other_epoch))
    throw InvalidInput(fmt::format(
        "checkpoint {} stopped after step {} of epoch {}{}, but this run takes {} images a step and {} steps "
        "an epoch; resume it with the --batch_size, shards and --epoch_size it was saved with, or change "
        "them from an epoch's checkpoint",
        config.load_model_path, state.epoch_iteration, state.epochs_done + 1,
        state.global_batch > 0
            ? fmt::format(" ({} images a step, {} steps an epoch)", state.global_batch, state.epoch_steps)
            : "",
        built.global_batch, iterations));
  state.model = built.model;
  if (state.shard_images_trained == 0) state.shard_images_trained = state.images_trained / config.num_shards;
  state.global_batch = built.global_batch;
  state.epoch_steps = built.epoch_steps;
  session->ws.RunNetOnce(session->models.parallel.broadcast_net);  // shard 0's device 0 is the reference
  session->reader->Seek(state.reader_position);
}

void CreateNets(const Sources& sources, Session* session) {
  session->train_net = session->ws.CreateNet(session->models.train.net());
  if (sources.test) session->test_net = session->ws.CreateNet(session->models.test.net());
}

IntervalLogOptions IntervalOptions(const TrainerConfig& config, int64_t iterations, const TrainerState& state,
                                   EventFile* events) {
  IntervalLogOptions options;
  options.events = events;
  options.every_secs = config.log_every_secs;
  options.every_iters = config.log_every_iters;
  options.to_stderr = !StderrIsTerminal();  // a terminal has the live progress line
  options.csv_path = config.iter_log.empty() ? "" : ShardFileName(config.iter_log, config.shard_id);
  options.line_prefix = ShardPrefix(config);
  options.images_per_step = config.batch_size;
  options.iterations_per_epoch = iterations;
  options.num_epochs = config.num_epochs;
  options.resumed_step = state.iteration;
  options.resumed_seconds = state.training_milliseconds / 1000.0;
  return options;
}

// Every --checkpoint_every_iters steps of the job (counted from its start, wherever a run resumed), shard 0
// hands a snapshot to the background writer. The step that ends an epoch is left to the epoch's checkpoint,
// written moments later with the same parameters.
void MaybeSaveMidEpoch(const TrainerConfig& config, int64_t steps_left, Session* session) {
  if (!session->checkpoints) return;
  session->checkpoints->ThrowIfFailed();  // a failed background write ends training at the next step
  const TrainerState& state = session->state;
  if (config.checkpoint_every_iters == 0 || state.iteration % config.checkpoint_every_iters != 0 ||
      steps_left == 0)
    return;
  session->checkpoints->SaveInBackground(session->ws, session->models.parallel.scopes[0],
                                         session->models.parallel.state_blobs, state);
}

// Whether the job agreed to stop, and on which signal (session->stop_signal): a collective across shards,
// which every shard reaches at the same steps.
bool JobStops(Session* session) {
  session->stop_signal = session->stop_vote->Agreed();
  return session->stop_signal != 0;
}

// Trains steps first_step .. iterations - 1 of one epoch (0-based `epoch`; first_step > 0 when a mid-epoch
// checkpoint resumed it), reporting progress and saving mid-epoch checkpoints; returns its seconds. The
// first step ends the first iteration of `first_step_of` (the communicator, in the run's first epoch; else
// null), after which the shards wait for each other for --timeout instead of --first_iter_timeout.
double RunEpoch(const TrainerConfig& config, int64_t epoch, int64_t first_step, int64_t iterations,
                GlooCommunicator* first_step_of, Session* session, ProgressLine* progress,
                IntervalLog* intervals) {
  using Clock = std::chrono::steady_clock;
  const Workspace& ws = session->ws;
  const TrainingModels& models = session->models;
  TrainerState& state = session->state;
  const int64_t milliseconds_before = state.training_milliseconds;
  auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  for (int64_t i = first_step; i < iterations; ++i) {
    session->train_net->Run();
    if (first_step_of && i == first_step) first_step_of->EndFirstIteration();
    state.reader_position += GlobalBatch(config);
    state.images_trained += GlobalBatch(config);
    state.shard_images_trained += config.batch_size;
    ++state.iteration;
    state.epoch_iteration = i + 1;
    state.training_milliseconds = milliseconds_before + static_cast<int64_t>(seconds() * 1000);
    MaybeSaveMidEpoch(config, iterations - (i + 1), session);
    if (progress->enabled())
      progress->Update(epoch + 1, config.num_epochs, i + 1, iterations,
                       (i + 1 - first_step) * config.batch_size / seconds(), MeanOf(ws, models.train_loss));
    if (intervals->StepDone(state.iteration, i + 1 == iterations))
      intervals->Report({epoch + 1, i + 1, MeanOf(ws, models.train_loss), MeanOf(ws, models.train_accuracy),
                         ScalarOf(ws, models.lr)});
    if (i + 1 < iterations && JobStops(session)) break;  // the epoch's last step ends the epoch first
  }
  progress->Finish();
  return seconds();
}

// The epoch's row of the log: this machine's images, the running totals, and the last step's figures. An
// epoch resumed from a mid-epoch checkpoint counts only the `iterations` this run trained.
void RecordEpoch(const TrainerConfig& config, const Session& session, int64_t epoch, int64_t iterations,
                 double seconds, double test_accuracy, EpochRecord* record) {
  record->time_spent = seconds;
  record->cumulative_time_spent += seconds;
  record->input_count = iterations * config.batch_size;
  record->cumulative_input_count += record->input_count;
  record->cumulative_batch_count += iterations;
  record->accuracy = MeanOf(session.ws, session.models.train_accuracy);
  record->loss = MeanOf(session.ws, session.models.train_loss);
  record->learning_rate = ScalarOf(session.ws, session.models.lr);
  record->epoch = epoch + 1;
  record->test_accuracy = test_accuracy;
}

double TestAccuracy(const TrainerConfig& config, const Sources& sources, Session* session) {
  if (!session->test_net) return -1;
  return Evaluate(&session->ws, session->test_net, session->models.test_replicas, sources.test.get(),
                  config.batch_size)
      .top1();
}

void PrintEpoch(const TrainerConfig& config, const Sources& sources, const EpochRecord& record) {
  // The log's -1 for "no test data" is a column value, not something to print.
  const std::string test =
      record.test_accuracy >= 0 ? fmt::format(", test accuracy {:.4f}", record.test_accuracy) : std::string();
  fmt::print("{}epoch {}/{}: {:.1f} s, {:.1f} img/s, loss {:.4f}, train accuracy {:.4f}{}\n",
             ShardPrefix(config), record.epoch, config.num_epochs, record.time_spent,
             record.input_count / record.time_spent, record.loss, record.accuracy, test);
  for (const BatchSource* source : {sources.train.get(), sources.test.get()})
    if (Skipped(source) > 0)
      fmt::print("skipped {} bad records of {} so far (--skip_bad_records)\n", Skipped(source),
                 dynamic_cast<const DbSource*>(source)->name());
}

// The trainer state after an epoch, and, with --save_model_name, shard 0's checkpoint of it (after the
// mid-epoch checkpoint still being written, if any).
void EndEpoch(const TrainerConfig& config, const EpochRecord& record, Session* session) {
  TrainerState& state = session->state;
  state.epochs_done = record.epoch;
  state.epoch_iteration = 0;
  state.training_milliseconds = static_cast<int64_t>(record.cumulative_time_spent * 1000);
  if (!session->checkpoints) return;
  std::string path = CheckpointPath(config.file_store_path, config.save_model_name, state.epochs_done);
  session->checkpoints->SaveNow(path, session->ws, session->models.parallel.scopes[0],
                                session->models.parallel.state_blobs, state);
  fmt::print("saved checkpoint {}\n", path);
}

// The log's running totals continue those of a resumed run.
EpochRecord StartingTotals(const TrainerConfig& config, const TrainerState& state) {
  EpochRecord record;
  record.cumulative_batch_count = state.iteration;
  record.cumulative_input_count = state.shard_images_trained;
  record.cumulative_time_spent = state.training_milliseconds / 1000.0;
  return record;
}

// After the job agreed to stop, between two steps or after an epoch's end: shard 0's checkpoint of where
// training stopped (the epoch's own at its end) and the line that says so, on every shard.
void StopTraining(const TrainerConfig& config, int64_t iterations, Session* session, TrainerResult* result) {
  const TrainerState& state = session->state;
  const bool mid_epoch = state.epoch_iteration > 0;
  std::string saved = "nothing saved (no --save_model_name)";
  if (!config.save_model_name.empty()) {
    const std::string path =
        mid_epoch ? IterationCheckpointPath(config.file_store_path, config.save_model_name, state.iteration)
                  : CheckpointPath(config.file_store_path, config.save_model_name, state.epochs_done);
    if (mid_epoch && session->checkpoints)  // at `path`
      session->checkpoints->SaveMidEpochNow(session->ws, session->models.parallel.scopes[0],
                                            session->models.parallel.state_blobs, state);
    // Under `lockstep launch` the agent chooses the checkpoint a new round resumes from.
    saved = fmt::format("{}saved {}: resume with {}", session->checkpoints ? "" : "shard 0 ", path,
                        LinesPrefixedByLauncher()
                            ? "lockstep launch (its next round, or the same command run again)"
                            : "--load_model_path latest");
  }
  result->stopped_by = session->stop_signal;
  const std::string where = mid_epoch ? fmt::format("step {} of {} in epoch {}", state.epoch_iteration,
                                                    iterations, state.epochs_done + 1)
                                      : fmt::format("epoch {}", state.epochs_done);
  result->stopped_message = fmt::format("stopped by {} after {} of {}; {}",
                                        StopSignalName(result->stopped_by), where, config.num_epochs, saved);
}

TrainerResult TrainShard(const TrainerConfig& config, std::shared_ptr<GlooCommunicator> gloo,
                         Rendezvous* rendezvous) {
  Sources sources = OpenSources(config);
  const int64_t iterations = IterationsPerEpoch(config, *sources.train);
  Session session;
  session.stop_vote.emplace(gloo.get(), kStopVoteChannel);
  BuildAndInstall(config, gloo, rendezvous, sources, iterations, &session);
  session.state.global_batch = GlobalBatch(config);  // what a resume within an epoch must keep
  session.state.epoch_steps = iterations;
  RestoreCheckpoint(config, iterations, &session);
  CreateNets(sources, &session);
  if (!config.save_model_name.empty() && config.shard_id == 0)
    session.checkpoints = std::make_unique<CheckpointWriter>(config.file_store_path, config.save_model_name,
                                                             config.keep_checkpoints);

  const std::string log_name = CsvLog::FileName(config.model, config.num_devices, config.batch_size,
                                                config.num_labels, config.base_learning_rate);
  CsvLog log(config.log_dir, ShardFileName(log_name, config.shard_id), config.arguments);
  ProgressLine progress(StderrIsTerminal());
  std::unique_ptr<EventFile> events = OpenTrainingEvents(config);
  if (events) fmt::print("{}TensorBoard events: {}\n", ShardPrefix(config), events->path());
  IntervalLog intervals(IntervalOptions(config, iterations, session.state, events.get()));
  EpochRecord record = StartingTotals(config, session.state);
  TrainerResult result;
  result.log_path = log.path();
  const int64_t first_epoch = session.state.epochs_done;
  for (int64_t epoch = first_epoch; epoch < config.num_epochs; ++epoch) {
    const bool first = epoch == first_epoch;
    const int64_t first_step = first ? session.state.epoch_iteration : 0;
    const double seconds = RunEpoch(config, epoch, first_step, iterations, first ? gloo.get() : nullptr,
                                    &session, &progress, &intervals);
    if (session.state.epoch_iteration < iterations) {  // a stop request between two steps
      StopTraining(config, iterations, &session, &result);
      break;
    }
    RecordEpoch(config, session, epoch, iterations - first_step, seconds,
                TestAccuracy(config, sources, &session), &record);
    log.Append(record);
    if (events) WriteEpochEvents(events.get(), record, session.state.iteration);
    PrintEpoch(config, sources, record);
    EndEpoch(config, record, &session);
    result.last_test_accuracy = record.test_accuracy;
    result.last_loss = record.loss;
    if (epoch + 1 < config.num_epochs && JobStops(&session)) {
      StopTraining(config, iterations, &session, &result);
      break;
    }
  }
  if (session.checkpoints) session.checkpoints->Finish();
  session.stop_vote->Finish();
  if (gloo) gloo->Close();
  return result;
}

}  // namespace

TrainerResult Train(const TrainerConfig& given_config) {
  ValidateTrainerConfig(given_config);
  fmt::print("{}\n", VersionLine());
  const TrainerConfig config = ResolveLatestCheckpoint(given_config);
  CheckModelAgainstCheckpoint(config, /*train=*/true);
  if (RunIsComplete(config)) {
    TrainerResult result;
    result.complete = true;
    return result;
  }
  if (config.plan_memory) {  // the plan only: nothing is opened for writing, no peer is met
    Sources sources = OpenSources(config);
    TrainingModels models;
    BuildTrainingModels(config, "", &models);
    ReportMemoryPlan(config, models);
    return {};
  }
  // "latest" that found nothing still asked to resume: no overwrite check. The claim lasts the run.
  const std::unique_ptr<CheckpointClaim> claim = PrepareRunOutputs(given_config);
  if (config.threads > 0) omp_set_num_threads(config.threads);
  std::shared_ptr<GlooCommunicator> gloo = OpenNetwork(config);
  std::shared_ptr<Rendezvous> rendezvous = MeetShards(config);
  try {
    if (gloo) {
      gloo->Connect(rendezvous);
      if (LinesPrefixedByLauncher())  // the line starts "[shard i] " already
        fmt::print("joined {} as shard {} of {}\n", rendezvous->description(), config.shard_id,
                   config.num_shards);
      else
        fmt::print("shard {} of {}: joined {}\n", config.shard_id, config.num_shards,
                   rendezvous->description());
    }
    return TrainShard(config, gloo, rendezvous.get());
  } catch (const Error& e) {
    // The other shards name this shard and its error instead of only seeing it vanish.
    if (rendezvous) rendezvous->ReportFailure(-1, e.what());
    throw;
  }
}

EvaluationResult EvaluateCheckpoint(const TrainerConfig& config, const std::string& predictions_path,
                                    bool with_logits) {
  if (config.load_model_path.empty())
    throw InvalidInput("--load_model_path is required: the checkpoint to evaluate");
  if (config.test_data.empty() || config.test_data == "null")
    throw InvalidInput(fmt::format("--test_data {}: give a database path or fashion-mnist",
                                   config.test_data.empty() ? "is required" : "null has no labels to score"));
  CheckEvaluationData(config);
  ValidateTrainerConfig(TrainingOnTestData(config));
  CheckModelAgainstCheckpoint(config, /*train=*/false);
  if (!predictions_path.empty()) PrepareOutputFile(predictions_path, "--predictions");
  if (config.threads > 0) omp_set_num_threads(config.threads);
  std::unique_ptr<BatchSource> source = OpenBatchSource(DataSpec(config.test_data, config, false));

  // The trainer's model on the same devices, its parameters from the checkpoint on device 0 and broadcast;
  // the training net is never created, so nothing trains and nothing is written back.
  TrainingModels models;
  BuildTrainingModels(config, "", &models);
  Workspace ws;
  ws.RunNetOnce(models.train.param_init_net());
  const std::string& scope = models.parallel.scopes[0];
  std::vector<std::string> names;
  for (const std::string& name : models.test.GetParams(scope)) names.push_back(name.substr(scope.size()));
  LoadCheckpointParameters(config.load_model_path, &ws, scope, names);
  ws.RunNetOnce(models.parallel.broadcast_net);
  Net* test_net = ws.CreateNet(models.test.net());

  std::optional<PredictionsCsv> predictions;
  if (!predictions_path.empty()) predictions.emplace(predictions_path, with_logits);
  EvaluationResult result = Evaluate(&ws, test_net, models.test_replicas, source.get(), config.batch_size,
                                     [&](const RecordPrediction& prediction) {
                                       if (predictions)
                                         predictions->Append(source->KeyAt(prediction.position), prediction);
                                     });
  if (predictions) predictions->Commit();
  return result;
}

}  // namespace lockstep
