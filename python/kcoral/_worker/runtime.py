"""Device runtimes: what differs between a CPU and a GPU worker.

The engine asks the runtime to place each instruction (GPU lease), to turn
uploaded bytes into tensors and libraries, to call cpu_only functions, and to
export returned tensors.

CPU servers run in one of two modes (`kcoral server --cpu-execution`):
  host       (default) tensors become host arrays (torch CPU tensors when
             torch is installed, else numpy), libraries load with TVM-FFI;
  reference  the reference server's behaviour: tensor and library uploads
             fail with kind `unavailable`.
"""

import os

from kcoral._worker.errors import InstructionFailure
from kcoral._worker import tensors


def make_runtime(device: str):
    if device == "cpu":
        return CpuRuntime(host_execution=os.environ.get("KCORAL_CPU_EXECUTION", "host") == "host")
    if device == "gpu":
        from kcoral._worker.gpu_runtime import GpuRuntime

        return GpuRuntime()
    raise SystemExit(f"kcoral worker: unsupported device {device!r}")


def _library_versions() -> dict:
    """Versions from package metadata: importing tvm_ffi here would cost every
    fresh worker ~0.35 s of CPU (bench/roundtrip.py)."""
    from importlib import metadata

    versions = {}
    try:
        versions["tvm_ffi"] = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        pass
    return versions


class CpuRuntime:
    retire_reason = None  # a CPU worker never asks itself; engine.py adds library_limit for any

    def __init__(self, host_execution: bool):
        self.host_execution = host_execution
        self._versions = _library_versions()

    def target(self) -> dict:
        return {}

    def versions(self) -> dict:
        return dict(self._versions)

    def initialize(self) -> None:
        """Nothing to set up on a CPU."""

    def place(self, instruction: dict, request) -> None:
        """A CPU server has no GPU lease."""

    def finish(self, request):
        """End-of-request clean-up; returns an exception to report, or None."""
        return None

    def _require_host_execution(self, what: str) -> None:
        if not self.host_execution:
            raise InstructionFailure("unavailable", f"{what} uploads need a GPU server")

    def upload_tensor(self, blob, dtype: str, shape: list):
        self._require_host_execution("tensor")
        return tensors.host_tensor(blob, dtype, shape)

    def load_library(self, blob, sha256: str, request):
        self._require_host_execution("library")
        return load_library(blob, sha256)

    def library_function(self, module, name: str):
        kind = "runtime" if self.host_execution else "unavailable"
        return library_function(module, name, kind)

    def call_cpu_only(self, fn, args: list, request):
        return fn(*args)

    def export_tensor(self, value):
        return tensors.export_host_tensor(value)


# Libraries this process loaded, by SHA-256. Each stays loaded for the
# process's life, and so does the descriptor it was loaded from: glibc knows
# a library by its path and hands back the loaded one for a path it has seen,
# so /proc/self/fd/N must never name another library later.
_loaded: dict[str, object] = {}
# Past this many, a reused worker is retired after its request (engine.py):
# each library holds a descriptor and its mapping for the process's life.
_MAX_LIBRARIES = int(os.environ.get("KCORAL_MAX_LIBRARIES_PER_WORKER", "256"))


def libraries_full() -> bool:
    return len(_loaded) >= _MAX_LIBRARIES


def load_library(blob, sha256: str):
    """Loads uploaded library bytes with TVM-FFI (spec/protocol.md §6),
    straight from the blob's sealed memfd: nothing is written to disk.

    TVM-FFI picks a loader by the file name's suffix, which /proc/self/fd/N
    lacks, so its loader for shared libraries is called by name."""
    if sha256 in _loaded:  # the same bytes: glibc would return this one anyway
        return _loaded[sha256]
    try:
        import tvm_ffi
    except ImportError:
        raise InstructionFailure("unavailable", "library uploads need apache-tvm-ffi on the server") from None
    loader = tvm_ffi.get_global_func("ffi.Module.load_from_file.so", allow_missing=True)
    if loader is None:
        raise InstructionFailure("unavailable", "this apache-tvm-ffi has no loader for shared libraries")
    fd = os.dup(blob.fd)  # never closed (see _loaded); the blob's own one closes with the request
    try:
        module = loader(f"/proc/self/fd/{fd}", "so")
        tvm_ffi._ffi_api.ModuleGlobalsAdd(module)  # as load_module does: the library stays loaded
    except Exception as exc:  # noqa: BLE001 - any loader failure is the upload's fault
        os.close(fd)  # nothing was loaded from it
        raise InstructionFailure("compile", f"cannot load the uploaded library: {exc}") from exc
    _loaded[sha256] = module
    return module


def library_function(module, name: str, not_a_library_kind: str):
    """get_function on a library handle: `compile` when the export is missing."""
    if not hasattr(module, "implements_function"):
        raise InstructionFailure(not_a_library_kind, f"cannot select {name!r}: the handle is not a module or library")
    if not module.implements_function(name):
        raise InstructionFailure("compile", f"the uploaded library exports no function {name!r}")
    return _LibraryFunction(module, module.get_function(name))


class _LibraryFunction:
    """A library function that keeps its library loaded while the handle lives."""

    def __init__(self, module, function):
        self._module = module
        self._function = function

    def __call__(self, *args):
        return self._function(*args)
