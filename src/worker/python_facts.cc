#include "worker/python_facts.h"

#include <time.h>

#include <algorithm>

namespace py = pybind11;

namespace kc::worker {

namespace {

// Python strings may hold lone surrogates; the record is UTF-8.
std::string Utf8(PyObject* text) {
  if (text == nullptr || !PyUnicode_Check(text)) return "?";
  PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "backslashreplace");
  if (bytes == nullptr) {
    PyErr_Clear();
    return "?";
  }
  std::string out(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  return out;
}

// "file:line name", as tracebacks name a frame.
std::string DescribeFrame(PyFrameObject* frame, PyCodeObject* code) {
  return Utf8(code->co_filename) + ":" + std::to_string(PyFrame_GetLineNumber(frame)) + " " +
         Utf8(code->co_qualname);
}

double MicrosecondsSince(const timespec& start) {
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - start.tv_sec) * 1e6 +
         static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e3;
}

// Module dicts gain and refresh this one on their own whenever a warning is shown.
// (The length test first: this runs for every watched name at every seal.)
bool Ignored(PyObject* key) {
  constexpr Py_ssize_t kLength = sizeof("__warningregistry__") - 1;
  return PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) == kLength &&
         PyUnicode_CompareWithASCIIString(key, "__warningregistry__") == 0;
}

// The value under the exact-str key equal to `key` (an exact str), or null. Only exact strings
// are compared, so no key's __eq__ runs.
PyObject* FindByContent(PyObject* dict, PyObject* key) {
  PyObject* candidate;
  PyObject* value;
  Py_ssize_t position = 0;
  while (PyDict_Next(dict, &position, &candidate, &value)) {
    if (candidate == key) return value;
    if (PyUnicode_CheckExact(candidate) && PyUnicode_CheckExact(key) &&
        PyUnicode_Compare(candidate, key) == 0) {
      return value;
    }
  }
  return nullptr;
}

bool IsScalar(PyObject* value) {
  return value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
         PyFloat_CheckExact(value);
}

// A private module-level number or flag: libraries keep caches and state there that change on
// their own (torch.cuda._cached_device_count is filled in on first use, _initialized flips).
bool PrivateScalar(PyObject* key, PyObject* value) {
  return PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) > 0 &&
         PyUnicode_READ_CHAR(key, 0) == '_' && IsScalar(value);
}

}  // namespace

void PythonFacts::AddGenuine(PyObject* code, PyObject* globals) {
  if (!genuine_.emplace(code, globals).second) return;
  // Nested functions, lambdas and (before 3.12) comprehensions have code objects of their own.
  PyObject* consts = reinterpret_cast<PyCodeObject*>(code)->co_consts;
  for (Py_ssize_t i = 0; consts != nullptr && i < PyTuple_GET_SIZE(consts); ++i) {
    PyObject* item = PyTuple_GET_ITEM(consts, i);
    if (PyCode_Check(item)) AddGenuine(item, globals);
  }
}

void PythonFacts::Bind(const std::vector<std::string>& names, const py::list& chain,
                       const py::list& benign_wraps) {
  std::vector<Watched> watched;
  py::dict modules = py::reinterpret_borrow<py::dict>(PyImport_GetModuleDict());
  for (const std::string& name : names) {
    Watched entry{name, py::object(), py::object(), {}};
    if (modules.contains(name)) {
      entry.module = modules[py::str(name)];
      PyObject* key;
      PyObject* value;
      Py_ssize_t position = 0;
      while (PyDict_Next(modules.ptr(), &position, &key, &value)) {
        if (value == entry.module.ptr() && PyUnicode_Check(key) &&
            PyUnicode_CompareWithASCIIString(key, name.c_str()) == 0) {
          entry.module_key = py::reinterpret_borrow<py::object>(key);
        }
      }
      if (!py::hasattr(entry.module, "__dict__")) continue;
      entry.dict = entry.module.attr("__dict__");
    } else {
      const size_t dot = name.rfind('.');
      if (dot == std::string::npos || !modules.contains(name.substr(0, dot))) continue;
      py::object owner = modules[py::str(name.substr(0, dot))];
      py::object type = py::getattr(owner, name.substr(dot + 1).c_str(), py::none());
      if (!PyType_Check(type.ptr())) continue;
      // The type's own dict, not the read-only mappingproxy that __dict__ gives.
      entry.dict =
          py::reinterpret_borrow<py::object>(reinterpret_cast<PyTypeObject*>(type.ptr())->tp_dict);
    }
    if (!PyDict_Check(entry.dict.ptr())) continue;
    PyObject* key;
    PyObject* value;
    Py_ssize_t position = 0;
    while (PyDict_Next(entry.dict.ptr(), &position, &key, &value)) {
      if (!Ignored(key)) {
        entry.entries.push_back({py::reinterpret_borrow<py::object>(key),
                                 py::reinterpret_borrow<py::object>(value),
                                 PrivateScalar(key, value)});
      }
    }
    watched.push_back(std::move(entry));
  }

  benign_.clear();
  for (const py::handle& item : benign_wraps) {
    auto pair = item.cast<py::tuple>();
    if (pair.size() != 2 || !PyCode_Check(pair[1].ptr())) {
      throw py::type_error("bind_integrity: benign_wraps holds (name, code object) pairs");
    }
    benign_.emplace(pair[0].cast<std::string>(), pair[1].ptr());
  }
  benign_refs_ = py::list(benign_wraps);
  genuine_.clear();
  engine_run_ = nullptr;
  for (const py::handle& item : chain) {
    PyObject* code = item.ptr();
    PyObject* globals = nullptr;
    if (PyFunction_Check(code)) {
      globals = PyFunction_GetGlobals(code);
      code = PyFunction_GetCode(code);
    }
    if (!PyCode_Check(code))
      throw py::type_error("bind_integrity: the chain holds functions or code objects");
    AddGenuine(code, globals);
    engine_run_ = code;
  }
  chain_ = py::list(chain);
  watched_ = std::move(watched);
  py::object sys = py::module_::import("sys");
  monitoring_get_tool_ = py::hasattr(sys, "monitoring")
                             ? py::getattr(sys.attr("monitoring"), "get_tool", py::none())
                             : py::none();
  bound_ = true;
}

