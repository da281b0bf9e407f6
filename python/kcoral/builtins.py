"""Helpers importable by uploaded code: `from kcoral.builtins import benchmark`.

Must import on any server, CPU ones included, with nothing but the standard
library (spec/protocol.md §7.5).
"""

import math
import sys
import types

from kcoral._worker.timing import cfg_count as _cfg_count  # the cfg rules both timers share
from kcoral._worker.timing import short as _short
from kcoral._worker.timing import split_cfg as _split_cfg
from kcoral.errors import ExecutionError

try:
    # Bound now, at import (before any upload runs): rebinding kcoral._core.host_benchmark later
    # changes nothing here. The timer and its statistics are C++ (src/worker/host_timer.h) and
    # the result comes back sealed (docs/benchmark-integrity.md).
    from kcoral._core import host_benchmark as _host_timer
    from kcoral._core import worker_settings as _worker_settings
except ImportError:  # a client install without the worker core: benchmark says so when called
    _host_timer = _worker_settings = None

__all__ = ["assert_close", "benchmark", "benchmark_paired", "check_close", "compile_tirx"]

# Which timer runs is decided by the worker's settings (the server's start message,
# src/ipc/worker_settings.h) as they were at import, before any upload ran; they are set once per
# process (src/worker/process_settings.h), and rebinding what reads them later changes nothing.
_DEVICE, _CPU_EXECUTION = "cpu", "host"
if _worker_settings is not None:
    _DEVICE, _CPU_EXECUTION = _worker_settings().device, _worker_settings().cpu_execution


def _host_benchmark(fn, args: tuple, cfg: dict) -> dict:
    """Times host callables with the monotonic clock, one sample per call, in C++."""
    warmup, warmup_ms = _cfg_count(cfg, "warmup", "warmup_ms", 0)
    repeat, repeat_ms = _cfg_count(cfg, "repeat", "repeat_ms", 1)
    if _host_timer is None:
        raise ExecutionError("unavailable", "benchmark needs kcoral._core (the worker core), which is not built here")
    return _host_timer(fn, tuple(args), warmup, repeat, warmup_ms, repeat_ms)


def benchmark(fn, *rest) -> dict:
    """benchmark(fn, *args, cfg?) -> latency statistics in milliseconds.

    cfg keys: warmup_ms (25), repeat_ms (100), warmup, repeat (counts that
    override the budgets), flush_l2 (True; GPU only), and on GPU servers:
    outputs (indices of the output arguments; default: found by probe calls,
    whatever their position), rotate_inputs (True), tolerance ({"rtol",
    "atol"}; default: 1e-3 and 1e-5, widened to the spread of two reference
    calls for nondeterministic reductions), launch_gate (True: a timed
    call's GPU work starts once all of it is queued), unverifiable (outputs
    random by design, timed but never checked: "return", "return[1]",
    "return['key']", "arg:2") and constants (returned paths that are
    constants, excused when over 4 KiB). Each call gets its tensors from a
    rotation of copies holding the caller's values or fresh ones; output
    arguments and returned tensors are checked against the reference call's
    for those values after every timed call. The result carries an
    `integrity` report (flags, conditions, outputs_unchecked, loosened,
    floor), sealed in C++ and verified by the server; `integrity.trusted`
    is true only when nothing is flagged and every output was checked
    (docs/benchmark-integrity.md).
    """
    if not callable(fn):
        raise ExecutionError("runtime", "benchmark expects a compiled module handle")
    args, cfg = _split_cfg(rest)
    if _DEVICE == "gpu":
        from kcoral._worker import gpu_benchmark

        return gpu_benchmark.benchmark(fn, args, cfg)
    if _CPU_EXECUTION != "host":
        raise ExecutionError("unavailable", "benchmark needs a GPU server (this CPU server runs in reference mode)")
    try:
        return _host_benchmark(fn, args, cfg)
    except ExecutionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the callable failed
        from kcoral._worker.errors import safe_text, type_name  # the exception is user code's

        raise ExecutionError("runtime", _short(f"benchmark call failed: {type_name(exc)}: {safe_text(exc)}")) from exc


def benchmark_paired(candidate, reference, *rest) -> dict:
    """benchmark_paired(candidate, reference, *args, cfg?) -> a paired comparison (GPU only).

    Both run over the same arguments, interleaved call by call (ABBA), so
    drift and clocks fall on both alike. The result has the candidate's
    benchmark keys, "reference" with the reference's, ratio_median
    (candidate / reference) with ratio_ci95_low/high, speedup_median, and
    outputs_match_reference. cfg as for benchmark.
    """
    if not callable(candidate) or not callable(reference):
        raise ExecutionError("runtime", "benchmark_paired expects two compiled module handles")
    args, cfg = _split_cfg(rest)
    if _DEVICE != "gpu":
        raise ExecutionError("unavailable", "benchmark_paired needs a GPU server")
    from kcoral._worker import gpu_benchmark

    return gpu_benchmark.benchmark_paired(candidate, reference, args, cfg)


