// torch_tributary._C: the backend class and its creator, for torch_tributary/__init__.py to
// register with torch.distributed.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Tributary collectives as a torch.distributed backend";
  // The base class as torch binds it: the object is a ProcessGroup (a Backend in PyTorch 2.x).
#if TORCH_VERSION_MAJOR >= 2
  py::object base = py::module::import("torch._C._distributed_c10d").attr("Backend");
#else
  py::object base = py::module::import("torch._C._distributed_c10d").attr("ProcessGroup");
#endif
  py::class_<torch_tributary::ProcessGroupTributary,
             c10::intrusive_ptr<torch_tributary::ProcessGroupTributary>>(m, "ProcessGroupTributary", base)
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
  m.attr("torch_version_built") = TORCH_VERSION;
}
