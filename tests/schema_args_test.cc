// Declared operator arguments: a misspelled, ill-typed or out-of-range argument is refused in one line that
// names the operator (and the closest declared name), whether the op is built in C++ or comes from a NetDef
// file; defaults come from the schema; every schema documents itself; `lockstep ops` prints the catalogue.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lockstep/core/operator.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

std::string CreationError(const OperatorDef& def) {
  Workspace ws;
  try {
    CreateOperator(def, &ws);
  } catch (const InvalidInput& error) {
    return error.what();
  }
  ADD_FAILURE() << DescribeOperator(def) << " was created";
  return "";
}

void ExpectOneLineWith(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

TEST(SchemaArgs, MisspelledArgumentNamesTheOperatorAndTheClosestDeclaredName) {
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"conv1"}, {Arg("strid", 2)})),
                    {"Conv(x, w) -> conv1: unknown argument 'strid'; did you mean 'stride'?",
                     "declared: ", "dilation", "group", "ws_nbytes_limit"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("LeakyRelu", {"x"}, {"y"}, {Arg("alpah", 0.1f)})),
                    {"LeakyRelu(x) -> y: unknown argument 'alpah'; did you mean 'alpha'?"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Relu", {"x"}, {"y"}, {Arg("alpah", 3)})),
                    {"Relu(x) -> y: unknown argument 'alpah'; Relu takes no arguments"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("colour", 1)})),
                    {"unknown argument 'colour'; declared: kernel, "});
}

TEST(SchemaArgs, WrongTypeAndOutOfRangeValuesAreRefused) {
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("stride", "2")})),
                    {"Conv(x, w) -> y: argument 'stride' must be an int, got the string \"2\""});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("stride", 1.5f)})),
                    {"argument 'stride' must be an int, got the float 1.5"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("pads", 1)})),
                    {"argument 'pads' must be a list of ints, got the int 1"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Dropout", {"x"}, {"y", "mask"}, {Arg("ratio", 2.0f)})),
                    {"Dropout(x) -> y, mask: argument 'ratio' must be in [0, 1), got 2"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Dropout", {"x"}, {"y", "mask"}, {Arg("ratio", 1.0f)})),
                    {"argument 'ratio' must be in [0, 1), got 1"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", NAN)})),
                    {"Scale(x) -> y: argument 'scale' must be a number, got nan"});
  ExpectOneLineWith(
      CreationError(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("strides", std::vector<int64_t>{1, 0})})),
      {"argument 'strides' must be at least 1, got 0"});
  // A string of declared choices: Caffe2's NHWC order, wherever an op on images takes `order`.
  for (const OperatorDef& def :
       {MakeOperatorDef("Conv", {"x", "w"}, {"y"}), MakeOperatorDef("MaxPool", {"x"}, {"y"}),
        MakeOperatorDef("SpatialBN", {"x", "s", "b", "m", "v"}, {"y"}, {Arg("is_test", 1)}),
        MakeOperatorDef("Concat", {"a", "b"}, {"y", "info"}), MakeOperatorDef("Split", {"x"}, {"a", "b"})}) {
    OperatorDef nhwc = def;
    *nhwc.add_arg() = Arg("order", "NHWC").proto;
    ExpectOneLineWith(CreationError(nhwc), {"argument 'order' must be one of NCHW, got 'NHWC'"});
  }
  Argument twice = Arg("stride", 2).proto;
  OperatorDef conv = MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("stride", 1)});
  *conv.add_arg() = twice;
  ExpectOneLineWith(CreationError(conv), {"argument 'stride' is given twice"});
}

