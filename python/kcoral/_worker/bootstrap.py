"""What every worker does between entering its sandbox and serving, in this
order: `python -m kcoral._worker` and the zygote's forked children alike."""

from kcoral import _core
from kcoral._worker.engine import Engine
from kcoral._worker.runtime import make_runtime


def ready_engine() -> Engine:
    # The settings came in the server's start message (the zygote's, for a forked worker).
    settings = _core.worker_settings()
    # Imports that user programs commonly need happen here (the runtime), before
    # the worker reports ready, so a request never waits for them.
    engine = Engine(make_runtime(settings.device))
    engine.bind_integrity()  # before serve: the first request freezes it
    # Last, so the pages are charged to this worker's own cgroup (--worker-heap-mbytes).
    _core.warm_heap(settings.heap_bytes)
    return engine
