// ONNX export: the zoo's LeNet and ResNet-18 read back with ONNX's own messages pass its checker with the
// expected graph (operators in order, initializers with the checkpoint's names, shapes and values, BN in
// inference mode, no Dropout, the input documented in the metadata); an operator without a mapping stops
// the export with one line naming it, and a failed export leaves no file behind. Whether onnxruntime agrees
// with lockstep's numbers is tests/python/test_onnx_export.py's question.
#include "lockstep/train/onnx_checkpoint.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <map>

#include "lockstep/core/atomic_file.h"
#include "lockstep/core/workspace.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"
#include "lockstep/train/checkpoint.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// A checkpoint of `name` with its freshly initialised parameters, as the trainer would save it.
std::string WriteCheckpoint(const fs::path& dir, const std::string& name, const ModelConfig& geometry) {
  ModelHelper model(name);
  BuildModel(name, model, "data", geometry);
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  TrainerState state;
  state.model = {name, geometry.num_channels, geometry.image_size, geometry.num_labels};
  state.epochs_done = 1;
  state.iteration = 7;
  const std::string path = (dir / (name + "_1.safetensors")).string();
  SaveCheckpoint(path, ws, "", model.GetParams(), state);
  return path;
}

TrainerConfig ExportConfig(const std::string& checkpoint, int channels, int image_size, int labels) {
  TrainerConfig config;
  config.load_model_path = checkpoint;
  config.num_channels = channels;
  config.image_size = image_size;
  config.num_labels = labels;
  return config;
}

onnx::ModelProto ReadModel(const fs::path& path) {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(ReadFile(path))) << path;
  return model;
}

std::vector<std::string> NodeTypes(const onnx::ModelProto& model) {
  std::vector<std::string> types;
  for (const auto& node : model.graph().node()) types.push_back(node.op_type());
  return types;
}

std::map<std::string, std::string> Metadata(const onnx::ModelProto& model) {
  std::map<std::string, std::string> metadata;
  for (const auto& entry : model.metadata_props()) metadata[entry.key()] = entry.value();
  return metadata;
}

std::vector<int64_t> Dims(const onnx::TensorProto& tensor) {
  return {tensor.dims().begin(), tensor.dims().end()};
}

// "N,1,28,28": a value's shape, symbolic dims by name.
std::string ShapeOf(const onnx::ValueInfoProto& value) {
  std::string text;
  for (const auto& dim : value.type().tensor_type().shape().dim())
    text +=
        (text.empty() ? "" : ",") + (dim.has_dim_param() ? dim.dim_param() : std::to_string(dim.dim_value()));
  return text;
}

const onnx::AttributeProto* Attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Files other than the expected ones in `dir`: what a failed write could leave (temporaries).
std::vector<std::string> FileNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(OnnxExport, LeNetPassesTheCheckerWithItsCheckpointsParameters) {
  const fs::path dir = FreshDir("onnx_lenet");
  const std::string checkpoint = WriteCheckpoint(dir, "lenet", {1, 28, 10, true});
  TrainerConfig config = ExportConfig(checkpoint, 1, 28, 10);
  config.test_data = "fashion-mnist";
  const fs::path path = dir / "lenet.onnx";
  OnnxExportSummary summary = ExportCheckpointToOnnx(config, {"test_data"}, path.string());

  onnx::ModelProto model = ReadModel(path);
  EXPECT_NO_THROW(onnx::checker::check_model(model));
  const std::vector<std::string> expected = {"Conv",        "Relu",    "AveragePool", "Conv", "Relu",
                                             "AveragePool", "Flatten", "Gemm",        "Relu", "Gemm"};
  EXPECT_EQ(NodeTypes(model), expected);
  EXPECT_EQ(summary.node_types, expected);
  EXPECT_EQ(summary.checker, "passed");
  EXPECT_EQ(summary.file_bytes, static_cast<int64_t>(fs::file_size(path)));
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), kOnnxOpsetVersion);
  EXPECT_EQ(model.producer_name(), "lockstep");

  // The parameters under their checkpoint names, shapes and values; FC's weight stays (M, K) for transB.
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"conv1_w", {20, 1, 3, 3}}, {"conv1_b", {20}}, {"conv2_w", {50, 20, 5, 5}}, {"conv2_b", {50}},
      {"fc3_w", {128, 800}},      {"fc3_b", {128}},  {"fc4_w", {10, 128}},        {"fc4_b", {10}}};
  ModelHelper reference("lenet");
  BuildModel("lenet", reference, "data", {1, 28, 10, true});
  Workspace ws;
  ws.RunNetOnce(reference.param_init_net());
  Workspace empty;  // a model's blobs exist once its param_init_net ran
  EXPECT_THROW(LoadCheckpointParameters(checkpoint, &empty, "", reference.GetParams()), InvalidInput);
  LoadCheckpointParameters(checkpoint, &ws, "", reference.GetParams());
  ASSERT_EQ(model.graph().initializer_size(), static_cast<int>(shapes.size()));
  int64_t values = 0;
  for (const auto& tensor : model.graph().initializer()) {
    ASSERT_TRUE(shapes.count(tensor.name())) << tensor.name();
    EXPECT_EQ(Dims(tensor), shapes.at(tensor.name())) << tensor.name();
    EXPECT_EQ(tensor.data_type(), onnx::TensorProto::FLOAT);
    const std::vector<float> expected_values = Values(ws.Blob(tensor.name()));
    ASSERT_EQ(tensor.raw_data().size(), expected_values.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(tensor.raw_data().data(), expected_values.data(), tensor.raw_data().size()), 0)
        << tensor.name();
    values += static_cast<int64_t>(expected_values.size());
  }
  EXPECT_EQ(summary.parameter_values, values);

  const onnx::NodeProto& gemm = model.graph().node(7);
  ASSERT_NE(Attribute(gemm, "transB"), nullptr);
  EXPECT_EQ(Attribute(gemm, "transB")->i(), 1);
  ASSERT_EQ(model.graph().input_size(), 1);
  EXPECT_EQ(model.graph().input(0).name(), "data");
  EXPECT_EQ(ShapeOf(model.graph().input(0)), "N,1,28,28");
  ASSERT_EQ(model.graph().output_size(), 1);
  EXPECT_EQ(model.graph().output(0).name(), "logits");
  EXPECT_EQ(ShapeOf(model.graph().output(0)), "N,10");
  std::map<std::string, std::string> metadata = Metadata(model);
  EXPECT_EQ(metadata["model"], "lenet");
  EXPECT_EQ(metadata["input_name"], "data");
  EXPECT_EQ(metadata["input_shape"], "N, 1, 28, 28");
  EXPECT_EQ(metadata["input_layout"], "NCHW");
  EXPECT_NE(metadata["input_normalization"].find("pixel * (1/255)"), std::string::npos);
  EXPECT_EQ(metadata["checkpoint_iteration"], "7");
}

