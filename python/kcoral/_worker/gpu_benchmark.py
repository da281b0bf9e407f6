"""`kcoral.builtins.benchmark` on GPU workers: the CUPTI timer of kcoral._native.

builtins.benchmark dispatches here when KCORAL_WORKER_DEVICE=gpu. The cfg is checked exactly as
the host timer checks it (builtins._cfg_count); the counts, the estimate, the L2 flush and the
CUPTI timed loop live in C++ (src/native/cupti_timer.h), out of reach of user monkeypatching
(spec/benchmark.md §9.8).

Failure kinds (spec/benchmark.md §1.6):
  - `unavailable`: kcoral._native is missing, CUPTI failed, an iteration had no GPU activity or
    a non-positive span, or the process has no usable GPU;
  - `runtime`: the callable raised, or a CUDA error surfaced during warm-up or timing.
Messages are shortened to 600 characters, keeping both ends.
"""

from kcoral import builtins
from kcoral._worker.errors import safe_text, type_name
from kcoral.errors import ExecutionError


def benchmark(fn, args: tuple, cfg: dict) -> dict:
    warmup, warmup_ms = builtins._cfg_count(cfg, "warmup", "warmup_ms", 0)
    repeat, repeat_ms = builtins._cfg_count(cfg, "repeat", "repeat_ms", 1)
    flush_l2 = bool(cfg.get("flush_l2", builtins._DEFAULTS["flush_l2"]))

    try:
        from kcoral import _native
    except ImportError as exc:
        raise ExecutionError(
            "unavailable", builtins._short(f"benchmark needs kcoral._native (CUPTI), which is not built here: {exc}")
        ) from None

    try:
        raw = _native.benchmark(
            fn, tuple(args), warmup=warmup, repeat=repeat, warmup_ms=warmup_ms, repeat_ms=repeat_ms, flush_l2=flush_l2
        )
    except _native.UnavailableError as exc:
        raise ExecutionError("unavailable", builtins._short(f"CUPTI benchmark unavailable: {exc}")) from exc
    except _native.CallError as exc:
        raise ExecutionError("runtime", builtins._short(f"benchmark failed: {exc}")) from exc
    except ExecutionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the callable raised; _native re-raises it unchanged
        message = f"benchmark call failed: {type_name(exc)}: {safe_text(exc)}"  # user code's exception
        raise ExecutionError("runtime", builtins._short(message)) from exc

    result = builtins.summarize(raw["samples_ms"])
    result.update(
        activities_stable=raw["activities_stable"],
        flush_l2=raw["flush_l2"],
        warmup=raw["warmup"],
        repeat=raw["repeat"],
        timer="cupti",
    )
    return result
