"""Where a grade's GPU lease goes (issue 42, docs/grading.md "The lease"): the honest 50 us kernel
of tests/gpu/test_grade.py (a float32 matmul at n=1024, three more shapes) graded --reps times on
a GPU server started here; per phase, the lease the server measured, each instruction's time as
the server saw it (run_timeline events), and the phase's own steps (`steps_ms`). Medians.

    python3 bench/grade_lease.py --reps 5          # on a GPU machine (scripts/gpu-env.sh)
    python3 bench/grade_lease.py --url http://gpu:8001 --reps 5   # a running server: no instruction times
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gpu"))

from eval_mix import Server  # noqa: E402

from kcoral import Client  # noqa: E402
from kcoral.grading import drive, grade_steps  # noqa: E402
from kcoral.grading.verdict import PHASES  # noqa: E402
from test_grade import HONEST as CANDIDATE  # noqa: E402 - the test's workload, graded the same way
from test_grade import MAKE_INPUTS, REFERENCE, SHAPES  # noqa: E402


def instruction_names(program) -> list[str]:
    names = []
    for ins in program.instructions:
        what = ins.get("id") or ins.get("key") or ""
        names.append(f"{ins['op']}{'/' + ins['kind'] if ins.get('kind') else ''} {what}".strip())
    return names


def one_grade(client: Client, timeout: float) -> tuple[dict, list]:
    """The verdict and, per phase, (program, result, seconds on the client)."""
    seen = []

    def execute(program):
        started = time.perf_counter()
        result = client.execute(program, timeout_seconds=timeout)
        seen.append((program, result, time.perf_counter() - started))
        return result

    verdict = drive(grade_steps(CANDIDATE, REFERENCE, MAKE_INPUTS, {"shapes": SHAPES}), execute)
    return verdict, seen


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running GPU server (default: start one on GPU 0)")
    parser.add_argument("--reps", type=int, default=5, help="grades measured, after one not counted (default 5)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds each program may take")
    args = parser.parse_args()

    server = None if args.url else Server(sys.executable, ["--device", "gpu", "--gpus", "0", "--workers-per-gpu", "4"])
    url = args.url or server.url
    try:
        with Client(url) as client:
            one_grade(client, args.timeout)  # the first pays the server's first-use costs
            grades = [one_grade(client, args.timeout) for _ in range(args.reps)]
        timelines = {e["request_id"]: e for e in server.events("run_timeline")} if server else {}
    finally:
        if server:
            server.stop()

    verdicts = [v for v, _ in grades]
    print(
        f"{len(grades)} grades; correct {sum(v['correct'] for v in verdicts)}, trusted {sum(v['trusted'] for v in verdicts)}"
    )
    print(f"lease per grade (ms): median {median([v['lease_ms'] for v in verdicts]):.0f}, "
          f"max {max(v['lease_ms'] for v in verdicts):.0f}; the issue's bound 2000")  # fmt: skip
    for index, phase in enumerate(PHASES):
        runs = [seen[index] for _, seen in grades if len(seen) > index]
        if not runs:
            continue
        program = runs[0][0]
        print(f"\n## {phase}: lease {median([r.lease_held_ms for _, r, _ in runs]):.1f} ms, "
              f"client wall {median([s * 1000 for _, _, s in runs]):.1f} ms")  # fmt: skip
        print("| instruction | ms | leased |")
        print("|---|---|---|")
        names = instruction_names(program)
        for i, name in enumerate(names):
            times = [
                t for _, r, _ in runs for t in timelines.get(r.request_id, {}).get("instructions", []) if t[0] == i
            ]
            if times:
                leased = sum(1 for t in times if t[3])
                print(f"| {i} {name} | {median([t[1] for t in times]):.1f} | {leased}/{len(times)} |")
        steps: dict[str, list[float]] = {}
        for _, result, _ in runs:
            value = next(iter(result.results.values()), None) if result.completed else None
            for step, ms in (value or {}).get("steps_ms", {}).items() if isinstance(value, dict) else ():
                steps.setdefault(step, []).append(ms)
        if steps:
            print("| step inside the phase | ms |")
            print("|---|---|")
            for step, values in steps.items():
                print(f"| {step} | {median(values):.1f} |")


if __name__ == "__main__":
    main()
