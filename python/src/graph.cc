// Graph building: the C++ ModelHelper, its layers, any registered operator, the data-parallel rewrite and the
// optimizer. The Python modules (model_helper, brew, data_parallel_model, optimizer) give them Caffe2's names
// and arguments; everything here only adds operators to NetDefs.
#include <pybind11/numpy.h>

#include <algorithm>
#include <optional>

#include "bindings.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/cpu_isa.h"
#include "lockstep/core/device_backend.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/mixed_precision.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/ops/gradient_buckets.h"
#include "lockstep/parallel/data_parallel.h"

namespace lockstep::python {
namespace {

using namespace pybind11::literals;

ParamTag TagFromName(const std::string& tag) {
  if (tag == "weight") return ParamTag::kWeight;
  if (tag == "bias") return ParamTag::kBias;
  if (tag == "computed") return ParamTag::kComputed;
  throw InvalidInput(fmt::format("unknown parameter tag '{}'; use weight, bias or computed", tag));
}

const char* TagName(ParamTag tag) {
  switch (tag) {
    case ParamTag::kWeight:
      return "weight";
    case ParamTag::kBias:
      return "bias";
    case ParamTag::kComputed:
      return "computed";
  }
  return "";
}

FillSpec MakeFill(const std::string& type, const py::dict& args) {
  return FillSpec{type, ArgsFromKwargs(args)};
}

// A name or device scope entered with `with` from Python; the C++ guard restores the previous scope on exit.
template <typename Guard, typename Value>
class ScopeGuard {
 public:
  ScopeGuard(ModelHelper& model, Value value) : model_(model), value_(std::move(value)) {}
  void Enter() { guard_.emplace(model_, value_); }
  void Exit(const py::args&) { guard_.reset(); }

