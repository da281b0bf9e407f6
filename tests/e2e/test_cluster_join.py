"""Issue 26, joining (docs/cluster.md): `--cluster nats://...` makes a server a node of a KCoral
cluster on a real 3-server NATS JetStream cluster. Every node's /health shows the whole
cluster's view (node ids, URLs, pools with target and load); a node that stops leaves the view
at once, one that is killed leaves it after three missed heartbeats; without NATS the server
refuses to start and says why."""

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from conftest import Server, free_port, wait_for
from nats_cluster import CLUSTER_SECRET, NatsCluster  # never skipped: make deps installs nats-server


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    cluster = NatsCluster(tmp_path_factory.mktemp("nats"))
    yield cluster
    cluster.stop()


SECRET = {"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET}


def node(tmp_path_factory, nats, *flags):
    return Server(
        tmp_path_factory.mktemp("node"),
        "--cluster",
        nats.flag,
        "--cluster-heartbeat-seconds",
        "1",
        *flags,
        env=SECRET,
    )


def cluster_view(server) -> dict:
    return httpx.get(server.url + "/health", timeout=10).json()["cluster"]


def until(predicate, timeout: float, what: str):
    """conftest's wait_for, asking every 0.2 s."""
    return wait_for(predicate, timeout, what, every=0.2)


def node_ids(server) -> set[str]:
    return {n["node_id"] for n in cluster_view(server)["nodes"]}


def test_every_node_sees_the_whole_cluster(tmp_path_factory, nats):
    a = node(tmp_path_factory, nats)
    b = node(tmp_path_factory, nats)
    try:
        for server in (a, b):
            view = cluster_view(server)
            assert view["connected"] is True
            assert view["servers"] == nats.urls
            assert view["node_id"] == f"127.0.0.1-{server.port}"
            both = {f"127.0.0.1-{a.port}", f"127.0.0.1-{b.port}"}
            until(lambda s=server: node_ids(s) >= both, 15, f"both nodes in {server.url}'s view")
        record = next(n for n in cluster_view(a)["nodes"] if n["node_id"] == f"127.0.0.1-{b.port}")
        assert record["url"] == b.url
        assert record["age_s"] < 5
        pool = record["pools"][0]
        assert pool["pool"] == "cpu" and pool["device"] == "cpu"
        assert pool["request_capacity"] >= 1 and "versions" in pool
        # Both CPU nodes run the same toolchain: one pool of two nodes, their seats summed.
        pools = cluster_view(a)["pools"]
        assert [p["pool"] for p in pools] == ["cpu"], pools
        assert sorted(pools[0]["nodes"]) == sorted([f"127.0.0.1-{a.port}", f"127.0.0.1-{b.port}"])
        assert pools[0]["request_capacity"] == sum(n["pools"][0]["request_capacity"] for n in cluster_view(a)["nodes"])
        joined = [e for e in a.events() if e["event"] == "cluster_joined"]
        assert joined and joined[0]["node_id"] == f"127.0.0.1-{a.port}"
    finally:
        b.stop()
    try:  # a node that stops takes itself out at once
        until(lambda: f"127.0.0.1-{b.port}" not in node_ids(a), 5, "the stopped node to leave the view")
    finally:
        a.stop()


def test_a_killed_node_leaves_the_view_after_missed_heartbeats(tmp_path_factory, nats):
    a = node(tmp_path_factory, nats)
    b = node(tmp_path_factory, nats)
    try:
        b_id = f"127.0.0.1-{b.port}"
        until(lambda: b_id in node_ids(a), 15, "the second node in the view")
        os.killpg(b.process.pid, signal.SIGKILL)
        b.process.wait()
        started = time.monotonic()
        until(lambda: b_id not in node_ids(a), 15, "the killed node to leave the view")
        assert time.monotonic() - started < 10  # three 1 s beats, plus the bucket's expiry sweep
    finally:
        b.stop()
        a.stop()


def test_a_node_survives_losing_one_nats_server(tmp_path_factory, nats):
    a = node(tmp_path_factory, nats)
    try:
        index = next(i for i, url in enumerate(nats.urls) if url == cluster_view(a)["connected_url"])
        nats.processes[index].send_signal(signal.SIGKILL)
        nats.processes[index].wait()
        nats.processes[index] = None
        # It reconnects to another server, and the R3 bucket still answers.
        view = until(lambda: (v := cluster_view(a))["connected"] and v["nodes"] and v, 20, "a reconnection")
        assert view["connected_url"] != nats.urls[index], view
        assert f"127.0.0.1-{a.port}" in {n["node_id"] for n in view["nodes"]}
        # Its watch of the nodes' bucket goes on (or is made again): it hears its own beats
        # again, past the bucket's leader election if the dead server led it.
        time.sleep(4)
        try:
            until(lambda: [n["age_s"] < 1.5 for n in cluster_view(a)["nodes"]] == [True], 20, "its own fresh beat")
        except AssertionError as missed:  # which nodes it saw, and how stale: for the next reader
            raise AssertionError(f"{missed}; the last view: {cluster_view(a)}") from None
    finally:
        a.stop()


def test_a_node_whose_nats_server_hangs_moves_to_another(tmp_path_factory):
    """A server SIGSTOPped keeps its TCP connections open. With cnats's default pings (every two
    minutes) the node stayed on it that long, its heartbeats failing; pinged every heartbeat, it
    moves to another server within a few seconds and its beats land again."""
    hanging = NatsCluster(tmp_path_factory.mktemp("nats-hang"))
    a = node(tmp_path_factory, hanging)
    stopped = None
    try:
        index = next(i for i, url in enumerate(hanging.urls) if url == cluster_view(a)["connected_url"])
        stopped = hanging.processes[index]
        stopped.send_signal(signal.SIGSTOP)
        hung_at = time.monotonic()
        view = until(
            lambda: (v := cluster_view(a))["connected"] and v["connected_url"] != hanging.urls[index] and v,
            15,
            "a move to another server",
        )
        print(f"moved to {view['connected_url']} {time.monotonic() - hung_at:.1f} s after its server hung")
        until(lambda: [n["age_s"] < 1.5 for n in cluster_view(a)["nodes"]] == [True], 20, "its own fresh beat")
    finally:
        if stopped is not None:
            stopped.send_signal(signal.SIGCONT)
        a.stop()
        hanging.stop()


def test_without_nats_the_server_refuses_to_start(tmp_path):
    dead = f"nats://127.0.0.1:{free_port()}"  # nobody listens there
    done = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--port", str(free_port()), "--log-dir", "",
         "--cluster", dead],
        capture_output=True, text=True, timeout=60, env={**os.environ, **SECRET},
    )  # fmt: skip
    assert done.returncode != 0
    assert "--cluster" in done.stderr and "NATS" in done.stderr, done.stderr


