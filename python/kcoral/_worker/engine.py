"""Engine: runs one program's instructions in order (spec/protocol.md §2).

Handles are request-local. The first failing instruction ends the program;
returns that ran before it keep their results. Placement on the GPU lease and
anything device-specific is delegated to the runtime (runtime.py).
"""

import hashlib
import json
import linecache
import sys
import types

from kcoral import _core
from kcoral._worker import files, integrity, values
from kcoral._worker.blob_maps import MappedBlob
from kcoral._worker.errors import InstructionFailure, describe_exception, format_traceback
from kcoral._worker.handles import CpuOnlyFunction, CudaFunctionSource, CudaSource
from kcoral._worker.libraries import libraries_full


class Request:
    """State of one request: handles, results, encoded segments."""

    def __init__(self, program: dict, blob_fds: dict, limits: dict, workspace: str):
        self.instructions = program["instructions"]
        self.blobs = {sha: MappedBlob(fd) for sha, fd in blob_fds.items()}
        self.workspace = workspace
        self.handles: dict = {}
        self.results: dict = {}
        self.budget = values.SegmentBudget(int(limits.get("max_response_bytes") or 0))
        self.request_id = limits.get("request_id", "")
        self.module_names: list[str] = []
        self.linecache_keys: list[str] = []

    def resolve(self, ref: dict):
        return self.handles[ref["$ref"]]


