"""Entering a worker's sandbox, right after the zygote's fork (or at a plain
worker's start), before the worker reports ready.

The server's spec (a kcoral._core.WorkerSpec, src/ipc/sandbox_spec.h) names
the workspace and, when sandboxed, the cgroups and device nodes; before the
fork, `complete` adds what only this side knows: the paths the interpreter
imports from, and the descriptors of the view's template and of the network
namespace lent to the worker. The C++ core does the confining
(src/worker/sandbox.h); the worker is pid 2 of its PID namespace, beside the
reaper that is pid 1 (src/worker/namespace_init.h).
"""

import functools
import os
import shutil
import sys
import tempfile


@functools.cache
def interpreter_paths() -> list[str]:
    """What the interpreter, its packages and the toolkits it calls live in.

    Computed once, in the zygote before it forks (a PATH search per worker
    cost more than the whole kernel side of the sandbox)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    cwd = os.getcwd()
    # `python -m` puts the server's working directory first; workers import
    # nothing from it, and it must not become visible.
    paths.update(p for p in sys.path if p and p != cwd and os.path.exists(p))
    paths.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            paths.add(os.environ[variable])
    # Toolchains that uploaded compile code runs (tvm_ffi's build calls $CXX
    # or g++, nvcc and ninja): each one's installation root (/opt/gcc for
    # /opt/gcc/bin/g++; /usr ones are visible already).
    tools = ["nvcc", "gcc", "g++", "c++", "cc", "clang", "clang++", "ninja"]
    tools += [os.environ[v].split()[0] for v in ("CC", "CXX", "CUDAHOSTCXX") if os.environ.get(v, "").strip()]
    for tool in tools:
        found = shutil.which(tool)
        if found:
            paths.add(os.path.dirname(os.path.dirname(os.path.realpath(found))))
    return sorted(os.path.abspath(p) for p in paths)


def complete(spec):
    """`spec` (a kcoral._core.WorkerSpec) with what the worker about to be forked
    needs from this process (see above); unchanged without a sandbox."""
    from kcoral import _core

    if not spec.sandboxed:
        return spec
    return _core.complete_sandbox(spec, interpreter_paths())


def enter(spec, socket_fd: int) -> str:
    """Confines this process as `spec` (completed) says; returns the workspace to run in."""
    from kcoral import _core

    if not spec.sandboxed:
        # Unsandboxed workers still keep their temporary files in their workspace.
        os.environ["TMPDIR"] = os.path.join(spec.workspace, ".kcoral", "tmp")
        tempfile.tempdir = None
        return spec.workspace
    inside = _core.enter_sandbox(spec, socket_fd)
    private = os.path.join(inside, ".kcoral")
    os.environ.update(
        HOME=os.path.join(private, "home"),
        TMPDIR="/tmp",
        USER="kcoral",
        LOGNAME="kcoral",
        XDG_CACHE_HOME=os.path.join(private, "cache"),
        TVM_FFI_CACHE_DIR=os.path.join(private, "cache", "tvm-ffi"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    tempfile.tempdir = None
    sys.dont_write_bytecode = True
    return inside


def report_failure(socket_fd: int, error: BaseException) -> None:
    """Tells the server why this worker cannot serve (it then exits)."""
    import socket

    from kcoral import _core

    message = _core.failed_message(f"{type(error).__name__}: {error}"[:4000])
    try:
        socket.socket(fileno=os.dup(socket_fd)).send(message)
    except OSError:
        pass
