// kcoral._core: the C++ loop that drives a worker process (DESIGN.md
// "Workers"). It owns the socket to the server, the frame protocol
// (ipc/frame.h), output capture and the workspace switch; the Python engine
// (kcoral/_worker/engine.py) only dispatches instructions to user code and
// encodes values. It also seals benchmark results (result_seal.h) and runs the
// host timer (host_timer.h). This is the only file that binds them to Python.
//
// Teardown order: serve() returns when the server closes the socket; the
// Python entry point then exits the interpreter normally.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "base/memfd.h"
#include "base/remove_tree.h"
#include "base/sealed_result_abi.h"
#include "base/unique_fd.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "ipc/sandbox_spec.h"
#include "worker/host_timer.h"
#include "worker/namespace_init.h"
#include "worker/network_namespaces.h"
#include "worker/output_capture.h"
#include "worker/pid_namespace.h"
#include "worker/process_settings.h"
#include "worker/resource_limits.h"
#include "worker/result_seal.h"
#include "worker/sandbox.h"
#include "worker/seccomp_filter.h"
#include "worker/view_templates.h"
#include "worker/warm_heap.h"

namespace py = pybind11;

namespace kc::worker {
namespace {

// The worker's end of the server socket; set once by Serve().
int g_socket_fd = -1;
// Inside a sandbox, the workspace's path there (the server's run frame names
// the host path); empty when unsandboxed.
std::string g_sandbox_workspace;

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.message());
}

// The process's one sealer: the seal capsule is a plain C function and must reach it. Leaked
// on purpose (result_seal.h: it holds Python references and the key until exit).
ResultSealer& Sealer() {
  static ResultSealer* sealer = new ResultSealer();
  return *sealer;
}

// The capsule's function (sealed_result_abi.h): kcoral._native hands over its result here.
PyObject* SealResultFromNative(const char* result_json, size_t length) {
  try {
    auto result = nlohmann::ordered_json::parse(result_json, result_json + length, nullptr,
                                                /*allow_exceptions=*/false);
    if (result.is_discarded()) {
      PyErr_SetString(PyExc_ValueError, "seal_result: the result is not JSON");
      return nullptr;
    }
    return Sealer().Seal(std::move(result)).release().ptr();
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  }
  return nullptr;
}

static_assert(std::is_same_v<decltype(&SealResultFromNative), SealResultFn>);

py::dict HostBenchmark(const py::object& fn, const py::tuple& args, std::optional<int64_t> warmup,
                       std::optional<int64_t> repeat, double warmup_ms, double repeat_ms) {
  std::vector<std::string> flags = ResultSealer::TracingFlags("was set when the timer started");
  if (Sealer().gpu_worker()) {
    flags.push_back("the host timer ran on a GPU worker: this is wall time, not device time");
  }
  StatusOr<nlohmann::ordered_json> result =
      RunHostBenchmark(fn, args, {warmup, repeat, warmup_ms, repeat_ms});
  if (!result.ok()) throw py::value_error(result.status().message());
  (*result)["integrity"] = {{"defences", {{"sealed", true}}}, {"flags", flags}};
  return Sealer().Seal(std::move(result).value());
}

void SendProgress(ipc::MessageType type, int index) {
  ThrowIfError(ipc::SendFrame(g_socket_fd, ipc::Encode(type, ipc::ProgressMessage{index})));
}

void SendSignal(ipc::MessageType type) {
  ThrowIfError(ipc::SendFrame(g_socket_fd, ipc::Signal(type)));
}

