// Running a case of the cross-backend operator table on the CPU and on another device, and comparing what
// each computed (op_cases.h).
#include <algorithm>
#include <cstring>
#include <optional>

#include "lockstep/core/half.h"
#include "op_cases.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> Compared(const OpCase& c) {
  if (!c.compare.empty()) return c.compare;
  return {c.op.output().begin(), c.op.output().end()};
}

// Runs the case on `device` in a fresh workspace, with the inputs c.narrowed lists in c.narrow_to when
// `narrow`, and returns the compared blobs in host memory, plain and in float32; nullopt (with a failure
// recorded) when an operator throws. The inputs start in the device's memory, where the operators before it
// in a net would have left them.
std::optional<Blobs> RunOn(const OpCase& c, const Device& device, bool narrow) {
  Workspace ws;
  try {
    if (c.prepare) c.prepare(&ws);
    for (const auto& [name, value] : c.inputs) {
      Tensor* blob = ws.CreateBlob(name);
      blob->PlaceOn(device);
      const bool narrowed = narrow && std::count(c.narrowed.begin(), c.narrowed.end(), name);
      blob->CopyFrom(narrowed ? Narrowed(value, c.narrow_to) : value);
    }
    for (OperatorDef setup : c.setup) {
      SetDevice(&setup, device);
      RunOp(&ws, setup);
    }
    OperatorDef def = c.op;
    SetDevice(&def, device);  // keeps the device option's random_seed
    auto op = CreateOperator(def, &ws);
    for (int run = 0; run < c.runs; ++run) op->Run();
    Blobs outputs;
    for (const auto& name : Compared(c)) {
      Tensor host;
      host.CopyFrom(ws.Blob(name));
      outputs[name] = Widened(Plain(host));
    }
    return outputs;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "on " << device.ToString() << ": " << e.what();
    return std::nullopt;
  }
}

// Within the tolerance for float blobs; bit for bit with tolerance 0 (where infinities must match too) and
// for every other dtype.
void ExpectSameBlob(const std::string& name, const Tensor& device, const Tensor& cpu, float tolerance) {
  SCOPED_TRACE("blob '" + name + "' (the device's first, the CPU's second)");
  ASSERT_EQ(DataTypeName(device.dtype()), std::string(DataTypeName(cpu.dtype())));
  ASSERT_EQ(ShapeToString(device.shape()), ShapeToString(cpu.shape()));
  const bool is_float = device.dtype() == DataType::kFloat;
  if (is_float && tolerance > 0) return ExpectNear(device, cpu, tolerance);
  const auto* a = static_cast<const uint8_t*>(device.raw_data());
  const auto* b = static_cast<const uint8_t*>(cpu.raw_data());
  const size_t element = ElementSize(device.dtype());
  for (int64_t i = 0; i < device.numel(); ++i)
    ASSERT_EQ(std::memcmp(a + i * element, b + i * element, element), 0)
        << "element " << i << " differs"
        << (is_float ? fmt::format(": {} vs {}", device.data<float>()[i], cpu.data<float>()[i]) : "");
}

}  // namespace

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

void ExpectSameOnCpuAnd(const OpCase& c, const Device& device) {
  auto cpu = RunOn(c, Device{DeviceType::kCpu, 0}, false);
  auto other = RunOn(c, device, true);
  if (!cpu || !other) return;
  if (c.check) {
    c.check(c.inputs, *cpu);
    c.check(c.inputs, *other);
    return;
  }
  for (const auto& name : Compared(c)) ExpectSameBlob(name, other->at(name), cpu->at(name), c.tolerance);
}

Tensor Narrowed(const Tensor& x, DataType type) {
  Tensor narrow(x.shape(), type);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float value = x.data<float>()[i];
    if (type == DataType::kFloat16)
      narrow.data<Float16>()[i] = ToFloat16(value);
    else
      narrow.data<BFloat16>()[i] = ToBFloat16(value);
  }
  return narrow;
}

Tensor Widened(const Tensor& x) {
  if (x.dtype() != DataType::kFloat16 && x.dtype() != DataType::kBFloat16) return x;
  Tensor wide(x.shape(), DataType::kFloat);
  for (int64_t i = 0; i < x.numel(); ++i)
    wide.data<float>()[i] =
        x.dtype() == DataType::kFloat16 ? ToFloat(x.data<Float16>()[i]) : ToFloat(x.data<BFloat16>()[i]);
  return wide;
}

}  // namespace lockstep::testing
