"""What house-keeping beside a timing span does to timed kernels (issue 25).

    python bench/housekeeping_perturbation.py [--patterns all|a,b,...] [--quiet-runs 3]
        [--churn-runs 2] [--parts contexts,create,...] [--part-patterns a,b,...] [--json OUT]

Starts one GPU server (its default --housekeeping unless given; fresh process per request) and
times every pattern of the honest corpus (tests/gpu/honest_patterns.py; defences on,
one benchmark per request) in rounds, in this order in one run:

  quiet, churn, quiet, churn, quiet ...   (--quiet-runs quiet rounds, --churn-runs churn rounds)

- quiet: nothing else on the server. Each request sleeps --settle-s after its setup (without
  the GPU lease) so its own replacement stand-by is ready before it times; a result whose
  span still overlapped house-keeping (timing_spans.housekeeping_beside > 0) is retried.
- churn: --churners clients send trivial requests on fresh workers all the time, so stand-bys
  create contexts and retired workers destroy theirs beside the spans (the result counts them).

Then, for --part-patterns, each part of house-keeping alone beside the spans
(bench/gpu_churn.py: contexts, create, teardown, modules, alloc, kernels), against quiet
rounds taken in the same phase loop.

Verdict per pattern (issue 25 "Done means"): the churn median is within max(0.5%, quiet
spread) of the quiet median (quiet median: the median of the quiet rounds' medians; quiet
spread: the largest difference between two quiet rounds' medians), and the churn p99 is
within 2% of the quiet p99 (the median of the quiet rounds' p99s) or inside the quiet
rounds' own p99 range. Prints a table; --json writes every number.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from kcoral import Client, Program

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "gpu"))
import honest_patterns as hp  # noqa: E402
from programs import TENSORS, single_call  # noqa: E402

from eval_mix import Server  # noqa: E402 - bench/ is this script's directory

PART_PATTERNS = ("launch_bound_tiny", "memory_bound_large", "compute_bound_matmul_4096", "l2_resident")
SETTLE = r"""
import time

def settle(seconds):
    time.sleep(seconds)
    return 0