// Writes the outcome JSON and the binary segments into two memfds and sends
// them; `meta` (retire, gpu_access_detected_ns) rides in the frame header.
Status SendOutcome(const std::string& outcome_json, const py::list& segments,
                   const py::dict& meta) {
  KC_ASSIGN_OR_RETURN(UniqueFd outcome_fd, MakeMemfd("kcoral-outcome"));
  KC_RETURN_IF_ERROR(WriteAll(outcome_fd.get(), outcome_json));
  KC_ASSIGN_OR_RETURN(UniqueFd parts_fd, MakeMemfd("kcoral-parts"));
  for (const py::handle& segment : segments) {
    py::buffer_info info = py::buffer(py::reinterpret_borrow<py::object>(segment)).request();
    std::string_view bytes(static_cast<const char*>(info.ptr),
                           static_cast<size_t>(info.size * info.itemsize));
    KC_RETURN_IF_ERROR(WriteAll(parts_fd.get(), bytes));
  }
  // The server maps the segments and writes them to the socket as they are,
  // so they must not change after this (it refuses an unsealed memfd).
  KC_RETURN_IF_ERROR(SealMemfd(parts_fd.get()));
  ipc::OutcomeMessage outcome;
  if (meta.contains("retire")) outcome.retire = meta["retire"].cast<std::string>();
  if (meta.contains("gpu_access_detected_ns")) {
    outcome.gpu_access_detected_ns = meta["gpu_access_detected_ns"].cast<int64_t>();
  }
  return ipc::SendFrame(g_socket_fd, ipc::Encode(outcome), {outcome_fd.get(), parts_fd.get()});
}

// A reused sandboxed worker's /tmp and /dev/shm are its own tmpfs: what one
// request left there must not reach the next. After the answer, off its path.
void ClearPrivateTemporaries() {
  for (const char* dir : {"/tmp", "/dev/shm"}) {
    UniqueFd fd(::open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.valid()) RemoveContents(fd.get());
  }
}

// Runs one `run` frame: capture on, cwd = workspace, engine.run, capture off.
Status RunOne(ipc::Frame& frame, py::object& engine) {
  KC_ASSIGN_OR_RETURN(ipc::RunMessage run, ipc::DecodeRun(frame));
  const std::vector<std::string>& blob_names = run.blobs;
  if (frame.fds.size() != 3 + blob_names.size()) return InternalError("run frame: fd count");
  KC_ASSIGN_OR_RETURN(std::string program_json, ReadWholeFd(frame.fds[0].get()));
  frame.fds[0].Reset();  // user code must not find it open

  py::dict blobs;
  for (size_t i = 0; i < blob_names.size(); ++i) {
    // Python maps the sealed memfd and owns the descriptor from here on.
    blobs[py::str(blob_names[i])] = frame.fds[3 + i].Release();
  }
  py::dict limits;
  limits["output_limit_bytes"] = run.output_limit_bytes;
  limits["max_response_bytes"] = run.max_response_bytes;
  limits["request_id"] = run.request_id;
  // Seals made from here on name this request; the binding of "genuine" is frozen.
  Sealer().RunStarted(run.request_id);
  struct RunEnd {
    ~RunEnd() { Sealer().RunFinished(); }
  } run_end;

  const std::string workspace = g_sandbox_workspace.empty() ? run.workspace : g_sandbox_workspace;
  if (::chdir(workspace.c_str()) != 0) return InternalError("cannot enter workspace " + workspace);

  py::object result;
  {
    OutputCapture capture(frame.fds[1].get(), frame.fds[2].get());
    frame.fds[1].Reset();
    frame.fds[2].Reset();
    result = engine.attr("run")(program_json, blobs, limits, workspace);
    // Python's own buffers go out before the descriptors switch back.
    py::module_::import("sys").attr("stdout").attr("flush")();
    py::module_::import("sys").attr("stderr").attr("flush")();
    capture.Restore();
  }
  if (::chdir("/") != 0) return InternalError("cannot leave the workspace");
  auto triple = result.cast<py::tuple>();
  Status sent = SendOutcome(triple[0].cast<std::string>(), triple[1].cast<py::list>(),
                            triple[2].cast<py::dict>());
  if (!g_sandbox_workspace.empty()) ClearPrivateTemporaries();  // the server empties the workspace
  return sent;
}

