"""Entering a worker's sandbox, right after the zygote's fork (or at a plain
worker's start), before the worker reports ready.

The server's spec names the workspace and, when sandboxed, the cgroups and
device nodes (pool/worker_setup.h); this side adds what only the interpreter
knows: the paths it imports from. The C++ core does the confining
(src/worker/sandbox.h); then this process forks once more, so that the
namespace's pid 1 is a reaper and the worker runs as pid 2
(src/worker/namespace_init.h).
"""

import functools
import json
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


def enter(spec: dict, socket_fd: int) -> str:
    """Confines this process as `spec` says; returns the workspace to run in."""
    from kcoral import _core

    workspace = spec["workspace"]
    sandbox = spec.get("sandbox")
    if sandbox is None:
        # Unsandboxed workers still keep their temporary files in their workspace.
        os.environ["TMPDIR"] = os.path.join(workspace, ".kcoral", "tmp")
        tempfile.tempdir = None
        return workspace
    sandbox = dict(sandbox, readonly_paths=interpreter_paths() + list(sandbox.get("readonly_paths", [])))
    inside = _core.enter_sandbox(json.dumps(sandbox), socket_fd)
    worker = os.fork()
    if worker != 0:
        _core.run_namespace_init(worker)  # never returns
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

    message = json.dumps({"type": "failed", "error": f"{type(error).__name__}: {error}"[:4000]})
    try:
        socket.socket(fileno=os.dup(socket_fd)).send(message.encode())
    except OSError:
        pass
