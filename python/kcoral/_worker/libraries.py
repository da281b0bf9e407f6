"""Uploaded libraries, loaded with TVM-FFI: the process's table of them and get_function on one.

Shared by both runtimes (runtime.py, gpu_runtime.py) and the engine, which retires a worker that
holds too many.
"""

import os

from kcoral import _core
from kcoral._worker.errors import InstructionFailure

# Libraries this process loaded, by SHA-256. Each stays loaded for the
# process's life, and so does the descriptor it was loaded from: glibc knows
# a library by its path and hands back the loaded one for a path it has seen,
# so /proc/self/fd/N must never name another library later.
_loaded: dict[str, object] = {}


def libraries_full() -> bool:
    """Past its settings' max_libraries (KCORAL_MAX_LIBRARIES_PER_WORKER on the server), a
    reused worker is retired after its request (engine.py): each library holds a descriptor
    and its mapping for the process's life."""
    return len(_loaded) >= _core.worker_settings().max_libraries


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
