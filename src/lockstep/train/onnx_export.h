// ONNX export: the inference graph of a net of lockstep's operators, with its parameters as initializers, as
// an ONNX model (opset 13) built with the ONNX library's own messages and validated by its checker and strict
// shape inference before the file is written, atomically. Used by `lockstep export` and lockstep.export_onnx.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

class Workspace;

inline constexpr int64_t kOnnxOpsetVersion = 13;

// What to export of a net: the float32 NCHW blob it reads and the blob it answers with. Everything between
// them is translated; operators that do not lead from the input to the output (readers, losses, accuracy,
// optimizers) are left out.
struct OnnxGraphSpec {
  std::string input;                   // the net's input blob, float32 (N, C, H, W)
  Shape input_shape;                   // as the net was built; the batch dimension is exported symbolic ("N")
  std::string output;                  // the net's output blob, the logits
  std::string input_name = "data";     // the names the ONNX graph gives them
  std::string output_name = "logits";  // "probabilities" is usual with softmax
  bool softmax = false;                // append a Softmax over axis 1 to the output
  std::string graph_name = "lockstep";
  std::map<std::string, std::string> metadata;  // metadata_props, beside the ones the export adds
};

struct OnnxExportSummary {
  std::vector<std::string> node_types;  // the ONNX graph's nodes, in order
  int64_t initializers = 0;             // parameters written
  int64_t parameter_values = 0;         // float32 values in them
  int64_t file_bytes = 0;
  std::string checker = "passed";  // what onnx::checker::check_model said
};

// The ONNX operators each lockstep operator type maps to, for help and errors: "AveragePool, Conv, ...".
std::string OnnxMappedOperators();

// The ONNX model of `net` (serialized ModelProto), its parameters read from `ws`: every blob an exported
// operator reads that no exported operator writes, other than spec.input, must be a float32 blob of `ws`.
// SpatialBN becomes BatchNormalization with its running statistics (inference mode, whatever is_test says);
// Dropout and Copy pass their input through. Throws InvalidInput with one line naming an operator that has
// no ONNX mapping, or a blob that cannot be exported; Error when the ONNX checker refuses the result.
std::string NetToOnnx(const NetDef& net, const Workspace& ws, const OnnxGraphSpec& spec,
                      OnnxExportSummary* summary = nullptr);

// NetToOnnx, written to `path` atomically: a failure leaves no file (and an existing one as it was).
OnnxExportSummary ExportOnnx(const NetDef& net, const Workspace& ws, const OnnxGraphSpec& spec,
                             const std::string& path);

}  // namespace lockstep