TEST(OnnxExport, ResNet18HasInferenceBatchNormAndTheCheckpointsModel) {
  const fs::path dir = FreshDir("onnx_resnet18");
  const std::string checkpoint = WriteCheckpoint(dir, "resnet18", {3, 32, 10, true});
  // No --model: the checkpoint's metadata names it.
  TrainerConfig config = ExportConfig(checkpoint, 3, 32, 10);
  config.model = "lenet";  // the default, not given: ignored
  const fs::path path = dir / "resnet18.onnx";
  ExportCheckpointToOnnx(config, {}, path.string(), /*softmax=*/true);

  onnx::ModelProto model = ReadModel(path);
  EXPECT_NO_THROW(onnx::checker::check_model(model));
  std::vector<std::string> types = NodeTypes(model);
  ASSERT_GE(types.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(types.begin(), types.begin() + 4),
            (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "MaxPool"}));
  EXPECT_EQ(std::vector<std::string>(types.end() - 4, types.end()),
            (std::vector<std::string>{"GlobalAveragePool", "Flatten", "Gemm", "Softmax"}));
  int batch_norms = 0, adds = 0;
  for (const auto& node : model.graph().node()) {
    EXPECT_NE(node.op_type(), "Dropout");
    if (node.op_type() == "Add") ++adds;
    if (node.op_type() != "BatchNormalization") continue;
    ++batch_norms;
    EXPECT_EQ(node.output_size(), 1) << "inference mode has one output";
    EXPECT_EQ(Attribute(node, "training_mode"), nullptr);
    ASSERT_NE(Attribute(node, "epsilon"), nullptr);
    EXPECT_FLOAT_EQ(Attribute(node, "epsilon")->f(), 1e-5f);
    EXPECT_EQ(node.input(3), node.input(1).substr(0, node.input(1).size() - 2) + "_rm");
    EXPECT_EQ(node.input(4), node.input(1).substr(0, node.input(1).size() - 2) + "_riv");
  }
  EXPECT_EQ(batch_norms, 20);  // 17 convolutions in blocks and the stem, 3 projections
  EXPECT_EQ(adds, 8);
  EXPECT_EQ(model.graph().output(0).name(), "probabilities");
  EXPECT_EQ(ShapeOf(model.graph().output(0)), "N,10");
  std::map<std::string, std::string> metadata = Metadata(model);
  EXPECT_EQ(metadata["model"], "resnet18");
  EXPECT_NE(metadata["input_normalization"].find("not recorded"), std::string::npos);
}

