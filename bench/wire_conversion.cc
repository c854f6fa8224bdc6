// The CPU time a 16-bit gradient wire (--allreduce_dtype, comm/wire_dtype.h) adds to an allreduce, per
// float32 value of the bucket, on one thread: narrowing the bucket before it is sent, one hop's
// widen-add-round of a received part, and widening the result. The scaling model (scaling_model.py
// --wire_ns) charges a 16-bit allreduce on N shards narrow + widen + (N-1)/N * add per value.
//
//   build/wire_conversion [--mib 8] [--repeats 20] [--wire bfloat16|float16]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "lockstep/comm/wire_dtype.h"

using namespace lockstep;
using Clock = std::chrono::steady_clock;

namespace {

// Fastest of `repeats` runs of `work`, in nanoseconds per value of a bucket of `count`.
template <typename Work>
double BestNsPerValue(int repeats, size_t count, Work&& work) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    work();
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - start).count());
  }
  return best / static_cast<double>(count);
}

}  // namespace

int main(int argc, char** argv) {
  double mib = 8;
  int repeats = 20;
  std::string wire_name = "bfloat16";
  CLI::App app{"CPU cost of the 16-bit gradient wire's conversions, ns per float32 value (one thread)"};
  app.add_option("--mib", mib, "float32 bucket size in MiB (the default bucket is 8)")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "runs of each conversion; the fastest counts")
      ->check(CLI::PositiveNumber);
  app.add_option("--wire", wire_name, "bfloat16 or float16")->check(CLI::IsMember({"bfloat16", "float16"}));
  CLI11_PARSE(app, argc, argv);
  const DataType wire = wire_name == "bfloat16" ? DataType::kBFloat16 : DataType::kFloat16;

  const size_t count = static_cast<size_t>(mib * (1 << 20)) / sizeof(float);
  std::vector<float> values(count), widened(count);
  std::mt19937 generator(1);
  std::normal_distribution<float> gradient(0.0f, 1e-3f);
  for (float& v : values) v = gradient(generator);
  std::vector<uint16_t> sent(count), received(count);
  NarrowToWire(values.data(), count, wire, 1.0f, received.data());

  const double narrow =
      BestNsPerValue(repeats, count, [&] { NarrowToWire(values.data(), count, wire, 1.0f, sent.data()); });
  const double add = BestNsPerValue(repeats, count, [&] {
    if (wire == DataType::kBFloat16)
      SumBFloat16(reinterpret_cast<BFloat16*>(sent.data()),
                  reinterpret_cast<const BFloat16*>(received.data()), count);
    else
      SumFloat16(reinterpret_cast<Float16*>(sent.data()), reinterpret_cast<const Float16*>(received.data()),
                 count);
  });
  const double widen =
      BestNsPerValue(repeats, count, [&] { WidenFromWire(sent.data(), count, wire, 1.0f, widened.data()); });
  std::printf("%s wire, %.3g MiB bucket, best of %d, ns per value: narrow %.3f  add %.3f  widen %.3f\n",
              wire_name.c_str(), mib, repeats, narrow, add, widen);
  std::printf("--wire_ns %.3f,%.3f,%.3f\n", narrow, add, widen);
  return 0;
}
