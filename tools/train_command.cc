// The trainer's option table bound to CLI11: every value goes through SetOption, as any other front end's.
#include "train_command.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "lockstep/core/closest_names.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/stop_signals.h"
#include "lockstep/train/trainer_options.h"

namespace lockstep {

namespace {

// CLI11 adds " ..." for lists.
std::string TypeName(const TrainerOption& option) {
  if (IsInteger(option)) return "INT";
  if (IsNumeric(option)) return "FLOAT";
  return "TEXT";
}

void AddFlag(CLI::App* app, TrainerConfig* config, const TrainerOption& option) {
  const std::string flag = std::string("--") + option.name;
  std::string help = option.help;
  if (IsNumeric(option)) help += "; accepted range " + RangeText(option);
  if (IsFlag(option)) {
    // A switch that also takes a value, as Caffe2's scripts write it: --use_cpu, --use_cpu 1,
    // --use_cpu=false.
    auto set = [config, &option](const std::string& text) {
      SetOption(config, option.name, text.empty() ? "true" : text);
    };
    app->add_option_function<std::string>(flag, set, help)->expected(0, 1)->type_name("[true|false]");
    return;
  }
  CLI::Option* added;
  if (IsList(option)) {
    auto set = [config, &option](const std::vector<std::string>& items) {
      SetOption(config, option.name, fmt::format("{}", fmt::join(items, ",")));
    };
    added = app->add_option_function<std::vector<std::string>>(flag, set, help)->delimiter(',');
  } else {
    auto set = [config, &option](const std::string& text) { SetOption(config, option.name, text); };
    added = app->add_option_function<std::string>(flag, set, help);
  }
  added->type_name(TypeName(option))->default_str(OptionText(*config, option));
}

// The command the words named: the innermost subcommand given, or the program.
const CLI::App* GivenCommand(const CLI::App& app) {
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  return command;
}

}  // namespace

void AddTrainerFlags(CLI::App* app, TrainerConfig* config, bool train) {
  // A flag given twice takes its last value, so wrappers such as scripts/demo.sh can be overridden.
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const TrainerOption& option : TrainerOptions())
    if (train || option.eval) AddFlag(app, config, option);
  if (train)
    app->footer(
        "The defaults are those of Caffe2's resnet50_trainer except --num_epochs, --file_store_path, "
        "--save_model_name and --cudnn_workspace_limit_mb, whose help says why. LOCKSTEP_MAX_STEPS=N in the "
        "environment caps every epoch at N steps, to try a command quickly.");
}

GivenOptions GivenFlags(const CLI::App& app) {
  GivenOptions given;
  for (const TrainerOption& option : TrainerOptions()) {
    const CLI::Option* flag = app.get_option_no_throw(std::string("--") + option.name);
    if (flag && flag->count() > 0) given.insert(option.name);
  }
  return given;
}

TrainerConfig ResolveTrainConfig(const CLI::App& app, TrainerConfig config, const std::string& arguments) {
  config.arguments = arguments;
  ResolveTrainerConfig(GivenFlags(app), &config);
  return config;
}

int RunTrain(const CLI::App& app, TrainerConfig config, const std::string& arguments) {
  config = ResolveTrainConfig(app, std::move(config), arguments);
  // Ctrl-C or SIGTERM stops training between two steps, every shard of the job after the same one, and shard
  // 0 saves where it is.
  StopOnSignals stop_between_steps;
  TrainerResult result;
  try {
    result = Train(config);
  } catch (const Stopped& stopped) {  // before training: while waiting for the other shards
    result.stopped_by = stopped.signal();
    result.stopped_message = stopped.what();
  }
  if (!result.log_path.empty()) fmt::print("log: {}\n", result.log_path);
  if (result.stopped_by == 0) return 0;
  std::fprintf(stderr, "lockstep: %s\n", result.stopped_message.c_str());
  return 128 + result.stopped_by;  // as a shell reports a process its signal ended
}

// The command as its help names it: the program's file name, then the subcommand.
std::string CommandName(const CLI::App& app, const CLI::App& command) {
  const std::string program = std::filesystem::path(app.get_name()).filename().string();
  return &command == &app ? program : program + " " + command.get_name();
}

// The flag that `name` most likely meant: the nearest by spelling, else one it begins (--load_model for
// --load_model_path) or ends after an underscore (--epochs for --num_epochs); "" when none is near.
std::string NearestFlag(const std::string& name, const std::vector<std::string>& flags) {
  const std::vector<std::string> closest = ClosestNames(name, flags);
  if (!closest.empty()) return closest.front();
  if (name.size() < 3) return "";
  for (const std::string& flag : flags) {
    const size_t rest = flag.size() - std::min(flag.size(), name.size());
    if (flag.rfind(name, 0) == 0 ||
        (rest > 0 && flag.compare(rest, name.size(), name) == 0 && flag[rest - 1] == '_'))
      return flag;
  }
  return "";
}

