"""Issue 44, the lease on a run (docs/cluster.md "The run lease"): a node's heartbeat lists the
keys it runs, and a request that JetStream hands to another node while its first node is silent
waits for that node's outcome instead of running the program again, unless the node stays
silent past the lease (then it is presumed dead and the program runs again elsewhere). Each test
has a front door (it runs nothing) and two nodes that run; the program appends a line to a file
before it sleeps, so the file counts its runs."""

import os
import signal
import threading
import time
import uuid

import httpx
import pytest

from conftest import Server, call, wait_for
from nats_cluster import CLUSTER_SECRET, NatsCluster, cluster_key

# A pause timed against AckWait, a rerun timed to the lease within a second or three: alone on the
# machine (`make e2e` runs these after the rest).
pytestmark = pytest.mark.serial

ACK_WAIT_S = 3
HEARTBEAT_S = 1
# Appends "<token> <unix time>" and answers the token: which run the answer came from.
SOURCE = (
    "import os, time, uuid\n"
    "def main(path, seconds):\n"
    "    token = uuid.uuid4().hex\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(f'{token} {time.time():.3f}\\n')\n"
    "    time.sleep(seconds)\n"
    "    return token\n"
)


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    cluster = NatsCluster(tmp_path_factory.mktemp("nats"))
    yield cluster
    cluster.stop()


def start_nodes(tmp_path_factory, nats, lease_s: int) -> list[Server]:
    flags = [
        "--cluster", nats.flag, "--cluster-nats-monitor", nats.monitor_flag,
        "--cluster-heartbeat-seconds", str(HEARTBEAT_S), "--cluster-ack-wait-seconds", str(ACK_WAIT_S),
        "--cluster-run-lease-seconds", str(lease_s), "--num-workers", "1",
        "--sandbox", "none",  # the program writes the runs' file outside any sandbox
    ]  # fmt: skip
    nodes = []
    for extra in (["--cluster-entry-only"], [], []):
        nodes.append(
            Server(tmp_path_factory.mktemp("node"), *flags, *extra, env={"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET})
        )
    ids = {f"127.0.0.1-{n.port}" for n in nodes}
    wait_for(lambda: ids <= {r["node_id"] for r in cluster_nodes(nodes[0])}, 20, "every node in the view", every=0.2)
    return nodes


def cluster_nodes(node: Server) -> list[dict]:
    return httpx.get(node.url + "/health", timeout=10).json()["cluster"]["nodes"]


class Request:
    """One keyed request through the front door, on a thread of its own."""

    def __init__(self, entry: Server, path, seconds: float):
        from kcoral import Client

        self.key = f"lease-{uuid.uuid4().hex[:8]}"
        self.result = None

        def send():
            with Client(entry.url, max_attempts=1) as client:
                self.result = client.execute(
                    call(SOURCE, [str(path), seconds]), timeout_seconds=60, idempotency_key=self.key
                )

        self.thread = threading.Thread(target=send)
        self.thread.start()

    def holder(self, entry: Server, nodes: list[Server]) -> Server:
        """The node whose heartbeat lists the request's key as running."""
        key = cluster_key(self.key)
        held = wait_for(
            lambda: next((r["node_id"] for r in cluster_nodes(entry) if key in r.get("running", [])), None),
            30,
            "a heartbeat listing the request as running",
            every=0.1,
        )
        return next(n for n in nodes if f"127.0.0.1-{n.port}" == held)

    def answer(self) -> str:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        assert self.result.completed, self.result.error
        return self.result.results["out"]


def runs(path) -> list[tuple[str, float]]:
    return [(token, float(at)) for token, at in (line.split() for line in path.read_text().splitlines())]


def waits(node: Server) -> list[dict]:
    return [e for e in node.events() if e["event"] == "cluster_rerun_waited"]


def test_a_node_paused_past_ack_wait_runs_its_program_once(tmp_path_factory, nats):
    """The node running a keyed program is SIGSTOPped for twice AckWait: JetStream hands the
    request to the other node, which finds the paused node still listed as its holder and waits.
    Resumed, the paused node stores its outcome: the program ran once, and the answer is that
    run's."""
    nodes = start_nodes(tmp_path_factory, nats, lease_s=15)
    paused = None
    try:
        path = tmp_path_factory.mktemp("runs") / "runs.txt"
        request = Request(nodes[0], path, seconds=2)
        holder = request.holder(nodes[0], nodes)
        wait_for(lambda: path.exists() and runs(path), 10, "the program to start")
        paused = holder.process.pid
        os.killpg(paused, signal.SIGSTOP)
        time.sleep(2 * ACK_WAIT_S)
        other = next(n for n in nodes[1:] if n is not holder)
        os.killpg(paused, signal.SIGCONT)
        paused = None
        answer = request.answer()
        assert [token for token, _ in runs(path)] == [answer]
        waited = wait_for(lambda: waits(other), 10, "the other node's wait")
        assert waited[0]["outcome"] == "stored" and waited[0]["listed"], waited
        assert waited[0]["holder"] == f"127.0.0.1-{holder.port}", waited
    finally:
        if paused is not None:
            os.killpg(paused, signal.SIGCONT)
        for n in nodes:
            n.stop()


def test_a_holder_silent_past_the_lease_is_presumed_dead(tmp_path_factory, nats):
    """The node running a keyed program is SIGKILLed: the other node waits for it until the lease
    (counted from its last heartbeat) runs out, then runs the program; the answer is the rerun's."""
    lease_s = 8
    nodes = start_nodes(tmp_path_factory, nats, lease_s=lease_s)
    try:
        path = tmp_path_factory.mktemp("runs") / "runs.txt"
        request = Request(nodes[0], path, seconds=3)
        holder = request.holder(nodes[0], nodes)
        wait_for(lambda: path.exists() and runs(path), 10, "the program to start")
        os.killpg(holder.process.pid, signal.SIGKILL)
        holder.process.wait()
        killed_at = time.time()
        answer = request.answer()
        (_, _), (rerun, rerun_at) = runs(path)
        assert answer == rerun
        # Its last heartbeat came at most one heartbeat before the kill; AckWait alone would
        # have run it again within 3 s.
        assert lease_s - HEARTBEAT_S - 0.5 <= rerun_at - killed_at <= lease_s + 3, rerun_at - killed_at
        other = next(n for n in nodes[1:] if n is not holder)
        waited = wait_for(lambda: waits(other), 10, "the other node's wait")
        assert waited[0]["outcome"] == "holder_presumed_dead", waited
        assert waited[0]["holder"] == f"127.0.0.1-{holder.port}", waited
    finally:
        for n in nodes:
            n.stop()