// GPU workers set up their device in two steps, each when the server says so (house-keeping,
// pool/gpu_arbiter.h): `initialize` (the context) and `warm_up` (the first kernels).
Status SetUpDevice(py::object& engine, const char* step, ipc::MessageType done) {
  try {
    engine.attr(step)();
  } catch (const py::error_already_set& error) {
    return ipc::SendFrame(g_socket_fd, ipc::Encode(ipc::MessageType::kInitializeFailed,
                                                   ipc::FailedMessage{error.what()}));
  }
  return ipc::SendFrame(g_socket_fd, ipc::Signal(done));
}

// Sends `ask` and waits (without the GIL) for the server's `granted`.
void AskServer(ipc::MessageType ask, ipc::MessageType granted) {
  SendSignal(ask);
  StatusOr<ipc::Frame> frame = [] {
    py::gil_scoped_release unlocked;
    return ipc::ReceiveFrame(g_socket_fd);
  }();
  ThrowIfError(frame.status());
  if (ipc::TypeOf(*frame) != granted) {
    throw std::runtime_error("expected " + std::string(ipc::WordOf(granted)) + ", got " +
                             ipc::QuotedWord(*frame));
  }
}

// Blocks until the server grants the GPU lease.
void AcquireLease() {
  AskServer(ipc::MessageType::kLeaseAcquire, ipc::MessageType::kLeaseGranted);
}

// A timing span begins: blocks until the server grants it (under outside-spans,
// once no CUDA context is being created or destroyed on the GPU; gpu_arbiter.h).
void BeginTimingSpan() {
  AskServer(ipc::MessageType::kSpanBegin, ipc::MessageType::kSpanGranted);
}

// What the zygote keeps for the workers it forks (view_templates.h,
// network_namespaces.h); its Python is single-threaded.
ViewTemplates& ZygoteViews() {
  static ViewTemplates views;
  return views;
}

NetworkNamespaces& ZygoteNetworks() {
  static NetworkNamespaces networks;
  return networks;
}

// `spec` with what only the process about to fork its worker knows: `interpreter_paths` read-only
// before the server's own, the view's template and, with a private network, a lent network
// namespace (ipc/sandbox_spec.h).
ipc::WorkerSpec CompleteSandbox(ipc::WorkerSpec spec,
                                const std::vector<std::string>& interpreter_paths) {
  if (!spec.sandbox) return spec;
  ipc::SandboxSpec& sandbox = *spec.sandbox;
  sandbox.readonly_paths.insert(sandbox.readonly_paths.begin(), interpreter_paths.begin(),
                                interpreter_paths.end());
  ThrowIfError(CompileSeccompFilter());  // once, before the fork: workers only load it
  auto view = ZygoteViews().For(sandbox);
  ThrowIfError(view.status());
  sandbox.view_fd = *view;
  if (sandbox.private_network) {
    auto network = ZygoteNetworks().Acquire();
    ThrowIfError(network.status());
    sandbox.network_fd = *network;
  }
  return spec;
}

std::string EnterSandboxOf(const ipc::WorkerSpec& spec, int socket_fd) {
  if (!spec.sandbox) throw std::runtime_error("enter_sandbox: the spec has no sandbox");
  auto workspace = EnterSandbox(*spec.sandbox, socket_fd);
  ThrowIfError(workspace.status());
  g_sandbox_workspace = *workspace;
  return *workspace;
}

// This process's settings (process_settings.h).
ProcessSettings& Settings() {
  static ProcessSettings settings;
  return settings;
}

// Reads the start message the server sends first on `socket_fd` and keeps its settings; returns
// the worker's spec, or nullopt for the zygote (ipc/messages.h).
std::optional<ipc::WorkerSpec> ReceiveStart(int socket_fd) {
  // Refused before reading: a second call must not take a frame meant for Serve().
  if (Settings().is_set()) {
    throw std::runtime_error("receive_start: this process's settings are set already");
  }
  StatusOr<ipc::Frame> frame = [socket_fd] {
    py::gil_scoped_release unlocked;
    return ipc::ReceiveFrame(socket_fd);
  }();
  ThrowIfError(frame.status());
  StatusOr<ipc::StartMessage> start = ipc::DecodeStart(*frame);
  ThrowIfError(start.status());
  ThrowIfError(Settings().Set(std::move(start->settings)));
  return std::move(start->worker);
}

