// CheckSourceOptions: `lockstep train`'s flags and CreateDB's arguments for the same data-source option
// accept the same values and refuse the same values with the same one-line message, the flag ("--num_labels")
// or the argument ("argument num_labels") named in it.
#include "lockstep/data/source_options.h"

#include <gtest/gtest.h>

#include "lockstep/data/db.h"
#include "lockstep/train/trainer_options.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// One option set to one value, on top of synthetic data (or `data`) and a batch of 2.
struct OptionValue {
  std::string option, value;
  bool number = true;
  std::string data = "null";
};

// What the trainer says of it: "" when it is accepted.
std::string TrainerError(const OptionValue& given) {
  TrainerConfig config;
  config.model = "lenet";
  config.use_cpu = true;
  config.train_data = given.data;
  config.batch_size = 2;
  try {
    SetOption(&config, given.option, given.value);
    ResolveDataDefaults(config.train_data, {given.option}, &config);
    ValidateTrainerConfig(config);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

// What creating CreateDB with it as an argument says: "" when it is accepted.
std::string CreateDBError(const OptionValue& given) {
  std::vector<Arg> args = {Arg("db", given.data)};
  if (given.option != "batch_size") args.push_back(Arg("batch_size", int64_t{2}));
  args.push_back(given.number ? Arg(given.option, int64_t{std::stoll(given.value)})
                              : Arg(given.option, given.value));
  NetDef net;
  net.set_name("create_db");
  *net.add_op() = MakeOperatorDef("CreateDB", {}, {"reader"}, args);
  Workspace ws;
  try {
    ws.CreateNet(net);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(SourceOptions, TheTrainerAndCreateDBRefuseTheSameValuesWithTheSameMessage) {
  struct Refused {
    OptionValue given;
    std::string message;  // {} is where the option's prefix goes: "--" or "argument "
  };
  const std::vector<Refused> cases = {
      {{"num_labels", "1"}, "{}num_labels must be at least 2, got 1; accepted range [2, 16777216]"},
      {{"num_labels", "16777217"},
       "{}num_labels must be at most 16777216, got 16777217; accepted range [2, 16777216]"},
      {{"image_size", "0"}, "{}image_size must be at least 1, got 0; accepted range [1, 65536]"},
      {{"image_size", "65537"}, "{}image_size must be at most 65536, got 65537; accepted range [1, 65536]"},
      {{"num_channels", "0"}, "{}num_channels must be at least 1, got 0; accepted range [1, 4096]"},
      {{"num_channels", "4097"}, "{}num_channels must be at most 4096, got 4097; accepted range [1, 4096]"},
      {{"scale", "-1"}, "{}scale must be >= 0, got -1; accepted range [0, 65536]"},
      {{"scale", "65537"}, "{}scale must be at most 65536, got 65537; accepted range [0, 65536]"},
      {{"decode_threads", "0"}, "{}decode_threads must be at least 1, got 0; accepted range [1, 1024]"},
      {{"decode_threads", "1025"},
       "{}decode_threads must be at most 1024, got 1025; accepted range [1, 1024]"},
      {{"batch_size", "0"}, "{}batch_size must be at least 1, got 0; accepted range [1, 1048576]"},
      {{"batch_size", "1048577"},
       "{}batch_size must be at most 1048576, got 1048577; accepted range [1, 1048576]"},
      {{"prefetch", "-1"}, "{}prefetch must be >= 0, got -1; accepted range [0, 1024]"},
      {{"prefetch", "1025"}, "{}prefetch must be at most 1024, got 1025; accepted range [0, 1024]"},
      {{"db_type", "rocksdb", false},
       "{}db_type 'rocksdb' is not a database type; use one of: leveldb, lmdb"},
      {{"record_format", "json", false},
       "{}record_format: unknown record format 'json'; known formats: auto, datum, tensorprotos"},
      {{"color_order", "rbg", false}, "{}color_order: unknown color order 'rbg'; known orders: bgr, rgb"},
      {{"num_channels", "3", true, "fashion-mnist"},
       "{}num_channels 3 does not match fashion-mnist (1); leave it out"},
      {{"num_labels", "1", true, "fashion-mnist"},
       "{}num_labels 1 does not match fashion-mnist (10); leave it out"},
      {{"scale", "64", true, "fashion-mnist"},
       "{}scale 64 does not apply to fashion-mnist, whose 28x28 images are used whole; leave it out"},
  };
  for (const Refused& refused : cases) {
    SCOPED_TRACE(fmt::format("{} {} on {}", refused.given.option, refused.given.value, refused.given.data));
    EXPECT_EQ(TrainerError(refused.given), fmt::format(fmt::runtime(refused.message), "--"));
    EXPECT_EQ(CreateDBError(refused.given),
              "CreateDB() -> reader: " + fmt::format(fmt::runtime(refused.message), "argument "));
  }
}

TEST(SourceOptions, TheTrainerAndCreateDBAcceptTheSameValues) {
  const std::vector<OptionValue> accepted = {
      {"num_labels", "2"},
      {"num_labels", "16777216"},
      {"image_size", "1"},
      {"image_size", "65536"},
      {"num_channels", "4096"},
      {"scale", "0"},
      {"scale", "65536"},
      {"decode_threads", "1024"},
      {"batch_size", "1"},
      {"batch_size", "1048576"},
      {"prefetch", "0"},
      {"prefetch", "1024"},
      {"db_type", "leveldb", false},
      {"db_type", "lmdb", false},
      {"record_format", "tensorprotos", false},
      {"record_format", "datum", false},
      {"color_order", "rgb", false},
      {"num_channels", "1", true, "fashion-mnist"},
      {"num_labels", "10", true, "fashion-mnist"},
  };
  for (const OptionValue& given : accepted) {
    SCOPED_TRACE(fmt::format("{} {} on {}", given.option, given.value, given.data));
    EXPECT_EQ(TrainerError(given), "");
    EXPECT_EQ(CreateDBError(given), "");
  }
}

// The option table shows the data layer's bounds, and its db_type help the registered types.
TEST(SourceOptions, TheTrainersTableShowsTheDataLayersRulesAndTypes) {
  EXPECT_EQ(RangeText(FindTrainerOption("num_labels")), fmt::format("[{}, {}]", kMinLabels, kMaxLabels));
  EXPECT_EQ(RangeText(FindTrainerOption("batch_size")), fmt::format("[1, {}]", kMaxBatchSize));
  EXPECT_EQ(RangeText(FindTrainerOption("prefetch")), fmt::format("[0, {}]", kMaxPrefetch));
  const std::string help = FindTrainerOption("db_type").help;
  for (const std::string& type : DbTypes()) EXPECT_NE(help.find(type), std::string::npos) << help;
}

}  // namespace
}  // namespace lockstep::testing
