// CreateDB: the reader it puts into the workspace hands ReadBatch the same slices as a BatchReader built by
// hand over OpenBatchSource, for fashion-mnist, synthetic data and databases; running it again restarts the
// stream; every bad argument is a one-line error naming it.
#include <gtest/gtest.h>

#include "index_db.h"
#include "lockstep/core/half.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/ops/deferred_reader.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

constexpr const char* kReader = "reader";

NetDef CreateDBNet(const std::vector<Arg>& args) {
  NetDef net;
  net.set_name("create_db");
  *net.add_op() = MakeOperatorDef("CreateDB", {}, {kReader}, args);
  return net;
}

// One ReadBatch per replica, replica r into data_r and label_r.
NetDef ReadNet(int replicas) {
  NetDef net;
  net.set_name("read");
  for (int r = 0; r < replicas; ++r)
    *net.add_op() = MakeOperatorDef("ReadBatch", {}, {fmt::format("data_{}", r), fmt::format("label_{}", r)},
                                    {Arg("reader", kReader), Arg("replica", int64_t{r})});
  return net;
}

// The message of the InvalidInput that running `net` throws.
std::string ErrorOf(const NetDef& net) {
  Workspace ws;
  try {
    ws.RunNetOnce(net);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "CreateDB ran without an error";
  return "";
}

std::vector<int32_t> Labels(const Tensor& label) {
  return std::vector<int32_t>(label.data<int32_t>(), label.data<int32_t>() + label.numel());
}

// What a replica read at one step.
struct Slice {
  Shape shape;
  std::vector<float> data;
  std::vector<int32_t> labels;
};
using Slices = std::vector<std::vector<Slice>>;  // [step][replica]

// `steps` global batches read by hand from a BatchReader over OpenBatchSource(spec), which is closed again
// (LevelDB allows one open of a database at a time).
Slices ReadByHand(const SourceSpec& spec, int64_t batch_per_replica, int replicas, int steps) {
  BatchReader reader(OpenBatchSource(spec), batch_per_replica, replicas);
  Slices slices(steps, std::vector<Slice>(replicas));
  for (auto& step : slices)
    for (int r = 0; r < replicas; ++r) {
      Tensor data, label;
      reader.Read(r, &data, &label);
      step[r] = {data.shape(), Values(data), Labels(label)};
    }
  return slices;
}

// The same global batches, read by the ReadBatch ops of one net from the reader that CreateDB made (or by
// the ops of `read_net`, which write data_r and label_r too).
void ExpectReadBatchReads(Workspace* ws, const Slices& expected, const NetDef* read_net = nullptr) {
  const int replicas = static_cast<int>(expected[0].size());
  Net* read = ws->CreateNet(read_net ? *read_net : ReadNet(replicas));
  for (size_t step = 0; step < expected.size(); ++step) {
    read->Run();
    for (int r = 0; r < replicas; ++r) {
      SCOPED_TRACE(fmt::format("step {} replica {}", step, r));
      const Tensor& data = ws->Blob(fmt::format("data_{}", r));
      EXPECT_EQ(data.shape(), expected[step][r].shape);
      EXPECT_EQ(Values(data), expected[step][r].data);  // bitwise: the same positions and augmentation
      EXPECT_EQ(Labels(ws->Blob(fmt::format("label_{}", r))), expected[step][r].labels);
    }
  }
}

// Checks data_r and label_r against `count` records of an index database from `first` on, normalized as the
// trainer does, (x - 128) / 128.
void ExpectIndexRecords(const Workspace& ws, int r, int first, int count) {
  std::vector<float> pixels;
  std::vector<int32_t> labels;
  for (int index = first; index < first + count; ++index) {
    pixels.push_back((static_cast<float>(index) - 128.0f) / 128.0f);
    labels.push_back(index % 10);
  }
  EXPECT_EQ(Values(ws.Blob(fmt::format("data_{}", r))), pixels);
  EXPECT_EQ(Labels(ws.Blob(fmt::format("label_{}", r))), labels);
}

// The training spec of an index database: one-pixel grey images of 10 classes.
SourceSpec IndexSpec(const std::string& path, const std::string& type) {
  SourceSpec spec;
  spec.name = path;
  spec.db_type = type;
  spec.seed = 9;
  spec.channels = 1;
  spec.image_size = 1;
  spec.num_labels = 10;
  return spec;
}

TEST(CreateDB, FashionMnistReadsWhatABatchReaderOverOpenBatchSourceReads) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (int train : {1, 0}) {
    SCOPED_TRACE(fmt::format("train {}", train));
    SourceSpec spec;
    spec.name = "fashion-mnist";
    spec.seed = 5;
    spec.train = train == 1;
    const Slices expected = ReadByHand(spec, 8, 2, 3);
    Workspace ws;
    ws.RunNetOnce(CreateDBNet({Arg("db", "fashion-mnist"), Arg("batch_size", int64_t{8}),
                               Arg("num_replicas", int64_t{2}), Arg("seed", int64_t{5}),
                               Arg("train", int64_t{train})}));
    ExpectReadBatchReads(&ws, expected);
    EXPECT_EQ(ws.Blob("data_0").shape(), (Shape{8, 1, 28, 28}));
  }
}

