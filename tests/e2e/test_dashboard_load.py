"""Issue 28's load rule, in CI: 64 viewers following GET /api/status/stream (as the page does)
cost the server under 1% of one core, and trivial requests' p50 and p99 stay within 5% of a run
without viewers (bench/dashboard_load.py, shortened; it prints its table). Latency tails on a
shared 2-core machine move by more than 5% from one minute to the next for reasons of their
own, so a second run is allowed; both failing is a failure."""

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dashboard_load.py"


def test_sixty_four_viewers_cost_under_one_percent_of_a_core_and_move_no_latency():
    runs = []
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, str(BENCH), "--seconds", "30"],
            capture_output=True,
            text=True,
            timeout=400,
        )
        runs.append(run)
        print(run.stdout, run.stderr[-2000:])
        if run.returncode == 0:
            return
    assert False, "the load rule failed twice:\n" + "\n".join(r.stdout for r in runs)
