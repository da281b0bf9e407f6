#include "native/python_stack.h"

#include <Python.h>
#include <frameobject.h>

#include <string>
#include <vector>

namespace kc::native {
namespace {

// Deep stacks keep their innermost frames; the rest is summarised as "...".
constexpr size_t kMaxFrames = 64;

struct FrameSummary {
  std::string file;
  std::string function;
  int line = 0;
};

// A str attribute of `object` as UTF-8, or "?" (any error is cleared).
std::string StringAttribute(PyObject* object, const char* name) {
  std::string text = "?";
  PyObject* value = PyObject_GetAttrString(object, name);
  if (value != nullptr && PyUnicode_Check(value)) {
    if (const char* utf8 = PyUnicode_AsUTF8(value)) text = utf8;
  }
  Py_XDECREF(value);
  PyErr_Clear();
  return text;
}

// Innermost first.
std::vector<FrameSummary> CollectFrames(bool* truncated) {
  std::vector<FrameSummary> frames;
  *truncated = false;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr) {
    if (frames.size() == kMaxFrames) {
      *truncated = true;
      Py_DECREF(frame);
      break;
    }
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference, never null
    frames.push_back({StringAttribute(reinterpret_cast<PyObject*>(code), "co_filename"),
                      StringAttribute(reinterpret_cast<PyObject*>(code), "co_name"),
                      PyFrame_GetLineNumber(frame)});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or null
    Py_DECREF(frame);
    frame = back;
  }
  return frames;
}

std::string Location(const FrameSummary& frame) {
  return frame.file + ":" + std::to_string(frame.line) + " in " + frame.function;
}

}  // namespace

PythonStack DescribePythonStack(std::string_view preferred_prefix) {
  // The CUDA call may come from C code that is about to raise: keep its error state intact.
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);

  bool truncated = false;
  std::vector<FrameSummary> frames = CollectFrames(&truncated);
  PythonStack result;
  result.location = "<native>";
  if (!frames.empty()) {
    result.location = Location(frames.front());
    for (const FrameSummary& frame : frames) {
      if (std::string_view(frame.file).starts_with(preferred_prefix)) {
        result.location = Location(frame);
        break;
      }
    }
    if (truncated) result.stack = "  ...\n";
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      result.stack += "  File \"" + it->file + "\", line " + std::to_string(it->line) + ", in " +
                      it->function + "\n";
    }
  }

  PyErr_Restore(type, value, traceback);
  return result;
}

}  // namespace kc::native