bool PythonFacts::Changed(const Watched& watched, const Entry& entry, PyObject* now) const {
  if (now == entry.value.ptr()) return false;
  if (entry.private_scalar && (now == nullptr || IsScalar(now))) return false;
  if (now == nullptr || !PyFunction_Check(now) || benign_.empty()) return true;
  // A wrapper that a library is known to put around this very name, around the original.
  auto allowed = benign_.find(watched.name + "." + Utf8(entry.key.ptr()));
  if (allowed == benign_.end() || PyFunction_GetCode(now) != allowed->second) return true;
  PyObject* attributes = reinterpret_cast<PyFunctionObject*>(now)->func_dict;
  if (attributes == nullptr) return true;
  py::str wrapped_name("__wrapped__");
  return FindByContent(attributes, wrapped_name.ptr()) != entry.value.ptr();
}

void PythonFacts::CheckModuleTable(PythonFindings& found) const {
  // One pass over sys.modules, matching the key objects seen at bind time. It stops at the last
  // of them: the watched modules were imported before the bind, so they come early in the dict's
  // order (torch.compile's thousands of modules come after them).
  PyObject* modules = PyImport_GetModuleDict();
  std::unordered_map<PyObject*, const Watched*> by_key;
  for (const Watched& watched : watched_) {
    if (watched.module_key) by_key.emplace(watched.module_key.ptr(), &watched);
  }
  std::unordered_map<const Watched*, PyObject*> now;
  PyObject* key;
  PyObject* value;
  Py_ssize_t position = 0;
  while (!by_key.empty() && PyDict_Next(modules, &position, &key, &value)) {
    if (auto it = by_key.find(key); it != by_key.end()) {
      now.emplace(it->second, value);
      by_key.erase(it);
    }
  }
  for (const Watched& watched : watched_) {
    if (!watched.module) continue;
    auto it = now.find(&watched);
    PyObject* module =
        it != now.end()
            ? it->second
            : (watched.module_key ? FindByContent(modules, watched.module_key.ptr()) : nullptr);
    if (module != watched.module.ptr()) {
      found.patched.push_back(watched.name + " (in sys.modules)");
    }
  }
}

void PythonFacts::CheckPatched(PythonFindings& found) const {
  CheckModuleTable(found);
  auto report = [&](const Watched& watched, const Entry& entry) {
    found.patched.push_back(watched.name + "." + Utf8(entry.key.ptr()));
  };
  for (const Watched& watched : watched_) {
    // Fast path: a dict keeps insertion order, and replacing a value keeps its place, so the
    // snapshot is walked beside the dict, comparing pointers (a hash lookup per name costs
    // ~20 ns, too much for torch's thousands). The first key out of place (a name deleted, or
    // deleted and added again) sends the rest to a map of the dict by key object.
    const auto& entries = watched.entries;
    size_t next = 0;
    PyObject* key;
    PyObject* value;
    Py_ssize_t position = 0;
    while (next < entries.size() && PyDict_Next(watched.dict.ptr(), &position, &key, &value)) {
      if (Ignored(key)) continue;
      if (key != entries[next].key.ptr()) break;
      if (Changed(watched, entries[next], value)) report(watched, entries[next]);
      ++next;
    }
    if (next == entries.size()) continue;
    std::unordered_map<PyObject*, PyObject*> current;
    position = 0;
    while (PyDict_Next(watched.dict.ptr(), &position, &key, &value))
      current.emplace(key, value);
    for (; next < entries.size(); ++next) {
      auto it = current.find(entries[next].key.ptr());
      PyObject* now = it != current.end()
                          ? it->second
                          : FindByContent(watched.dict.ptr(), entries[next].key.ptr());
      if (Changed(watched, entries[next], now)) report(watched, entries[next]);
    }
  }
  std::sort(found.patched.begin(), found.patched.end());
}

