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

from kcoral import _core
from kcoral._worker import tensors
from kcoral._worker.errors import InstructionFailure
from kcoral._worker.libraries import library_function, load_library


def make_runtime(device: str):
    if device == "cpu":
        return CpuRuntime(host_execution=_core.worker_settings().cpu_execution == "host")
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
    device = "cpu"
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

    def warm_up(self) -> None:
        """Nothing to warm up on a CPU."""

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
