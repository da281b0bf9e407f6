"""`kcoral.builtins.benchmark` and `benchmark_paired` on GPU workers: kcoral._native.

builtins dispatches here on GPU workers. The cfg is checked as the host timer checks it
(timing.cfg_count); everything else lives in C++ (src/native/benchmark_entry.h): the counts,
the argument rotation and output checks, the L2 flush and persisting-L2 reset, the CUPTI timed
loop, the statistics, and the sealed integrity record (docs/benchmark-integrity.md). The native
functions are bound when the worker initializes, before any upload is imported.

Failure kinds (spec/benchmark.md §1.6):
  - `unavailable`: kcoral._native is missing, CUPTI failed, an iteration had no GPU activity or
    a non-positive span, or the process has no usable GPU;
  - `runtime`: the callable raised, or a CUDA error surfaced during warm-up or timing;
  - `correctness`: proof that a call's outputs differ from the reference call's beyond the
    tolerance (a checked output argument or returned tensor); nothing else refuses a benchmark.
Messages are shortened to 600 characters, keeping both ends.
"""

import re

from kcoral import _core
from kcoral._worker import timing
from kcoral._worker.errors import safe_text, type_name
from kcoral.errors import ExecutionError

# Bound by bind() at worker start: the module, for its exception types, and the two entry
# points themselves, so that rebinding kcoral._native.benchmark later changes nothing here.
_native = None
_benchmark = None
_benchmark_paired = None


def bind(native, torch) -> None:
    """Binds the natives and torch's DLPack exchange, before any upload runs."""
    global _native, _benchmark, _benchmark_paired
    native.bind_worker(torch.Tensor, torch._C._to_dlpack, torch._C._from_dlpack)
    _native, _benchmark, _benchmark_paired = native, native.benchmark, native.benchmark_paired


# Every cfg key the GPU benchmark honours; a misspelt key is refused rather than ignored.
_KEYS = (
    "warmup_ms",
    "repeat_ms",
    "warmup",
    "repeat",
    "flush_l2",
    "outputs",
    "rotate_inputs",
    "tolerance",
    "launch_gate",
    "unverifiable",
    "constants",
)

_RETURN_PATH = re.compile(r"return(\[(\d+|'[^'\[\]]{1,64}'|#\d+)\]|\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,4}")
_ARGUMENT = re.compile(r"arg:(\d{1,4})")


def _names(cfg: dict, key: str, arguments: bool) -> list:
    """cfg 'unverifiable' / 'constants': a list of returned paths as defences.returned names them
    ("return", "return[1]", "return['logits']", "return.loss"), and for 'unverifiable' also
    "arg:N" (argument N)."""
    names = cfg.get(key, [])
    example = '["return[1]", "arg:2"]' if arguments else '["return[1]"]'
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ExecutionError("runtime", f"benchmark cfg '{key}' must be a list of output names like {example}")
    for name in names:
        if _RETURN_PATH.fullmatch(name) is None and not (arguments and _ARGUMENT.fullmatch(name)):
            kinds = "a returned path (return, return[1], return['key'], return.field) or arg:N"
            raise ExecutionError(
                "runtime",
                f"benchmark cfg '{key}': {name[:80]!r} is not {kinds if arguments else 'a returned path'}",
            )
    return list(names)


def _tolerance(cfg: dict):
    """cfg 'tolerance' = {"rtol": r, "atol": a} (either may be left out: 1e-3, 1e-5) -> (rtol, atol)."""
    tolerance = cfg.get("tolerance")
    if tolerance is None:
        return None
    message = "benchmark cfg 'tolerance' must be a dict like {'rtol': 1e-3, 'atol': 1e-5} of finite numbers >= 0"
    if not isinstance(tolerance, dict) or not set(tolerance) <= {"rtol", "atol"}:
        raise ExecutionError("runtime", message)
    values = (tolerance.get("rtol", 1e-3), tolerance.get("atol", 1e-5))
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf") for v in values):
        raise ExecutionError("runtime", message)
    return float(values[0]), float(values[1])


def _options(cfg: dict) -> dict:
    unknown = sorted(str(key) for key in cfg if key not in _KEYS)
    if unknown:
        raise ExecutionError("runtime", f"benchmark cfg has unknown keys {unknown}; known: {', '.join(_KEYS)}")
    warmup, warmup_ms = timing.cfg_count(cfg, "warmup", "warmup_ms", 0)
    repeat, repeat_ms = timing.cfg_count(cfg, "repeat", "repeat_ms", 1)
    outputs = cfg.get("outputs")
    if outputs is not None and (
        not isinstance(outputs, (list, tuple))
        or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in outputs)
    ):
        raise ExecutionError("runtime", "benchmark cfg 'outputs' must be a list of argument indices (>= 0)")
    return {
        "warmup": warmup,
        "repeat": repeat,
        "warmup_ms": warmup_ms,
        "repeat_ms": repeat_ms,
        "flush_l2": bool(cfg.get("flush_l2", timing.DEFAULTS["flush_l2"])),
        "outputs": None if outputs is None else list(outputs),
        "rotate_inputs": bool(cfg.get("rotate_inputs", True)),
        "tolerance": _tolerance(cfg),
        "launch_gate": bool(cfg.get("launch_gate", True)),
        "unverifiable": _names(cfg, "unverifiable", arguments=True),
        "constants": _names(cfg, "constants", arguments=False),
    }


def _run(native_function, leading: tuple, options: dict) -> dict:
    # Warm-up, checks and timed calls are one timing span: while it runs, no
    # neighbour creates or destroys a CUDA context on this GPU, or under
    # --housekeeping beside-spans the server counts those that do (gpu_arbiter.h).
    _core.begin_span()
    try:
        return native_function(*leading, **options)
    except _native.UnavailableError as exc:
        raise ExecutionError("unavailable", timing.short(f"CUPTI benchmark unavailable: {exc}")) from exc
    except _native.CallError as exc:
        raise ExecutionError("runtime", timing.short(f"benchmark failed: {exc}")) from exc
    except _native.OutputCheckError as exc:
        raise ExecutionError("correctness", timing.short(f"benchmark output check failed: {exc}")) from exc
    except ValueError as exc:
        raise ExecutionError("runtime", timing.short(f"benchmark: {exc}")) from exc
    except ExecutionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the callable raised; _native re-raises it unchanged
        message = f"benchmark call failed: {type_name(exc)}: {safe_text(exc)}"  # user code's exception
        raise ExecutionError("runtime", timing.short(message)) from exc
    finally:
        _core.end_span()


def _require_bound() -> None:
    if _native is None:
        raise ExecutionError("unavailable", "benchmark needs kcoral._native (CUPTI), which is not built or bound here")


def benchmark(fn, args: tuple, cfg: dict) -> dict:
    _require_bound()
    return _run(_benchmark, (fn, tuple(args)), _options(cfg))


def benchmark_paired(candidate, reference, args: tuple, cfg: dict) -> dict:
    _require_bound()
    return _run(_benchmark_paired, (candidate, reference, tuple(args)), _options(cfg))
