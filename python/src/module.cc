// The _lockstep extension: lockstep's C++ core for the Python package. A lockstep::Error becomes Error (a
// RuntimeError) with the C++ one-line message; an InvalidInput is also a ValueError, an IoError an OSError.
#include "bindings.h"
#include "lockstep/core/cpu_isa.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/version.h"

namespace lockstep::python {

PYBIND11_MODULE(_lockstep, m) {
  m.doc() = "lockstep's C++ core; use the modules of the lockstep package";
  auto error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<IoError>(m, "IoError", py::make_tuple(error, py::handle(PyExc_OSError)));
  py::register_exception<InvalidInput>(m, "InvalidInput",
                                       py::make_tuple(error, py::handle(PyExc_ValueError)));
  m.def("version_line", &VersionLine, "The version line lockstep's programs print first");
  m.def("cpu_isa", &CpuIsaName, "The instruction set oneDNN's CPU kernels use here, e.g. avx512_core_amx");
  m.def("cpu_has_bfloat16", &CpuHasBFloat16Instructions,
        "Whether the CPU has AVX512_BF16 or AMX, which bfloat16 training on CPU needs");
  BindGraph(m);
  BindWorkspace(m);
  BindTraining(m);
  BindSchemas(m);
}

}  // namespace lockstep::python