TEST(CreateDB, NullMakesSyntheticBatchesOfTheGivenGeometry) {
  const NetDef create =
      CreateDBNet({Arg("db", "null"), Arg("batch_size", int64_t{3}), Arg("num_channels", int64_t{2}),
                   Arg("image_size", int64_t{5}), Arg("num_labels", int64_t{4})});
  Workspace ws;
  ws.RunNetOnce(create);
  EXPECT_NE(ws.FindObject<BatchReader>(kReader), nullptr);
  EXPECT_FALSE(ws.HasBlob(kReader)) << "an object, not a tensor";
  EXPECT_EQ(InferNetShapes(create, {}).at(kReader).dtype, DataType::kUndefined);
  SourceSpec spec;
  spec.name = "null";
  spec.channels = 2;
  spec.image_size = 5;
  spec.num_labels = 4;
  ExpectReadBatchReads(&ws, ReadByHand(spec, 3, 1, 2));
  EXPECT_EQ(ws.Blob("data_0").shape(), (Shape{3, 2, 5, 5}));
  EXPECT_EQ(ws.Blob("label_0").shape(), (Shape{3}));
  for (int32_t label : Labels(ws.Blob("label_0"))) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 4);
  }
  // A reader that was never made, and a replica the reader was not made for, say how to make it.
  NetDef misspelled = ReadNet(1);
  misspelled.mutable_op(0)->mutable_arg(0)->set_s("readr");
  EXPECT_NE(ErrorOf(misspelled)
                .find("no reader 'readr' in the workspace; make it with CreateDB([], \"readr\", "
                      "db=...) in the init net, and run that net first"),
            std::string::npos)
      << ErrorOf(misspelled);
  try {
    ws.RunNetOnce(ReadNet(2));
    ADD_FAILURE() << "replica 1 read a reader of 1 replica";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("replica 1 is outside the 1 replicas of reader '" +
                                         std::string(kReader) + "'; create it with CreateDB's num_replicas"),
              std::string::npos)
        << e.what();
  }
}

class CreateDBOnDatabase : public ::testing::TestWithParam<std::string> {};

// Records in file order (train 0): replica r of step t reads records [(2t + r) * 4, (2t + r + 1) * 4), each
// pixel its index normalized as the trainer does, (x - 128) / 128.
TEST_P(CreateDBOnDatabase, EvaluationReadsEachReplicasSliceInFileOrder) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, GetParam(), 40);
  Workspace ws;
  ws.RunNetOnce(
      CreateDBNet({Arg("db", path), Arg("db_type", GetParam()), Arg("batch_size", int64_t{4}),
                   Arg("num_replicas", int64_t{2}), Arg("train", int64_t{0}), Arg("num_channels", int64_t{1}),
                   Arg("image_size", int64_t{1}), Arg("scale", int64_t{0}), Arg("num_labels", int64_t{10})}));
  Net* read = ws.CreateNet(ReadNet(2));
  for (int step = 0; step < 3; ++step) {
    read->Run();
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(fmt::format("step {} replica {}", step, r));
      ExpectIndexRecords(ws, r, (2 * step + r) * 4, 4);
    }
  }
}

