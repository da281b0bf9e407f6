"""A fenced node takes no work (docs/cluster.md "The run lease"): a node whose heartbeats have
failed to be written for half the run lease may be presumed dead by the others before it could
finish a run, so it fetches nothing until its beats land again. The fault campaign met it as a
node whose broker sat in a cut-off minority: it still received messages, and ran them while the
others, hearing nothing from it, ran them again.

Made here with one nats-server and a user per node: node A's user loses its right to publish
heartbeats (the server's authorization, reloaded on SIGHUP) while it keeps fetching. Every
request sent then is run by node B; once A may write again, it takes work again."""

import time
import uuid

import pytest

from conftest import Server, call, wait_for
from kcoral import Client
from nats_cluster import CLUSTER_SECRET, AuthorizedNats

# Timed against the lease and the heartbeats: alone on the machine.
pytestmark = pytest.mark.serial

HEARTBEAT_S = 1
LEASE_S = 4  # fenced 2 s after A's first failing beat
PASSWORD = "fence-test-password"
SLEEPS = "import os\ndef main(seconds):\n    import time\n    time.sleep(seconds)\n    return os.getpid()\n"


@pytest.fixture
def cluster(tmp_path_factory):
    nats = AuthorizedNats(tmp_path_factory.mktemp("nats-fence"), ("front", "a", "b"), PASSWORD)
    nodes = []
    try:
        flags = [
            "--cluster", nats.flag, "--cluster-replicas", "1", "--cluster-heartbeat-seconds", str(HEARTBEAT_S),
            "--cluster-run-lease-seconds", str(LEASE_S), "--cluster-ack-wait-seconds", "3", "--num-workers", "1",
        ]  # fmt: skip
        for user, extra in (("front", ["--cluster-entry-only"]), ("a", []), ("b", [])):
            env = {"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET, "KCORAL_CLUSTER_PASSWORD": PASSWORD}
            nodes.append(
                Server(tmp_path_factory.mktemp(f"node-{user}"), *flags, "--cluster-user", user, *extra, env=env)
            )
        yield nats, nodes
    finally:
        for node in nodes:
            node.stop()
        nats.stop()


def runs_started(node: Server) -> int:
    return sum(1 for e in node.events() if e["event"] == "cluster_request_started")


def test_a_node_that_cannot_write_its_heartbeats_takes_no_work_until_it_can(cluster):
    nats, (front, a, b) = cluster
    with Client(front.url) as client:
        assert client.execute(call(SLEEPS, [0]), timeout_seconds=30).completed  # the cluster answers

        nats.reload("a", publish=["$KV.kcoral_nodes.>"])  # its heartbeats
        # A's next beat waits out JetStream's 5 s for an acknowledgement that never comes; from
        # then on its beats have failed since that beat began, more than half the lease.
        time.sleep(HEARTBEAT_S + 5 + LEASE_S / 2 + 1)
        a_before, b_before = runs_started(a), runs_started(b)
        for _ in range(6):
            result = client.execute(
                call(SLEEPS, [0.3]), timeout_seconds=60, idempotency_key=f"fence-{uuid.uuid4().hex}"
            )
            assert result.completed, result.error
        assert runs_started(a) == a_before, "the fenced node ran work"
        assert runs_started(b) - b_before == 6

        nats.reload(None)

        def a_took_one():
            client.execute(call(SLEEPS, [0.3]), timeout_seconds=60, idempotency_key=f"fence-{uuid.uuid4().hex}")
            return runs_started(a) > a_before

        wait_for(a_took_one, 30, "node A to take work again once its beats land", every=0.1)
