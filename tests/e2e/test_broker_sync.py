"""Issue 44: a node tells whether the NATS servers sync a write to disk before they acknowledge
it (cluster/broker_sync.h). A NATS client cannot see a server's settings, so the node asks each
server's monitoring endpoint (--cluster-nats-monitor) for /varz's jetstream.config.sync_always.
A broker that acknowledges first, one that cannot be asked, or no endpoint at all is a warning in
/health (cluster.broker_sync) and in the log; --cluster-allow-lazy-fsync accepts the risk, and
says what it costs. (The synced case: test_cluster_routing's health test; the dashboard's
line: test_dashboard's cluster test.)"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from conftest import Server, free_port
from nats_cluster import CLUSTER_SECRET, NatsCluster


@pytest.fixture(scope="module")
def lazy_broker(tmp_path_factory):
    """One broker on JetStream's default: acknowledges at once, syncs every two minutes."""
    broker = NatsCluster(tmp_path_factory.mktemp("lazy-nats"), size=1, lazy_fsync=True)
    yield broker
    broker.stop()


def broker_sync_of(tmp_path_factory, broker: NatsCluster, *flags: str) -> tuple[dict, list[dict]]:
    """(/health's cluster.broker_sync, the node's cluster_broker_sync events) of a node started
    with `flags`."""
    node = Server(tmp_path_factory.mktemp("node"), "--cluster", broker.flag, "--cluster-replicas", "1",
                  "--cluster-entry-only", *flags, env={"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET})  # fmt: skip
    try:
        sync = httpx.get(node.url + "/health", timeout=10).json()["cluster"]["broker_sync"]
        return sync, [e for e in node.events() if e["event"] == "cluster_broker_sync"]
    finally:
        node.stop()


def test_a_broker_that_acknowledges_before_it_syncs_is_a_warning_naming_it(tmp_path_factory, lazy_broker):
    sync, events = broker_sync_of(tmp_path_factory, lazy_broker, "--cluster-nats-monitor", lazy_broker.monitor_flag)
    assert (sync["state"], sync["warning"]) == ("lazy", True), sync
    assert lazy_broker.monitor_flag in sync["message"] and "sync_interval: always" in sync["message"]
    assert "--cluster-allow-lazy-fsync" in sync["message"]
    assert sync["brokers"] == [{"monitor": lazy_broker.monitor_flag, "sync_always": False,
                                "version": ".".join(map(str, lazy_broker.version))}]  # fmt: skip
    assert [(e["level"], e["state"]) for e in events] == [("WARNING", "lazy")], events


def test_without_monitoring_endpoints_the_node_says_it_cannot_tell(tmp_path_factory, lazy_broker):
    sync, events = broker_sync_of(tmp_path_factory, lazy_broker)
    assert (sync["state"], sync["warning"], sync["brokers"]) == ("unchecked", True, []), sync
    assert "--cluster-nats-monitor" in sync["message"] and "--cluster-allow-lazy-fsync" in sync["message"]
    assert [e["state"] for e in events] == ["unchecked"], events


def test_a_broker_that_cannot_be_asked_is_a_warning_with_its_reason(tmp_path_factory, lazy_broker):
    nobody = f"http://127.0.0.1:{free_port()}"
    sync, _ = broker_sync_of(tmp_path_factory, lazy_broker, "--cluster-nats-monitor", nobody)
    assert (sync["state"], sync["warning"]) == ("unknown", True), sync
    assert nobody in sync["message"] and "refused" in sync["message"], sync


def test_allowing_lazy_brokers_silences_the_warning_and_says_what_it_costs(tmp_path_factory, lazy_broker):
    sync, events = broker_sync_of(tmp_path_factory, lazy_broker, "--cluster-allow-lazy-fsync")
    assert (sync["state"], sync["warning"]) == ("lazy_allowed", False), sync
    assert "power" in sync["message"] and "run a program again" in sync["message"]
    assert events == []


def test_allowing_lazy_brokers_and_checking_them_is_refused():
    run = subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--cluster", "nats://127.0.0.1:1", "--cluster-allow-lazy-fsync",
         "--cluster-nats-monitor", "http://127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode != 0
    assert "--cluster-nats-monitor excludes --cluster-allow-lazy-fsync" in run.stderr + run.stdout, run.stderr