// Gradient ops take their forward op's arguments (the gradient makers copy them) and refuse the rest.
TEST(SchemaArgs, GradientOpsDeclareTheirForwardOpsArguments) {
  const OpSchema& gradient = SchemaRegistry::Of(MakeOperatorDef("ConvGradient", {}, {}));
  for (const ArgSpec* arg : SchemaRegistry::Of(MakeOperatorDef("Conv", {}, {})).args())
    EXPECT_NE(gradient.FindArg(arg->name), nullptr) << arg->name;
  EXPECT_NE(gradient.FindArg("no_dweight"), nullptr);
  ExpectOneLineWith(
      CreationError(MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, {Arg("strid", 2)})),
      {"unknown argument 'strid'; did you mean 'stride'?"});
}

TEST(SchemaArgs, ReadersTakeTheDeclaredDefault) {
  const OperatorDef conv = MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("group", 2)});
  EXPECT_EQ(IntArg(conv, "stride"), 1);
  EXPECT_EQ(IntArg(conv, "group"), 2);
  EXPECT_EQ(StringArg(conv, "order"), "NCHW");
  EXPECT_EQ(DefaultIntArg("Conv", "stride"), 1);
  EXPECT_FLOAT_EQ(FloatArg(MakeOperatorDef("Dropout", {"x"}, {"y"}), "ratio"), 0.5f);
  EXPECT_EQ(IntsArg(MakeOperatorDef("SpatialBNGradient", {}, {}), "gradients"),
            (std::vector<int64_t>{0, 1, 2}));
  // A float argument accepts an int, as Caffe2 nets write them.
  EXPECT_FLOAT_EQ(FloatArg(MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", 2)}), "scale"), 2.0f);
  EXPECT_THROW(IntArg(conv, "not_declared"), Error);
}

// A user's net file with a typo fails when the net is created, before anything runs.
TEST(SchemaArgs, MisspelledArgumentInANetDefFileIsRefused) {
  const std::filesystem::path dir = FreshDir("schema_args");
  const std::string text = R"(name: "typo"
op { input: "x" output: "y" type: "LeakyRelu" arg { name: "alpah" f: 0.2 } }
)";
  std::ofstream(dir / "typo.pbtxt") << text;
  const NetDef net = ReadNetDef((dir / "typo.pbtxt").string());
  WriteNetDef(net, (dir / "typo.pb").string());
  for (const char* file : {"typo.pbtxt", "typo.pb"}) {
    SCOPED_TRACE(file);
    Workspace ws;
    Feed(&ws, "x", RandomTensor({2, 3}, 1));
    try {
      ws.RunNetOnce(ReadNetDef((dir / file).string()));
      ADD_FAILURE() << "the net ran";
    } catch (const InvalidInput& error) {
      ExpectOneLineWith(error.what(), {"LeakyRelu(x) -> y: unknown argument 'alpah'; did you mean 'alpha'?"});
    }
    EXPECT_FALSE(ws.HasBlob("y"));
  }
}

// How many inputs and outputs an op takes follows from its schema's declarations: the required ones, up to
// all of them with the optional ones; ops whose last input stands for any number say so.
TEST(SchemaArgs, ArityFollowsTheDeclaredInputsAndOutputs) {
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x"}, {"y"})),
                    {"Conv(x) -> y: takes 2 to 3 inputs, got 1"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Conv", {"x", "w", "b", "c"}, {"y"})),
                    {"takes 2 to 3 inputs, got 4"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Dropout", {"x"}, {"y", "mask", "z"})),
                    {"takes 1 to 2 outputs, got 3"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("SpatialBN", {"x", "s", "b", "m"}, {"y"})),
                    {"takes 5 to 7 inputs, got 4"});
  ExpectOneLineWith(
      CreationError(MakeOperatorDef("ReadBatch", {"x"}, {"data", "label"}, {Arg("reader", "r")})),
      {"takes 0 inputs, got 1"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("Sum", {}, {"y"})), {"takes at least 1 inputs, got 0"});
  ExpectOneLineWith(CreationError(MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {})),
                    {"takes 1 to 3 outputs, got 0"});

  const auto& inputs = SchemaRegistry::Find("Conv")->inputs();
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_FALSE(inputs[1].optional);
  EXPECT_TRUE(inputs[2].optional);
}