def test_one_nats_server_without_cluster_replicas_1_is_refused_naming_the_flag(tmp_path_factory):
    """A new user's first try (issue 44): one nats-server, and the default three replicas."""
    one = NatsCluster(tmp_path_factory.mktemp("nats-one"), size=1)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--port", str(free_port()), "--log-dir", "",
             "--cluster", one.flag],
            capture_output=True, text=True, timeout=60, env={**os.environ, **SECRET},
        )  # fmt: skip
        assert done.returncode != 0
        assert "3 replicas" in done.stderr and "--cluster-replicas 1" in done.stderr, done.stderr
    finally:
        one.stop()


def test_a_cluster_without_a_secret_is_refused(tmp_path, nats):
    env = {k: v for k, v in os.environ.items() if k != "KCORAL_CLUSTER_SECRET"}
    done = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--port", str(free_port()), "--log-dir", "",
         "--cluster", nats.flag],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode != 0
    assert "KCORAL_CLUSTER_SECRET" in done.stderr and "--cluster-secret-file" in done.stderr, done.stderr


def test_cluster_options_need_cluster(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--cluster-user", "kc"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "--cluster" in done.stderr, done.stderr


def test_an_idle_threshold_shorter_than_two_ack_waits_is_refused_naming_both():
    """A dead node's request must be redelivered before its tenant's queue can idle out."""
    done = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--cluster", "nats://127.0.0.1:1",
         "--cluster-ack-wait-seconds", "10", "--cluster-idle-tenant-seconds", "15"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--cluster-idle-tenant-seconds 15 must be at least twice --cluster-ack-wait-seconds (10)" in done.stderr


def test_a_run_lease_shorter_than_three_heartbeats_is_refused_naming_both():
    """A node that missed a beat or two must not lose its runs to other nodes."""
    done = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--cluster", "nats://127.0.0.1:1",
         "--cluster-heartbeat-seconds", "2", "--cluster-run-lease-seconds", "5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--cluster-run-lease-seconds 5 must be at least three --cluster-heartbeat-seconds (6)" in done.stderr
