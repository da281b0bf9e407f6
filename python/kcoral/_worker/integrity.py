"""Binds what a sealed benchmark result is checked against, before any upload runs.

The engine calls bind() (Engine.bind_integrity) after the worker entered the sandbox and before
it serves (bootstrap.py, for zygote.py and __main__.py); GPU workers call it again from
Engine.initialize, once kcoral._native and the CUDA side of torch are loaded. kcoral._core
keeps, in C++, a snapshot of the attributes of the modules below and the code objects of
kcoral's benchmark path; at every seal it reports what changed and which frames called the
timer (src/worker/python_facts.h). Once the first request has arrived it refuses to bind again,
so user code cannot redefine what is genuine (docs/benchmark-integrity.md "Sealed results").
"""

import math  # noqa: F401 - watched: imported here, so that the snapshot holds them (the zygote
import statistics  # noqa: F401   imports this module before it forks, so workers pay nothing)
import sys
import time  # noqa: F401
import types

from kcoral import _core

# Modules whose attributes the seal compares (those not imported are skipped); "torch.Tensor"
# names the type's own dict.
WATCHED = (
    "kcoral.builtins",
    "kcoral.errors",
    "kcoral._core",
    "kcoral._native",
    "kcoral._worker.engine",
    "kcoral._worker.gpu_benchmark",
    "kcoral._worker.timing",
    "kcoral._worker.values",
    "statistics",
    "math",
    "time",
    "torch",
    "torch.testing",
    "torch.nn.functional",
    "torch.cuda",
    "torch.Tensor",
)

# Every function of these modules is kcoral's own benchmark path (the frames between the timer
# and the uploaded code that called it).
TIMER_MODULES = ("kcoral.builtins", "kcoral._worker.gpu_benchmark")


def _functions(module: types.ModuleType) -> list:
    found = []
    for value in vars(module).values():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            found.append(value)
        elif isinstance(value, type) and value.__module__ == module.__name__:
            found += [f for f in vars(value).values() if isinstance(f, types.FunctionType)]
    return found


def _benign_wraps() -> list:
    """Library patches that keep behaviour: importing torch._dynamo (torch.compile does) replaces
    torch.manual_seed by torch._disable_dynamo(torch.manual_seed), a wrapper that only keeps
    dynamo from tracing it. Allowed for that name only, with that wrapper, around the original."""
    disable = getattr(sys.modules.get("torch"), "_disable_dynamo", None)
    code = getattr(disable, "__code__", None)
    if code is None:
        return []
    return [("torch.manual_seed", c) for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "inner"]


def bind(device: str, chain_end: types.FunctionType) -> None:
    """`chain_end`: the engine's function that runs an instruction (Engine._run), where the walk
    up from the timer stops. Passed in by the engine, which this module does not import."""
    import kcoral.builtins  # noqa: F401 - resolved now, before any upload can patch it

    if device == "gpu":
        import kcoral._worker.gpu_benchmark  # noqa: F401 - builtins.benchmark imports it lazily

    chain = [f for name in TIMER_MODULES if name in sys.modules for f in _functions(sys.modules[name])]
    chain.append(chain_end)  # last: where the walk up from the timer stops
    _core.bind_integrity(list(WATCHED), chain, _benign_wraps())
