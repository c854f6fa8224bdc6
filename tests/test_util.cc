// Implementation of the shared test helpers.
#include "test_util.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "lockstep/ops/dnnl_utils.h"

namespace lockstep::testing {
namespace {

// ctest runs tests as processes side by side, and several test files keep fixed names under TempDir() (a
// trained checkpoint, a CLI's stderr): each process gets a directory of its own, removed when it exits.
// GoogleTest's TempDir() follows TEST_TMPDIR, and so do the CLIs the tests start.
[[maybe_unused]] const bool kPrivateTempDir = [] {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/lockstep_tests_XXXXXX";
  if (!::mkdtemp(pattern.data())) return false;
  ::setenv("TEST_TMPDIR", (pattern + "/").c_str(), 1);
  static const std::string dir = pattern;
  std::atexit([] { std::filesystem::remove_all(dir); });
  return true;
}();

}  // namespace

Tensor RandomTensor(const Shape& shape, unsigned seed, float low, float high) {
  Tensor tensor(shape, DataType::kFloat);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  float* data = tensor.data<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = dist(rng);
  return tensor;
}

Tensor TensorFromValues(const Shape& shape, const std::vector<float>& values) {
  Tensor tensor(shape, DataType::kFloat);
  EXPECT_EQ(tensor.numel(), static_cast<int64_t>(values.size()));
  std::memcpy(tensor.data<float>(), values.data(), values.size() * sizeof(float));
  return tensor;
}

Tensor Int32Tensor(const Shape& shape, const std::vector<int32_t>& values) {
  Tensor tensor(shape, DataType::kInt32);
  EXPECT_EQ(tensor.numel(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), tensor.data<int32_t>());
  return tensor;
}

void Feed(Workspace* ws, const std::string& name, const Tensor& value) {
  ws->CreateBlob(name)->CopyFrom(value);
}

Tensor Plain(const Tensor& tensor) {
  Tensor plain;
  tensor.ToPlain(&plain);
  return plain;
}

namespace {

Tensor InLayout(const Tensor& plain, dnnl::memory::format_tag tag) {
  dnnl::memory::desc desc(ToDims(plain.shape()), dnnl::memory::data_type::f32, tag);
  Tensor laid_out;
  dnnl::memory to = ResizeForDesc(&laid_out, plain.shape(), desc);
  dnnl::memory from = ToMemory(plain);
  Execute(dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  return laid_out;
}

}  // namespace

Tensor Blocked(const Tensor& plain) { return InLayout(plain, dnnl::memory::format_tag::nChw16c); }

Tensor ChannelsLast(const Tensor& plain) { return InLayout(plain, dnnl::memory::format_tag::nhwc); }

std::vector<float> Values(const Tensor& tensor) {
  Tensor plain = Plain(tensor);
  const float* data = plain.data<float>();
  return std::vector<float>(data, data + plain.numel());
}

void ExpectNear(const Tensor& actual, const Tensor& expected, float tolerance) {
  ASSERT_EQ(ShapeToString(actual.shape()), ShapeToString(expected.shape()));
  Tensor actual_plain = Plain(actual), expected_plain = Plain(expected);
  const float* a = actual_plain.data<float>();
  const float* b = expected_plain.data<float>();
  for (int64_t i = 0; i < actual.numel(); ++i) {
    float scale = std::max({1.0f, std::fabs(a[i]), std::fabs(b[i])});
    ASSERT_LE(std::fabs(a[i] - b[i]), tolerance * scale)
        << "at flat index " << i << ": " << a[i] << " vs " << b[i];
  }
}

void RunOp(Workspace* ws, const OperatorDef& def) { CreateOperator(def, ws)->Run(); }

void CheckGradient(const OperatorDef& op, const std::map<std::string, Tensor>& inputs,
                   GradientCheckOptions options) {
  Workspace ws;
  for (const auto& [name, value] : inputs) Feed(&ws, name, value);
  if (options.inputs_to_check.empty())
    for (int i = 0; i < op.input_size(); ++i)
      if (ws.Blob(op.input(i)).dtype() == DataType::kFloat) options.inputs_to_check.push_back(i);
  if (options.outputs_with_grad.empty()) options.outputs_with_grad = {0};

  auto forward = CreateOperator(op, &ws);
  forward->Run();

  // Output gradients: fixed random weights of the scalar L.
  GradientContext context{op, std::vector<std::string>(op.output_size()),
                          std::vector<std::string>(op.input_size())};
  std::vector<Tensor> weights(op.output_size());
  for (int k : options.outputs_with_grad) {
    weights[k] = RandomTensor(ws.Blob(op.output(k)).shape(), 1000 + k);
    context.output_grads[k] = op.output(k) + "_check_grad";
    Feed(&ws, context.output_grads[k], weights[k]);
  }
  for (int i : options.inputs_to_check) context.input_grads[i] = op.input(i) + "_check_grad";

  const GradientMaker* maker = GradientRegistry::Find(op.type());
  ASSERT_NE(maker, nullptr) << "no gradient registered for " << op.type();
  for (auto grad_op : (*maker)(context)) {
    *grad_op.mutable_device_option() = op.device_option();
    RunOp(&ws, grad_op);
  }

  auto loss = [&]() {
    forward->Run();
    double total = 0;
    for (int k : options.outputs_with_grad) {
      Tensor output = Plain(ws.Blob(op.output(k)));
      const float* y = output.data<float>();
      const float* w = weights[k].data<float>();
      for (int64_t j = 0; j < weights[k].numel(); ++j) total += static_cast<double>(y[j]) * w[j];
    }
    return total;
  };

  for (int i : options.inputs_to_check) {
    const std::string& name = op.input(i);
    Tensor analytic = Plain(ws.Blob(context.input_grads[i]));
    ASSERT_EQ(ShapeToString(analytic.shape()), ShapeToString(ws.Blob(name).shape()))
        << "gradient of " << name;
    float* x = ws.GetBlob(name)->data<float>();
    for (int64_t j = 0; j < analytic.numel(); ++j) {
      float saved = x[j];
      x[j] = saved + options.step;
      double plus = loss();
      x[j] = saved - options.step;
      double minus = loss();
      x[j] = saved;
      float numeric = static_cast<float>((plus - minus) / (2 * options.step));
      float value = analytic.data<float>()[j];
      float scale = std::max({1.0f, std::fabs(value), std::fabs(numeric)});
      ASSERT_LE(std::fabs(value - numeric), options.tolerance * scale)
          << op.type() << ": d/d" << name << "[" << j << "] analytic " << value << " vs numeric " << numeric;
    }
  }
}

namespace {
std::string FromEnvironment(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}
}  // namespace

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

CliOutput RunCliWithFiles(const std::filesystem::path& dir, const std::string& arguments) {
  const std::filesystem::path out = dir / "cli_out.txt", err = dir / "cli_err.txt";
  const std::string command = CliPath() + " " + arguments + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(command.c_str());
  return {WEXITSTATUS(status), ReadFile(out), ReadFile(err)};
}

std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("lockstep_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string CliPath() { return FromEnvironment("LOCKSTEP_CLI_PATH", LOCKSTEP_CLI_PATH); }
std::string SourceDir() { return FromEnvironment("LOCKSTEP_SOURCE_DIR", LOCKSTEP_SOURCE_DIR); }
bool HaveFashionMnist() {
  std::string dir = FromEnvironment("LOCKSTEP_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist");
  return std::ifstream(dir + "/train-images-idx3-ubyte.gz").good();
}

double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

}  // namespace lockstep::testing
