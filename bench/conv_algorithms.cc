// Every oneDNN implementation of one convolution, each pass (forward, backward data, backward weights) timed
// on random data: what a different choice of kernel or activation layout would gain over the one oneDNN
// lists first, which lockstep's Conv and ConvGradient take. ONEDNN_MAX_CPU_ISA and OMP_NUM_THREADS apply.
//
//   build/conv_algorithms --shape 16,64,64,56,3,1,1 [--layout any|nhwc|nchw16c] [--dtype float|bfloat16]
//                         [--repeats 5] [--reference]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Args = std::unordered_map<int, dnnl::memory>;
using Tag = dnnl::memory::format_tag;
using Type = dnnl::memory::data_type;

struct Setup {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  int repeats = 5;
  bool reference = false;  // the ref: implementations take seconds a pass
  std::mt19937 generator{1};
};

// A memory of `desc` holding uniform values in [-1, 1] (bfloat16 through a float32 reorder).
dnnl::memory RandomMemory(Setup& setup, const dnnl::memory::desc& desc) {
  const dnnl::memory::desc plain(desc.get_dims(), Type::f32, desc.get_ndims() == 4 ? Tag::nchw : Tag::a);
  dnnl::memory source(plain, setup.engine);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* values = static_cast<float*>(source.get_data_handle());
  for (size_t i = 0; i < plain.get_size() / sizeof(float); ++i) values[i] = uniform(setup.generator);
  dnnl::memory memory(desc, setup.engine);
  dnnl::reorder(source, memory).execute(setup.stream, source, memory);
  setup.stream.wait();
  return memory;
}

// Times each implementation of `pd` (the first is oneDNN's choice): the best of the repeats after a warm-up.
template <typename Primitive, typename PrimitiveDesc, typename MakeArgs>
void TimeEach(Setup& setup, const char* pass, PrimitiveDesc pd, MakeArgs make_args) {
  bool first = true;
  do {
    const std::string name = pd.impl_info_str();
    if (!setup.reference && name.rfind("ref", 0) == 0) continue;
    Args args = make_args(pd);
    Primitive primitive(pd);
    primitive.execute(setup.stream, args);
    setup.stream.wait();
    double best = 1e30;
    for (int r = 0; r < setup.repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      primitive.execute(setup.stream, args);
      setup.stream.wait();
      best = std::min(best,
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("%-16s %-50s %9.2f ms%s\n", pass, name.c_str(), best, first ? "  (oneDNN's choice)" : "");
    std::fflush(stdout);
    first = false;
  } while (pd.next_impl());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> shape;
  std::string layout = "any", dtype = "float";
  Setup setup;
  CLI::App app{"Every oneDNN implementation of one convolution, each pass timed (ms, best of the repeats)"};
  app.add_option("--shape", shape, "N,IC,OC,H,K,P,S: batch, channels in and out, square input size, kernel, pad, stride")
      ->delimiter(',')
      ->expected(7)
      ->required();
  app.add_option("--layout", layout, "activations: any (oneDNN picks per implementation), nhwc or nchw16c")
      ->check(CLI::IsMember({"any", "nhwc", "nchw16c"}));
  app.add_option("--dtype", dtype, "float or bfloat16 (bias and its gradient in float32)")
      ->check(CLI::IsMember({"float", "bfloat16"}));
  app.add_option("--repeats", setup.repeats, "timed runs of each implementation")->check(CLI::PositiveNumber);
  app.add_flag("--reference", setup.reference, "also time oneDNN's reference implementations (slow)");
  CLI11_PARSE(app, argc, argv);
  const int n = shape[0], ic = shape[1], oc = shape[2], h = shape[3], k = shape[4], p = shape[5], s = shape[6];
  const int out = (h + 2 * p - k) / s + 1;
  if (std::min({n, ic, oc, h, k, s}) < 1 || p < 0 || out < 1) {
    std::fprintf(stderr, "conv_algorithms: --shape %d,%d,%d,%d,%d,%d,%d gives no output; check it\n", n, ic, oc,
                 h, k, p, s);
    return 2;
  }
  const Tag activations = layout == "nhwc" ? Tag::nhwc : layout == "nchw16c" ? Tag::nChw16c : Tag::any;
  const Type type = dtype == "bfloat16" ? Type::bf16 : Type::f32;
  const dnnl::memory::desc src({n, ic, h, h}, type, activations), dst({n, oc, out, out}, type, activations),
      weights({oc, ic, k, k}, type, Tag::any), bias({oc}, Type::f32, Tag::a);
  const dnnl::memory::dims strides{s, s}, padding{p, p};
  std::printf("convolution N%d IC%d OC%d %dx%d kernel %d pad %d stride %d, %s, activations %s\n", n, ic, oc, h, h,
              k, p, s, dtype.c_str(), layout.c_str());

  using Forward = dnnl::convolution_forward;
  using BackwardData = dnnl::convolution_backward_data;
  using BackwardWeights = dnnl::convolution_backward_weights;
  const auto algorithm = dnnl::algorithm::convolution_direct;
  Forward::primitive_desc forward(setup.engine, dnnl::prop_kind::forward_training, algorithm, src, weights, bias,
                                  dst, strides, padding, padding);
  TimeEach<Forward>(setup, "forward", forward, [&](const Forward::primitive_desc& pd) {
    return Args{{DNNL_ARG_SRC, RandomMemory(setup, pd.src_desc())},
                {DNNL_ARG_WEIGHTS, RandomMemory(setup, pd.weights_desc())},
                {DNNL_ARG_BIAS, RandomMemory(setup, pd.bias_desc())},
                {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), setup.engine)}};
  });
  TimeEach<BackwardData>(
      setup, "backward data",
      BackwardData::primitive_desc(setup.engine, algorithm, src, weights, dst, strides, padding, padding, forward),
      [&](const BackwardData::primitive_desc& pd) {
        return Args{{DNNL_ARG_DIFF_DST, RandomMemory(setup, pd.diff_dst_desc())},
                    {DNNL_ARG_WEIGHTS, RandomMemory(setup, pd.weights_desc())},
                    {DNNL_ARG_DIFF_SRC, dnnl::memory(pd.diff_src_desc(), setup.engine)}};
      });
  TimeEach<BackwardWeights>(setup, "backward weights",
                            BackwardWeights::primitive_desc(setup.engine, algorithm, src, weights, bias, dst,
                                                            strides, padding, padding, forward),
                            [&](const BackwardWeights::primitive_desc& pd) {
                              return Args{{DNNL_ARG_SRC, RandomMemory(setup, pd.src_desc())},
                                          {DNNL_ARG_DIFF_DST, RandomMemory(setup, pd.diff_dst_desc())},
                                          {DNNL_ARG_DIFF_WEIGHTS, dnnl::memory(pd.diff_weights_desc(), setup.engine)},
                                          {DNNL_ARG_DIFF_BIAS, dnnl::memory(pd.diff_bias_desc(), setup.engine)}};
                            });
  return 0;
}
