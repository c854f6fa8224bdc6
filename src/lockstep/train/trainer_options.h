// The trainer's options, each declared once: its name (the flag without dashes, and the keyword of
// SetOption), the TrainerConfig field it sets, its help, its accepted range and whether every shard must
// agree on it. The command lines (tools/) and any other front end set options through this table.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lockstep/train/trainer_config.h"

namespace lockstep {

using OptionMember = std::variant<bool TrainerConfig::*, int TrainerConfig::*, int64_t TrainerConfig::*,
                                  uint64_t TrainerConfig::*, float TrainerConfig::*, double TrainerConfig::*,
                                  std::string TrainerConfig::*, std::vector<int> TrainerConfig::*,
                                  std::vector<std::string> TrainerConfig::*>;

// The accepted values of a numeric option (each element of a list): min to max, an end excluded where marked.
// long double holds every int64 and uint64 exactly.
struct OptionRange {
  long double min = 0, max = 0;
  bool min_excluded = false, max_excluded = false;
};

// What every shard of a multi-machine run must share, checked before the first step.
enum class ShardAgreement {
  kNone,
  kValue,   // the same value
  kLength,  // lists of the same length (each machine names its own network interfaces)
};

struct TrainerOption {
  const char* name;
  OptionMember member;
  const char* help;
  OptionRange range;  // numeric options only
  ShardAgreement agreement;
  bool eval;  // also an option of `lockstep eval`: the model, its data and the devices
};

const std::vector<TrainerOption>& TrainerOptions();
// Throws InvalidInput listing the known options when there is none of that name.
const TrainerOption& FindTrainerOption(const std::string& name);

bool IsNumeric(const TrainerOption& option);  // a number, or a list of numbers
bool IsInteger(const TrainerOption& option);  // an integer, or a list of integers
bool IsFlag(const TrainerOption& option);     // a bool: given without a value on the command line
bool IsList(const TrainerOption& option);     // comma-separated values

// Sets an option from text as a command line gives it ("64", "0.1", "true", "0,1"); throws InvalidInput
// naming the flag when the text is not a value of the option's type. Ranges are checked by
// ValidateTrainerConfig.
void SetOption(TrainerConfig* config, const std::string& name, const std::string& value);
// The option's value as text, in the form SetOption reads.
std::string OptionText(const TrainerConfig& config, const TrainerOption& option);
// "[1, 1048576]", "[0, 1)": the accepted range as the error messages give it.
std::string RangeText(const TrainerOption& option);
// Throws InvalidInput "--flag must be ..., got VALUE; accepted range R" for the first option out of range.
void CheckOptionRanges(const TrainerConfig& config);
// ("--flag", value) for each option every shard must agree on, in table order.
std::vector<std::pair<std::string, std::string>> ShardAgreementEntries(const TrainerConfig& config);

}  // namespace lockstep
