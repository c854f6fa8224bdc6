// Net -> ONNX translation and validation with ONNX's checker.
//
// The translation walks the operators that lead from the input to the output, in net order. ONNX assigns each
// value once while lockstep writes blobs in place (Relu, Dropout), so every write of a blob gets a fresh ONNX
// value name ("x", then "x_1", ...) and reads take the blob's latest one. A blob read before any exported
// operator writes it is a parameter: it becomes an initializer with the workspace's values. Operators that
// only pass their input on at inference (Dropout, Copy) alias their output to it.
#include "lockstep/train/onnx_export.h"

#include <fmt/ranges.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <functional>
#include <set>

#include "lockstep/core/atomic_file.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"
#include "lockstep/core/version.h"
#include "lockstep/core/workspace.h"
#include "lockstep/ops/conv_pool_args.h"

namespace lockstep {

namespace {

// The ONNX graph under construction: nodes, initializers and the current ONNX value of every lockstep blob.
class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto* graph, const Workspace& ws, std::map<std::string, TensorShape> shapes,
               const OnnxGraphSpec& spec)
      : graph_(graph), ws_(ws), shapes_(std::move(shapes)) {
    used_ = {spec.input_name, spec.output_name};
    value_[spec.input] = spec.input_name;
  }

  // The ONNX value holding `blob` now; a blob no exported operator has written is a parameter of the
  // workspace, added as an initializer.
  std::string Read(const std::string& blob) {
    auto it = value_.find(blob);
    if (it != value_.end()) return it->second;
    if (!ws_.HasBlob(blob))
      throw InvalidInput(
          fmt::format("export: '{}' is read by operator '{}' (op {}) but is neither the input, nor "
                      "written before, nor a parameter in the workspace",
                      blob, def_->type(), index_));
    const std::string name = NewValue(blob);
    AddInitializer(name, ws_.Blob(blob));
    return name;
  }
  // A new ONNX value for a write of `blob`.
  std::string Write(const std::string& blob) { return NewValue(blob); }
  // A new ONNX value that no blob holds (between the nodes of one operator), named after `hint`.
  std::string Intermediate(const std::string& hint) { return Unique(hint); }
  // `blob` now holds the value `value` (an operator that passes its input on).
  void Alias(const std::string& blob, const std::string& value) { value_[blob] = value; }

  onnx::NodeProto* Node(const std::string& type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    onnx::NodeProto* node = graph_->add_node();
    node->set_op_type(type);
    node->set_name(fmt::format("{}_{}", type, graph_->node_size() - 1));
    for (const auto& input : inputs) node->add_input(input);
    for (const auto& output : outputs) node->add_output(output);
    return node;
  }
  // A constant for an operator's argument (a shape, a factor), as an initializer named after its user.
  std::string Constant(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* tensor = NewInitializer(Unique(name), {static_cast<int64_t>(values.size())});
    tensor->set_data_type(onnx::TensorProto::INT64);
    for (int64_t v : values) tensor->add_int64_data(v);
    return tensor->name();
  }
  std::string Constant(const std::string& name, float value) {
    onnx::TensorProto* tensor = NewInitializer(Unique(name), {});
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_float_data(value);
    return tensor->name();
  }

  const Shape& ShapeOf(const std::string& blob) const {
    auto it = shapes_.find(blob);
    LOCKSTEP_ENFORCE(it != shapes_.end(), "no shape for blob '{}'", blob);
    return it->second.dims;
  }
  // The operator being translated, for messages.
  void Begin(const OperatorDef& def, int index) {
    def_ = &def;
    index_ = index;
  }
  std::string Current(const std::string& blob) const { return value_.at(blob); }

 private:
  std::string Unique(const std::string& name) {
    std::string unique = name;
    for (int k = 1; used_.count(unique); ++k) unique = fmt::format("{}_{}", name, k);
    used_.insert(unique);
    return unique;
  }
  std::string NewValue(const std::string& blob) { return value_[blob] = Unique(blob); }

