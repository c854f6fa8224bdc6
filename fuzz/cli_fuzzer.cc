// Fuzzes the `lockstep train`, `make-db` and `eval` command lines: the input is split into argv words at
// newlines, parsed by CLI11 as lockstep_main does, then train's flags are checked as before training (nothing
// is trained, evaluated or written).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "eval_command.h"
#include "lockstep/core/enforce.h"
#include "make_db_command.h"
#include "train_command.h"

namespace {

// The flags are declared once (it costs more than a parse); each run resets the values they write into.
struct CommandLine {
  CLI::App app{"lockstep"};
  lockstep::TrainerConfig config;
  lockstep::MakeDbFlags make_db_flags;
  lockstep::EvalFlags eval_flags;
  CLI::App* train = nullptr;
  CLI::App* make_db = nullptr;

  CommandLine() {
    app.require_subcommand(1);
    train = app.add_subcommand("train");
    lockstep::AddTrainerFlags(train, &config, /*train=*/true);
    make_db = app.add_subcommand("make-db");
    lockstep::AddMakeDbFlags(make_db, &make_db_flags);
    lockstep::AddEvalFlags(app.add_subcommand("eval"), &eval_flags);
  }

  void Reset() {
    app.clear();
    config = lockstep::TrainerConfig();
    make_db_flags = lockstep::MakeDbFlags();
    eval_flags = lockstep::EvalFlags();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words{"lockstep"};
  std::string word;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  words.push_back(word);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());

  static CommandLine* command_line = new CommandLine;
  command_line->Reset();
  try {
    command_line->app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
    return 0;
  } catch (const lockstep::InvalidInput&) {  // a value the option table cannot read
    return 0;
  }
  try {
    if (command_line->make_db->parsed()) {
      lockstep::ParseRecordFormat(command_line->make_db_flags.format);
    } else if (command_line->train->parsed()) {
      lockstep::ResolveTrainConfig(*command_line->train, command_line->config, "fuzz");
    }
  } catch (const lockstep::InvalidInput&) {
  } catch (const lockstep::IoError&) {  // a path the input names could not be read: reported, not a bug
  }
  return 0;
}
