// The Python extension module `dtensor._core` (nanobind). Thin: every function forwards to the C++
// library and the library's errors become Python exceptions (InputError -> ValueError,
// BackendError -> dtensor.BackendError, a RuntimeError). Planning and executing release the GIL.
#include <cstring>

#include "bindings.hpp"

NB_MODULE(_core, m) {
  using namespace dtensor;
  using namespace dtensor::python;
  m.doc() = "dtensor's C++ core: layouts, the redistribution planner, its cost model and executor.";

  static nb::exception<BackendError> backend_error(m, "BackendError", PyExc_RuntimeError);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    // messages decoded leniently: a byte that is not UTF-8 becomes U+FFFD, never a UnicodeDecodeError
    auto set = [](PyObject* type, const char* what) {
      PyObject* msg = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "replace");
      PyErr_SetObject(type, msg);
      Py_XDECREF(msg);
    };
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      set(PyExc_ValueError, e.what());
    } catch (const BackendError& e) {
      set(backend_error.ptr(), e.what());
    } catch (const Error& e) {
      set(PyExc_RuntimeError, e.what());
    } catch (const nb::cast_error&) {
      set(PyExc_TypeError, "an argument has the wrong type (expected an int, a sequence of ints or a str as documented)");
    }
  });

  bind_values(m);
  bind_plans(m);
  bind_ragged(m);
  bind_simulation(m);
  bind_execution(m);
  bind_tune(m);
  bind_load(m);

  // ---- misc ----
  m.def("parse_collective", [](const std::string& s) -> std::optional<std::string> {
    const auto c = parse_collective(s);
    if (!c) return std::nullopt;
    return std::string(to_string(*c));
  });
  m.def("dtypes", [] {
    std::vector<std::string> out;
    for (const auto t : kAllDTypes) out.emplace_back(to_string(t));
    return out;
  }, "The dtype names layouts accept");
  m.def("itemsize", [](const std::string& t) { return itemsize(parse_dtype(t)); }, "dtype"_a);
}