// An optional input is left out with every one after it, so no required one may follow it.
TEST(SchemaArgs, ARequiredInputAfterAnOptionalOneIsRefused) {
  OpSchema schema("TestOrder");
  schema.Input(0, "x", "any shape").OptionalInput(1, "y", "any shape");
  try {
    schema.Input(2, "z", "any shape");
    FAIL() << "a required input after an optional one was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("operator 'TestOrder': required input 'z' comes after optional input 'y'"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(OpSchema("TestOrder").Output(1, "y", "any shape").OptionalOutput(0, "x", "any shape"), Error);
}

// The catalogue is only as good as its docs: every schema and every argument has one.
TEST(SchemaArgs, EverySchemaDocumentsItselfAndEachArgument) {
  const std::vector<std::string> types = SchemaRegistry::Types();
  EXPECT_GE(types.size(), 48u);
  for (const std::string& type : types) {
    const OpSchema& schema = *SchemaRegistry::Find(type);
    EXPECT_FALSE(schema.doc().empty()) << type << " has no doc";
    for (const ArgSpec* arg : schema.args()) EXPECT_FALSE(arg->doc.empty()) << type << "." << arg->name;
    for (const auto* blobs : {&schema.inputs(), &schema.outputs()})
      for (const BlobSpec& blob : *blobs)
        EXPECT_FALSE(blob.name.empty() || blob.doc.empty()) << type << " has an undocumented input or output";
  }
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TEST(SchemaArgs, OpsCommandPrintsEveryArgumentWithItsDefault) {
  const std::filesystem::path dir = FreshDir("ops_command");
  const CliOutput conv = RunCliWithFiles(dir, "ops Conv");
  ASSERT_EQ(conv.code, 0) << conv.err;
  const std::vector<std::string> lines = Lines(conv.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind("Conv: 2-D convolution", 0), 0u) << lines[0];
  EXPECT_NE(conv.out.find("filter  (M, C / group, kh, kw)"), std::string::npos) << conv.out;
  EXPECT_NE(conv.out.find("bias    optional: (M)"), std::string::npos) << conv.out;
  // Each argument's row: name, type, default ("-" without one), accepted values, doc.
  for (const ArgSpec* arg : SchemaRegistry::Of(MakeOperatorDef("Conv", {}, {})).args()) {
    const std::string default_text = DefaultText(*arg).empty() ? "-" : DefaultText(*arg);
    auto row = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
      const std::vector<std::string> words = Words(line);
      return words.size() > 3 && words[0] == arg->name;
    });
    ASSERT_NE(row, lines.end()) << arg->name << " missing from:\n" << conv.out;
    const std::vector<std::string> words = Words(*row);
    EXPECT_EQ(words[1], ArgTypeName(arg->type)) << *row;
    EXPECT_EQ(words[2], default_text) << *row;
    EXPECT_NE(row->find(RangeText(*arg)), std::string::npos) << *row;
    EXPECT_NE(row->find(arg->doc), std::string::npos) << *row;
  }

  const CliOutput all = RunCliWithFiles(dir, "ops");
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_GE(Lines(all.out).size(), 48u);  // the test program registers a few more
  EXPECT_NE(all.out.find("\nConv  "), std::string::npos) << all.out;
  // Each row holds the first sentence of the doc: an abbreviation does not end it.
  EXPECT_NE(all.out.find("(Caffe2's AveragedLoss, e.g. of per-row losses).\n"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("normalization over the channels of NCHW (or NC) data.\n"), std::string::npos)
      << all.out;

  const CliOutput unknown = RunCliWithFiles(dir, "ops Cnov");
  EXPECT_EQ(unknown.code, kExitNotRetryable);
  EXPECT_NE(unknown.err.find("unknown operator type 'Cnov'; did you mean Conv"), std::string::npos)
      << unknown.err;
  EXPECT_EQ(Lines(unknown.err).size(), 1u) << unknown.err;
}

}  // namespace
}  // namespace lockstep::testing
