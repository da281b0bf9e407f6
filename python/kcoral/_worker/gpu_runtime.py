"""GPU runtime: torch CUDA tensors, TVM-FFI libraries, GPU lease placement and
the cpu_only watch (spec/protocol.md §2.4-§2.6, spec/server.md §2.6).

The worker is pinned to one GPU by the server (CUDA_VISIBLE_DEVICES=<UUID>),
so its device is always "cuda". The lease is arbitrated by the server; this
module only asks for it (kcoral._core.acquire_lease) and gives it back.
"""

import warnings
from importlib import metadata

from kcoral import _core
from kcoral._worker import tensors
from kcoral._worker.errors import InstructionFailure
from kcoral._worker.handles import CpuOnlyFunction
from kcoral._worker.libraries import library_function, load_library


#: Tensor uploads at least this large go through pinned staging (docs/data-path.md).
STAGED_COPY_BYTES = 8 << 20


def _distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


class GpuRuntime:
    device = "gpu"

    def __init__(self):
        import torch  # already imported by the zygote; CUDA is not initialized yet

        self.torch = torch
        self.held = False
        self.retire_reason = None
        self._native = None

    # -- description and set-up ---------------------------------------------

    def target(self) -> dict:
        arch = _core.worker_settings().gpu_arch
        return {"arch": arch} if arch else {}

    def versions(self) -> dict:
        versions = {"torch": str(self.torch.__version__)}
        if self.torch.version.cuda:
            versions["cuda"] = self.torch.version.cuda
        for key, dist in (
            ("tvm_ffi", "apache-tvm-ffi"),
            ("triton", "triton"),
            ("tvm", "apache-tvm"),
            ("cutlass", "nvidia-cutlass-dsl"),
            ("flashinfer", "flashinfer-python"),
        ):
            version = _distribution_version(dist)
            if version:
                versions[key] = version
        return versions

    def initialize(self) -> None:
        """Creates the CUDA context, its first allocation and the libraries' state,
        and launches no kernel (house-keeping outside any lease; the server may run
        it beside a neighbour's timing span: docs/gpu-scheduling.md)."""
        torch = self.torch
        torch.cuda.init()
        torch.empty(1, device="cuda")  # an allocation, no kernel
        try:
            # Not in the zygote (its import touches CUDA); here, once the context
            # exists, so library uploads don't pay for it inside a request.
            import tvm_ffi  # noqa: F401
        except ImportError:
            pass
        try:
            from kcoral import _native
        except ImportError:
            self._native = None  # benchmark and cpu_only then fail with `unavailable`
        else:
            from kcoral._worker import gpu_benchmark

            gpu_benchmark.bind(_native, torch)  # before any upload is imported
            self._native = _native
        # Engine.initialize then binds integrity again: _native and torch's CUDA state exist only now.

    def warm_up(self) -> None:
        """The first kernels, paid before a request arrives: CUPTI's first activity, the L2
        flush buffer, torch's common kernels (house-keeping outside any lease, and always
        outside timing spans but under --housekeeping beside-spans: kernels of another
        process share the GPU with a timed one)."""
        if self._native is not None:
            try:
                self._native.prepare_timer()
            except Exception:  # noqa: BLE001 - a benchmark then reports it as `unavailable`
                pass
        from kcoral._worker import warm_up

        warm_up.device(self.torch)

    def native(self):
        if self._native is None:
            raise InstructionFailure("unavailable", "kcoral._native (CUPTI) is not built on this server")
        return self._native

    # -- the GPU lease ------------------------------------------------------

    def acquire(self) -> None:
        if not self.held:
            _core.acquire_lease()
            self.held = True

    def release(self) -> None:
        if self.held:
            self._drain()
            _core.release_lease()
            self.held = False

    def _drain(self) -> None:
        """Nothing of ours may still run on the GPU once the lease is gone."""
        torch = self.torch
        try:
            torch.cuda.synchronize()
            if torch.cuda.memory_reserved() > torch.cuda.memory_allocated():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - a CUDA error here is reported by finish()
            pass

    def place(self, ins: dict, request) -> None:
        """Lease placement per instruction (spec/protocol.md §2.6)."""
        op, kind = ins["op"], ins.get("kind")
        if op == "upload" and kind == "bytes":
            return
        if (op == "upload" and kind == "file") or (op == "return" and kind in ("file", "folder")):
            self.release()
            return
        if op == "run":
            if isinstance(request.handles.get(ins["fn"]["$ref"]), CpuOnlyFunction):
                return  # call_cpu_only releases the lease itself
        self.acquire()

    def finish(self, request):
        """Final clean-up under the lease: synchronize and consume the last
        CUDA error. A sticky error retires this worker (poisoned_context)."""
        self.acquire()
        failure = None
        if self._native is not None:
            check = self._native.device_check()
            if check.get("error"):
                failure = InstructionFailure(
                    "runtime", f"CUDA error at the end of the request: {check['error']}: {check['message']}"
                )
                if check.get("sticky"):
                    self.retire_reason = "poisoned_context"
        else:
            try:
                self.torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                failure = InstructionFailure("runtime", f"CUDA error at the end of the request: {exc}")
                self.retire_reason = "poisoned_context"
        request.handles.clear()
        self.release()
        return failure

    # -- instructions ---------------------------------------------------------

    def upload_tensor(self, blob, dtype: str, shape: list):
        """One host-to-device copy, straight from the blob's mapping: through pinned
        staging chunks on several threads when large (src/native/staged_copy.h),
        else torch's own copy."""
        torch = self.torch
        try:
            torch_dtype = getattr(torch, dtype)
            count = 1
            for n in shape:
                count *= n
            if count == 0:
                return torch.empty(shape, dtype=torch_dtype, device="cuda")
            if blob.size >= STAGED_COPY_BYTES and self._native is not None:
                tensor = torch.empty(shape, dtype=torch_dtype, device="cuda")
                needed = tensor.numel() * tensor.element_size()
                if blob.size != needed:  # the server refuses such a program; a copy must never overrun even so
                    raise ValueError(f"the blob holds {blob.size} bytes, shape {shape} of {dtype} needs {needed}")
                # As many lanes as the worker has host threads (--worker-cpu-threads).
                self._native.copy_to_device(
                    blob.view(), tensor.data_ptr(), torch.cuda.current_stream().cuda_stream, torch.get_num_threads()
                )
                return tensor
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # frombuffer warns about read-only buffers; we copy
                host = torch.frombuffer(blob.view(), dtype=torch_dtype)
            return host.reshape(shape).to("cuda")
        except Exception as exc:  # noqa: BLE001
            raise InstructionFailure("runtime", f"cannot create the tensor: {type(exc).__name__}: {exc}") from exc

    def load_library(self, blob, sha256: str, request):
        return load_library(blob, sha256)

    def library_function(self, module, name: str):
        return library_function(module, name, "runtime")

    def call_cpu_only(self, fn, args: list, request):
        """Runs off the lease, watched by CUPTI: any CUDA call is a gpu_access error."""
        self.release()
        native = self.native()
        native.watch_begin()
        try:
            result = fn(*args)
        finally:
            violation = native.watch_end()
            if violation:
                raise InstructionFailure(
                    "gpu_access",
                    f"a cpu_only function called CUDA ({violation['cuda_call']}) at {violation['location']}",
                    {
                        "cuda_call": violation["cuda_call"],
                        "location": violation["location"],
                        "interfered_request_id": None,  # filled in by the server
                        "traceback": violation.get("stack", "")[-8192:],
                        "detected_ns": violation["detected_ns"],
                    },
                )
        return result

    def export_tensor(self, value):
        return tensors.export_host_tensor(value)