  onnx::TensorProto* NewInitializer(const std::string& name, const Shape& dims) {
    onnx::TensorProto* tensor = graph_->add_initializer();
    tensor->set_name(name);
    for (int64_t d : dims) tensor->add_dims(d);
    return tensor;
  }
  void AddInitializer(const std::string& name, const Tensor& blob) {
    Tensor plain;
    const Tensor* host = &blob;
    if (!blob.is_plain() || !blob.on_host()) {
      blob.ToPlain(&plain);
      host = &plain;
    }
    if (host->dtype() != DataType::kFloat)
      throw InvalidInput(
          fmt::format("export: parameter '{}' of operator '{}' (op {}) is {}; only float32 "
                      "parameters are exported",
                      name, def_->type(), index_, DataTypeName(host->dtype())));
    onnx::TensorProto* tensor = NewInitializer(name, host->shape());
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->set_raw_data(host->data<float>(), host->numel() * sizeof(float));  // little-endian, as ONNX's
  }

  onnx::GraphProto* graph_;
  const Workspace& ws_;
  std::map<std::string, TensorShape> shapes_;
  std::map<std::string, std::string> value_;
  std::set<std::string> used_;
  const OperatorDef* def_ = nullptr;
  int index_ = 0;
};

void SetInts(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}
void SetInt(onnx::NodeProto* node, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}
void SetFloat(onnx::NodeProto* node, const std::string& name, float value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

// kernel_shape, strides and pads (ONNX orders them [top, left, bottom, right]) of a window.
void SetWindow(onnx::NodeProto* node, const ConvPoolArgs& w) {
  SetInts(node, "kernel_shape", {w.kernel_h, w.kernel_w});
  SetInts(node, "strides", {w.stride_h, w.stride_w});
  SetInts(node, "pads", {w.pad_t, w.pad_l, w.pad_b, w.pad_r});
}

// One lockstep operator as ONNX nodes.
struct Mapping {
  std::function<void(const OperatorDef&, GraphBuilder&)> translate;
  int exported_outputs = -1;  // the outputs with an ONNX counterpart: the first ones; -1 all
};

// A node of `type` reading the op's inputs and writing its outputs.
onnx::NodeProto* Same(const std::string& type, const OperatorDef& def, GraphBuilder& g, int outputs = -1) {
  std::vector<std::string> in, out;
  for (const auto& blob : def.input()) in.push_back(g.Read(blob));
  const int n = outputs < 0 ? def.output_size() : outputs;
  for (int i = 0; i < n; ++i) out.push_back(g.Write(def.output(i)));
  return g.Node(type, in, out);
}

// Ops with a fused ReLU (relu=1) export as their own node, writing FusedReluInput's name, and a Relu node
// that FinishFusedRelu adds; without one, the node writes the op's output itself.
std::string FusedReluInput(const OperatorDef& def, GraphBuilder& g) {
  return IntArg(def, "relu") != 0 ? g.Intermediate(def.output(0) + "_before_relu") : g.Write(def.output(0));
}

void FinishFusedRelu(const OperatorDef& def, GraphBuilder& g, const std::string& y) {
  if (IntArg(def, "relu") != 0) g.Node("Relu", {y}, {g.Write(def.output(0))});
}

void Pool(const OperatorDef& def, GraphBuilder& g, const std::string& type) {
  const ConvPoolArgs args = ParsePoolArgs(def);
  if (args.global_pooling) {
    Same("Global" + type, def, g);
    return;
  }
  onnx::NodeProto* node = Same(type, def, g);
  SetWindow(node, args);
  if (type == "AveragePool") SetInt(node, "count_include_pad", IntArg(def, "count_include_pad"));
}

const std::map<std::string, Mapping>& Mappings() {
  static const std::map<std::string, Mapping> mappings = {
      {"Conv", {[](const OperatorDef& def, GraphBuilder& g) {
         ConvPoolArgs args = ParseConvPoolArgs(def);
         const Shape& filter = g.ShapeOf(def.input(1));  // (M, C/group, kh, kw)
         if (!args.has_kernel()) {
           args.kernel_h = filter[2];
           args.kernel_w = filter[3];
         }
         std::vector<std::string> in;
         for (const auto& input : def.input()) in.push_back(g.Read(input));
         const std::string y = FusedReluInput(def, g);
         onnx::NodeProto* node = g.Node("Conv", in, {y});
         SetWindow(node, args);
         SetInts(node, "dilations", {args.dilation_h, args.dilation_w});
         SetInt(node, "group", IntArg(def, "group"));
         FinishFusedRelu(def, g, y);
       }}},
      // Y = X W^T + b with X flattened at axis: Gemm with transB, after a Flatten unless X is a matrix, and
      // a Reshape back to X's dims before axis when there are several.
      {"FC", {[](const OperatorDef& def, GraphBuilder& g) {
         const Shape& x_dims = g.ShapeOf(def.input(0));
         const int64_t rank = static_cast<int64_t>(x_dims.size());
         int64_t axis = IntArg(def, "axis");
         if (axis < 0) axis += rank;
         std::string x = g.Read(def.input(0));
         if (rank != 2 || axis != 1) {
           const std::string flat = g.Intermediate(def.input(0) + "_flat");
           SetInt(g.Node("Flatten", {x}, {flat}), "axis", axis);
           x = flat;
         }
         const std::string w = g.Read(def.input(1)), b = g.Read(def.input(2));
         if (axis == 1) {
           SetInt(g.Node("Gemm", {x, w, b}, {g.Write(def.output(0))}), "transB", 1);
           return;
         }
         const std::string matrix = g.Intermediate(def.output(0) + "_matrix");
         SetInt(g.Node("Gemm", {x, w, b}, {matrix}), "transB", 1);
         std::vector<int64_t> dims = {-1};  // the batch, then X's other dims before axis, then M
         dims.insert(dims.end(), x_dims.begin() + 1, x_dims.begin() + axis);
         dims.push_back(g.ShapeOf(def.input(1))[0]);
         const std::string shape = g.Constant(def.output(0) + "_shape", dims);
         g.Node("Reshape", {matrix, shape}, {g.Write(def.output(0))});
       }}},
      {"Relu", {[](const OperatorDef& def, GraphBuilder& g) { Same("Relu", def, g); }}},
      {"LeakyRelu", {[](const OperatorDef& def, GraphBuilder& g) {
         SetFloat(Same("LeakyRelu", def, g), "alpha", FloatArg(def, "alpha"));
       }}},
      {"MaxPool", {[](const OperatorDef& def, GraphBuilder& g) { Pool(def, g, "MaxPool"); }}},
      {"AveragePool", {[](const OperatorDef& def, GraphBuilder& g) { Pool(def, g, "AveragePool"); }}},
      // Inference mode: the running statistics normalize, whatever is_test says (a training net exports as
      // its test net would run).
      {"SpatialBN",
       {[](const OperatorDef& def, GraphBuilder& g) {
          std::vector<std::string> in;
          for (int i = 0; i < 5; ++i) in.push_back(g.Read(def.input(i)));
          const std::string y = FusedReluInput(def, g);
          SetFloat(g.Node("BatchNormalization", in, {y}), "epsilon", FloatArg(def, "epsilon"));
          FinishFusedRelu(def, g, y);
        },
        1}},
      // broadcast=1 takes B as a suffix of A's shape, which is how ONNX broadcasts too.
      {"Add", {[](const OperatorDef& def, GraphBuilder& g) {
         const std::string a = g.Read(def.input(0)), b = g.Read(def.input(1));
         const std::string y = FusedReluInput(def, g);
         g.Node("Add", {a, b}, {y});
         FinishFusedRelu(def, g, y);
       }}},
      {"Sum", {[](const OperatorDef& def, GraphBuilder& g) {
         if (def.input_size() == 1)
           g.Alias(def.output(0), g.Read(def.input(0)));
         else
           Same("Sum", def, g);
       }}},
      {"Scale", {[](const OperatorDef& def, GraphBuilder& g) {
         const std::string x = g.Read(def.input(0));
         const std::string scale = g.Constant(def.output(0) + "_scale", FloatArg(def, "scale"));
         g.Node("Mul", {x, scale}, {g.Write(def.output(0))});
       }}},
      {"Flatten", {[](const OperatorDef& def, GraphBuilder& g) {
         SetInt(Same("Flatten", def, g), "axis", IntArg(def, "axis"));
       }}},
      // Caffe2's rules (0 keeps the dim, one -1 takes the rest) are ONNX's with allowzero=0.
      {"Reshape",
       {[](const OperatorDef& def, GraphBuilder& g) {
          if (def.input_size() > 1)
            throw InvalidInput(
                fmt::format("export: Reshape writing '{}' takes its shape from input '{}'; "
                            "give it as argument shape to export it",
                            def.output(0), def.input(1)));
          const std::string x = g.Read(def.input(0));
          const std::string shape = g.Constant(def.output(0) + "_shape", IntsArg(def, "shape"));
          g.Node("Reshape", {x, shape}, {g.Write(def.output(0))});
        },
        1}},
      {"Concat",
       {[](const OperatorDef& def, GraphBuilder& g) {
          SetInt(Same("Concat", def, g, 1), "axis", IntArg(def, "axis"));
        },
        1}},
      // Only the probabilities: the loss needs labels, which an inference graph does not have.
      {"SoftmaxWithLoss",
       {[](const OperatorDef& def, GraphBuilder& g) {
          const std::string x = g.Read(def.input(0));
          SetInt(g.Node("Softmax", {x}, {g.Write(def.output(0))}), "axis", 1);
        },
        1}},
      {"Dropout",
       {[](const OperatorDef& def, GraphBuilder& g) { g.Alias(def.output(0), g.Read(def.input(0))); }, 1}},
      {"Copy",
       {[](const OperatorDef& def, GraphBuilder& g) { g.Alias(def.output(0), g.Read(def.input(0))); }}},
  };
  return mappings;
}

int ExportedOutputs(const Mapping& mapping, const OperatorDef& def) {
  return mapping.exported_outputs < 0 ? def.output_size()
                                      : std::min(mapping.exported_outputs, def.output_size());
}

[[noreturn]] void NoMapping(const OperatorDef& def, int index) {
  throw InvalidInput(fmt::format("export: operator '{}' (op {}, output '{}') has no ONNX mapping; mapped: {}",
                                 def.type(), index, def.output_size() > 0 ? def.output(0) : "",
                                 OnnxMappedOperators()));
}

// The indices of the operators that lead from spec.input to spec.output, in net order: a backward sweep of
// the blobs still needed. The operator that last writes a needed blob is needed, and what it reads becomes
// needed; the input is where the sweep stops.
std::vector<int> NeededOperators(const NetDef& net, const OnnxGraphSpec& spec) {
  std::set<std::string> needed = {spec.output};
  std::vector<int> ops;
  bool reads_input = false;
  for (int i = net.op_size() - 1; i >= 0 && !needed.empty(); --i) {
    const OperatorDef& op = net.op(i);
    int first_needed = -1;
    for (int o = 0; o < op.output_size() && first_needed < 0; ++o)
      if (needed.count(op.output(o))) first_needed = o;
    if (first_needed < 0) continue;
    auto mapping = Mappings().find(op.type());
    if (mapping == Mappings().end()) NoMapping(op, i);
    for (int o = ExportedOutputs(mapping->second, op); o < op.output_size(); ++o)
      if (needed.count(op.output(o)))
        throw InvalidInput(
            fmt::format("export: output {} '{}' of operator '{}' (op {}) has no ONNX mapping "
                        "(only its first {} output(s) do)",
                        o, op.output(o), op.type(), i, ExportedOutputs(mapping->second, op)));
    for (const auto& output : op.output()) needed.erase(output);
    for (const auto& input : op.input())
      if (input != spec.input)
        needed.insert(input);
      else
        reads_input = true;
    ops.push_back(i);
  }
  if (ops.empty() && spec.output != spec.input)
    throw InvalidInput(fmt::format("export: no operator of the net writes the output '{}'", spec.output));
  // Otherwise the graph would compute from whatever the workspace holds under the real input's name.
  if (!ops.empty() && !reads_input)
    throw InvalidInput(fmt::format(
        "export: no operator on the way to '{}' reads the input '{}'; name the blob the network starts "
        "from (it reads {})",
        spec.output, spec.input, fmt::join(needed, ", ")));
  return {ops.rbegin(), ops.rend()};
}

// Shapes for the translation (FC's input rank, Conv's kernel, the output's dims), from lockstep's own shape
// functions. An operator that reads a blob the export leaves out (a loss's labels) gives its first output
// the shape of its first input, which is what its exported output (the softmax) has.
std::map<std::string, TensorShape> ExportedShapes(const NetDef& exported, const Workspace& ws,
                                                  const OnnxGraphSpec& spec) {
  std::map<std::string, TensorShape> shapes = {{spec.input, {spec.input_shape, DataType::kFloat}}};
  for (const auto& op : exported.op()) {
    std::vector<TensorShape> inputs;
    for (const auto& input : op.input()) {
      if (!shapes.count(input) && ws.HasBlob(input))
        shapes[input] = {ws.Blob(input).shape(), ws.Blob(input).dtype()};
      if (shapes.count(input)) inputs.push_back(shapes.at(input));
    }
    if (inputs.size() == static_cast<size_t>(op.input_size())) {
      std::vector<TensorShape> outputs = SchemaRegistry::Of(op).InferShapes(op, inputs);
      for (int i = 0; i < op.output_size() && i < static_cast<int>(outputs.size()); ++i)
        shapes[op.output(i)] = outputs[i];
    } else if (shapes.count(op.input(0))) {
      shapes[op.output(0)] = shapes.at(op.input(0));
    }
  }
  return shapes;
}

// ONNX value type float32 with `dims`, the first one symbolic ("N") when it is the batch.
void SetFloatType(onnx::ValueInfoProto* value, const Shape& dims, int64_t batch) {
  onnx::TypeProto_Tensor* type = value->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* shape = type->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i == 0 && dims[i] == batch)
      shape->add_dim()->set_dim_param("N");
    else
      shape->add_dim()->set_dim_value(dims[i]);
  }
}