// Exported without --test_data, a model says how its training data was read where its checkpoint records it.
TEST(OnnxExport, WithoutTestDataTheNormalizationIsTheCheckpointsRecord) {
  TrainerConfig config;
  EXPECT_EQ(InputNormalizationText(config, "", InputScaling("fashion-mnist")),
            "x = pixel * (1/255) in float32, as its training data was read (the checkpoint records it)");
  EXPECT_NE(
      InputNormalizationText(config, "null", InputScaling("/data/train_lmdb")).find("(pixel[c] - 128) / 128"),
      std::string::npos);
  EXPECT_NE(InputNormalizationText(config, "", "").find("not recorded"), std::string::npos);
}

// With a database, the reading of its images: the colour order only where there is colour.
TEST(OnnxExport, WithTestDataTheNormalizationNamesTheColourOrderOfColourModels) {
  TrainerConfig config;
  config.num_channels = 3, config.image_size = 28, config.scale = 32;
  EXPECT_EQ(InputNormalizationText(config, "/data/test_lmdb", ""),
            "x[c] = (pixel[c] - 128) / 128, channels in BGR order, after resizing each image so its shortest "
            "side is 32 and cropping its centre to 28 x 28");
  config.num_channels = 1;
  EXPECT_EQ(InputNormalizationText(config, "/data/test_lmdb", ""),
            "x[c] = (pixel[c] - 128) / 128, after resizing each image so its shortest side is 32 and cropping "
            "its centre to 28 x 28");
}

// A training net as built by hand: the reader's output is the input, Dropout and the loss are left out,
// SpatialBN in training mode exports on its running statistics, in-place writes get fresh ONNX names, fused
// ReLUs become nodes of their own.
TEST(OnnxExport, TrainingNetExportsItsInferenceGraph) {
  ModelHelper model("net");
  layers::ConvOptions conv;
  std::string x = layers::Conv(model, "data", "conv", 3, 4, 3, conv);
  x = layers::SpatialBN(model, x, "bn", 4, /*is_test=*/false, /*relu=*/true, 1e-3f, 0.9f);
  x = layers::Dropout(model, x, "drop", 0.5f, /*is_test=*/false);
  model.AddOp("Relu", {x}, {x});  // in place
  model.AddOp("Add", {x, x}, {"twice"},
              {Arg("relu", 1)});  // as the ReLU fusion leaves a residual block's end
  x = layers::FC(model, "twice", "fc", 4 * 6 * 6, 5);
  auto [softmax, loss] = layers::SoftmaxWithLoss(model, x, "label", "softmax", "loss");
  layers::Accuracy(model, softmax, "label", "accuracy");
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());

  OnnxGraphSpec spec;
  spec.input = "data";
  spec.input_shape = {2, 3, 8, 8};
  spec.output = softmax;
  spec.output_name = "probabilities";
  OnnxExportSummary summary;
  onnx::ModelProto exported;
  ASSERT_TRUE(exported.ParseFromString(NetToOnnx(model.net(), ws, spec, &summary)));
  EXPECT_NO_THROW(onnx::checker::check_model(exported));
  EXPECT_EQ(summary.node_types, (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Relu", "Add",
                                                          "Relu", "Flatten", "Gemm", "Softmax"}));
  const onnx::NodeProto& bn = exported.graph().node(1);
  EXPECT_EQ(bn.output_size(), 1);
  EXPECT_FLOAT_EQ(Attribute(bn, "epsilon")->f(), 1e-3f);
  // The second Relu reads the first's output under another name than its own.
  EXPECT_EQ(exported.graph().node(3).input(0), exported.graph().node(2).output(0));
  EXPECT_NE(exported.graph().node(3).output(0), exported.graph().node(3).input(0));
  EXPECT_EQ(exported.graph().output(0).name(), "probabilities");
  EXPECT_EQ(ShapeOf(exported.graph().output(0)), "N,5");
  for (const auto& tensor : exported.graph().initializer()) EXPECT_NE(tensor.name(), "label");
}

