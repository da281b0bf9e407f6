"""Uploaded by `kcoral mcp` as the module of its compile and evaluate programs: it runs on a KCoral
worker, never in the MCP process. Standard library, numpy and what the worker has (tvm_ffi,
kcoral.builtins) only: its source travels as text (programs.py reads this file).

A compiler's errors are data here, not a FAILED outcome: the agent gets them with line numbers
of its own source, not of the file build_inline wrote around it."""

import re
from pathlib import Path

from kcoral.builtins import benchmark, check_close  # noqa: F401 - selected by get_function

# gcc/clang: "path:line:col: error: text"; nvcc: "path(line): error: text".
_GCC = re.compile(
    r"(?P<path>/[^\s:()]+):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>fatal error|error|warning): (?P<message>.*)"
)
_NVCC = re.compile(r"(?P<path>/[^\s:()]+)\((?P<line>\d+)\): (?P<severity>error|warning)[^:]*: (?P<message>.*)")
_GUTTER = re.compile(r"^(\s*)(\d+)( \|)")
_NOISE = re.compile(r"^(\[\d+/\d+\] |FAILED: |ninja|stdout:|c\+\+ |g\+\+ |nvcc |/usr/\S*(?:c\+\+|g\+\+|nvcc) )")
_LOG_LIMIT = 6000


_BUILD_INLINE_FILES = ("main.cpp", "cuda.cu")  # what build_inline names the file it writes the source into


def _caller_offset(path: str, source: str) -> int | None:
    """Lines build_inline wrote above the caller's source in `path` (its includes), or None when
    `path` is another file (a header the error was found in)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return 0 if Path(path).name in _BUILD_INLINE_FILES else None
    body = source.lstrip("\n")  # build_inline may drop the blank lines the source starts with
    at = text.find(body.rstrip("\n")[:200])
    return text[:at].count("\n") - (len(source) - len(body)) if at >= 0 else None


def _header_name(path: str) -> str:
    """A header's path from its include directory on (tvm/ffi/function_details.h), not the worker's."""
    return path.rsplit("/include/", 1)[-1]


def diagnostics(log: str, source: str, shown_name: str) -> dict:
    """The compiler's errors at the lines of `source` (or of the header they were found in), and
    its log with build_inline's file renamed `shown_name` and its lines mapped back."""
    found, offsets = [], {}
    lines = source.splitlines()
    for pattern in (_GCC, _NVCC):
        for match in pattern.finditer(log):
            path = match["path"]
            if path not in offsets:
                offsets[path] = _caller_offset(path, source)
            offset = offsets[path]
            line = int(match["line"]) - (offset or 0)
            found.append(
                {
                    "file": shown_name if offset is not None else _header_name(path),
                    "line": line,
                    "column": int(match["column"]) if match.groupdict().get("column") else None,
                    "severity": match["severity"],
                    "message": match["message"].strip(),
                    "source_line": lines[line - 1] if offset is not None and 0 < line <= len(lines) else None,
                }
            )
    found.sort(key=lambda item: item["file"] != shown_name)  # the caller's own lines first
    callers = {path: offset for path, offset in offsets.items() if offset is not None}
    gutter = next(iter(callers.values()), 0)
    cleaned = []
    for raw in log.splitlines():
        if _NOISE.match(raw.lstrip()) and ": error" not in raw:
            continue
        for path, offset in callers.items():
            raw = re.sub(
                re.escape(path) + r"([:(])(\d+)", lambda m, o=offset: f"{shown_name}{m[1]}{int(m[2]) - o}", raw
            )
            raw = re.sub(
                r"at line (\d+) of " + re.escape(path),
                lambda m, o=offset: f"at line {int(m[1]) - o} of {shown_name}",
                raw,
            )
            raw = raw.replace(path, shown_name)
        for path in offsets.keys() - callers.keys():
            raw = raw.replace(path, _header_name(path))
        raw = _GUTTER.sub(lambda m: f"{m[1]}{int(m[2]) - gutter}{m[3]}", raw)
        cleaned.append(raw)
    text = "\n".join(cleaned).strip()
    return {"diagnostics": found, "log": text[:_LOG_LIMIT], "log_truncated": len(text) > _LOG_LIMIT}


def _cuda_arch_list(arch: str) -> str:
    """sm_90a -> 9.0a, the form TVM_FFI_CUDA_ARCH_LIST takes (this worker may have no GPU to ask)."""
    digits = arch.removeprefix("sm_")
    suffix = "a" if digits.endswith("a") else ""
    digits = digits.removesuffix("a")
    return f"{int(digits[:-1])}.{digits[-1]}{suffix}"


