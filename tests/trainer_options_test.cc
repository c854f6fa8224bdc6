// The trainer's option table: setting options by name, the range of every numeric option (through the library
// and through the CLI), the shard-agreement entries and the defaults that depend on the data.
#include "lockstep/train/trainer_options.h"

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "lockstep/core/enforce.h"
#include "lockstep/data/open_batch_source.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// A configuration that passes validation on CPU devices with synthetic data.
TrainerConfig Valid() {
  TrainerConfig config;
  config.model = "lenet";
  config.train_data = "null";
  config.use_cpu = true;
  return config;
}

// The message of the InvalidInput that fn throws, or "" when it throws none.
template <typename F>
std::string ErrorOf(F fn) {
  try {
    fn();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

// Values just outside the option's range, as text; an unsigned option's "-1" fails to parse, which must name
// the flag and the range as well.
std::vector<std::string> OutOfRangeTexts(const TrainerOption& option) {
  const OptionRange& r = option.range;
  std::vector<std::string> texts;
  if (IsInteger(option)) {
    const long double below = r.min_excluded ? r.min : r.min - 1;
    const long double above = r.max_excluded ? r.max : r.max + 1;
    texts.push_back(fmt::format("{}", static_cast<long long>(below)));
    if (above <= static_cast<long double>(INT64_MAX))
      texts.push_back(fmt::format("{}", static_cast<long long>(above)));
  } else {
    texts.push_back(fmt::format("{}", static_cast<double>(r.min_excluded ? r.min : r.min - 1)));
    texts.push_back(fmt::format("{}", static_cast<double>(r.max_excluded ? r.max : r.max * 2)));
  }
  return texts;
}

}  // namespace

TEST(TrainerOptions, NamesAreUniqueAndEveryNumericOptionHasARange) {
  std::set<std::string> names;
  for (const TrainerOption& option : TrainerOptions()) {
    EXPECT_TRUE(names.insert(option.name).second) << option.name << " twice";
    if (IsNumeric(option)) {
      EXPECT_LT(option.range.min, option.range.max) << option.name;
    }
  }
  EXPECT_EQ(ErrorOf([] { CheckOptionRanges(TrainerConfig()); }), "") << "the defaults are within range";
}

TEST(TrainerOptions, SetOptionByName) {
  TrainerConfig config;
  SetOption(&config, "batch_size", "64");
  SetOption(&config, "epoch_size", "1099511627776");
  SetOption(&config, "base_learning_rate", "0.25");
  SetOption(&config, "timeout", "2.5");
  SetOption(&config, "seed", "18446744073709551615");
  SetOption(&config, "use_cpu", "true");
  SetOption(&config, "gpus", "0,2");
  SetOption(&config, "num_gpus", "3");  // the flag's name, not the field's
  SetOption(&config, "distributed_interfaces", "eth0,ib0");
  SetOption(&config, "model", "lenet");
  EXPECT_EQ(config.batch_size, 64);
  EXPECT_EQ(config.epoch_size, int64_t{1} << 40);
  EXPECT_EQ(config.base_learning_rate, 0.25f);
  EXPECT_EQ(config.timeout, 2.5);
  EXPECT_EQ(config.seed, UINT64_MAX);
  EXPECT_TRUE(config.use_cpu);
  EXPECT_EQ(config.gpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(config.num_devices, 3);
  EXPECT_EQ(config.distributed_interfaces, (std::vector<std::string>{"eth0", "ib0"}));
  EXPECT_EQ(config.model, "lenet");
  EXPECT_NE(
      ErrorOf([&] { SetOption(&config, "batch_sise", "1"); }).find("unknown option 'batch_sise'; known: "),
      std::string::npos);
  EXPECT_EQ(ErrorOf([&] { SetOption(&config, "batch_size", "12abc"); }),
            "--batch_size 12abc: not an integer; accepted range [1, 1048576]");
  EXPECT_EQ(ErrorOf([&] { SetOption(&config, "momentum", "fast"); }),
            "--momentum fast: not a number; accepted range [0, 1)");
  EXPECT_EQ(ErrorOf([&] { SetOption(&config, "nesterov", "maybe"); }),
            "--nesterov maybe: not a truth value; use true or false");
}

// Every option's text, read back, gives the same value: what the help shows is what the option holds.
TEST(TrainerOptions, TextRoundTrips) {
  TrainerConfig defaults, changed = Valid();
  changed.gpus = {1, 3};
  changed.momentum = 0.875f;
  changed.distributed_interfaces = {"eth0"};
  for (const TrainerConfig& original : {defaults, changed})
    for (const TrainerOption& option : TrainerOptions()) {
      TrainerConfig copy;
      SetOption(&copy, option.name, OptionText(original, option));
      EXPECT_EQ(OptionText(copy, option), OptionText(original, option)) << option.name;
    }
  EXPECT_EQ(OptionText(changed, FindTrainerOption("gpus")), "1,3");
  EXPECT_EQ(OptionText(defaults, FindTrainerOption("epoch_size")), "1500000");
}

// Below and above the range of every numeric option: one error naming the flag, the value and the range.
TEST(TrainerOptions, EveryNumericOptionOutOfRangeNamesTheFlagAndTheRange) {
  int numeric = 0, checked = 0;
  for (const TrainerOption& option : TrainerOptions()) {
    if (!IsNumeric(option)) continue;
    ++numeric;
    for (const std::string& text : OutOfRangeTexts(option)) {
      std::string message = ErrorOf([&] {
        TrainerConfig config = Valid();
        SetOption(&config, option.name, text);
        ValidateTrainerConfig(config);
      });
      EXPECT_NE(message.find(std::string("--") + option.name + " "), std::string::npos)
          << text << ": " << message;
      EXPECT_NE(message.find("accepted range " + RangeText(option)), std::string::npos) << message;
      EXPECT_NE(message.find(text), std::string::npos) << message;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * numeric - 1) << "below and above each range; nothing is above --seed's";
  EXPECT_EQ(
      ErrorOf([] {
        TrainerConfig config = Valid();
        config.epoch_size = (int64_t{1} << 40) + 1;
        ValidateTrainerConfig(config);
      }),
      "--epoch_size must be at most 1099511627776, got 1099511627777; accepted range [0, 1099511627776]");
  EXPECT_EQ(ErrorOf([] {
              TrainerConfig config = Valid();
              config.momentum = 1;
              ValidateTrainerConfig(config);
            }),
            "--momentum must be below 1, got 1; accepted range [0, 1)");
  EXPECT_EQ(ErrorOf([] {
              TrainerConfig config = Valid();
              config.num_shards = 2;
              config.shard_id = 2;
              config.run_id = "x";
              ValidateTrainerConfig(config);
            }),
            "--shard_id 2: must be below --num_shards 2; accepted range [0, 1]");
}

// Values past what the option's type holds fail while parsing the command line: one line naming the flag and
// the range, for every numeric flag of the CLI.
TEST(TrainerOptionsCli, EveryNumericFlagOverflowGivesOneLine) {
  for (const TrainerOption& option : TrainerOptions()) {
    if (!IsNumeric(option)) continue;
    const std::string huge = IsInteger(option) ? "99999999999999999999999" : "1e999";
    CliOutput run = RunCliWithFiles(
        ::testing::TempDir(),
        fmt::format("train --use_cpu --model lenet --train_data null --{} {}", option.name, huge));
    EXPECT_EQ(run.code, kExitNotRetryable) << option.name;
    EXPECT_EQ(run.err, fmt::format("lockstep: error: --{} {}: out of range; accepted range {}\n", option.name,
                                   huge, RangeText(option)));
  }
  CliOutput run = RunCliWithFiles(
      ::testing::TempDir(), "train --use_cpu --model lenet --train_data null --epoch_size 1099511627777");
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(
      run.err,
      "lockstep: error: --epoch_size must be at most 1099511627776, got 1099511627777; accepted range [0, "
      "1099511627776]\n");
  run = RunCliWithFiles(::testing::TempDir(), "train --use_cpu --model lenet --train_data null --threads -1");
  EXPECT_EQ(run.err, "lockstep: error: --threads must be >= 0, got -1; accepted range [0, 4096]\n");
  // A missing flag or a bad value is named before the devices are looked for.
  run = RunCliWithFiles(::testing::TempDir(), "train --model lenet --train_data null --batch_size 0");
  EXPECT_EQ(run.err,
            "lockstep: error: --batch_size must be at least 1, got 0; accepted range [1, 1048576]\n");
  run = RunCliWithFiles(::testing::TempDir(), "train --model lenet");
  EXPECT_NE(run.err.find("--train_data is required"), std::string::npos) << run.err;
}

// The help shows the default that applies: Caffe2's epoch size, one pass over fashion-mnist.
TEST(TrainerOptionsCli, HelpShowsDefaultsAndRanges) {
  CliOutput run = RunCliWithFiles(::testing::TempDir(), "train --help");
  EXPECT_EQ(run.code, 0);
  EXPECT_NE(run.out.find("--epoch_size INT=1500000"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("one pass over the training data, the default with --train_data fashion-mnist"),
            std::string::npos);
  EXPECT_NE(run.out.find("accepted range [0, 1099511627776]"), std::string::npos);
  EXPECT_NE(run.out.find("--batch_size INT=32"), std::string::npos);
  CliOutput eval = RunCliWithFiles(::testing::TempDir(), "eval --help");
  EXPECT_NE(eval.out.find("--batch_size"), std::string::npos);
  EXPECT_EQ(eval.out.find("--epoch_size"), std::string::npos) << "eval takes the model and data options only";
}

TEST(TrainerOptions, FashionMnistDefaultsToOnePassUnlessEpochSizeIsGiven) {
  TrainerConfig config;
  ResolveDataDefaults("null", {}, &config);
  EXPECT_EQ(config.epoch_size, 1500000);
  ResolveDataDefaults("fashion-mnist", {}, &config);
  EXPECT_EQ(config.epoch_size, 0);
  EXPECT_EQ(config.image_size, 28);
  TrainerConfig given;
  given.epoch_size = 640;
  ResolveDataDefaults("fashion-mnist", {"epoch_size"}, &given);
  EXPECT_EQ(given.epoch_size, 640);
  given.image_size = 32;
  EXPECT_EQ(ErrorOf([&] { ResolveDataDefaults("fashion-mnist", {"image_size"}, &given); }),
            "--image_size 32 does not match fashion-mnist (28); leave it out");
}

// fashion-mnist is read as pixel / 255, image databases as (pixel - 128) / 128: a model trained on one scores
// wrongly on the other, so the two are not paired; synthetic data pairs with either.
TEST(TrainerOptions, TrainAndTestDataAreReadTheSameWay) {
  TrainerConfig config = Valid();
  config.train_data = "fashion-mnist";
  config.test_data = FreshDir("fashion_test_lmdb").string();
  EXPECT_EQ(
      ErrorOf([&] { ValidateTrainerConfig(config); }),
      "--train_data fashion-mnist is read as pixel / 255 but --test_data " + config.test_data +
          " as (pixel - 128) / 128: the model would score wrongly on it; test on data read as its training "
          "data is (for an image database of the same images: lockstep make-db)");
  config.train_data = "null";
  EXPECT_EQ(ErrorOf([&] { ValidateTrainerConfig(config); }), "");
  EXPECT_EQ(InputScaling("fashion-mnist"), "pixel / 255");
  EXPECT_EQ(InputScaling("train_lmdb"), "(pixel - 128) / 128");
  EXPECT_EQ(InputScaling("null"), "");
}

TEST(TrainerOptions, AllreduceDtypeIsFloatBFloat16OrFloat16) {
  TrainerConfig config = Valid();
  for (const std::string dtype : {"float", "bfloat16", "float16"}) {
    config.allreduce_dtype = dtype;
    EXPECT_EQ(ErrorOf([&] { ValidateTrainerConfig(config); }), "") << dtype;
  }
  config.allreduce_dtype = "half";
  EXPECT_EQ(ErrorOf([&] { ValidateTrainerConfig(config); }),
            "unknown --allreduce_dtype 'half'; choose float, bfloat16 or float16");
}

// The hyper-parameters the shards compare before the first step, generated from the table.
TEST(TrainerOptions, ShardAgreementEntries) {
  TrainerConfig config = Valid();
  config.distributed_interfaces = {"eth0", "ib0"};
  auto entries = ShardAgreementEntries(config);
  std::set<std::string> names;
  for (const auto& [name, value] : entries) names.insert(name);
  // clang-format off
  EXPECT_EQ(names, (std::set<std::string>{
                       "--model", "--batch_size", "--epoch_size", "--num_epochs", "--base_learning_rate",
                       "--lr_step_epochs", "--lr_gamma",
                       "--momentum", "--nesterov", "--weight_decay", "--combine_spatial_bn",
                       "--model_parallel", "--micro_batches", "--dtype", "--loss_scale", "--seed",
                       "--train_data", "--allreduce_algorithm", "--allreduce_dtype", "--allreduce_bucket_mb",
                       "--allreduce_tail_bucket_mb", "--allreduce_channels", "--distributed_interfaces"}));
  // clang-format on
  for (const auto& [name, value] : entries) {
    if (name == "--distributed_interfaces") {
      EXPECT_EQ(value, "2 values");
    } else if (name == "--batch_size") {
      EXPECT_EQ(value, "32");
    } else if (name == "--base_learning_rate") {
      EXPECT_EQ(value, "0.1");
    }
  }
}

}  // namespace lockstep::testing
