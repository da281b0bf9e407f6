"""The compile and evaluate programs, built from a tool's arguments after checking them here, so
that a mistake comes back naming its field before anything is sent.

Both upload worker_side.py as their module. The compile step is marked cpu_only: on a GPU server
or a cluster it runs on the CPU pool and holds no GPU lease."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from kcoral.program import DTYPE_ITEM_SIZES, Program

from .tool_errors import tool_error

LANGUAGES = ("cpp", "cuda")
FILLS = ("randn", "rand", "randint", "zeros", "ones", "arange")
_ARCH = re.compile(r"sm_[0-9]{2,3}a?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMPY_DTYPES = tuple(d for d in DTYPE_ITEM_SIZES if not d.startswith(("bfloat", "float8")))
MAX_INPUT_ELEMENTS = 1 << 26  # 64 Mi elements a tensor: made on the worker, but it must fit there


@lru_cache(maxsize=1)
def worker_source() -> str:
    return (Path(__file__).resolve().parent / "worker_side.py").read_text()


def _identifiers(value: Any, field: str) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) and _IDENTIFIER.fullmatch(n) for n in names)
    ):
        raise tool_error(
            f"{field} must name the exported function(s) as C identifiers",
            field=field,
            fix='give the names of the functions the source defines, e.g. ["add_one"]',
        )
    return names


def compile_program(
    source: str, language: str, functions: Any, extra_cflags: list[str] | None, arch: str | None = None
) -> Program:
    if not isinstance(source, str) or not source.strip():
        raise tool_error("source is empty", field="source", fix="pass the C++ or CUDA source text")
    if language not in LANGUAGES:
        raise tool_error(f"language {language!r} is not known", field="language", fix=f"use one of {list(LANGUAGES)}")
    names = _identifiers(functions, "functions")
    flags = extra_cflags or []
    if not all(isinstance(flag, str) and flag.startswith("-") for flag in flags):
        raise tool_error("extra_cflags must be compiler flags", field="extra_cflags", fix='e.g. ["-O3"]')
    if language == "cuda" and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise tool_error(
            f"arch {arch!r} is not a CUDA architecture",
            field="arch",
            fix="e.g. 'sm_90a'; leave it out to use the server's (the `target` tool shows it)",
        )
    spec = {
        "name": "kcoral_mcp_" + "_".join(names)[:48],
        "arch": arch if language == "cuda" else None,
        "source": source,
        "language": language,
        "functions": names,
        "extra_cflags": flags if language == "cpp" else None,
        "extra_cuda_cflags": flags if language == "cuda" else None,
    }
    program = Program()
    module = program.upload(id="mcp_worker_side", kind="module", source=worker_source())
    build = program.get_function(id="compile_library", module=module, name="compile_library", cpu_only=True)
    program.return_(key="compiled", value=program.run(id="compile", fn=build, args=[spec]))
    return program


def _tensor_spec(spec: Any, field: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise tool_error(f"{field} must be an object", field=field, fix='e.g. {"shape": [1024], "dtype": "float32"}')
    unknown = sorted(set(spec) - {"shape", "dtype", "fill", "seed", "low", "high"})
    if unknown:
        raise tool_error(
            f"{field} has unknown keys {unknown}", field=field, fix="keys: shape, dtype, fill, seed, low, high"
        )
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise tool_error(
            f"{field}.shape must be a list of sizes", field=f"{field}.shape", fix="e.g. [1024] or [64, 64]"
        )
    elements = 1
    for size in shape:
        elements *= size
    if elements > MAX_INPUT_ELEMENTS:
        raise tool_error(
            f"{field} has {elements} elements", field=f"{field}.shape", fix=f"at most {MAX_INPUT_ELEMENTS}"
        )
    dtype = spec.get("dtype", "float32")
    if dtype not in _NUMPY_DTYPES:
        raise tool_error(
            f"{field}.dtype {dtype!r} is not known", field=f"{field}.dtype", fix=f"use one of {list(_NUMPY_DTYPES)}"
        )
    fill = spec.get("fill", "randn")
    if fill not in FILLS:
        raise tool_error(f"{field}.fill {fill!r} is not known", field=f"{field}.fill", fix=f"use one of {list(FILLS)}")
    seed = spec.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise tool_error(f"{field}.seed must be an integer >= 0", field=f"{field}.seed", fix="e.g. 0")
    return {**spec, "shape": shape, "dtype": dtype, "fill": fill, "seed": seed}


def _number(value: Any, field: str, default: float) -> float:
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise tool_error(f"{field} must be a finite number >= 0", field=field, fix=f"e.g. {default}")
    return float(value)


def evaluate_program(
    *,
    library: bytes | None,
    library_sha256: str | None,
    module: str | None,
    function: str,
    reference: str,
    reference_function: str,
    inputs: list[Any],
    outputs: list[Any],
    rtol: float | None,
    atol: float | None,
    warmup_ms: float | None,
    repeat_ms: float | None,
    on_gpu: bool = False,
) -> Program:
    """Candidate(*inputs, *outputs) writes the outputs (or, without outputs, returns the value);
    reference(*inputs) returns the expected value(s); then check_close, then the benchmark. On a
    GPU server (`on_gpu`) the tensors are torch CUDA tensors, else numpy arrays."""
    _identifiers(function, "function")
    _identifiers(reference_function, "reference_function")
    if not isinstance(reference, str) or f"def {reference_function}" not in reference:
        raise tool_error(
            f"reference must be Python source defining {reference_function}(*inputs)",
            field="reference",
            fix=f"e.g. 'def {reference_function}(x):\\n    return x + 1' (numpy arrays in, the expected value out)",
        )
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise tool_error(
            "inputs and outputs must be lists of tensor specs",
            field="inputs",
            fix='e.g. [{"shape": [1024], "dtype": "float32"}]',
        )
    device = {"device": "cuda"} if on_gpu else {}
    input_specs = [{**_tensor_spec(spec, f"inputs[{i}]"), **device} for i, spec in enumerate(inputs)]
    output_specs = [
        {**_tensor_spec(spec, f"outputs[{i}]"), "fill": "zeros", **device} for i, spec in enumerate(outputs)
    ]
    cfg = {"rtol": _number(rtol, "rtol", 1e-2), "atol": _number(atol, "atol", 1e-3)}
    timing = {"warmup_ms": _number(warmup_ms, "warmup_ms", 25), "repeat_ms": _number(repeat_ms, "repeat_ms", 100)}

    program = Program()
    worker = program.upload(id="mcp_worker_side", kind="module", source=worker_source())
    make_tensor = program.get_function(id="make_tensor", module=worker, name="make_tensor")
    compare = program.get_function(id="compare", module=worker, name="compare")
    benchmark = program.get_function(id="benchmark", module=worker, name="benchmark")
    if library is not None:
        candidate_module = program.upload(id="library", kind="library", value=library, sha256=library_sha256)
    else:
        candidate_module = program.upload(id="module", kind="module", source=module)
    candidate = program.get_function(id="function", module=candidate_module, name=function)
    reference_module = program.upload(id="reference", kind="module", source=reference)
    expected_fn = program.get_function(id="reference_function", module=reference_module, name=reference_function)
    args = [program.run(id=f"inputs_{i}", fn=make_tensor, args=[s]) for i, s in enumerate(input_specs)]
    outs = [program.run(id=f"outputs_{i}", fn=make_tensor, args=[s]) for i, s in enumerate(output_specs)]
    expected = program.run(id="expected", fn=expected_fn, args=args)
    returned = program.run(id="candidate_call", fn=candidate, args=[*args, *outs])
    check = program.run(id="correctness", fn=compare, args=[cfg, expected, *(outs or [returned])])
    timed = program.run(id="benchmark_call", fn=benchmark, args=[candidate, *args, *outs, timing])
    program.return_(key="correctness", value=check)
    program.return_(key="timing", value=timed)
    return program