def compile_library(spec: dict) -> dict:
    """tvm_ffi.cpp.build_inline on this worker: {"ok": True, "library": bytes} or the errors."""
    import os

    import tvm_ffi.cpp

    cuda = spec["language"] == "cuda"
    options = {"cuda_sources": spec["source"], "backend": "cuda"} if cuda else {"cpp_sources": spec["source"]}
    previous = os.environ.get("TVM_FFI_CUDA_ARCH_LIST")
    if cuda and spec.get("arch"):
        os.environ["TVM_FFI_CUDA_ARCH_LIST"] = _cuda_arch_list(spec["arch"])
    try:
        path = tvm_ffi.cpp.build_inline(
            name=spec["name"],
            functions=spec["functions"],
            extra_cflags=spec.get("extra_cflags") or None,
            extra_cuda_cflags=spec.get("extra_cuda_cflags") or None,
            **options,
        )
    except Exception as exc:  # noqa: BLE001 - a failed build is the answer, not a crash
        shown = "kernel.cu" if cuda else "kernel.cpp"
        return {"ok": False, "error": f"{type(exc).__name__}", **diagnostics(str(exc), spec["source"], shown)}
    finally:
        if previous is None:
            os.environ.pop("TVM_FFI_CUDA_ARCH_LIST", None)
        else:
            os.environ["TVM_FFI_CUDA_ARCH_LIST"] = previous
    return {"ok": True, "library": Path(path).read_bytes()}


def _numpy_tensor(spec: dict):
    import numpy as np

    shape, dtype, fill = spec["shape"], spec["dtype"], spec.get("fill", "randn")
    rng = np.random.default_rng(spec.get("seed", 0))
    if fill == "randn":
        return rng.standard_normal(shape).astype(dtype)
    if fill == "rand":
        return rng.random(shape).astype(dtype)
    if fill == "randint":
        return rng.integers(spec.get("low", 0), spec.get("high", 100), size=shape).astype(dtype)
    if fill == "arange":
        return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    return (np.ones if fill == "ones" else np.zeros)(shape, dtype=dtype)


def make_tensor(spec: dict):
    """A tensor from {"shape", "dtype", "fill": randn|rand|zeros|ones|arange|randint, "seed"}: a
    numpy array, or with "device": "cuda" (a GPU server) the same values as a torch CUDA tensor,
    which a CUDA kernel can read."""
    array = _numpy_tensor(spec)
    if spec.get("device") == "cuda":
        import torch

        return torch.from_numpy(array).to("cuda")
    return array


def _like(actual, value, index: int, notes: list):
    """The reference's value as the output's kind of tensor (numpy, or torch on its device), cast
    to its dtype when only the dtype differs (a float64 reference for a float32 kernel)."""
    if hasattr(actual, "device") and hasattr(actual, "to"):  # torch
        import torch

        actual_dtype, value = actual.dtype, torch.as_tensor(value, device=actual.device)
        if value.dtype != actual_dtype and value.shape == actual.shape:
            notes.append(f"output {index}: the reference's {value.dtype} was cast to the output's {actual_dtype}")
            value = value.to(actual_dtype)
        return actual, value
    import numpy as np

    actual, value = np.asarray(actual), np.asarray(value)
    if value.dtype != actual.dtype and value.shape == actual.shape:
        notes.append(f"output {index}: the reference's {value.dtype} was cast to the output's {actual.dtype}")
        value = value.astype(actual.dtype)
    return actual, value


def compare(cfg: dict, expected, *actuals) -> dict:
    """check_close of each output against the reference's value (a tuple for several outputs)."""
    wanted = list(expected) if isinstance(expected, (tuple, list)) and len(actuals) > 1 else [expected]
    if len(wanted) != len(actuals):
        return {"passed": False, "reason": f"the reference returned {len(wanted)} values for {len(actuals)} outputs"}
    checks, notes = [], []
    for index, (actual, value) in enumerate(zip(actuals, wanted)):
        actual, value = _like(actual, value, index, notes)
        checks.append(check_close(actual, value, {"rtol": cfg["rtol"], "atol": cfg["atol"]}))
    passed = all(check["passed"] for check in checks)
    reasons = [f"output {i}: {c['reason']}" for i, c in enumerate(checks) if not c["passed"]]
    return {"passed": passed, "outputs": checks, "notes": notes, "reason": "; ".join(reasons) or None}
