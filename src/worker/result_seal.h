// ResultSealer: finishes every benchmark result inside the worker (docs/benchmark-integrity.md
// "Sealed results"). A timer in C++ (kcoral._native's CUPTI timer through the capsule of
// sealed_result_abi.h, or the host timer of host_timer.h) hands over its result as JSON; the
// sealer adds integrity.request_id, .instruction_index, .scope, the Python-level facts
// (python_facts.h) and their flags, writes `record` (the whole result in the wire value
// encoding, wire_value.h, as compact JSON) and `seal` (hex HMAC-SHA256 of the record under this
// worker's key), and returns the plain dict user code gets. The server checks the seal with the
// key from the ready frame and replaces what user code returned by the record.
//
// Lifetime, in the worker's order:
//   sealer.MakeKey();                          // Serve(), before the ready frame
//   sealer.Bind(modules, chain);               // bootstrap; again at GPU initialize
//   sealer.RunStarted(request_id);             // each run frame; Bind is refused from now on
//   sealer.InstructionStarted(i) ... Seal(result) ... InstructionFinished(i)
//   sealer.RunFinished();
// Needs the GIL for every call (the GIL is what orders them). Never destroyed: it holds Python
// references and the key, both needed until exit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "ipc/worker_settings.h"
#include "worker/python_facts.h"
#include "worker/seal_key.h"

namespace kc::worker {

class ResultSealer {
 public:
  Status MakeKey();
  // The key in hex for the ready frame; the caller wipes the string once it is sent.
  std::string KeyHex() const;

  // kFailedPrecondition once a request has started: user code must not redefine "genuine".
  Status Bind(const std::vector<std::string>& names, const pybind11::list& chain,
              const pybind11::list& benign_wraps);

  // The worker's device from its settings (process_settings.h), set by Serve() before any upload.
  void SetWorkerDevice(ipc::WorkerDevice device) { device_ = device; }
  bool gpu_worker() const { return device_ == ipc::WorkerDevice::kGpu; }

  void RunStarted(std::string request_id);
  void RunFinished();
  // The engine numbers instructions 0, 1, ... and closes each before the next; anything else
  // (user code calling these to move a record's provenance) is kFailedPrecondition.
  Status InstructionStarted(int index);
  Status InstructionFinished(int index);

  // `result`: an object; its "integrity" object (made if missing) may hold "defences", "flags",
  // "conditions" and other facts; the sealed "flags" and "conditions" are always arrays. Returns
  // the sealed dict. Throws (py::error_already_set, std::exception) on failure; the callers turn
  // that into a Python exception.
  pybind11::dict Seal(nlohmann::ordered_json result);

  // For the host timer: flags for tracing found when a benchmark starts.
  static std::vector<std::string> TracingFlags(std::string_view when) {
    return PythonFacts::TracingFlags(when);
  }

 private:
  std::unique_ptr<SealKey> key_;
  bool key_for_server_ = false;
  ipc::WorkerDevice device_ = ipc::WorkerDevice::kCpu;
  PythonFacts facts_;
  bool run_started_ = false;
  std::string request_id_;  // of the run frame being served; empty between runs
  int last_instruction_ = -1;
  bool instruction_open_ = false;
};

// The sentence integrity.scope carries: what the seal protects, and what it cannot.
extern const char* const kSealScope;

}  // namespace kc::worker