def compile_tirx(fn, bindings=None):
    """Compiles a TIRx kernel; needs Apache TVM on the server."""
    try:
        import tvm  # noqa: F401
    except ImportError:
        raise ExecutionError("unavailable", "compile_tirx needs Apache TVM on the server") from None
    raise ExecutionError("unavailable", "compile_tirx is not supported by this server yet")


# -- correctness: check_close / assert_close (spec/benchmark.md §2.3, §10; issue 9) --------------
#
# The comparison is kcoral._native's (src/native/tensor_check.h): strict shape and dtype
# equality, |a-e| <= atol + rtol*|e|, NaN/inf counted, finite statistics only, chunked copies.
# Its function is captured here, when kcoral.builtins is imported, and check_close/assert_close
# hold it in closures: uploaded code that rebinds kcoral._native.check_close, torch's DLPack
# exporters or torch.testing.assert_close afterwards does not reach them. The guarantee is as
# strong as that import is early: the worker should import kcoral.builtins before any upload.

_CLOSE_DEFAULTS = {"rtol": 1e-2, "atol": 1e-3}


def _close_tolerances(cfg) -> tuple[float, float]:
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        raise ExecutionError("runtime", "check_close cfg must be a dict like {'rtol': 1e-2, 'atol': 1e-3}")
    unknown = sorted(str(key) for key in cfg if key not in _CLOSE_DEFAULTS)
    if unknown:  # a misspelt tolerance would silently fall back to the default
        raise ExecutionError("runtime", f"check_close cfg has unknown keys {unknown}; known: rtol, atol")
    values = []
    for key in ("rtol", "atol"):
        value = cfg.get(key, _CLOSE_DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ExecutionError("runtime", f"check_close cfg {key!r} must be a finite number >= 0")
        values.append(float(value))
    return values[0], values[1]


def _make_close_checks():
    try:
        from kcoral import _native
    except ImportError as exc:
        missing = f"check_close needs kcoral._native, which is not built on this server: {exc}"
        native_check, native = None, None
    else:
        missing = ""
        native_check, native = _native.check_close, _native
    unavailable_error = getattr(native, "UnavailableError", ())
    call_error = getattr(native, "CallError", ())
    bind_exporters = getattr(native, "bind_exporters", None)
    exporters_bound = getattr(native, "exporters_bound", None)

    def bind_torch():
        # torch's exporter, once: now if torch is loaded (the GPU worker's zygote preloads it),
        # else at the first check after torch was imported.
        torch = sys.modules.get("torch")
        if torch is None or bind_exporters is None or exporters_bound():
            return
        try:
            bind_exporters(torch.Tensor, torch._C._to_dlpack)
        except RuntimeError:
            pass  # bound meanwhile

    bind_torch()

    def check_close(actual, expected, cfg=None) -> dict:
        """check_close(actual, expected, cfg?) -> {passed, max_abs_err, max_rel_err, mismatched,
        total, nonfinite_actual, nonfinite_expected, rtol, atol, first_mismatch, reason}.

        Tensors are torch (CPU or CUDA) or numpy arrays of the same shape and dtype; cfg is
        {rtol: 1e-2, atol: 1e-3}. A mismatch, of values or of shape and dtype, is data:
        passed is False and reason says why.
        """
        rtol, atol = _close_tolerances(cfg)
        if native_check is None:
            raise ExecutionError("unavailable", _short(missing))
        bind_torch()
        try:
            return native_check(actual, expected, rtol, atol)
        except unavailable_error as exc:
            raise ExecutionError("unavailable", _short(f"check_close: {exc}")) from None
        except call_error as exc:
            raise ExecutionError("runtime", _short(f"check_close failed: {exc}")) from None
        except (TypeError, ValueError) as exc:
            raise ExecutionError("runtime", _short(f"check_close: {exc}")) from None
        except Exception as exc:  # noqa: BLE001 - a producer's export failed (e.g. a sparse tensor)
            raise ExecutionError("runtime", _short(f"check_close: {type(exc).__name__}: {exc}")) from None

    def assert_close(actual, expected, cfg=None) -> dict:
        """assert_close(actual, expected, cfg?): check_close, raising `correctness` unless passed."""
        result = check_close(actual, expected, cfg)
        if not result["passed"]:
            raise ExecutionError("correctness", _short(f"outputs differ: {result['reason']}"))
        return result

    return check_close, assert_close


check_close, assert_close = _make_close_checks()


class _ReadOnlyModule(types.ModuleType):
    """`kcoral.builtins.benchmark = fake` fails loudly instead of working. A small hardening, not
    the defence: the module's __dict__ stays writable, and the seal is what catches a fake."""

    def __setattr__(self, name, value):
        raise AttributeError(f"kcoral.builtins is read-only: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"kcoral.builtins is read-only: cannot delete {name!r}")


sys.modules[__name__].__class__ = _ReadOnlyModule