// Settings for a process that no server started, from keyword arguments named as the wire's
// fields (ipc/worker_settings.h).
void UseWorkerSettings(const py::kwargs& fields) {
  auto json =
      nlohmann::json::parse(py::module_::import("json").attr("dumps")(fields).cast<std::string>(),
                            nullptr, /*allow_exceptions=*/false);
  StatusOr<ipc::WorkerSettings> settings = ipc::DecodeWorkerSettings(json);
  ThrowIfError(settings.status());
  ThrowIfError(Settings().Set(std::move(settings).value()));
}

void Serve(py::object engine, int socket_fd) {
  g_socket_fd = socket_fd;
  ::fcntl(g_socket_fd, F_SETFD, FD_CLOEXEC);  // user subprocesses must not inherit it
  // The worker dies with its parent (the zygote, the sandbox's pid 1, or the
  // server: STYLE.md §6), even if that is SIGKILLed; if it is already gone,
  // getppid() no longer names it.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(0);
  // Orphaned descendants of user code stay below us, where KillTree finds them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const ipc::WorkerSettings& settings = Settings().get();
  ThrowIfError(LimitResources(settings.address_space_mbytes));

  py::dict describe = engine.attr("describe")();
  ipc::ReadyMessage ready;
  ready.pid = ::getpid();
  ready.describe = nlohmann::json::parse(
      py::module_::import("json").attr("dumps")(describe).cast<std::string>());
  // One key per worker process (a forked worker makes its own), known only to C++ and the server.
  ThrowIfError(Sealer().MakeKey());
  Sealer().SetWorkerDevice(settings.device);
  ready.seal_key = Sealer().KeyHex();
  nlohmann::json header = ipc::Encode(ready);
  Status sent = ipc::SendFrame(g_socket_fd, header);
  // Freed heap must not keep the key.
  ::explicit_bzero(ready.seal_key.data(), ready.seal_key.size());
  std::string& key_hex = header["seal_key"].get_ref<std::string&>();
  ::explicit_bzero(key_hex.data(), key_hex.size());
  ThrowIfError(sent);

  for (;;) {
    StatusOr<ipc::Frame> frame = [] {
      py::gil_scoped_release unlocked;  // idle: let other Python threads run
      return ipc::ReceiveFrame(g_socket_fd);
    }();
    if (!frame.ok()) {
      if (frame.status().code() == StatusCode::kUnavailable) return;  // server closed: exit
      ThrowIfError(frame.status());
    }
    if (ipc::TypeOf(*frame) == ipc::MessageType::kInitialize) {
      ThrowIfError(SetUpDevice(engine, "initialize", ipc::MessageType::kInitialized));
      continue;
    }
    if (ipc::TypeOf(*frame) == ipc::MessageType::kWarmUp) {
      ThrowIfError(SetUpDevice(engine, "warm_up", ipc::MessageType::kWarmedUp));
      continue;
    }
    ThrowIfError(RunOne(*frame, engine));
  }
}

}  // namespace
}  // namespace kc::worker

