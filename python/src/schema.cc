// The operator catalogue from the schemas: what `lockstep ops` prints, as Python values, so that the package
// reads argument defaults where they are declared instead of repeating them.
#include "lockstep/core/schema.h"

#include <pybind11/pybind11.h>

#include "bindings.h"

namespace lockstep::python {
namespace {

using namespace pybind11::literals;

py::object ArgValue(const Argument& arg, ArgType type) {
  switch (type) {
    case ArgType::kInt:
      return py::int_(arg.i());
    case ArgType::kFloat:
      return py::float_(arg.has_f() ? arg.f() : static_cast<float>(arg.i()));
    case ArgType::kString:
      return py::str(arg.s());
    case ArgType::kInts:
      return py::cast(std::vector<int64_t>(arg.ints().begin(), arg.ints().end()));
    case ArgType::kFloats:
      return py::cast(std::vector<float>(arg.floats().begin(), arg.floats().end()));
  }
  return py::none();
}

py::list Blobs(const std::vector<BlobSpec>& blobs) {
  py::list list;
  for (const auto& blob : blobs)
    list.append(py::dict("name"_a = blob.name, "doc"_a = blob.doc, "optional"_a = blob.optional));
  return list;
}

// {"doc", "inputs": [{"name", "doc", "optional"}], "outputs": [...], "args": {name: {"type", "doc", "min",
// "max", "max_excluded" and, when declared, "default" and "choices"}}}.
py::dict SchemaOf(const std::string& type) {
  const OpSchema& schema = SchemaRegistry::Of(MakeOperatorDef(type, {}, {}));
  py::dict args;
  for (const ArgSpec* arg : schema.args()) {
    py::dict entry("type"_a = ArgTypeName(arg->type), "doc"_a = arg->doc, "min"_a = arg->min,
                   "max"_a = arg->max, "max_excluded"_a = arg->max_excluded);
    if (arg->default_value) entry["default"] = ArgValue(*arg->default_value, arg->type);
    if (!arg->choices.empty()) entry["choices"] = arg->choices;
    args[py::str(arg->name)] = entry;
  }
  return py::dict("doc"_a = schema.doc(), "inputs"_a = Blobs(schema.inputs()),
                  "outputs"_a = Blobs(schema.outputs()), "args"_a = args);
}

}  // namespace

void BindSchemas(py::module_& m) {
  m.def("operator_schema", &SchemaOf, "type"_a,
        "The schema of an operator type: its doc, inputs, outputs and arguments");
  m.def("schema_types", &SchemaRegistry::Types, "The operator types that have a schema, sorted");
}

}  // namespace lockstep::python
