// PythonFacts: the Python-level facts a sealed benchmark result reports
// (docs/benchmark-integrity.md "Sealed results"): what user code may have changed around kcoral's
// timer, checked in C++ at seal time against what was bound when the worker started, before any
// upload ran.
//
//   facts.Bind({"kcoral.builtins", "statistics", "torch.Tensor"}, chain);  // worker start
//   PythonFindings found = facts.Check();                                  // each seal
//
// Bind snapshots every attribute of each named module that is already imported (a name that is
// no module but "module.Type" snapshots that type's dict), holding strong references, and keeps
// the code objects of kcoral's benchmark path. Check reports:
//   - patched: "module.attr" whose object changed or disappeared (added names are not reported,
//     nor a private number or flag changing to another, nor a library's known wrapper around
//     the original: see Bind), and modules replaced in sys.modules;
//   - the call chain: the Python frames of this thread from the innermost outward, up to the
//     engine's genuine Engine._run frame. The timer's own Python caller must be kcoral code
//     (kcoral.builtins.benchmark); callers in the uploaded module above it are normal and only
//     reported; foreign code between two kcoral frames, a timer called by foreign code, or no
//     Engine._run frame at all is flagged;
//   - a trace or profile function (sys.settrace/setprofile or the C-level ones) on this thread,
//     and sys.monitoring tools (Python 3.12+).
//
// Check runs no Python code of the program's: dicts are read by iteration and keys compared by
// identity or as exact strings, never by a lookup that could call a planted key's __eq__ (which
// could put a patched name back for the length of the check).
//
// Needs the GIL for every call. Not thread-safe beyond that. The object lives until exit and is
// never destroyed (it holds Python references that must not be released after finalization).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace kc::worker {

struct PythonFindings {
  bool bound = false;
  std::vector<std::string> patched;  // sorted
  bool direct = false;               // every frame up to Engine._run is kcoral's own
  std::string first_foreign_frame;   // "file:line name" of the first other frame; empty if none
  bool engine_frame = false;         // a genuine Engine._run frame was found
  bool trace = false;
  bool profile = false;
  std::vector<std::string> monitoring_tools;
  std::vector<std::string> flags;  // one sentence per finding that makes a result untrusted
  double check_us = 0;             // what Check cost

  // integrity.python of a sealed result.
  nlohmann::ordered_json ToJson() const;
};

class PythonFacts {
 public:
  // `names`: modules, or "module.Type" for a type's dict. `chain`: functions (code and globals
  // are both checked) or code objects of kcoral's benchmark path; the last one is the engine's
  // Engine._run, where the walk stops. `benign_wraps`: ("module.attr", code) pairs: that name
  // may be replaced by a function with that code whose __wrapped__ is the original (a library's
  // own behaviour-preserving wrapper, e.g. torch._dynamo's around torch.manual_seed). Replaces
  // any earlier binding.
  void Bind(const std::vector<std::string>& names, const pybind11::list& chain,
            const pybind11::list& benign_wraps);

  PythonFindings Check() const;

  // Flags for a trace or profile function set on this thread now; `when` ends the sentence.
  static std::vector<std::string> TracingFlags(std::string_view when);

 private:
  struct Entry {
    pybind11::object key;
    pybind11::object value;
    // A private number or flag (a library's cache or state): a change to another such value is
    // not reported.
    bool private_scalar;
  };
  struct Watched {
    std::string name;
    pybind11::object module;      // null for a type's dict
    pybind11::object module_key;  // the key object naming `module` in sys.modules
    pybind11::object dict;
    std::vector<Entry> entries;  // in the dict's order at bind time
  };

  void AddGenuine(PyObject* code, PyObject* globals);
  // Whether `now` (null: the name is gone) counts as a change of `entry`.
  bool Changed(const Watched& watched, const Entry& entry, PyObject* now) const;
  void CheckModuleTable(PythonFindings& found) const;
  void CheckPatched(PythonFindings& found) const;
  void WalkCallChain(PythonFindings& found) const;
  void CheckMonitoring(PythonFindings& found) const;

  bool bound_ = false;
  std::vector<Watched> watched_;
  std::unordered_map<PyObject*, PyObject*> genuine_;   // code -> its globals (nullptr: any)
  PyObject* engine_run_ = nullptr;                     // a code object in genuine_
  pybind11::list chain_;                               // owns the references above
  std::unordered_map<std::string, PyObject*> benign_;  // "module.attr" -> allowed wrapper code
  pybind11::list benign_refs_;                         // owns those code objects
  pybind11::object monitoring_get_tool_;               // sys.monitoring.get_tool, as bound
};

}  // namespace kc::worker
