"""Issue 44 item 5: `kcoral cluster up|status|down` (kcoral/tools/local_cluster.py) starts three
NATS brokers and two CPU nodes on this machine, sends a request through them, and leaves them
running; `down` stops every process it started, by pid, and removes the cluster's folder."""

import json
import subprocess
import sys

import pytest
from conftest import alive

# Three brokers and two nodes brought up from nothing: beside 4 busy test workers the brokers
# took longer to place a 3-replica stream than the node waited, twice in clean-clone runs.
pytestmark = pytest.mark.serial


def kcoral_cluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoral", "cluster", *args], capture_output=True, text=True,
                          timeout=180)  # fmt: skip


def test_a_local_cluster_comes_up_answers_and_goes_down_leaving_nothing(tmp_path):
    folder = tmp_path / "cluster"
    up = kcoral_cluster("up", "--dir", str(folder))
    state = json.loads((folder / "cluster.json").read_text()) if (folder / "cluster.json").exists() else {}
    pids = state.get("node_pids", []) + state.get("broker_pids", [])
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "answered 42" in up.stdout and "dashboard: http://127.0.0.1:" in up.stdout, up.stdout
        assert len(state["node_pids"]) == 2 and len(state["broker_pids"]) == 3
        assert all(alive(pid) for pid in pids)

        status = kcoral_cluster("status", "--dir", str(folder))
        assert status.returncode == 0 and status.stdout.count("2 nodes in view, brokers synced") == 2, status.stdout

        again = kcoral_cluster("up", "--dir", str(folder))
        assert again.returncode == 1 and "already up" in again.stdout, again.stdout
    finally:
        down = kcoral_cluster("down", "--dir", str(folder))
    assert down.returncode == 0, down.stdout + down.stderr
    assert not [pid for pid in pids if alive(pid)]
    assert not folder.exists()


def test_cluster_help_teaches_the_three_actions():
    shown = kcoral_cluster("--help")
    assert shown.returncode == 0
    for action in ("up", "status", "down", "--dir", "--keep"):
        assert action in shown.stdout, shown.stdout
