// The parts of the _lockstep extension, one per file, and the conversions they share.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "lockstep/core/net_def.h"

namespace lockstep::python {

namespace py = pybind11;

void BindGraph(py::module_& m);      // graph.cc: ModelHelper, layers, operators, Parallelize, optimizer
void BindWorkspace(py::module_& m);  // workspace.cc: blobs as numpy arrays, nets
void BindTraining(py::module_& m);   // training.cc: trainer options, readers, checkpoints, shards, logs
void BindSchemas(py::module_& m);    // schema.cc: the operator catalogue

// Operator arguments from Python keyword arguments: bool and int -> i, float -> f, str -> s, and lists of
// them. Throws InvalidInput naming the argument for any other value.
std::vector<Arg> ArgsFromKwargs(const py::dict& kwargs);

// A NetDef from its serialized bytes (as the Python protobuf module writes them) and back.
NetDef NetDefFromBytes(const py::bytes& bytes);
py::bytes NetDefToBytes(const NetDef& net);

}  // namespace lockstep::python
