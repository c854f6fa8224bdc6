// The trainer's option table bound to CLI11: every value goes through SetOption, as any other front end's.
#include "train_command.h"

#include <fmt/ranges.h>

#include <cstdio>
#include <utility>

#include "lockstep/core/enforce.h"
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
    app->add_flag(flag, config->*std::get<bool TrainerConfig::*>(option.member), help);
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
  TrainerResult result = Train(ResolveTrainConfig(app, std::move(config), arguments));
  if (!result.log_path.empty()) fmt::print("log: {}\n", result.log_path);
  return 0;
}

std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv) {
  try {
    app->parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {
    return app->exit(e);  // --help or --version
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    return kExitNotRetryable;
  } catch (const Error& e) {  // a value SetOption cannot read
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    return kExitNotRetryable;
  }
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
