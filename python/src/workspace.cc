// Workspaces from Python: blobs in and out as numpy arrays, and nets created and run over them. Runs release
// the GIL, so other Python threads go on while a net runs.
#include "lockstep/core/workspace.h"

#include <pybind11/numpy.h>

#include <algorithm>

#include "bindings.h"
#include "lockstep/core/closest_names.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/net.h"
#include "lockstep/parallel/memonger.h"

namespace lockstep::python {
namespace {

using namespace pybind11::literals;

py::dtype NumpyType(DataType type) {
  switch (type) {
    case DataType::kFloat:
      return py::dtype::of<float>();
    case DataType::kInt32:
      return py::dtype::of<int32_t>();
    case DataType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DataType::kInt64:
      return py::dtype::of<int64_t>();
    case DataType::kFloat16:
      return py::dtype("float16");
    case DataType::kBFloat16:  // numpy has no bfloat16: the bits, as the tensor stores them
      return py::dtype::of<uint16_t>();
    case DataType::kUndefined:
      break;
  }
  throw InvalidInput("the blob holds no value yet; run the net that writes it first");
}

DataType TensorType(const py::dtype& dtype) {
  if (dtype.is(py::dtype::of<float>())) return DataType::kFloat;
  if (dtype.is(py::dtype::of<int32_t>())) return DataType::kInt32;
  if (dtype.is(py::dtype::of<uint8_t>())) return DataType::kUInt8;
  if (dtype.is(py::dtype::of<int64_t>())) return DataType::kInt64;
  if (dtype.is(py::dtype("float16"))) return DataType::kFloat16;
  throw InvalidInput(
      fmt::format("arrays of {} cannot be fed; use float32, float16, int32, int64 or uint8 (e.g. "
                  "array.astype(numpy.float32))",
                  py::str(py::handle(dtype)).cast<std::string>()));
}

// The blob's values in host memory and plain layout: the blob itself when it already is, else a copy.
std::shared_ptr<const Tensor> HostPlain(const Workspace& ws, const std::string& name) {
  const Tensor& blob = ws.Blob(name);
  if (blob.on_host() && blob.is_plain()) return std::shared_ptr<const Tensor>(&blob, [](const Tensor*) {});
  auto host = std::make_shared<Tensor>();
  if (blob.on_host()) {
    blob.ToPlain(host.get());
  } else {
    Tensor copy;
    copy.CopyFrom(blob);  // waits for the device's work on the blob
    copy.ToPlain(host.get());
  }
  return host;
}

std::vector<py::ssize_t> Strides(const Shape& shape, size_t element) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(element);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// Why `name` cannot be fetched: it names a workspace object, or a blob the memory plan placed in a shared
// buffer, or nothing (then the plan's part when its replica's blobs were planned, and the names nearest to
// it).
std::string MissingBlob(const Workspace& ws, const std::string& name) {
  if (ws.ObjectAddress(name))
    return fmt::format("'{}' is a workspace object (a reader or a communicator), not a blob of tensor data",
                       name);
  const std::string keep_it =
      "the memory plan gave the nets' intermediate blobs shared buffers; to fetch it, name it in "
      "Parallelize's blobs_to_keep or pass share_buffers=False";
  // Planned blobs are named "<scope>__shared_<k>" (shared names) or "<blob>__<net>" (placed in an arena).
  const std::vector<std::string> nets = ws.NetNames();
  auto placed_as = [&](const std::string& blob) {
    for (const std::string& net : nets) {
      const std::string suffix = "__" + net;
      if (blob.size() > suffix.size() &&
          blob.compare(blob.size() - suffix.size(), suffix.size(), suffix) == 0)
        return blob.substr(0, blob.size() - suffix.size());
    }
    return std::string();
  };
  const std::string scope = name.substr(0, name.rfind('/') + 1);
  bool planned_scope = false;
  std::vector<std::string> candidates;
  for (const std::string& blob : ws.BlobNames()) {
    const std::string placed = placed_as(blob);
    if (placed == name) return fmt::format("blob '{}' is not kept: {}", name, keep_it);
    if (placed.empty() && blob.find(kSharedBlobMarker) == std::string::npos)
      candidates.push_back(blob);
    else if (blob.rfind(scope, 0) == 0 && blob.find('/', scope.size()) == std::string::npos)
      planned_scope = true;
  }
  std::string message = fmt::format("blob '{}' does not exist in the workspace", name);
  if (planned_scope) message += fmt::format(": if a net computes it, {}", keep_it);
  const std::vector<std::string> closest = ClosestNames(name, candidates);
  if (!closest.empty())
    message += fmt::format("{}did you mean '{}'?", planned_scope ? "; if not, " : "; ", closest[0]);
  return message;
}

// copy=true: an array of its own. copy=false: a read-only view of a host blob's buffer, which the array
// keeps alive and which later runs overwrite (until the blob moves to a larger buffer).
py::array Fetch(const Workspace& ws, const std::string& name, bool copy) {
  if (!ws.HasBlob(name)) throw InvalidInput(MissingBlob(ws, name));
  std::shared_ptr<const Tensor> tensor = HostPlain(ws, name);
  if (tensor->dtype() == DataType::kUndefined)
    throw InvalidInput(fmt::format("blob '{}' holds no value yet; run the net that writes it first", name));
  const py::dtype dtype = NumpyType(tensor->dtype());
  const auto strides = Strides(tensor->shape(), ElementSize(tensor->dtype()));
  if (copy) {
    py::array out(dtype, tensor->shape(), strides);
    std::memcpy(out.mutable_data(), tensor->raw_data(),
                NumElements(tensor->shape()) * ElementSize(tensor->dtype()));
    return out;
  }
  const Tensor* blob = &ws.Blob(name);
  if (tensor.get() != blob)
    throw InvalidInput(
        fmt::format("blob '{}' is not in host memory in plain layout; fetch it with copy=True", name));
  // The view's base owns the buffer: a feed or run that grows the blob cannot free it under the array.
  auto* owner = new std::shared_ptr<const void>(blob->storage());
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  py::array view(dtype, tensor->shape(), strides, tensor->raw_data(), base);
  py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return view;
}

// Into the blob's own buffer where it is large enough, so blobs that share a buffer keep sharing it.
void Feed(Workspace& ws, const std::string& name, const py::array& array,
          const std::optional<Device>& device) {
  py::array contiguous = py::array::ensure(array, py::array::c_style);
  if (!contiguous) throw InvalidInput(fmt::format("blob '{}': the value is not an array", name));
  const Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  const DataType type = TensorType(contiguous.dtype());
  Tensor* blob = ws.CreateBlob(name);
  blob->PlaceOn(device.value_or(Device{}));
  if (blob->on_host()) {
    blob->Resize(shape, type);
    std::memcpy(blob->raw_data(), contiguous.data(), blob->nbytes());
  } else {
    Tensor host(shape, type);
    std::memcpy(host.raw_data(), contiguous.data(), host.nbytes());
    blob->CopyFrom(host);
  }
}

}  // namespace

void BindWorkspace(py::module_& m) {
  py::class_<Workspace>(m, "Workspace")
      .def(py::init<>())
      .def("feed", &Feed, "name"_a, "array"_a, "device"_a = std::nullopt)
      .def("fetch", &Fetch, "name"_a, "copy"_a = true)
      .def("has_blob", &Workspace::HasBlob)
      .def("blobs", &Workspace::BlobNames)
      .def("run_net_once",
           [](Workspace& ws, const py::bytes& net) {
             NetDef def = NetDefFromBytes(net);
             py::gil_scoped_release release;
             ws.RunNetOnce(def);
           })
      .def(
          "create_net",
          [](Workspace& ws, const py::bytes& net, bool overwrite) {
            NetDef def = NetDefFromBytes(net);
            py::gil_scoped_release release;
            return ws.CreateNet(def, overwrite)->def().name();
          },
          "net"_a, "overwrite"_a = false)
      .def("has_net", [](Workspace& ws, const std::string& name) { return ws.GetNet(name) != nullptr; })
      .def(
          "run_net",
          [](Workspace& ws, const std::string& name, int64_t num_iter) {
            Net* net = ws.GetNet(name);
            if (!net)
              throw InvalidInput(fmt::format("no net '{}' in the workspace; create it with CreateNet", name));
            for (int64_t i = 0; i < num_iter; ++i) {
              {
                py::gil_scoped_release release;
                net->Run();
              }
              // Ctrl-C raises KeyboardInterrupt between two iterations, not after the last.
              if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
          },
          "name"_a, "num_iter"_a = 1)
      .def_property_readonly("allocated_bytes", &Workspace::AllocatedBytes);
}

}  // namespace lockstep::python
