"""A node reading a request's claim holds its run (docs/cluster.md "The run lease"): its
heartbeats list the key from the moment it decides to run the message, before it reads the claim.
A claim read waits up to 5 s on a broker that does not answer, saying nothing to JetStream
meanwhile, so the message was handed to another node, which saw the key in nobody's record and
ran it beside the first: the fault campaign's broker-pause counted it as a duplicate in CI.

Made here with one nats-server and a user per node: node A may not read claims, acknowledge
messages or hear wakes (a wake confirms a claim without a read), while its heartbeats still
land. A takes a keyed request, then node B joins; the request is handed to B after AckWait and
B waits for A. A may read again 8 s on: the program runs once, on A."""

import threading
import time
import uuid

import httpx
import pytest

from conftest import Server, call, wait_for
from kcoral import Client
from nats_cluster import CLUSTER_SECRET, AuthorizedNats, cluster_key

# Timed against AckWait and the heartbeats: alone on the machine.
pytestmark = pytest.mark.serial

ACK_WAIT_S = 3
PASSWORD = "claim-wait-test-password"
SOURCE = "import os\ndef main(seconds):\n    import time\n    time.sleep(seconds)\n    return os.getpid()\n"
# What node A may not do while it holds the request (cluster/outcome_store.cc reads a claim with
# kvStore_Get: a direct get, or a message get on an older stream).
NO_CLAIM_READS = ["$JS.API.DIRECT.GET.KV_kcoral_claims.>", "$JS.API.STREAM.MSG.GET.KV_kcoral_claims"]
NO_ACKS = ["$JS.ACK.>"]
NO_WAKES = ["kcoral.wake.>"]


@pytest.fixture
def cluster(tmp_path_factory):
    nats = AuthorizedNats(tmp_path_factory.mktemp("nats-claim"), ("front", "a", "b"), PASSWORD)
    flags = [
        "--cluster", nats.flag, "--cluster-replicas", "1", "--cluster-heartbeat-seconds", "1",
        "--cluster-run-lease-seconds", "30", "--cluster-ack-wait-seconds", str(ACK_WAIT_S), "--num-workers", "1",
    ]  # fmt: skip
    env = {"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET, "KCORAL_CLUSTER_PASSWORD": PASSWORD}

    def node(user: str, *extra: str) -> Server:
        return Server(tmp_path_factory.mktemp(f"node-{user}"), *flags, "--cluster-user", user, *extra, env=env)

    nodes = []
    try:
        nodes += [node("front", "--cluster-entry-only"), node("a")]
        yield nats, nodes, lambda: nodes.append(node("b")) or nodes[-1]
    finally:
        for n in nodes:
            n.stop()
        nats.stop()


def cluster_nodes(node: Server) -> list[dict]:
    return httpx.get(node.url + "/health", timeout=10).json()["cluster"]["nodes"]


def events_of(node: Server, event: str, key: str) -> list[dict]:
    return [e for e in node.events() if e["event"] == event and e.get("key") == key]


def test_a_request_handed_on_while_its_node_reads_the_claim_waits_for_that_node(cluster):
    nats, (front, a), start_b = cluster
    with Client(front.url, max_attempts=1) as client:
        assert client.execute(call(SOURCE, [0]), timeout_seconds=30).completed  # the cluster answers

        nats.reload("a", publish=NO_CLAIM_READS + NO_ACKS, subscribe=NO_WAKES)
        time.sleep(1)  # the reload lands
        idempotency_key = f"claim-{uuid.uuid4().hex}"
        key = cluster_key(idempotency_key)
        answers = []

        def ask():
            answers.append(client.execute(call(SOURCE, [0.3]), timeout_seconds=60, idempotency_key=idempotency_key))

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        # A took it (its one seat is now taken, so it fetches nothing more) and reads the claim,
        # in vain: its heartbeats list the key meanwhile.
        wait_for(
            lambda: any(key in r.get("running", []) for r in cluster_nodes(front)),
            10,
            "A's record to list the key",
            every=0.1,
        )
        b = start_b()
        time.sleep(2 * ACK_WAIT_S + 2)  # B joins, and is handed the request after AckWait
        assert not events_of(a, "cluster_request_started", key), "A ran the program without its claim"
        nats.reload(None)

        asking.join(60)
        assert answers and answers[0].completed, answers and answers[0].error
        assert len(events_of(a, "cluster_request_started", key)) == 1
        assert not events_of(b, "cluster_request_started", key), "B ran the program beside A"
        waited = wait_for(lambda: events_of(b, "cluster_rerun_waited", key), 10, "B's wait for A")
        assert waited[0]["holder"] == f"127.0.0.1-{a.port}" and waited[0]["listed"], waited
        assert waited[0]["outcome"] == "stored", waited