void PythonFacts::WalkCallChain(PythonFindings& found) const {
  bool innermost = true;
  bool foreign_seen = false;
  std::string inside;  // a foreign frame with kcoral's own code above it
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());  // new reference
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* globals = PyFrame_GetGlobals(frame);
    auto it = genuine_.find(reinterpret_cast<PyObject*>(code));
    // A genuine code object run with other globals (types.FunctionType(code, fake)) is foreign.
    const bool genuine = it != genuine_.end() && (it->second == nullptr || it->second == globals);
    if (genuine && it->first == engine_run_) {
      found.engine_frame = true;
    } else if (!genuine) {
      if (!foreign_seen) found.first_foreign_frame = DescribeFrame(frame, code);
      if (innermost) {
        found.flags.push_back("call chain: the timer was called by foreign code at " +
                              found.first_foreign_frame + ", not by kcoral.builtins.benchmark");
      }
      foreign_seen = true;
    } else if (foreign_seen && inside.empty()) {
      inside = found.first_foreign_frame;
    }
    Py_DECREF(code);
    Py_XDECREF(globals);
    PyFrameObject* back = found.engine_frame ? nullptr : PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
    innermost = false;
  }
  if (!inside.empty()) {
    found.flags.push_back("call chain: foreign code at " + inside +
                          " runs inside kcoral's benchmark path");
  }
  if (!found.engine_frame) {
    found.flags.push_back(
        "call chain: no genuine Engine._run frame (the benchmark did not run as a run "
        "instruction of the engine)");
  }
  found.direct = found.engine_frame && !foreign_seen;
}

std::vector<std::string> PythonFacts::TracingFlags(std::string_view when) {
  std::vector<std::string> flags;
  const PyThreadState* state = PyThreadState_Get();
  if (state->c_tracefunc != nullptr) {
    flags.push_back("a trace function (sys.settrace or C-level) " + std::string(when));
  }
  if (state->c_profilefunc != nullptr) {
    flags.push_back("a profile function (sys.setprofile or C-level) " + std::string(when));
  }
  return flags;
}

void PythonFacts::CheckMonitoring(PythonFindings& found) const {
  if (!monitoring_get_tool_ || monitoring_get_tool_.is_none()) return;
  for (int tool = 0; tool < 6; ++tool) {  // 6 and 7 are sys.settrace's and sys.setprofile's own
    PyObject* name = PyObject_CallFunction(monitoring_get_tool_.ptr(), "i", tool);
    if (name == nullptr) {
      PyErr_Clear();
      continue;
    }
    if (name != Py_None) {
      found.monitoring_tools.push_back(Utf8(name));
      found.flags.push_back("a sys.monitoring tool is registered: " + Utf8(name));
    }
    Py_DECREF(name);
  }
}

PythonFindings PythonFacts::Check() const {
  timespec start;
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  PythonFindings found;
  found.bound = bound_;
  if (!bound_) {
    found.flags.push_back("the worker never bound its genuine benchmark path (bind_integrity)");
    return found;
  }
  CheckPatched(found);
  for (const std::string& name : found.patched)
    found.flags.push_back("patched: " + name);
  WalkCallChain(found);
  const PyThreadState* state = PyThreadState_Get();
  found.trace = state->c_tracefunc != nullptr;
  found.profile = state->c_profilefunc != nullptr;
  for (std::string& flag : TracingFlags("is set while sealing"))
    found.flags.push_back(flag);
  CheckMonitoring(found);
  found.check_us = MicrosecondsSince(start);
  return found;
}

nlohmann::ordered_json PythonFindings::ToJson() const {
  nlohmann::ordered_json chain = {
      {"direct", direct}, {"engine_frame", engine_frame}, {"first_foreign_frame", nullptr}};
  if (!first_foreign_frame.empty()) chain["first_foreign_frame"] = first_foreign_frame;
  return {{"bound", bound},      {"patched", patched}, {"call_chain", chain},
          {"trace", trace},      {"profile", profile}, {"monitoring_tools", monitoring_tools},
          {"check_us", check_us}};
}

}  // namespace kc::worker