"""


def timed_program(pattern: hp.Pattern, settle_s: float) -> Program:
    program = Program()
    kernel, arguments, helpers = hp.add_pattern(program, pattern)
    pause = program.upload(id="settle_module", kind="module", source=SETTLE)
    # cpu_only: the settle holds no GPU lease, so churning requests get the GPU meanwhile.
    settle = program.get_function(id="settle", module=pause, name="settle", cpu_only=True)
    program.run(id="settled", fn=settle, args=[settle_s])
    benchmark = program.get_function(id="benchmark", module=helpers, name="benchmark")
    timing = program.run(id="on", fn=benchmark, args=[kernel, *arguments, hp.cfg_for(pattern, "on")])
    program.return_(key="on", value=timing)
    return program


def time_pattern(client: Client, pattern: hp.Pattern, settle_s: float, quiet: bool) -> dict:
    """One request; quiet ones are retried (up to 3 times) while house-keeping overlapped the span."""
    for attempt in range(3):
        result = client.execute(timed_program(pattern, settle_s), timeout_seconds=120)
        if not result.completed:
            return {"error": (result.error or {}).get("message", result.status)[:300]}
        spans = result.timing_spans or {}
        if not quiet or spans.get("housekeeping_beside", 0) == 0 or attempt == 2:
            timing = result.results["on"]
            integrity = timing.get("integrity", {})
            return {
                "median_us": timing["latency_ms_median"] * 1e3,
                "p99_us": timing["latency_ms_p99"] * 1e3,
                "max_us": timing["latency_ms_max"] * 1e3,
                "beside": spans.get("housekeeping_beside", 0),
                "trusted": integrity.get("verified") is True and integrity.get("trusted") is True,
                "flags": integrity.get("flags", []),
                "retries": attempt,
            }
    raise AssertionError("unreachable")


class ServerChurn:
    """--churners clients sending trivial fresh requests until stopped."""

    def __init__(self, url: str, churners: int):
        self.url, self.stop, self.done = url, threading.Event(), []
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(churners)]

    def loop(self) -> None:
        with Client(self.url) as client:
            while not self.stop.is_set():
                result = client.execute(single_call(TENSORS, "plus_one", [1]), timeout_seconds=60)
                self.done.append(result.completed)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        time.sleep(1.0)  # the churn under way before the first timed request
        return self

    def __exit__(self, *_):
        self.stop.set()
        for thread in self.threads:
            thread.join()


class PartChurn:
    """bench/gpu_churn.py PART in its own process group, stopped by SIGTERM."""

    def __init__(self, part: str, gpu: int):
        self.part = part
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "bench" / "gpu_churn.py"), part, "--device", str(gpu)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.count = None

    def __enter__(self):
        if self.process.stdout.readline().strip() != "ready":
            self.process.kill()
            raise SystemExit(f"gpu_churn {self.part} did not start")
        time.sleep(0.5)
        return self

    def __exit__(self, *_):
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            out, _ = self.process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            out, _ = self.process.communicate()
        done = [line for line in out.splitlines() if line.startswith("done ")]
        self.count = int(done[-1].split()[1]) if done else None


def run_round(client: Client, patterns: list, settle_s: float, quiet: bool, label: str) -> dict:
    out = {}
    started = time.monotonic()
    for pattern in patterns:
        out[pattern.name] = time_pattern(client, pattern, settle_s, quiet)
    print(f">> {label}: {len(patterns)} patterns in {time.monotonic() - started:.0f} s", flush=True)
    return out


def judge(quiet: list, busy: list) -> dict:
    """quiet, busy: one dict per round for one pattern. Issue 25's criteria."""
    medians = [r["median_us"] for r in quiet]
    p99s = [r["p99_us"] for r in quiet]
    quiet_median, quiet_p99 = statistics.median(medians), statistics.median(p99s)
    spread = max(medians) - min(medians)
    allowed = max(0.005 * quiet_median, spread)
    busy_median = statistics.median(r["median_us"] for r in busy)
    busy_p99 = max(r["p99_us"] for r in busy)  # the worse churn round
    median_ok = abs(busy_median - quiet_median) <= allowed
    p99_ok = abs(busy_p99 - quiet_p99) <= 0.02 * quiet_p99 or min(p99s) <= busy_p99 <= max(p99s)
    return {
        "quiet_median_us": quiet_median,
        "quiet_spread_us": spread,
        "busy_median_us": busy_median,
        "median_delta_pct": 100 * (busy_median - quiet_median) / quiet_median,
        "median_allowed_pct": 100 * allowed / quiet_median,
        "median_ok": median_ok,
        "quiet_p99_us": quiet_p99,
        "busy_p99_us": busy_p99,
        "p99_delta_pct": 100 * (busy_p99 - quiet_p99) / quiet_p99,
        "p99_ok": p99_ok,
        "quiet_max_us": max(r["max_us"] for r in quiet),
        "busy_max_us": max(r["max_us"] for r in busy),
        "beside": sum(r["beside"] for r in busy),
        "trusted": all(r["trusted"] for r in quiet + busy),
    }


def print_table(title: str, verdicts: dict) -> None:
    print(f"\n{title}")
    header = (
        f"{'pattern':38} {'quiet med us':>12} {'spread':>7} {'busy d%':>8} {'allow%':>7} "
        f"{'quiet p99':>10} {'busy d%':>8} {'max q/b us':>16} {'beside':>6}  verdict"
    )
    print(header)
    print("-" * len(header))
    for name, v in verdicts.items():
        if "error" in v:
            print(f"{name:38} error: {v['error']}")
            continue
        verdict = "ok" if v["median_ok"] and v["p99_ok"] else ("MEDIAN" if not v["median_ok"] else "P99")
        if not v["trusted"]:
            verdict += " untrusted"
        print(
            f"{name:38} {v['quiet_median_us']:12.3f} {v['quiet_spread_us']:7.3f} {v['median_delta_pct']:+8.2f} "
            f"{v['median_allowed_pct']:7.2f} {v['quiet_p99_us']:10.3f} {v['p99_delta_pct']:+8.2f} "
            f"{v['quiet_max_us']:7.1f}/{v['busy_max_us']:<8.1f} {v['beside']:6d}  {verdict}"
        )
    held = sum(1 for v in verdicts.values() if "error" not in v and v["median_ok"] and v["p99_ok"])
    print(f"{held}/{len(verdicts)} patterns within the criteria")