// Flags of Caffe2's later trainer script (imagenet_trainer.py) that lockstep spells otherwise, with what to
// pass instead: the nearest flag name would send the user the wrong way (--num_layers to --num_labels).
std::string InsteadOfCaffe2Flag(const std::string& name) {
  if (name == "num_layers")
    return "the depth is in the model's name: --model resnet18, resnet34, resnet50 or resnet101";
  if (name == "use_ideep") return "CPUs always run on oneDNN: pass --use_cpu";
  return "";
}

std::string UnknownArguments(const CLI::App& app) {
  const CLI::App* command = GivenCommand(app);
  std::vector<std::string> flags;
  for (const CLI::Option* option : command->get_options())
    for (const std::string& name : option->get_lnames()) flags.push_back(name);
  const std::vector<std::string> extras = command->remaining();
  std::vector<std::string> problems;
  for (const std::string& extra : extras) {
    if (extra.rfind("--", 0) != 0) continue;
    const std::string name = extra.substr(2, extra.find('=') - 2);
    const std::string instead = InsteadOfCaffe2Flag(name);
    const std::string meant = NearestFlag(name, flags);
    problems.push_back(fmt::format("unknown flag --{}{}", name,
                                   !instead.empty() ? "; " + instead
                                   : meant.empty()  ? ""
                                                    : fmt::format("; did you mean --{}?", meant)));
  }
  if (problems.empty()) problems.push_back(fmt::format("unexpected argument(s) {}", fmt::join(extras, " ")));
  return fmt::format("{} (`{} --help` lists the flags)", fmt::join(problems, "; "),
                     CommandName(app, *command));
}

// The commands the program has (CLI11's get_subcommands() alone lists only those given).
std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(command->get_name());
  return names;
}

// For a first word that is no command: the commands nearest to it (the program's own flags for a flag).
std::string UnknownCommand(const CLI::App& app) {
  const std::string word = app.remaining().front();
  const bool flag = word.rfind('-', 0) == 0;
  std::vector<std::string> candidates;
  if (flag) {
    for (const CLI::Option* option : app.get_options())
      for (const std::string& name : option->get_lnames()) candidates.push_back("--" + name);
  } else {
    candidates = CommandNames(app);
  }
  const std::vector<std::string> closest = ClosestNames(word, candidates);
  return fmt::format("unknown {} '{}'{} (`{} --help` lists the commands)", flag ? "flag" : "command", word,
                     closest.empty() ? "" : fmt::format("; did you mean {}?", closest.front()),
                     CommandName(app, app));
}

std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv) {
  try {
    app->parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {
    return app->exit(e);  // --help or --version
  } catch (const CLI::ExtrasError&) {
    std::fprintf(stderr, "lockstep: error: %s\n", UnknownArguments(*app).c_str());
    return kExitNotRetryable;
  } catch (const CLI::ParseError& e) {
    const bool no_command =
        !CommandNames(*app).empty() && app->get_subcommands().empty() && !app->remaining().empty();
    if (no_command)
      std::fprintf(stderr, "lockstep: error: %s\n", UnknownCommand(*app).c_str());
    else if (dynamic_cast<const CLI::RequiredError*>(&e))  // "logs is required": and where the usage is
      std::fprintf(stderr, "lockstep: error: %s (`%s --help` shows the usage)\n", e.what(),
                   CommandName(*app, *GivenCommand(*app)).c_str());
    else
      std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    return kExitNotRetryable;
  } catch (const Error& e) {  // a value SetOption cannot read
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    return kExitNotRetryable;
  }
}

CLI::Validator InRange(double min, double max) {
  const std::string range =
      std::isinf(max) ? fmt::format("at least {}", min) : fmt::format("in [{}, {}]", min, max);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return fmt::format("must be a number, got {}", text);
        if (!(value >= min)) return fmt::format("must be at least {}, got {}", min, text);
        if (value > max) return fmt::format("must be at most {}, got {}", max, text);
        return "";
      },
      range);
}

std::string OutputBeside(const std::string& input, const std::string& extension) {
  std::filesystem::path output(input);
  output.replace_extension(extension);
  if (std::filesystem::exists(output))
    throw InvalidInput(
        fmt::format("{} exists: pass --output to name the file to write (a file named there is "
                    "replaced)",
                    output.string()));
  return output.string();
}

int ReportErrors(const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    const bool repeats = dynamic_cast<const InvalidInput*>(&e) || dynamic_cast<const NoSpace*>(&e);
    return repeats ? kExitNotRetryable : kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: internal error: %s\n", e.what());
  }
  return kExitFailure;
}

}  // namespace lockstep
