"""Many programs at once: the engines of Client.map and AsyncClient.map.

Both run an iterable of Programs with at most ``concurrency`` executions in
flight and yield ``(index, outcome)`` pairs as executions finish (seldom in
input order); ``index`` is the program's position in the iterable, and every
index is yielded exactly once. ``outcome`` is the ProgramResult (COMPLETED or
FAILED), or the exception object where execute() raised for that program
(KCoralError, TransportError, ProtocolError; TypeError or ValueError for a
bad program): one failed call neither stops the others nor loses their
results, and the caller decides what a failure means. Exceptions that are
not ``Exception`` (KeyboardInterrupt, cancellation) still propagate.

Programs are taken from the iterable lazily, one as each slot frees, so a
generator of large programs holds at most ``concurrency`` of them at once.

Progress: ``progress=None`` shows a tqdm bar on stderr when stderr is a
terminal; True or False forces it on or off. The bar counts FAILED results
and raised errors apart.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from .program import Program
from .result import ProgramResult

__all__ = ["Outcome", "check_concurrency", "map_tasks", "map_threads"]

#: What map yields beside each index.
Outcome = ProgramResult | Exception


def check_concurrency(concurrency: object) -> int:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    return concurrency


def map_threads(
    execute: Callable[..., ProgramResult],
    programs: Iterable[Program],
    concurrency: int,
    progress: bool | None,
    options: dict[str, Any],
) -> Iterator[tuple[int, Outcome]]:
    """Client.map on a pool of ``concurrency`` threads.

    Threads, not AsyncClient: Client is thread-safe (one httpx.Client), and an
    execution waits on its socket with the GIL released, so N threads keep N
    executions in flight on the caller's own connection pool, headers and
    blob-endpoint knowledge. Driving AsyncClient from this blocking generator
    would need an event loop on another thread (asyncio.run fails where the
    caller already runs one, as in Jupyter) and a second pool, for no gain at
    the concurrencies a thread pool serves well (up to a few hundred; use
    AsyncClient.map beyond).

    Leaving the loop early stops taking programs; the executions in flight
    finish in the background and their outcomes are dropped (closing the
    Client ends them at once, and the server cancels a program whose client
    hung up).
    """
    items = enumerate(programs)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kcoral-map")
    running: dict[Future, int] = {}
    bar = _Progress(progress, programs)

    def start(count: int) -> None:
        for index, program in itertools.islice(items, count):
            running[executor.submit(execute, program, **options)] = index

    try:
        start(concurrency)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            finished = sorted(((running.pop(f), f) for f in done), key=lambda pair: pair[0])
            start(len(finished))  # refill before the caller looks at any outcome
            for index, future in finished:
                outcome = _outcome(future)
                bar.count(outcome)
                yield index, outcome
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        bar.close()


async def map_tasks(
    execute: Callable[..., Awaitable[ProgramResult]],
    programs: Iterable[Program],
    concurrency: int,
    progress: bool | None,
    options: dict[str, Any],
) -> AsyncIterator[tuple[int, Outcome]]:
    """AsyncClient.map on asyncio tasks, at most ``concurrency`` at once.

    Closing the iterator early (``async with contextlib.aclosing(...)``, or
    an exception in the loop body) cancels the executions in flight: their
    connections close, and the server cancels the programs.
    """
    items = enumerate(programs)
    running: dict[asyncio.Future, int] = {}
    bar = _Progress(progress, programs)

    def start(count: int) -> None:
        for index, program in itertools.islice(items, count):
            running[asyncio.ensure_future(execute(program, **options))] = index

    try:
        start(concurrency)
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            finished = sorted(((running.pop(t), t) for t in done), key=lambda pair: pair[0])
            start(len(finished))
            for index, task in finished:
                outcome = _outcome(task)
                bar.count(outcome)
                yield index, outcome
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        bar.close()


def _outcome(future: Future | asyncio.Future) -> Outcome:
    error = future.exception()
    if error is None:
        return future.result()
    if not isinstance(error, Exception):
        raise error
    return error


class _Progress:
    """A tqdm bar on stderr, or nothing; counts FAILED results and errors."""

    def __init__(self, progress: bool | None, programs: Iterable[Program]) -> None:
        if progress is None:
            isatty = getattr(sys.stderr, "isatty", None)
            progress = bool(isatty and isatty())
        self._bar = None
        self._failed = self._errors = 0
        if progress:
            from tqdm import tqdm  # only where a bar is shown

            try:
                total = len(programs)  # type: ignore[arg-type]
            except TypeError:
                total = None
            self._bar = tqdm(total=total, unit="program", file=sys.stderr, dynamic_ncols=True)

    def count(self, outcome: Outcome) -> None:
        if self._bar is None:
            return
        if isinstance(outcome, Exception):
            self._errors += 1
        elif not outcome.completed:
            self._failed += 1
        if self._failed or self._errors:
            self._bar.set_postfix(failed=self._failed, errors=self._errors, refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