def encode_outcome(outcome: dict) -> bytes:
    """The outcome as the server reads it (src/protocol/json_reader.h): compact
    UTF-8 JSON, spelled as the server writes its reply, so that its size bounds
    the reply's. A lone surrogate in a string (Python allows them) is not UTF-8;
    it becomes its JSON escape "\\udXXX", which reads back as the same string."""
    limit = sys.getrecursionlimit()
    # The C encoder counts each container against the recursion limit; values
    # nest at most values.MAX_DEPTH levels, two containers each.
    sys.setrecursionlimit(max(limit, 2 * values.MAX_DEPTH + 200))
    try:
        text = json.dumps(outcome, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    finally:
        sys.setrecursionlimit(limit)
    return text.encode("utf-8", "backslashreplace")


def _reconfigure_output() -> None:
    """print() of a lone surrogate writes its escape instead of failing the
    program, as Python's own stderr does (errors="backslashreplace")."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass  # not a TextIOWrapper, or already closed: nothing to protect


def _restore_output(saved: tuple) -> None:
    """Puts back sys.stdout and sys.stderr as the program found them, so the
    worker can flush them after the run (src/worker/module.cc) whatever the
    program did: replaced them (with None, anything), closed them, or left
    bytes buffered that can no longer be written."""
    for name, original, fd in (("stdout", saved[0], 1), ("stderr", saved[1], 2)):
        stream = original
        try:
            if stream.closed:
                raise ValueError("closed")
            stream.flush()
        except Exception:  # noqa: BLE001 - closed by the program, or its fd is gone
            # The standard streams never own their descriptor (closefd=False),
            # so a new wrapper on the same descriptor works after a close.
            stream = open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        setattr(sys, name, stream)


class Engine:
    def __init__(self, runtime):
        self.runtime = runtime
        _reconfigure_output()  # before output capture swaps the descriptors

    def describe(self) -> dict:
        return {"target": self.runtime.target(), "versions": self.runtime.versions()}

    def bind_integrity(self) -> None:
        """Binds what sealed benchmark results are checked against (integrity.py), with
        Engine._run where the walk up from the timer stops. Before serving; on GPU workers
        again at initialize, once kcoral._native and torch's CUDA side are loaded."""
        integrity.bind(self.runtime.device, Engine._run)

    def initialize(self) -> None:
        """Device set-up the server schedules as house-keeping: the CUDA context."""
        self.runtime.initialize()
        if self.runtime.device == "gpu":
            self.bind_integrity()  # again: _native and torch's CUDA state exist only now

    def warm_up(self) -> None:
        """Then the device's first kernels, scheduled apart (they run on the GPU)."""
        self.runtime.warm_up()

    def run(self, program_json: str, blob_fds: dict, limits: dict, workspace: str):
        """Runs a program; returns (outcome JSON bytes, binary segments, frame meta)."""
        request = Request(json.loads(program_json), blob_fds, limits, workspace)
        sys.path.insert(0, workspace)  # uploaded .py files are importable (spec/server.md §3.2)
        output = (sys.stdout, sys.stderr)
        error = None
        try:
            for index, instruction in enumerate(request.instructions):
                _core.instruction_started(index)
                try:
                    self.runtime.place(instruction, request)
                    self._execute(instruction, request)
                except BaseException as exc:  # noqa: BLE001 - user code may raise anything
                    error = self._error(index, instruction, exc)
                finally:
                    _core.instruction_finished(index)
                if error is not None:
                    break
            cleanup_error = self.runtime.finish(request)
            if error is None and cleanup_error is not None:
                index = len(request.instructions) - 1
                error = self._error(index, request.instructions[index], cleanup_error)
        finally:
            self._forget(request)
            _restore_output(output)
        meta = {}
        if self.runtime.retire_reason:
            meta["retire"] = self.runtime.retire_reason
        elif libraries_full():
            meta["retire"] = "library_limit"
        if error and "detected_ns" in error:
            meta["gpu_access_detected_ns"] = error.pop("detected_ns")
        outcome = {
            "status": "FAILED" if error else "COMPLETED",
            "results": request.results,
            "segments": [memoryview(s).nbytes for s in request.budget.segments],
        }
        if error:
            outcome["error"] = error
        try:
            return encode_outcome(outcome), request.budget.segments, meta
        except Exception as exc:  # noqa: BLE001 - a bug here must still give an answer
            # Every value was checked when its return ran, so this is the
            # engine's own failure: the program fails, its results are dropped.
            index = len(request.instructions) - 1
            failed = {
                "status": "FAILED",
                "results": {},
                "segments": [],
                "error": self._error(index, request.instructions[index], exc),
            }
            return encode_outcome(failed), [], meta

    @staticmethod
    def _error(index: int, instruction: dict, exc: BaseException) -> dict:
        """The error object for `exc` (spec/protocol.md §4.4); never raises."""
        kind, message, extra = describe_exception(exc)
        op = instruction["op"]
        return {
            "kind": kind,
            "message": message,
            "instruction_index": index,
            "instruction_op": op,
            "instruction_id": instruction.get("id") if op != "return" else None,
            "traceback": format_traceback(exc),
            **extra,
        }

    @staticmethod
    def _forget(request: Request) -> None:
        for name in request.module_names:
            sys.modules.pop(name, None)
        for key in request.linecache_keys:
            linecache.cache.pop(key, None)
        if sys.path and sys.path[0] == request.workspace:
            sys.path.pop(0)
        for blob in request.blobs.values():
            blob.close()

    # -- instructions -------------------------------------------------------

    def _execute(self, ins: dict, request: Request) -> None:
        op = ins["op"]
        if op == "upload":
            request.handles[ins["id"]] = self._upload(ins, request)
        elif op == "get_function":
            request.handles[ins["id"]] = self._get_function(ins, request)
        elif op == "run":
            request.handles[ins["id"]] = self._run(ins, request)
        elif op == "return":
            self._return(ins, request)
        else:  # the server validated the program; this is a bug
            raise InstructionFailure("engine", f"unknown op {op!r}")

    def _upload(self, ins: dict, request: Request):
        kind = ins["kind"]
        if kind == "module":
            if ins.get("language") == "cuda":
                return CudaSource(ins["source"])
            return self._exec_module(ins, request)
        blob = request.blobs[ins["blob"]]
        if kind == "bytes":
            return blob.bytes_value()
        if kind == "file":
            path = files.normalize_path(ins["path"])
            files.write_upload(request.workspace, path, blob.view())
            return path
        if kind == "tensor":
            return self.runtime.upload_tensor(blob, ins["dtype"], ins["shape"])
        if kind == "library":
            return self.runtime.load_library(blob, ins["blob"], request)
        raise InstructionFailure("engine", f"unknown upload kind {kind!r}")

    def _exec_module(self, ins: dict, request: Request):
        source = ins["source"]
        digest = hashlib.sha1(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        filename = f"<uploaded:{digest}>"
        # inspect-based compilers (Triton, TIRx, CuTe) re-read the source.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        request.linecache_keys.append(filename)
        name = f"kcoral_uploaded_{digest}_{len(request.module_names)}"
        module = types.ModuleType(name)
        module.__file__ = filename
        # A real module in sys.modules keeps dataclasses, pickle and typing working.
        sys.modules[name] = module
        request.module_names.append(name)
        try:
            code = compile(source, filename, "exec")
            exec(code, module.__dict__)  # noqa: S102 - running uploaded code is the product
        except BaseException as exc:  # noqa: BLE001
            kind, message, _ = describe_exception(exc)
            if kind == "engine":
                kind = "parse"
            raise InstructionFailure(kind, f"cannot import the uploaded module: {message}") from exc
        return module

    def _get_function(self, ins: dict, request: Request):
        module = request.resolve(ins["module"])
        name = ins["name"]
        if isinstance(module, CudaSource):
            if not name.isidentifier():
                raise InstructionFailure("parse", f"{name!r} is not a CUDA function name")
            fn = CudaFunctionSource(name, module.source)
        elif isinstance(module, types.ModuleType):
            if name not in module.__dict__:
                raise InstructionFailure("parse", f"the uploaded Python module defines no name {name!r}")
            fn = module.__dict__[name]
        else:
            fn = self.runtime.library_function(module, name)
        return CpuOnlyFunction(fn) if ins.get("cpu_only") else fn

    def _run(self, ins: dict, request: Request):
        fn = request.resolve(ins["fn"])
        cpu_only = isinstance(fn, CpuOnlyFunction)
        if cpu_only:
            fn = fn.fn
        if not callable(fn):
            raise InstructionFailure("runtime", f"handle {ins['fn']['$ref']!r} is not callable")
        args = [request.resolve(a) if _is_ref(a) else a for a in ins.get("args", [])]
        if cpu_only:
            return self.runtime.call_cpu_only(fn, args, request)
        return fn(*args)

    def _return(self, ins: dict, request: Request) -> None:
        budget = request.budget
        mark = budget.checkpoint()
        try:
            kind = ins.get("kind")
            if kind is None:
                value = request.resolve(ins["value"])
                if isinstance(value, CpuOnlyFunction):
                    value = value.fn
                node = values.encode_value(value, budget, self.runtime.export_tensor)
            else:
                path = ins["path"]
                if _is_ref(path):
                    path = request.resolve(path)
                    if not isinstance(path, str):
                        raise InstructionFailure("serialization", "a returned path must be a string")
                try:
                    path = files.normalize_path(path)
                except ValueError as exc:
                    raise InstructionFailure("serialization", str(exc)) from None
                left = budget.max_bytes - budget.used if budget.max_bytes else 0
                if kind == "file":
                    node = {"type": "file", "part": budget.add(files.collect_file(request.workspace, path, left))}
                else:
                    found, directories = files.collect_folder(request.workspace, path, left)
                    node = {
                        "type": "folder",
                        "files": {p: {"type": "file", "part": budget.add(d)} for p, d in found.items()},
                        "directories": directories,
                    }
        except BaseException:
            budget.rollback(mark)
            raise
        request.results[ins["key"]] = node


def _is_ref(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("$ref"), str) and value["$ref"] != ""
