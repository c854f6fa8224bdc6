// `lockstep launch`: checks the agent's flags and the training command once, before any shard starts, and
// runs the agent.
#include "launch_command.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "lockstep/comm/launcher.h"
#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"
#include "lockstep/launch/agent.h"
#include "lockstep/train/trainer_options.h"
#include "train_command.h"

namespace lockstep {
namespace {

// What the agent needs of the training arguments, checked as `lockstep train` would parse them.
void ReadTrainArguments(const std::vector<std::string>& arguments, AgentOptions* options) {
  CLI::App train("", "lockstep train");
  TrainerConfig config;
  AddTrainerFlags(&train, &config, /*train=*/true);
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11 takes them last first
  auto refuse = [](const std::string& why) {
    return InvalidInput(fmt::format("in the training arguments after `-- train`: {}", why));
  };
  try {
    train.parse(reversed);
    CheckOptionRanges(config);  // what `lockstep train` checks before anything else
  } catch (const CLI::ExtrasError&) {
    throw refuse(UnknownArguments(train));
  } catch (const CLI::ParseError& e) {
    throw refuse(e.what());
  } catch (const Error& e) {
    throw refuse(e.what());
  }
  const GivenOptions given = GivenFlags(train);
  for (const char* flag : {"num_shards", "shard_id", "run_id", "redis_host", "redis_port", "load_model_path"})
    if (given.count(flag))
      throw InvalidInput(
          fmt::format("drop --{} from the training arguments: the agent sets the shards, the run "
                      "id, the store and the checkpoint to resume from for every round",
                      flag));
  if (config.save_model_name.empty())
    throw InvalidInput(
        "the training arguments need --save_model_name: a restarted job resumes from the "
        "checkpoints it names");
  options->save_model_name = config.save_model_name;
  options->batch_size = config.batch_size;
  options->num_epochs = config.num_epochs;
  options->straggler_timeout = std::max(config.timeout, config.first_iter_timeout);
  options->train_names_file_store = given.count("file_store_path") > 0;
  options->checkpoint_directory =
      options->train_names_file_store ? config.file_store_path : options->rendezvous.directory;
}

std::string ThisProgram() {
  std::error_code error;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw IoError("cannot find the lockstep binary (/proc/self/exe) to start the shards with");
  return path.string();
}

}  // namespace

int SplitLaunchCommand(int argc, char** argv, LaunchFlags* flags) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      flags->has_command = true;
      flags->command.assign(argv + i + 1, argv + argc);
      return i;
    }
  return argc;
}

void AddLaunchFlags(CLI::App* app, LaunchFlags* flags) {
  app->allow_extras();  // RunLaunch names them: most likely a training command without `--`
  app->add_option("--nproc_per_node", flags->agent.nproc_per_node,
                  "Shard processes this agent runs on its machine")
      ->check(InRange(1, 4096))
      ->capture_default_str();
  app->add_option("--nnodes", flags->nnodes,
                  "Agents (machines) in the job: N, or MIN:MAX to start with MIN when MAX do not come within "
                  "--join_grace (default 1, or mpirun's / srun's process count)");
  app->add_option("--max_restarts", flags->agent.max_restarts,
                  "Restarts of the job after failures; one more failure ends it with the list of failures")
      ->check(InRange(0, 1000000))
      ->capture_default_str();
  app->add_option("--monitor_interval", flags->agent.monitor_interval,
                  "Seconds between the agent's looks at its shards and at the other agents' failures")
      ->check(InRange(0.01, 3600.0))
      ->capture_default_str();
  app->add_option("--join_grace", flags->agent.join_grace,
                  "Seconds a round waits for more agents once MIN have joined")
      ->check(InRange(0.0, 86400.0))
      ->capture_default_str();
  app->add_option("--join_timeout", flags->agent.join_timeout, "Seconds a round waits for MIN agents to join")
      ->check(InRange(1.0, 1e6))
      ->capture_default_str();
  app->add_option(
         "--stop_grace", flags->agent.stop_grace,
         "Seconds the shards get, when Ctrl-C or SIGTERM stops the job, to finish their step and save "
         "a checkpoint before SIGKILL (a second Ctrl-C: at once); give your scheduler's kill wait")
      ->check(InRange(0.0, 86400.0))
      ->capture_default_str();
  app->add_option(
      "--rdzv", flags->rdzv,
      "Where the agents meet (required): redis://HOST:PORT or file://DIR, a directory every machine "
      "can write; with file:// the shards meet and save checkpoints there unless the training "
      "arguments give --file_store_path");
  app->add_option("--job_id", flags->job_id,
                  "The job's id, the same on every machine; run ids are <job_id>_r<round> (default with one "
                  "machine: a fresh one; with mpirun / srun: the launcher's job id)");
}

int RunLaunch(const LaunchFlags& flags) {
  if (flags.rdzv.empty())
    throw InvalidInput(
        "--rdzv is required: redis://HOST:PORT or file://DIR, where the agents (and shards) meet");
  if (!flags.has_command || flags.command.empty() || flags.command[0] != "train")
    throw InvalidInput("give the training command after `--`: lockstep launch [flags] -- train ARGS...");
  if (!flags.unknown.empty())
    throw InvalidInput(fmt::format("unknown launch arguments before `--`: {}; see lockstep launch --help",
                                   fmt::join(flags.unknown, " ")));
  AgentOptions options = flags.agent;
  options.rendezvous = ParseAgentStoreAddress(flags.rdzv);
  options.train_arguments.assign(flags.command.begin() + 1, flags.command.end());
  ReadTrainArguments(options.train_arguments, &options);
  options.program = ThisProgram();
  // Under mpirun or srun the agent is one process per machine: its rank orders the agents.
  std::optional<LauncherShards> launcher = ShardsFromLauncher();
  std::tie(options.min_nodes, options.max_nodes) =
      !flags.nnodes.empty()
          ? ParseNodeRange(flags.nnodes)
          : std::pair<int, int>{launcher ? launcher->num_shards : 1, launcher ? launcher->num_shards : 1};
  options.agent_id =
      launcher ? fmt::format("rank{:06d}", launcher->shard_id) : fmt::format("{}-{}", HostName(), getpid());
  options.job_id = !flags.job_id.empty() ? flags.job_id : launcher ? launcher->job_id : "";
  if (options.job_id.empty()) {
    if (options.max_nodes > 1)
      throw InvalidInput(
          "--job_id is required with several machines: pass the same id (e.g. job-$(date +%s), made once) to "
          "every agent");
    options.job_id = fmt::format("{}-{}-{}", HostName(), getpid(),
                                 std::chrono::system_clock::now().time_since_epoch().count());
  }
  if (options.job_id.find_first_of("/ \t\n") != std::string::npos)
    throw InvalidInput(fmt::format("--job_id '{}': use no '/' and no spaces", options.job_id));
  return RunAgent(options);
}

}  // namespace lockstep