// Training (the defaults: shuffled, random crops and mirrors, prefetching) reads what the trainer's reader
// over the same spec reads.
TEST_P(CreateDBOnDatabase, TrainingReadsWhatABatchReaderOverOpenBatchSourceReads) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, GetParam(), 40);
  const Slices expected = ReadByHand(IndexSpec(path, GetParam()), 3, 2, 8);  // past the end of the first pass
  Workspace ws;
  ws.RunNetOnce(
      CreateDBNet({Arg("db", path), Arg("db_type", GetParam()), Arg("batch_size", int64_t{3}),
                   Arg("num_replicas", int64_t{2}), Arg("seed", int64_t{9}), Arg("num_channels", int64_t{1}),
                   Arg("image_size", int64_t{1}), Arg("num_labels", int64_t{10})}));
  ExpectReadBatchReads(&ws, expected);
}

// A second run replaces the reader: the stream starts again at position 0, for the nets already created too.
TEST_P(CreateDBOnDatabase, RunningAgainRestartsTheStream) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, GetParam(), 40);
  const NetDef create = CreateDBNet(
      {Arg("db", path), Arg("db_type", GetParam()), Arg("batch_size", int64_t{4}), Arg("train", int64_t{0}),
       Arg("num_channels", int64_t{1}), Arg("image_size", int64_t{1}), Arg("num_labels", int64_t{10})});
  Workspace ws;
  std::vector<std::vector<int32_t>> first_run;
  ws.RunNetOnce(create);
  Net* read = ws.CreateNet(ReadNet(1));
  for (int step = 0; step < 3; ++step) {
    read->Run();
    first_run.push_back(Labels(ws.Blob("label_0")));
  }
  EXPECT_EQ(first_run[1], (std::vector<int32_t>{4, 5, 6, 7}));

  ws.RunNetOnce(create);
  for (int step = 0; step < 3; ++step) {
    read->Run();
    EXPECT_EQ(Labels(ws.Blob("label_0")), first_run[step]) << "step " << step;
  }
}

// Caffe2's form: CreateDB(db, db_type, num_shards, shard_id) names the database, and each replica's
// ImageInput (arguments as resnet50_trainer passes them) reads its slice from the one reader they share.
NetDef ImageInputNet(int replicas, const std::vector<Arg>& args) {
  NetDef net;
  net.set_name("image_input");
  for (int r = 0; r < replicas; ++r) {
    std::vector<Arg> all = args;
    all.push_back(Arg("replica", int64_t{r}));
    all.push_back(Arg("num_replicas", int64_t{replicas}));
    *net.add_op() = MakeOperatorDef("ImageInput", {kReader},
                                    {fmt::format("data_{}", r), fmt::format("label_{}", r)}, all);
  }
  return net;
}

// resnet50_trainer's arguments, for one-pixel grey Datums.
std::vector<Arg> TrainerImageArgs(int64_t batch_size, int is_test, const std::string& output_type = "float") {
  return {Arg("batch_size", batch_size),
          Arg("use_caffe_datum", 1),
          Arg("mean", 128.f),
          Arg("std", 128.f),
          Arg("scale", 1),
          Arg("crop", 1),
          Arg("mirror", 1),
          Arg("is_test", is_test),
          Arg("color", 0),
          Arg("output_type", output_type),
          Arg("use_gpu_transform", 0)};
}

