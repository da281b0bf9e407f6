"""Issue 26, the kill test in brief: bench/cluster_soak.py (docs/cluster.md "Failure table") with
120 requests at concurrency 12, a node SIGKILLed and restarted every 8 s and the stream's leader
once, must answer every request once with its value and show JetStream redelivering work. The
full run (2,000 requests at concurrency 32) is the bench itself."""

import json
import signal
import subprocess
import sys

from conftest import REPO

SOAK_TIME_LIMIT_S = 150  # about 40 s on 2 cores; the bench stops all it started on SIGTERM


def test_killed_nodes_and_leader_lose_and_duplicate_nothing(tmp_path):
    command = [
        sys.executable, str(REPO / "bench" / "cluster_soak.py"), "--requests", "120", "--concurrency", "12",
        "--kill-every", "8", "--leader-kill-at", "12", "--workers-per-node", "4", "--out", str(tmp_path),
    ]  # fmt: skip
    soak = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = soak.communicate(timeout=SOAK_TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        soak.send_signal(signal.SIGTERM)
        output, _ = soak.communicate(timeout=60)
        raise AssertionError(f"the soak ran past {SOAK_TIME_LIMIT_S} s:\n{output[-4000:]}") from None
    report = json.loads((tmp_path / "cluster_soak.json").read_text())
    assert report["answered"] == report["right"] == 120, output[-4000:]
    assert (report["lost"], report["wrong"], report["duplicated"]) == (0, 0, 0), output[-4000:]
    assert report["redeliveries"] > 0, output[-4000:]
    assert report["kills"] >= 1 and report["leader_kills"] == 1, output[-4000:]
    assert report["leaked_processes"] == 0
    assert soak.returncode == 0, output[-4000:]
