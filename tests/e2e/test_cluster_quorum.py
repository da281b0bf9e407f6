"""Issue 44: a node whose NATS servers have no quorum answers with 503, kind `unavailable`, and
Retry-After, never a silent hang: a request it cannot queue, after retrying for the 15 s of a
leader election (cluster_types.h kQueueRetryFor); a queued one whose outcome store has not
answered that long. Once the brokers are back, the node serves again."""

import contextlib
import threading
import time
import uuid

import httpx
import pytest

from conftest import Server
from nats_cluster import CLUSTER_SECRET, NatsCluster
from test_fair_share import BOUNDARY, sleeping

QUEUE_RETRY_S = 15


@contextlib.contextmanager
def one_node_cluster(tmp_path):
    """Three brokers and a node on them that has answered one request; all stopped after."""
    (tmp_path / "node").mkdir()
    nats = NatsCluster(tmp_path / "nats")
    node = None
    try:
        node = Server(tmp_path / "node", "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
                      "--num-workers", "1", env={"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET})  # fmt: skip
        assert execute(node, 0)[0].status_code == 200
        yield nats, node
    finally:
        if node is not None:
            node.stop()
        nats.stop()


def execute(node: Server, seconds: float, key: str | None = None) -> tuple[httpx.Response, float]:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    if key:
        headers["Idempotency-Key"] = key
    started = time.monotonic()
    answer = httpx.post(node.url + "/execute", content=sleeping(seconds), headers=headers, timeout=120)
    return answer, time.monotonic() - started


def assert_unavailable(answer: httpx.Response, took: float) -> dict:
    assert answer.status_code == 503, answer.text
    assert answer.headers.get("Retry-After") == "1", answer.headers
    error = answer.json()["error"]
    assert error["kind"] == "unavailable", error
    assert took < QUEUE_RETRY_S + 15, took  # bounded, never the request's own timeout
    return error


def test_a_request_that_cannot_be_queued_without_a_quorum_is_503_unavailable(tmp_path):
    with one_node_cluster(tmp_path) as (nats, node):
        for i in (0, 1):  # two of three: no quorum
            nats.kill(i)
        error = assert_unavailable(*execute(node, 0))
        assert "cluster" in error["message"], error
        for i in (0, 1):
            nats.start(i)
        nats.wait_ready()
        deadline = time.monotonic() + 60
        while (answer := execute(node, 0)[0]).status_code != 200 and time.monotonic() < deadline:
            time.sleep(1)  # as a client would, after Retry-After
        assert answer.status_code == 200 and answer.json()["status"] == "COMPLETED", answer.text


@pytest.mark.serial  # its request must be queued and running within the 1 s before the brokers die
def test_a_queued_request_whose_quorum_is_lost_is_503_unavailable_naming_its_key(tmp_path):
    with one_node_cluster(tmp_path) as (nats, node):
        answered = {}
        sending = threading.Thread(target=lambda: answered.update(zip(("answer", "took"), execute(node, 3, str(uuid.uuid4())))))  # fmt: skip
        sending.start()
        time.sleep(1)  # queued, and running on the node's one seat
        for i in (0, 1):
            nats.kill(i)
        sending.join(QUEUE_RETRY_S + 60)
        error = assert_unavailable(answered["answer"], answered["took"])
        assert "same Idempotency-Key" in error["message"], error
