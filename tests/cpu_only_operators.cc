// The operators that have no CUDA implementation on purpose, each with the reason and where it is tested
// (op_cases.h): the CUDA build's completeness checks leave them out.
#include "op_cases.h"

namespace lockstep::testing {

const std::map<std::string, std::string>& CpuOnlyOperators() {
  static const std::map<std::string, std::string> cpu_only = [] {
    std::map<std::string, std::string> types;
    for (const char* type : {"Sigmoid", "SigmoidGradient", "Tanh", "TanhGradient", "Sqr", "SqrGradient",
                             "Softmax", "SoftmaxGradient", "NHWC2NCHW", "NCHW2NHWC"})
      types[type] =
          "Caffe2 compatibility, CPU only: tests/unary_ops_test.cc, softmax_op_test.cc, layout_ops_test.cc";
    for (const char* type :
         {"SumElements", "SumElementsGradient", "AveragedLoss", "AveragedLossGradient", "SquaredL2Distance",
          "SquaredL2DistanceGradient", "LabelCrossEntropy", "LabelCrossEntropyGradient"})
      types[type] = "Caffe2 compatibility, CPU only: tests/loss_ops_test.cc";
    types["FloatToHalf"] = types["HalfToFloat"] = "Caffe2 compatibility, CPU only: tests/cast_op_test.cc";
    types["Print"] = "writes to stderr from host memory, CPU only: tests/print_op_test.cc";
    types["SpatialBNReluAgain"] =
        "the memory plan recomputes with it on CPUs only (parallel/recompute.h): tests/recompute_test.cc";
    types["SumReluGradient"] = types["AveragePoolReluGradient"] =
        "made by the ReLU fusion on CPUs only (parallel/fuse_relu.h): tests/fuse_relu_test.cc";
    types["Alias"] =
        "shared_model's views, on CPU devices only (parallel/shared_parameters.h): "
        "tests/data_parallel_test.cc";
    types["FileStoreHandlerCreate"] = types["RedisStoreHandlerCreate"] =
        "writes a store handler, not a tensor, on the host: tests/store_handler_ops_test.cc";
    return types;
  }();
  return cpu_only;
}

}  // namespace lockstep::testing
