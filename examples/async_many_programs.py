"""Evaluate many small programs through AsyncClient, at most --concurrency at
once, and print the throughput and the latency of each evaluation.

    python3 -m kcoral server --device cpu --num-workers 2 --host 127.0.0.1 --port 8000 &
    python3 examples/async_many_programs.py --count 1000 --concurrency 64

--url defaults to $KCORAL_URL, else http://127.0.0.1:8000. Latency is one
execute() call as the client sees it: from its start (once a slot is free)
to its decoded result, so it includes the wait in the server's queue. The
same bound without hand-written tasks: ``async for index, outcome in
client.map(programs, concurrency=64)`` (yields as each finishes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time

from kcoral import AsyncClient, Program

SOURCE = "def main(i):\n    return i + 1\n"


def program(i: int) -> Program:
    p = Program()
    fn = p.get_function(module=p.upload(kind="module", source=SOURCE), name="main")
    p.return_(key="out", value=p.run(fn=fn, args=[i]))
    return p


def allow_connections(count: int) -> None:
    """Each connection in flight is a file descriptor: raise the soft limit if it is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
        )


async def evaluate(url: str, count: int, concurrency: int) -> int:
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    failures: list[str] = []

    async with AsyncClient(url) as client:
        await client.health()  # fail early if nothing answers there

        async def one(i: int) -> None:
            async with slots:
                started = time.perf_counter()
                try:
                    result = await client.execute(program(i))
                except Exception as error:  # KCoralError, TransportError, ProtocolError
                    failures.append(f"program {i}: {type(error).__name__}: {error}")
                    return
                latencies.append(time.perf_counter() - started)
            if not result.completed or result["out"] != i + 1:
                failures.append(f"program {i}: {result.status} {result.error or result.results}")

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        wall = time.perf_counter() - started

    latencies.sort()
    ms = [seconds * 1000 for seconds in latencies]
    print(f"{count} programs, concurrency {concurrency}, {url}")
    print(f"  wall {wall:.2f} s, {count / wall:.1f} programs/s")
    if ms:
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        print(f"  latency p50 {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms")
    for line in failures[:10]:
        print("  FAILED", line, file=sys.stderr)
    if failures:
        print(f"  {len(failures)} of {count} failed", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("KCORAL_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--count", type=int, default=1000, help="programs to evaluate (default 1000)")
    parser.add_argument("--concurrency", type=int, default=64, help="evaluations in flight at most (default 64)")
    args = parser.parse_args()
    if args.count < 1 or args.concurrency < 1:
        parser.error("--count and --concurrency must be at least 1")
    allow_connections(min(args.count, args.concurrency))
    return asyncio.run(evaluate(args.url, args.count, args.concurrency))


if __name__ == "__main__":
    sys.exit(main())