// "N, 1, 28, 28" with the batch symbolic.
std::string ShapeText(const Shape& dims, int64_t batch) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + (i == 0 && dims[i] == batch ? std::string("N") : std::to_string(dims[i]));
  return text;
}

void AddMetadata(onnx::ModelProto* model, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* entry = model->add_metadata_props();
  entry->set_key(key);
  entry->set_value(value);
}

// The ONNX library's verdict: the checker, then shape inference in strict mode (as onnx.checker's
// full_check), which also fills the value_info of every intermediate value.
void Check(onnx::ModelProto* model) {
  try {
    onnx::checker::check_model(*model);
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception& e) {
    throw Error(fmt::format("export: the ONNX checker refused the exported model: {}", e.what()));
  }
}

}  // namespace

std::string OnnxMappedOperators() {
  std::string text;
  for (const auto& [type, mapping] : Mappings()) text += (text.empty() ? "" : ", ") + type;
  return text;
}

std::string NetToOnnx(const NetDef& net, const Workspace& ws, const OnnxGraphSpec& spec,
                      OnnxExportSummary* summary) {
  if (spec.input_shape.size() != 4)
    throw InvalidInput(fmt::format("export: the input '{}' must be (N, C, H, W), got shape {}", spec.input,
                                   ShapeToString(spec.input_shape)));
  const std::vector<int> indices = NeededOperators(net, spec);
  NetDef exported;
  exported.set_name(net.name());
  for (int i : indices) *exported.add_op() = net.op(i);

  std::map<std::string, TensorShape> shapes = ExportedShapes(exported, ws, spec);

  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("lockstep");
  model.set_producer_version(Version());
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpsetVersion);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name(spec.graph_name);

  GraphBuilder g(graph, ws, shapes, spec);
  for (int k = 0; k < exported.op_size(); ++k) {
    const OperatorDef& def = exported.op(k);
    g.Begin(def, indices[k]);
    Mappings().at(def.type()).translate(def, g);
  }

  // The output under its ONNX name: a Softmax node, or the last value renamed (an Identity when that value
  // is the input or a parameter, which no node writes).
  const std::string last = g.Current(spec.output);
  if (spec.softmax) {
    SetInt(g.Node("Softmax", {last}, {spec.output_name}), "axis", 1);
  } else {
    bool written = false;
    for (auto& node : *graph->mutable_node()) {
      for (auto& output : *node.mutable_output())
        if (output == last) output = spec.output_name, written = true;
      for (auto& input : *node.mutable_input())
        if (input == last) input = spec.output_name;
    }
    if (!written) g.Node("Identity", {last}, {spec.output_name});
  }

  const int64_t batch = spec.input_shape[0];
  const Shape& output_dims = shapes.count(spec.output) ? shapes.at(spec.output).dims : spec.input_shape;
  onnx::ValueInfoProto* input = graph->add_input();
  input->set_name(spec.input_name);
  input->set_doc_string("float32 images, NCHW");
  SetFloatType(input, spec.input_shape, batch);
  onnx::ValueInfoProto* output = graph->add_output();
  output->set_name(spec.output_name);
  output->set_doc_string(spec.softmax ? "class probabilities (softmax of the logits)"
                                      : "logits, before softmax");
  SetFloatType(output, output_dims, batch);

  AddMetadata(&model, "producer", VersionLine());
  AddMetadata(&model, "input_name", spec.input_name);
  AddMetadata(&model, "input_shape", ShapeText(spec.input_shape, batch));
  AddMetadata(&model, "input_layout", "NCHW");
  AddMetadata(&model, "input_dtype", "float32");
  AddMetadata(&model, "output_name", spec.output_name);
  AddMetadata(&model, "output_shape", ShapeText(output_dims, batch));
  AddMetadata(&model, "output",
              spec.softmax ? "probabilities (softmax over axis 1)" : "logits (before softmax)");
  for (const auto& [key, value] : spec.metadata) AddMetadata(&model, key, value);

  Check(&model);
  if (summary) {
    for (const auto& node : graph->node()) summary->node_types.push_back(node.op_type());
    summary->initializers = 0;
    summary->parameter_values = 0;
    for (const auto& tensor : graph->initializer()) {
      if (tensor.data_type() != onnx::TensorProto::FLOAT || tensor.raw_data().empty()) continue;
      ++summary->initializers;
      summary->parameter_values += static_cast<int64_t>(tensor.raw_data().size() / sizeof(float));
    }
  }
  std::string bytes;
  LOCKSTEP_ENFORCE(model.SerializeToString(&bytes), "serializing the ONNX model");
  if (summary) summary->file_bytes = static_cast<int64_t>(bytes.size());
  return bytes;
}

OnnxExportSummary ExportOnnx(const NetDef& net, const Workspace& ws, const OnnxGraphSpec& spec,
                             const std::string& path) {
  OnnxExportSummary summary;
  const std::string bytes = NetToOnnx(net, ws, spec, &summary);
  WriteFileAtomically(path, bytes, "ONNX model");
  return summary;
}

}  // namespace lockstep