// Evaluation (is_test=1): replica r of shard s reads what ReadBatch's replica (s x 2 + r) of a 4-replica job
// reads, records in file order.
TEST_P(CreateDBOnDatabase, ImageInputReadsTheReplicasSliceOfItsShard) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, GetParam(), 40);
  for (int shard : {0, 1}) {
    Workspace ws;
    ws.RunNetOnce(CreateDBNet({Arg("db", path), Arg("db_type", GetParam()), Arg("num_shards", int64_t{2}),
                               Arg("shard_id", int64_t{shard}), Arg("num_labels", int64_t{10})}));
    EXPECT_NE(ws.FindObject<DeferredReader>(kReader), nullptr);
    Net* read = ws.CreateNet(ImageInputNet(2, TrainerImageArgs(3, 1)));
    for (int step = 0; step < 2; ++step) {
      read->Run();
      for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE(fmt::format("shard {} step {} replica {}", shard, step, r));
        EXPECT_EQ(ws.Blob(fmt::format("data_{}", r)).shape(), (Shape{3, 1, 1, 1}));
        ExpectIndexRecords(ws, r, (4 * step + 2 * shard + r) * 3, 3);
      }
    }
  }
}

// output_type float16 (resnet50_trainer's --dtype float16) gives the float32 slice rounded to float16.
TEST(ImageInput, Float16OutputIsTheFloatSliceRounded) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, "lmdb", 8);
  Workspace ws;
  ws.RunNetOnce(CreateDBNet({Arg("db", path), Arg("num_labels", int64_t{10})}));
  NetDef net;
  net.set_name("read");
  *net.add_op() =
      MakeOperatorDef("ImageInput", {kReader}, {"data", "label"}, TrainerImageArgs(4, 1, "float16"));
  ws.RunNetOnce(net);
  const Tensor& data = ws.Blob("data");
  ASSERT_EQ(data.dtype(), DataType::kFloat16);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(data.data<Float16>()[i].bits, ToFloat16((static_cast<float>(i) - 128.0f) / 128.0f).bits) << i;
  EXPECT_EQ(InferNetShapes(net, {}).at("data").dtype, DataType::kFloat16);
}

// Training (is_test=0, mirror=1) reads what the trainer's reader over the same spec reads.
TEST_P(CreateDBOnDatabase, ImageInputTrainingReadsWhatABatchReaderReads) {
  TempDirectory dir;
  const std::string path = MakeIndexDb(dir, GetParam(), 40);
  SourceSpec spec = IndexSpec(path, GetParam());
  spec.scale = 1;
  spec.record_format = "datum";
  spec.decode_threads = 4;
  const Slices expected = ReadByHand(spec, 3, 2, 8);
  Workspace ws;
  ws.RunNetOnce(CreateDBNet({Arg("db", path), Arg("db_type", GetParam()), Arg("seed", int64_t{9}),
                             Arg("num_labels", int64_t{10})}));
  const NetDef read = ImageInputNet(2, TrainerImageArgs(3, 0));
  ExpectReadBatchReads(&ws, expected, &read);
}

INSTANTIATE_TEST_SUITE_P(Backends, CreateDBOnDatabase, ::testing::Values("lmdb", "leveldb"));

