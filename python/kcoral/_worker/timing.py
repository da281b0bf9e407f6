"""The benchmark cfg rules both timers share (spec/benchmark.md §1.1, §1.6): the host timer of
kcoral.builtins and the CUPTI one of gpu_benchmark.py. Their own module, so that neither reaches
into the other's private names, and standard library only, like kcoral.builtins.
"""

import math

from kcoral.errors import ExecutionError

DEFAULTS = {"warmup_ms": 25.0, "repeat_ms": 100.0, "flush_l2": True}


def split_cfg(rest: tuple) -> tuple[tuple, dict]:
    """The last positional argument is the config when it is a dict (spec benchmark.md §1.1)."""
    if rest and isinstance(rest[-1], dict):
        return rest[:-1], rest[-1]
    return rest, {}


def cfg_count(cfg: dict, count_key: str, budget_key: str, minimum: int) -> tuple[int | None, float]:
    """(explicit count or None, budget in ms); the budget is only checked when it is used."""
    if cfg.get(count_key) is not None:
        value = cfg[count_key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ExecutionError("runtime", f"benchmark cfg {count_key!r} must be an integer >= {minimum}")
        return value, float(DEFAULTS[budget_key])
    budget = cfg.get(budget_key, DEFAULTS[budget_key])
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget < math.inf:
        raise ExecutionError("runtime", f"benchmark cfg {budget_key!r} must be a non-negative number")
    return None, float(budget)


def short(text: str, limit: int = 600) -> str:
    """Shortens a message to `limit` characters, keeping both ends (spec benchmark.md §1.6)."""
    if len(text) <= limit:
        return text
    marker = " ... "
    head = (limit - len(marker)) // 2
    return text[:head] + marker + text[-(limit - len(marker) - head) :]