 private:
  ModelHelper& model_;
  Value value_;
  std::optional<Guard> guard_;
};

template <typename Guard, typename Value>
void BindScopeGuard(py::module_& m, const char* name) {
  using Scope = ScopeGuard<Guard, Value>;
  py::class_<Scope>(m, name)
      .def(py::init<ModelHelper&, Value>(), py::keep_alive<1, 2>())
      .def("__enter__", &Scope::Enter)
      .def("__exit__", &Scope::Exit);
}

std::vector<std::string> BlobNames(const py::handle& names) {
  if (py::isinstance<py::str>(names)) return {names.cast<std::string>()};
  std::vector<std::string> out;
  for (const py::handle& name : names) out.push_back(py::str(name).cast<std::string>());
  return out;
}

void BindModelHelper(py::module_& m) {
  py::class_<Device>(m, "Device")
      .def(py::init([](int type, int id) {
             return Device{static_cast<DeviceType>(type), id};
           }),
           "type"_a, "id"_a = 0)
      .def_property_readonly("type", [](const Device& d) { return static_cast<int>(d.type); })
      .def_readonly("id", &Device::id)
      .def("__eq__", &Device::operator==)
      .def("__repr__", &Device::ToString);

  py::class_<ModelHelper>(m, "ModelHelper")
      .def(py::init<const std::string&, bool>(), "name"_a, "init_params"_a = true)
      .def_property("seed", &ModelHelper::seed, &ModelHelper::set_seed)
      .def_property_readonly("name", &ModelHelper::name)
      .def_property_readonly("net_name", [](const ModelHelper& model) { return model.net().name(); })
      .def_property_readonly("init_net_name",
                             [](ModelHelper& model) { return model.param_init_net().name(); })
      .def("rename_nets",
           [](ModelHelper& model, const std::string& net, const std::string& init_net) {
             model.net().set_name(net);
             model.param_init_net().set_name(init_net);
           })
      .def("net_bytes", [](const ModelHelper& model) { return NetDefToBytes(model.net()); })
      .def_property_readonly("op_count", [](const ModelHelper& model) { return model.net().op_size(); })
      .def("init_net_bytes", [](ModelHelper& model) { return NetDefToBytes(model.param_init_net()); })
      .def(
          "add_op",
          [](ModelHelper& model, bool init, const std::string& type, const std::vector<std::string>& inputs,
             const std::vector<std::string>& outputs, const py::dict& args) {
            OperatorDef op = MakeOperatorDef(type, inputs, outputs, ArgsFromKwargs(args));
            // A misspelled or ill-typed argument fails here, where the Python line that wrote it is.
            SchemaRegistry::Of(op).Verify(op);
            if (!init) return model.AddOp(std::move(op))->output_size();
            SetDevice(&op, model.device());
            *model.param_init_net().add_op() = std::move(op);
            return static_cast<int>(outputs.size());
          },
          "init"_a, "type"_a, "inputs"_a, "outputs"_a, "args"_a)
      .def("set_net_bytes",
           [](ModelHelper& model, bool init, const py::bytes& bytes) {
             NetDef net = NetDefFromBytes(bytes);
             for (const OperatorDef& op : net.op()) SchemaRegistry::Of(op).Verify(op);
             (init ? model.param_init_net() : model.net()) = std::move(net);
           })
      .def("scoped", &ModelHelper::Scoped)
      .def_property_readonly("name_scope", &ModelHelper::name_scope)
      .def_property_readonly("device", &ModelHelper::device)
      .def("create_param",
           [](ModelHelper& model, const std::string& name, const Shape& shape, const std::string& fill,
              const py::dict& fill_args, const std::string& tag) {
             return model.CreateParam(name, shape, MakeFill(fill, fill_args), TagFromName(tag));
           })
      .def_property_readonly("params",
                             [](const ModelHelper& model) {
                               std::vector<std::string> names;
                               for (const auto& param : model.params()) names.push_back(param.name);
                               return names;
                             })
      .def("param_info",
           [](const ModelHelper& model, const std::string& name) {
             const ParamInfo& info = model.Param(name);
             return py::dict("shape"_a = info.shape, "tag"_a = TagName(info.tag), "device"_a = info.device);
           })
      .def(
          "get_params",
          [](const ModelHelper& model, const std::string& scope, const std::vector<std::string>& tags) {
            std::vector<ParamTag> wanted;
            for (const auto& tag : tags) wanted.push_back(TagFromName(tag));
            return model.GetParams(scope, wanted);
          },
          "scope"_a = "", "tags"_a = std::vector<std::string>{})
      .def("add_gradient_operators", &ModelHelper::AddGradientOperators, "losses"_a,
           "also"_a = std::set<std::string>())
      .def_property_readonly("param_to_grad", &ModelHelper::param_to_grad)
      .def_property_readonly("replica", [](const ModelHelper& model) {
        const auto& r = model.replica();
        return py::dict("index"_a = r.index, "count"_a = r.count, "devices"_a = r.devices);
      });

  BindScopeGuard<ModelHelper::NameScope, std::string>(m, "NameScope");
  BindScopeGuard<ModelHelper::DeviceScope, Device>(m, "DeviceScope");
}

void BindLayers(py::module_& m) {
  m.def("conv", [](ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
                   int kernel, int stride, int pad, int dilation, int group, bool bias,
                   const std::string& weight_fill, const py::dict& weight_args, const std::string& bias_fill,
                   const py::dict& bias_args, const py::dict& sides) {
    layers::ConvOptions o;
    o.stride = stride, o.pad = pad, o.dilation = dilation, o.group = group, o.bias = bias;
    o.weight_init = MakeFill(weight_fill, weight_args);
    o.bias_init = MakeFill(bias_fill, bias_args);
    o.sides = ArgsFromKwargs(sides);
    return layers::Conv(model, in, out, dim_in, dim_out, kernel, o);
  });
  m.def("fc", [](ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
                 const std::string& weight_fill, const py::dict& weight_args, const std::string& bias_fill,
                 const py::dict& bias_args, int axis) {
    return layers::FC(model, in, out, dim_in, dim_out, MakeFill(weight_fill, weight_args),
                      MakeFill(bias_fill, bias_args), axis);
  });
  m.def("relu", &layers::Relu);
  auto pool = [](auto layer) {
    return [layer](ModelHelper& model, const std::string& in, const std::string& out, int kernel, int stride,
                   int pad, const py::dict& sides) {
      return layer(model, in, out, kernel, stride, pad, ArgsFromKwargs(sides));
    };
  };
  m.def("max_pool", pool(&layers::MaxPool));
  m.def("average_pool", pool(&layers::AveragePool));
  m.def("global_average_pool", &layers::GlobalAveragePool);
  m.def("spatial_bn", &layers::SpatialBN);
  m.def("dropout", &layers::Dropout);
  m.def("add", &layers::Add);
  m.def("scale", &layers::Scale);
  m.def("flatten", &layers::Flatten);
  m.def("read_batch", &layers::ReadBatch);
  m.def("softmax_with_loss", &layers::SoftmaxWithLoss);
  m.def("accuracy", &layers::Accuracy);
  m.def("build_model", [](const std::string& name, ModelHelper& model, const std::string& data,
                          int num_channels, int image_size, int num_labels, bool is_test) {
    return BuildModel(name, model, data, ModelConfig{num_channels, image_size, num_labels, is_test});
  });
  m.def("known_models", &KnownModelsText);
  m.def("is_known_model", &IsKnownModel);
  m.def(
      "compute_in_low_precision",
      [](ModelHelper& model, int first_op, const std::string& input, const std::string& output,
         const std::string& dtype) {
        if (dtype != "float16" && dtype != "bfloat16")
          throw InvalidInput(fmt::format("compute_in: dtype '{}'; use float16 or bfloat16", dtype));
        if (model.device().type == DeviceType::kCpu) {
          if (dtype == "float16")
            throw InvalidInput("compute_in: float16 needs a GPU; CPUs compute in bfloat16");
          RequireCpuBFloat16("compute_in: bfloat16 on CPU");
        }
        return ComputeInLowPrecision(model, first_op, input, output,
                                     dtype == "float16" ? DataType::kFloat16 : DataType::kBFloat16);
      },
      "model"_a, "first_op"_a, "input"_a, "output"_a, "dtype"_a);
  m.def("operator_types",
        [](int device) { return OperatorRegistry::Types(static_cast<DeviceType>(device)); });
}

void BindParallelize(py::module_& m) {
  py::class_<DataParallelModel>(m, "DataParallelModel")
      .def_readonly("scopes", &DataParallelModel::scopes)
      .def_readonly("losses", &DataParallelModel::losses)
      .def_readonly("state_blobs", &DataParallelModel::state_blobs)
      .def_property_readonly("buckets",
                             [](const DataParallelModel& p) {
                               std::vector<std::vector<std::string>> buckets;
                               for (const auto& bucket : p.buckets) buckets.push_back(bucket.params);
                               return buckets;
                             })
      .def("broadcast_net_bytes", [](const DataParallelModel& p) { return NetDefToBytes(p.broadcast_net); });

  py::class_<ParallelOptions>(m, "ParallelOptions")
      .def(py::init<>())
      .def_readwrite("devices", &ParallelOptions::devices)
      .def_property(
          "device_type", [](const ParallelOptions& o) { return static_cast<int>(o.device_type); },
          [](ParallelOptions& o, int type) { o.device_type = static_cast<DeviceType>(type); })
      .def_readwrite("devices_per_replica", &ParallelOptions::devices_per_replica)
      .def_readwrite("micro_batches", &ParallelOptions::micro_batches)
      .def_readwrite("num_shards", &ParallelOptions::num_shards)
      .def_readwrite("shard_id", &ParallelOptions::shard_id)
      .def_readwrite("shard_communicator", &ParallelOptions::shard_communicator)
      .def_readwrite("bucket_bytes", &ParallelOptions::bucket_bytes)
      .def_readwrite("tail_bucket_bytes", &ParallelOptions::tail_bucket_bytes)
      .def_readwrite("allreduce_channels", &ParallelOptions::allreduce_channels)
      .def_property(
          "allreduce_dtype",
          [](const ParallelOptions& o) { return std::string(DataTypeName(o.allreduce_dtype)); },
          [](ParallelOptions& o, const std::string& name) {
            o.allreduce_dtype = ParseFloatType(name, "allreduce_dtype");
          })
      .def_readwrite("combine_spatial_bn", &ParallelOptions::combine_spatial_bn)
      .def_readwrite("shared_model", &ParallelOptions::shared_model)
      .def_readwrite("share_buffers", &ParallelOptions::share_buffers)
      .def_readwrite("keep_blobs", &ParallelOptions::keep_blobs)
      .def_readwrite("threads_per_device", &ParallelOptions::threads_per_device)
      .def_readwrite("max_threads", &ParallelOptions::max_threads);

  // The builders are Python callables given the Python model (which wraps `model`); an exception they
  // raise leaves through Parallelize unchanged, traceback included.
  m.def(
      "parallelize",
      [](ModelHelper& model, py::object py_model, py::function input, py::function forward, py::object update,
         ParallelOptions o) {
        o.input_builder = [&](ModelHelper&) { input(py_model); };
        o.forward_builder = [&](ModelHelper&, float loss_scale) {
          py::object losses = forward(py_model, loss_scale);
          if (losses.is_none()) return std::vector<std::string>{};
          return BlobNames(losses);
        };
        if (!update.is_none()) o.param_update_builder = [&](ModelHelper&) { update(py_model); };
        return Parallelize(model, o);
      },
      "model"_a, "py_model"_a, "input"_a, "forward"_a, "update"_a, "options"_a);
  m.def("cuda_device_count", [] {
    DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
    return cuda ? cuda->DeviceCount() : 0;
  });
  m.def("batch_per_device", &BatchPerDevice, "batch_size"_a, "devices"_a, "shards"_a = 1);
  m.def("device_scope_name",
        [](int type, int id) { return DeviceScopeName(static_cast<DeviceType>(type), id); });
  // Parallelize's bucket plan for given float blobs, as (bytes, names) per bucket: what models of its
  // communication (bench/scaling_model.py) plan with.
  m.def(
      "plan_gradient_buckets",
      [](const std::vector<std::pair<std::string, Shape>>& blobs, size_t bucket_bytes, size_t tail_bytes) {
        std::vector<std::pair<size_t, std::vector<std::string>>> plan;
        for (auto& bucket : PlanGradientBuckets(blobs, bucket_bytes, tail_bytes))
          plan.emplace_back(bucket.bytes, std::move(bucket.params));
        return plan;
      },
      "blobs"_a, "bucket_bytes"_a, "tail_bytes"_a = 0);
}

void BindOptimizer(py::module_& m) {
  m.def(
      "add_momentum_sgd",
      [](ModelHelper& model, float base_learning_rate, float momentum, bool nesterov, float weight_decay,
         const py::dict& schedule) {
        SgdOptions o;
        o.base_learning_rate = base_learning_rate, o.momentum = momentum, o.nesterov = nesterov;
        o.weight_decay = weight_decay;
        o.schedule = ArgsFromKwargs(schedule);
        SgdBlobs blobs = AddMomentumSgd(model, o);
        return py::dict("iter"_a = blobs.iter, "lr"_a = blobs.lr, "moments"_a = blobs.moments);
      },
      "model"_a, "base_learning_rate"_a, "momentum"_a, "nesterov"_a, "weight_decay"_a, "schedule"_a);
}

enum class ValueKind { kInt, kFloat, kString, kOther };

ValueKind KindOf(const py::handle& value) {
  if (py::isinstance<py::str>(value)) return ValueKind::kString;
  if (py::isinstance<py::int_>(value) || py::hasattr(value, "__index__")) return ValueKind::kInt;  // bool too
  if (py::isinstance<py::float_>(value) || py::hasattr(value, "__float__")) return ValueKind::kFloat;
  return ValueKind::kOther;
}

}  // namespace

std::vector<Arg> ArgsFromKwargs(const py::dict& kwargs) {
  std::vector<Arg> args;
  for (const auto& [key, given] : kwargs) {
    const std::string name = key.cast<std::string>();
    // A numpy array is its list of values; numpy scalars are the Python numbers they convert to.
    const py::object value =
        py::isinstance<py::array>(given) ? given.attr("tolist")() : py::reinterpret_borrow<py::object>(given);
    const bool is_list = py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value);
    std::vector<ValueKind> kinds;
    const py::sequence items = is_list ? value.cast<py::sequence>() : py::sequence(py::make_tuple(value));
    for (const py::handle& item : items) kinds.push_back(KindOf(item));
    const auto all = [&](ValueKind kind) {
      return std::all_of(kinds.begin(), kinds.end(), [&](ValueKind k) { return k == kind; });
    };
    const auto all_numbers = [&] {
      return std::all_of(kinds.begin(), kinds.end(),
                         [](ValueKind k) { return k != ValueKind::kOther && k != ValueKind::kString; });
    };
    if (!is_list && all(ValueKind::kInt)) {
      args.emplace_back(name, value.cast<int64_t>());
    } else if (!is_list && all(ValueKind::kFloat)) {
      args.emplace_back(name, value.cast<float>());
    } else if (!is_list && all(ValueKind::kString)) {
      args.emplace_back(name, value.cast<std::string>());
    } else if (is_list && all(ValueKind::kInt)) {
      args.emplace_back(name, value.cast<std::vector<int64_t>>());
    } else if (is_list && all_numbers()) {
      args.emplace_back(name, value.cast<std::vector<float>>());
    } else if (is_list && all(ValueKind::kString)) {
      Arg arg(name, std::vector<int64_t>{});
      for (const py::handle& item : value.cast<py::sequence>())
        arg.proto.add_strings(item.cast<std::string>());
      args.push_back(std::move(arg));
    } else if (is_list) {
      throw InvalidInput(
          fmt::format("argument '{}' mixes types; a list argument holds only numbers or only strings", name));
    } else {
      throw InvalidInput(
          fmt::format("argument '{}' is a {}; operator arguments are int, float, str or a list of them", name,
                      py::str(value.get_type().attr("__name__")).cast<std::string>()));
    }
  }
  return args;
}

NetDef NetDefFromBytes(const py::bytes& bytes) {
  NetDef net;
  if (!net.ParseFromString(std::string(bytes)))
    throw InvalidInput("not a serialized NetDef; pass a lockstep_pb2.NetDef, a net or its name");
  return net;
}

py::bytes NetDefToBytes(const NetDef& net) { return py::bytes(net.SerializeAsString()); }

void BindGraph(py::module_& m) {
  // core.Net.AddGradientOperators: the net with its backward pass, and Caffe2's gradient map.
  m.def("add_gradient_operators_to_net",
        [](const py::bytes& net_bytes, const std::vector<std::string>& losses,
           const std::set<std::string>& wrt) {
          NetDef net = NetDefFromBytes(net_bytes);
          std::map<std::string, std::string> gradients = AddGradientOperators(&net, losses, wrt);
          for (const auto& loss : losses) gradients[loss] = GradientName(loss);
          return py::make_tuple(NetDefToBytes(net), gradients);
        });
  BindModelHelper(m);
  BindLayers(m);
  BindParallelize(m);
  BindOptimizer(m);
}

}  // namespace lockstep::python