// What ImageInput cannot do is refused in one line when its net is created.
TEST(ImageInput, UnsupportedArgumentsAreRefusedInOneLine) {
  Workspace ws;
  ws.RunNetOnce(CreateDBNet({Arg("db", "null")}));
  const std::vector<std::pair<std::vector<Arg>, std::string>> cases = {
      {{Arg("crop", 8)}, "argument batch_size is required"},
      {{Arg("batch_size", 2)}, "argument crop is required"},
      {{Arg("batch_size", 2), Arg("crop", 8), Arg("mirror", 1)}, "pass mean=128 and std=128"},
      {{Arg("batch_size", 2), Arg("crop", 8), Arg("mean", 128.f), Arg("std", 128.f)},
       "training streams crop and mirror at random"},
      {{Arg("batch_size", 2), Arg("crop", 8), Arg("mean", 128.f), Arg("std", 128.f), Arg("is_test", 1),
        Arg("output_type", "int8")},
       "output_type 'int8' is not a dtype ImageInput writes; pass float or float16"},
      {{Arg("batch_size", 2), Arg("crop", 8), Arg("is_test", 1), Arg("warp", 1)}, "unknown argument 'warp'"},
  };
  for (const auto& [args, expected] : cases) {
    NetDef net;
    net.set_name("read");
    *net.add_op() = MakeOperatorDef("ImageInput", {kReader}, {"data", "label"}, args);
    try {
      ws.CreateNet(net, true);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

TEST(ImageInput, NeedsCaffe2sCreateDB) {
  Workspace ws;
  ws.RunNetOnce(CreateDBNet({Arg("db", "null"), Arg("batch_size", int64_t{2})}));  // a ReadBatch reader
  NetDef net;
  net.set_name("read");
  *net.add_op() = MakeOperatorDef(
      "ImageInput", {kReader}, {"data", "label"},
      {Arg("batch_size", 2), Arg("crop", 8), Arg("is_test", 1), Arg("mean", 128.f), Arg("std", 128.f)});
  try {
    ws.CreateNet(net);
    FAIL() << "a ReadBatch reader was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("must be what CreateDB wrote without a batch size"),
              std::string::npos)
        << e.what();
  }
}

struct BadArguments {
  std::vector<Arg> args;
  std::vector<std::string> expected;  // parts of the message
};

TEST(CreateDB, EveryBadArgumentIsAOneLineErrorNamingIt) {
  const Arg db("db", "null"), batch("batch_size", int64_t{2});
  const std::vector<BadArguments> cases = {
      {{batch}, {"argument db is required", "fashion-mnist", "a database path"}},
      {{db, batch, Arg("shard_id", int64_t{1})},
       {"argument shard_id is for ImageInput's readers", "pass num_replicas = devices x shards"}},
      {{db, Arg("batch_size", int64_t{0})},
       {"argument batch_size must be at least 1, got 0; accepted range [1, 1048576]"}},
      {{db, batch, Arg("num_replicas", int64_t{0})},
       {"argument 'num_replicas' must be in [1, 2147483647], got 0"}},
      {{db, batch, Arg("db_type", "rocksdb")}, {"argument db_type 'rocksdb'", "leveldb, lmdb"}},
      {{db, batch, Arg("record_format", "json")}, {"argument record_format", "auto, datum, tensorprotos"}},
      {{db, batch, Arg("color_order", "rbg")},
       {"argument color_order: unknown color order 'rbg'; known orders: bgr, rgb"}},
      {{db, batch, Arg("train", int64_t{2})}, {"argument 'train' must be in [0, 1], got 2"}},
      {{db, batch, Arg("skip_bad_records", int64_t{-1})}, {"argument 'skip_bad_records' must be in [0, 1]"}},
      {{db, batch, Arg("seed", int64_t{-1})}, {"argument 'seed' must be at least 0, got -1"}},
      {{db, batch, Arg("image_size", int64_t{0})}, {"argument image_size must be at least 1, got 0"}},
      {{db, batch, Arg("num_labels", int64_t{1})},
       {"argument num_labels must be at least 2, got 1; accepted range [2, 16777216]"}},
      {{db, batch, Arg("num_labels", int64_t{1} << 40)},
       {"argument num_labels must be at most 16777216, got 1099511627776"}},
      {{db, batch, Arg("decode_threads", int64_t{0})},
       {"argument decode_threads must be at least 1, got 0; accepted range [1, 1024]"}},
      {{db, batch, Arg("prefetch", int64_t{-1})},
       {"argument prefetch must be >= 0, got -1; accepted range [0, 1024]"}},
      {{db, batch, Arg("image_size", "28")}, {"argument 'image_size' must be an int, got the string \"28\""}},
      {{db, batch, Arg("batch_sise", int64_t{2})},
       {"unknown argument 'batch_sise'; did you mean 'batch_size'?"}},
      {{Arg("db", "fashion-mnist"), batch, Arg("num_channels", int64_t{3})},
       {"argument num_channels 3 does not match fashion-mnist (1)"}},
      {{Arg("db", "/nonexistent/train_lmdb"), batch},
       {"argument db '/nonexistent/train_lmdb' cannot be opened", "does not exist"}},
  };
  for (const BadArguments& bad : cases) {
    const std::string error = ErrorOf(CreateDBNet(bad.args));
    EXPECT_NE(error.find("CreateDB() -> reader"), std::string::npos) << error;
    for (const std::string& part : bad.expected) EXPECT_NE(error.find(part), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  }
}

}  // namespace
}  // namespace lockstep::testing
