"""Where the seed's correctness check spends its time inside a GPU worker.

    python bench/check_probe.py [--requests 4] [--concurrency 1,8]

Starts our GPU server (fresh and reused workers) and sends a program that runs
the seed's check step by step (two device-to-host copies, then
torch.testing.assert_close), timing each step by wall and CPU clock, and
profiling one assert_close with cProfile.
"""

import argparse
import statistics
import sys
import threading
from pathlib import Path

from kcoral import Client, Program

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_mix import Server  # noqa: E402

PROBE = r"""
import cProfile
import io
import os
import pstats
import resource
import time

import torch


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    fn()
    ru2 = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_ms": (time.perf_counter() - w) * 1e3, "cpu_ms": (time.process_time() - c) * 1e3,
            "minflt": ru2.ru_minflt - ru.ru_minflt, "nvcsw": ru2.ru_nvcsw - ru.ru_nvcsw,
            "nivcsw": ru2.ru_nivcsw - ru.ru_nivcsw}


def main():
    n = 1 << 20
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, device="cuda", generator=g)
    y = x + 1
    expected = x + 1
    torch.cuda.synchronize()
    out = {"threads": torch.get_num_threads(), "affinity": len(os.sched_getaffinity(0)),
           "omp": os.environ.get("OMP_NUM_THREADS", "")}
    holder = {}
    out["d2h_first"] = timed(lambda: holder.update(a=y.cpu(), b=expected.cpu()))
    out["d2h_again"] = timed(lambda: holder.update(a=y.cpu(), b=expected.cpu()))
    check = lambda: torch.testing.assert_close(holder["a"], holder["b"], rtol=1e-2, atol=1e-3)
    out["assert_first"] = timed(check)
    out["assert_again"] = timed(check)
    out["isclose"] = timed(lambda: torch.isclose(holder["a"], holder["b"]).all().item())
    saved = torch.get_num_threads()
    for t in (1, 4):
        torch.set_num_threads(t)
        out[f"assert_threads{t}"] = timed(check)
    torch.set_num_threads(saved)
    profile = cProfile.Profile()
    profile.enable()
    check()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
    out["profile"] = text.getvalue()[-3500:]
    return out
"""


def program() -> Program:
    p = Program()
    module = p.upload(id="probe", kind="module", source=PROBE)
    fn = p.get_function(id="main", module=module, name="main")
    result = p.run(id="result", fn=fn, args=[])
    p.return_(key="result", value=result)
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--sandbox", default="namespaces")
    args = parser.parse_args()
    for mode in ("fresh", "reused"):
        per_worker = "1" if mode == "fresh" else "0"
        server = Server(
            sys.executable,
            [
                "--device",
                "gpu",
                "--gpus",
                "0",
                "--workers-per-gpu",
                "8",
                "--sandbox",
                args.sandbox,
                "--max-requests-per-worker",
                per_worker,
            ],
        )
        try:
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                results: list[dict] = []
                lock = threading.Lock()

                def loop():
                    with Client(server.url) as client:
                        for _ in range(args.requests):
                            r = client.execute(program(), timeout_seconds=120)
                            with lock:
                                results.append(r.results.get("result") if r.completed else {"error": r.error})

                threads = [threading.Thread(target=loop) for _ in range(concurrency)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                good = [r for r in results if "error" not in r]
                print(f"\n{mode} workers, {concurrency} at once, {len(good)}/{len(results)} completed")
                for r in results:
                    if "error" in r:
                        print("  error:", str(r["error"])[:400])
                        break
                if not good:
                    continue
                print(f"  threads {good[0]['threads']}, affinity {good[0]['affinity']}, OMP {good[0]['omp']!r}")
                for key in (
                    "d2h_first",
                    "d2h_again",
                    "assert_first",
                    "assert_again",
                    "isclose",
                    "assert_threads1",
                    "assert_threads4",
                ):
                    cells = {
                        f: statistics.median(r[key][f] for r in good)
                        for f in ("wall_ms", "cpu_ms", "minflt", "nvcsw", "nivcsw")
                    }
                    print(f"  {key:<16} " + "  ".join(f"{f} {v:9.2f}" for f, v in cells.items()))
                print(good[-1]["profile"])
        finally:
            server.stop()


if __name__ == "__main__":
    main()