def verdicts_of(rounds: list, patterns: list) -> dict:
    out = {}
    for pattern in patterns:
        quiet = [r["results"][pattern.name] for r in rounds if r["kind"] == "quiet"]
        busy = [r["results"][pattern.name] for r in rounds if r["kind"] != "quiet"]
        failed = [x for x in quiet + busy if "error" in x]
        out[pattern.name] = {"error": failed[0]["error"]} if failed else judge(quiet, busy)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patterns", default="all", help="'all' or comma-separated names (default all)")
    parser.add_argument("--quiet-runs", type=int, default=3, help="quiet rounds (at least 3 for a spread)")
    parser.add_argument("--churn-runs", type=int, default=2, help="rounds with fresh workers churning (0: parts only)")
    parser.add_argument("--churners", type=int, default=3, help="clients churning fresh workers")
    parser.add_argument("--settle-s", type=float, default=0.6, help="sleep after setup, before timing")
    parser.add_argument("--parts", default="", help="parts of gpu_churn.py to try alone ('' skips)")
    parser.add_argument("--part-patterns", default=",".join(PART_PATTERNS))
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--sandbox", default="namespaces")
    parser.add_argument("--housekeeping", default="", help="the server's --housekeeping (default: its default)")
    parser.add_argument("--json", default="", help="write every number here")
    args = parser.parse_args()
    if args.quiet_runs < 3:
        parser.error("--quiet-runs must be at least 3: a quiet spread needs three quiet rounds")
    names = hp.NAMES if args.patterns == "all" else [n for n in args.patterns.split(",") if n]
    unknown = [n for n in names if n not in hp.BY_NAME]
    if unknown:
        parser.error(f"unknown patterns {unknown}; known: {', '.join(hp.NAMES)}")
    patterns = [hp.BY_NAME[n] for n in names]
    flags = ["--device", "gpu", "--gpus", str(args.gpu), "--workers-per-gpu", "8", "--sandbox", args.sandbox]
    flags += ["--max-timeout-seconds", "120"] + (["--housekeeping", args.housekeeping] if args.housekeeping else [])
    server = Server(sys.executable, flags, label="ours")
    report = {"args": vars(args)}
    try:
        with Client(server.url) as client:
            kinds = ["quiet"] + ["churn", "quiet"] * args.churn_runs
            kinds += ["quiet"] * max(0, args.quiet_runs - kinds.count("quiet"))
            part_patterns = [hp.BY_NAME[n] for n in args.part_patterns.split(",") if n]
            first = patterns if args.churn_runs else part_patterns
            run_round(client, first, args.settle_s, True, "compile caches and first loads (not counted)")
            rounds = []
            if not args.churn_runs:
                kinds = []
            for index, kind in enumerate(kinds):
                if kind == "quiet":
                    results = run_round(client, patterns, args.settle_s, True, f"round {index}: quiet")
                    rounds.append({"kind": kind, "results": results})
                else:
                    with ServerChurn(server.url, args.churners) as churn:
                        results = run_round(client, patterns, args.settle_s, False, f"round {index}: churn")
                    rounds.append({"kind": kind, "results": results, "churn_requests": len(churn.done)})
            report["rounds"] = rounds
            if rounds:
                report["verdicts"] = verdicts_of(rounds, patterns)
                print_table(
                    "Fresh workers churning beside the spans (the server's own house-keeping)", report["verdicts"]
                )

            parts = [p for p in args.parts.split(",") if p]
            report["parts"] = {}
            for part in parts:
                part_rounds = [
                    {"kind": "quiet", "results": run_round(client, part_patterns, args.settle_s, True, "quiet")}
                ]
                with PartChurn(part, args.gpu) as churn:
                    busy = run_round(client, part_patterns, args.settle_s, True, f"part {part}")
                part_rounds.append({"kind": part, "results": busy})
                part_rounds.append(
                    {"kind": "quiet", "results": run_round(client, part_patterns, args.settle_s, True, "quiet")}
                )
                part_rounds.append(
                    {"kind": "quiet", "results": run_round(client, part_patterns, args.settle_s, True, "quiet")}
                )
                report["parts"][part] = {"rounds": part_rounds, "operations": churn.count}
                report["parts"][part]["verdicts"] = verdicts_of(part_rounds, part_patterns)
                print_table(
                    f"{part} alone beside the spans ({churn.count} operations)", report["parts"][part]["verdicts"]
                )
    finally:
        server.stop()
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