PYBIND11_MODULE(_core, m) {
  m.doc() = "KCoral worker core: IPC with the server, output capture, workspace switch.";
  m.def("serve", &kc::worker::Serve, py::arg("engine"), py::arg("socket_fd"),
        "Serve programs from the server on `socket_fd` until it closes the socket.");
  // A worker's spec (ipc/sandbox_spec.h), opaque to Python but for what its code branches on.
  py::class_<kc::ipc::WorkerSpec>(m, "WorkerSpec")
      .def_property_readonly(
          "workspace", [](const kc::ipc::WorkerSpec& spec) { return spec.workspace; },
          "The worker's workspace on the host.")
      .def_property_readonly(
          "sandboxed", [](const kc::ipc::WorkerSpec& spec) { return spec.sandbox.has_value(); },
          "Whether the worker confines itself (enter_sandbox).")
      .def_property_readonly(
          "network_fd",
          [](const kc::ipc::WorkerSpec& spec) {
            return spec.sandbox ? spec.sandbox->network_fd : -1;
          },
          "The network namespace lent to the worker by complete_sandbox; -1: none.");
  // This process's settings (ipc/worker_settings.h), read-only.
  py::class_<kc::ipc::WorkerSettings>(m, "WorkerSettings")
      .def_property_readonly(
          "device",
          [](const kc::ipc::WorkerSettings& s) { return std::string(kc::ipc::TextOf(s.device)); },
          "\"cpu\" or \"gpu\".")
      .def_property_readonly(
          "cpu_execution",
          [](const kc::ipc::WorkerSettings& s) {
            return std::string(kc::ipc::TextOf(s.cpu_execution));
          },
          "CPU workers: \"host\" (run uploads) or \"reference\" (refuse them).")
      .def_readonly("address_space_mbytes", &kc::ipc::WorkerSettings::address_space_mbytes,
                    "A CPU worker's address-space cap; 0: none.")
      .def_readonly("heap_bytes", &kc::ipc::WorkerSettings::heap_bytes,
                    "Heap faulted in before the worker is ready (warm_heap).")
      .def_readonly("gpu_arch", &kc::ipc::WorkerSettings::gpu_arch,
                    "The GPU's target (\"sm_90a\"); empty on CPU.")
      .def_readonly("max_libraries", &kc::ipc::WorkerSettings::max_libraries,
                    "Uploaded libraries a reused worker may hold before it is retired.")
      .def_readonly("preload", &kc::ipc::WorkerSettings::preload,
                    "Modules the zygote imports; None: its device's default.");
  m.def("receive_start", &kc::worker::ReceiveStart, py::arg("socket_fd"),
        "Read the server's start message from `socket_fd` (first, before anything reads "
        "worker_settings()); keeps its settings for worker_settings() and returns the "
        "WorkerSpec of a worker started without a zygote, None for the zygote.");
  m.def(
      "worker_settings", [] { return kc::worker::Settings().get(); },
      "This process's settings: from its start message (a forked worker has its zygote's), "
      "else the defaults.");
  m.def("use_worker_settings", &kc::worker::UseWorkerSettings,
        "Settings for a process no server started (bench/seal_cost.py), as keyword arguments "
        "named as in ipc/worker_settings.h; refused once settings are set.");
  m.def("complete_sandbox", &kc::worker::CompleteSandbox, py::arg("spec"),
        py::arg("interpreter_paths"),
        "The spec with what this process adds before it forks the worker: the interpreter's "
        "paths read-only, the view's template and, with a private network, a lent network "
        "namespace; unchanged without a sandbox.");
  m.def("enter_sandbox", &kc::worker::EnterSandboxOf, py::arg("spec"), py::arg("socket_fd"),
        "Confine this process as the completed spec says (worker/sandbox.h); returns the "
        "workspace path inside.");
  m.def(
      "unshare_pid_namespace",
      [] { kc::worker::ThrowIfError(kc::worker::UnsharePidNamespaceForNextChild()); },
      "The next child of this process starts a new PID namespace, as its pid 1.");
  m.def(
      "restore_pid_namespace", [] { kc::worker::ThrowIfError(kc::worker::RestorePidNamespace()); },
      "Children after this one are born in this process's own PID namespace again.");
  m.def(
      "start_namespace_init",
      [] {
        auto init = kc::worker::StartNamespaceInit();
        kc::worker::ThrowIfError(init.status());
        return *init;
      },
      "Start pid 1 of the new PID namespace (worker/namespace_init.h); returns its pid.");
  m.def("forget_namespace_init", &kc::worker::ForgetNamespaceInit, py::arg("init_pid"),
        "Free the stack of a namespace init that has been reaped.");
  m.def(
      "release_network_namespace", [](int fd) { kc::worker::ZygoteNetworks().Release(fd); },
      py::arg("network_fd"),
      "The worker lent this network namespace is gone (its PID namespace has died).");
  m.def(
      "warm_heap", [](size_t bytes) { kc::worker::WarmHeap(bytes); }, py::arg("bytes"),
      "Fault in `bytes` of the heap and keep them for the program's allocations "
      "(worker/warm_heap.h).");
  m.def("acquire_lease", &kc::worker::AcquireLease, "Block until the server grants the GPU lease.");
  m.def("begin_span", &kc::worker::BeginTimingSpan,
        "A timing span begins (under the lease): block until the server grants it.");
  m.def(
      "end_span", [] { kc::worker::SendSignal(kc::ipc::MessageType::kSpanEnd); },
      "The timing span is over (no round trip).");
  m.def(
      "release_lease", [] { kc::worker::SendSignal(kc::ipc::MessageType::kLeaseRelease); },
      "Give the GPU lease back (no round trip).");
  m.def("instruction_started", [](int index) {
    kc::worker::ThrowIfError(kc::worker::Sealer().InstructionStarted(index));
    kc::worker::SendProgress(kc::ipc::MessageType::kInstruction, index);
  });
  m.def("instruction_finished", [](int index) {
    kc::worker::ThrowIfError(kc::worker::Sealer().InstructionFinished(index));
    kc::worker::SendProgress(kc::ipc::MessageType::kInstructionEnd, index);
  });
  // The zygote's and a failing worker's messages (Python sends them on its own sockets).
  m.def(
      "ready_message",
      [](int64_t pid) {
        return py::bytes(kc::ipc::Encode(kc::ipc::ReadyMessage{pid, {}, ""}).dump());
      },
      py::arg("pid"), "The zygote's ready message (ipc/messages.h), as bytes to send.");
  m.def(
      "forked_message",
      [](int64_t pid, std::optional<int64_t> namespace_init) {
        return py::bytes(kc::ipc::Encode(kc::ipc::ForkedMessage{pid, namespace_init}).dump());
      },
      py::arg("pid"), py::arg("namespace_init") = py::none(),
      "The zygote's answer to a fork: the worker's pid and, sandboxed, its namespace's pid 1.");
  m.def(
      "failed_message",
      [](const std::string& error) {
        return py::bytes(
            kc::ipc::Encode(kc::ipc::MessageType::kFailed, kc::ipc::FailedMessage{error}).dump());
      },
      py::arg("error"), "A worker's `failed` message: it cannot serve, and why.");
  m.def(
      "fork_spec",
      [](const py::bytes& header) {
        kc::ipc::Frame frame;
        frame.header = nlohmann::json::parse(std::string(header), nullptr, false);
        auto fork = kc::ipc::DecodeFork(frame);
        kc::worker::ThrowIfError(fork.status());
        return std::move(fork).value().worker;
      },
      py::arg("header"), "The WorkerSpec of a received fork message; RuntimeError otherwise.");
  m.def(
      "bind_integrity",
      [](const std::vector<std::string>& modules, const py::list& call_chain,
         const py::list& benign_wraps) {
        kc::worker::ThrowIfError(kc::worker::Sealer().Bind(modules, call_chain, benign_wraps));
      },
      py::arg("modules"), py::arg("call_chain"), py::arg("benign_wraps") = py::list(),
      "Snapshot what sealed results compare against (worker/python_facts.h); refused once a "
      "request has started.");
  m.def("host_benchmark", &kc::worker::HostBenchmark, py::arg("fn"), py::arg("args"),
        py::arg("warmup") = py::none(), py::arg("repeat") = py::none(), py::arg("warmup_ms") = 25.0,
        py::arg("repeat_ms") = 100.0,
        "Time fn(*args) on the host (worker/host_timer.h); returns the sealed result dict.");
  m.attr("seal_result") = py::capsule(reinterpret_cast<void*>(&kc::worker::SealResultFromNative),
                                      kc::kSealResultCapsule);
}