TEST(OnnxExport, OperatorWithoutMappingIsOneLineNamingIt) {
  ModelHelper model("net");
  layers::ConvOptions conv;
  std::string x = layers::Conv(model, "data", "conv", 3, 4, 3, conv);
  model.AddOp("Cast", {x}, {"half"}, {Arg("to", int64_t{12})});
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  OnnxGraphSpec spec;
  spec.input = "data";
  spec.input_shape = {1, 3, 8, 8};
  spec.output = "half";
  try {
    NetToOnnx(model.net(), ws, spec);
    FAIL() << "exported an operator without mapping";
  } catch (const InvalidInput& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("export: operator 'Cast' (op 1, output 'half') has no ONNX mapping; mapped: ", 0),
              0u)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

// A failed export leaves the file as it was (or absent) and no temporary; a successful one replaces it whole.
TEST(OnnxExport, FailureLeavesNoFile) {
  const fs::path dir = FreshDir("onnx_atomic");
  const std::string checkpoint = WriteCheckpoint(dir, "lenet", {1, 28, 10, true});
  const fs::path path = dir / "model.onnx";
  // A geometry that contradicts the checkpoint is refused before anything is written.
  EXPECT_THROW(ExportCheckpointToOnnx(ExportConfig(checkpoint, 1, 32, 10), {"image_size"}, path.string()),
               InvalidInput);
  EXPECT_EQ(FileNames(dir), std::vector<std::string>{"lenet_1.safetensors"});

  WriteFileAtomically(path.string(), "an older file", "test file");
  EXPECT_THROW(ExportCheckpointToOnnx(ExportConfig(checkpoint, 3, 28, 10), {"num_channels"}, path.string()),
               InvalidInput);
  EXPECT_EQ(ReadFile(path), "an older file");
  EXPECT_EQ(FileNames(dir), (std::vector<std::string>{"lenet_1.safetensors", "model.onnx"}));

  ExportCheckpointToOnnx(ExportConfig(checkpoint, 1, 28, 10), {}, path.string());
  EXPECT_NO_THROW(onnx::checker::check_model(ReadModel(path)));
  EXPECT_EQ(FileNames(dir), (std::vector<std::string>{"lenet_1.safetensors", "model.onnx"}));
}

TEST(OnnxExport, CommandLine) {
  const fs::path dir = FreshDir("onnx_cli");
  const std::string checkpoint = WriteCheckpoint(dir, "lenet", {1, 28, 10, true});
  CliOutput ok =
      RunCliWithFiles(dir, "export --load_model_path " + checkpoint + " --test_data fashion-mnist --output " +
                               (dir / "lenet.onnx").string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("10 ONNX nodes (opset 13)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("checker passed"), std::string::npos) << ok.out;
  EXPECT_NO_THROW(onnx::checker::check_model(ReadModel(dir / "lenet.onnx")));

  CliOutput other = RunCliWithFiles(dir, "export --load_model_path " + checkpoint +
                                             " --model resnet18 --output " + (dir / "x.onnx").string());
  EXPECT_EQ(other.code, kExitNotRetryable);
  EXPECT_NE(
      other.err.find("--model resnet18 contradicts the checkpoint " + checkpoint + ", which holds lenet"),
      std::string::npos)
      << other.err;
  EXPECT_FALSE(fs::exists(dir / "x.onnx"));

  // --test_data is checked as lockstep eval checks it: a database that is not there is refused.
  const std::string missing = (dir / "no_such_db").string();
  CliOutput no_data = RunCliWithFiles(dir, "export --load_model_path " + checkpoint + " --test_data " +
                                               missing + " --output " + (dir / "y.onnx").string());
  EXPECT_EQ(no_data.code, kExitNotRetryable);
  EXPECT_NE(no_data.err.find("--test_data '" + missing + "' does not exist"), std::string::npos)
      << no_data.err;
  EXPECT_FALSE(fs::exists(dir / "y.onnx"));

  // --output names a file: a directory is refused before any work, a missing folder is made.
  CliOutput folder =
      RunCliWithFiles(dir, "export --load_model_path " + checkpoint + " --output " + dir.string());
  EXPECT_EQ(folder.code, kExitNotRetryable);
  EXPECT_EQ(folder.err,
            "lockstep: error: --output '" + dir.string() + "' is a directory; name the file to write\n");
  CliOutput text = RunCliWithFiles(
      dir, "export --load_model_path " + checkpoint + " --output " + (dir / "m.txt").string());
  EXPECT_EQ(text.err, "lockstep: error: --output '" + (dir / "m.txt").string() +
                          "': the model is ONNX; name the file *.onnx\n");
  EXPECT_FALSE(fs::exists(dir / "m.txt"));
  CliOutput nested = RunCliWithFiles(
      dir, "export --load_model_path " + checkpoint + " --output " + (dir / "new/m.onnx").string());
  EXPECT_EQ(nested.code, 0) << nested.err;
  EXPECT_TRUE(fs::exists(dir / "new/m.onnx"));

  // Without --output the model goes beside the checkpoint under its name, and never over a file there.
  const fs::path beside = fs::path(checkpoint).replace_extension(".onnx");
  CliOutput named = RunCliWithFiles(dir, "export --load_model_path " + checkpoint);
  EXPECT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(named.out.rfind(beside.string() + ": 10 ONNX nodes", 0), 0u) << named.out;
  EXPECT_NO_THROW(onnx::checker::check_model(ReadModel(beside)));
  CliOutput again = RunCliWithFiles(dir, "export --load_model_path " + checkpoint);
  EXPECT_EQ(again.code, kExitNotRetryable);
  EXPECT_EQ(again.err,
            "lockstep: error: " + beside.string() +
                " exists: pass --output to name the file to write (a file named there is replaced)\n");
}

}  // namespace lockstep::testing
