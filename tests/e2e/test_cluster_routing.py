"""Issue 26, routing (docs/cluster.md): on a real 3-server NATS JetStream cluster with three
KCoral CPU nodes, any node takes POST /execute, queues it on JetStream for the pool that can run
it, and answers with the first stored outcome. Blobs travel between nodes by hash, never through
the broker; large results come back; a retry with the same Idempotency-Key on another node gets
the first run's outcome, never a second run; the reference client works unchanged through any
node. The fault tests (a node killed mid-request) start fresh nodes of their own."""

import hashlib
import json
import os
import signal
import subprocess
import threading
import time

import httpx
import pytest

from conftest import Server, call, wait_for
from nats_cluster import CLUSTER_SECRET, NatsCluster, NatsWire, cluster_key, peer_signature
from test_reference_client import HERE, reference_environment, reference_python
from wire import TRIVIAL, assert_error, execute

SECRET = {"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET}
ACK_WAIT_S = 3  # a dead node's request runs elsewhere this soon
RUN_LEASE_S = 3  # ... and its runs are presumed dead this long after its last heartbeat


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    cluster = NatsCluster(tmp_path_factory.mktemp("nats"))
    yield cluster
    cluster.stop()


def start_node(tmp_path_factory, nats, *flags):
    return Server(
        tmp_path_factory.mktemp("node"),
        "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
        "--cluster-ack-wait-seconds", str(ACK_WAIT_S), "--cluster-run-lease-seconds", str(RUN_LEASE_S),
        "--num-workers", "2",
        "--cluster-nats-monitor", nats.monitor_flag, *flags,
        env=SECRET,
    )  # fmt: skip


def wait_for_view(nodes, timeout=20):
    ids = {f"127.0.0.1-{n.port}" for n in nodes}

    def everyone_sees_everyone():
        for n in nodes:
            seen = {r["node_id"] for r in httpx.get(n.url + "/health", timeout=10).json()["cluster"]["nodes"]}
            if not ids <= seen:
                return False
        return True

    wait_for(everyone_sees_everyone, timeout, "every node in every node's view", every=0.2)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, nats):
    started = [start_node(tmp_path_factory, nats) for _ in range(3)]
    try:
        wait_for_view(started)
        yield started
    finally:
        for n in started:
            n.stop()


def executions(nodes, key_or_request_id: str) -> list[tuple[int, dict]]:
    """(node index, event) of every cluster_request_executed naming this request."""
    return [
        (i, e)
        for i, n in enumerate(nodes)
        for e in n.events()
        if e["event"] == "cluster_request_executed" and key_or_request_id in (e.get("request_id"), e.get("key"))
    ]


def test_any_node_is_an_entry_point_and_work_spreads(nodes):
    """Every node answers as an entry point; 8 requests at once (each node has 2 seats) are
    pulled by whichever nodes have a free seat, so they cannot all run on one node."""
    from concurrent.futures import ThreadPoolExecutor

    from kcoral import Client

    def send(i):
        with Client(nodes[i % 3].url) as client:
            source = "import time\ndef main(a, b):\n    time.sleep(1)\n    return a * b\n"
            return i, client.execute(call(source, [i, 7]), timeout_seconds=60)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(send, range(8)))
    ran_on = set()
    for i, result in results:
        assert result.completed, result.error
        assert result.results["out"] == i * 7
        ran_on.update(n for n, _ in wait_for(lambda r=result: executions(nodes, r.request_id), 10, "the run's event"))
    assert len(ran_on) >= 2, ran_on


def test_health_shows_the_cluster_and_its_cpu_pool(nodes):
    health = httpx.get(nodes[0].url + "/health", timeout=10).json()
    pools = health["cluster"]["pools"]
    assert [p["pool"] for p in pools] == ["cpu"]
    assert pools[0]["pool_id"].startswith("cpu-")
    assert len(pools[0]["nodes"]) == 3
    # Each broker's /varz said it syncs before it acknowledges (kcoral.tools.nats_brokers).
    sync = health["cluster"]["broker_sync"]
    assert (sync["state"], sync["warning"]) == ("synced", False), sync
    assert [b["sync_always"] for b in sync["brokers"]] == [True] * 3, sync


def test_a_gpu_arch_the_cluster_lacks_is_refused_naming_its_pools(nodes):
    """options.gpu_arch is the client's choice of pool (pool_view.h): in this cluster of CPU
    nodes there is none of sm_90a, and the 400 names the pools there are. (Choosing among GPU
    architectures, by the option or by the code in an uploaded library, is unit-tested:
    tests/unit/cluster/pool_view_test.cc and tests/unit/protocol/cuda_code_test.cc; one H200 here.)"""
    program = {**TRIVIAL, "options": {"gpu_arch": "sm_90a"}}
    message = assert_error(execute(nodes[0].url, program), 400, "parse")
    assert "options.gpu_arch" in message and "cpu-" in message


def test_blobs_travel_by_hash_between_nodes(tmp_path_factory, nats, nodes):
    """A 9 MiB tensor sent to a front door (--cluster-entry-only: it runs nothing) runs on
    another node, which fetches it from the entry node, checked by its SHA-256 (in 4 MiB reads
    and a remainder: peer_client.cc)."""
    import numpy as np
    from kcoral import Client, Program

    door = start_node(tmp_path_factory, nats, "--cluster-entry-only")
    try:
        wait_for_view([*nodes, door])
        data = np.arange((9 << 18) + 3, dtype=np.float32)  # 9 MiB and 12 bytes
        program = Program()
        x = program.upload(id="x", kind="tensor", value=data)
        module = program.upload(id="m", kind="module", source="def main(x):\n    return float(x.sum())\n")
        fn = program.get_function(id="f", module=module, name="main")
        program.return_(key="out", value=program.run(id="r", fn=fn, args=[x]))
        with Client(door.url) as client:
            result = client.execute(program, timeout_seconds=60)
        assert result.completed, result.error
        assert result.results["out"] == pytest.approx(float(data.sum()), rel=1e-6)
        ran = wait_for(lambda: executions(nodes, result.request_id), 10, "the run's event")
        assert len(ran) == 1  # on one of the module's nodes, not the door
        fetches = [e for n in nodes for e in n.events() if e["event"] == "cluster_blob_fetched"]
        assert any(e["request_id"] == result.request_id and e["from"] == door.url for e in fetches), fetches
        pools = httpx.get(door.url + "/health", timeout=10).json()["cluster"]["pools"]
        assert len(pools[0]["nodes"]) == 3  # the door announces no pool
    finally:
        door.stop()


def test_results_over_a_megabyte_come_back_whole(nodes):
    from kcoral import Client

    source = "def main(n):\n    return bytes(range(256)) * (n // 256)\n"
    for entry in nodes:
        with Client(entry.url) as client:
            result = client.execute(call(source, [3 << 20]), timeout_seconds=60)
        assert result.completed, result.error
        assert result.results["out"] == bytes(range(256)) * ((3 << 20) // 256)


def test_a_retry_with_the_key_gets_the_first_outcome_on_any_node(nodes):
    from kcoral import Client

    source = "import os, time\ndef main():\n    return [os.getpid(), time.time()]\n"
    key = f"retry-{time.time_ns()}"
    answers = []
    for entry in (nodes[0], nodes[1], nodes[2]):
        with Client(entry.url) as client:
            result = client.execute(call(source), timeout_seconds=60, idempotency_key=key)
        assert result.completed, result.error
        answers.append(result.results["out"])
    assert answers[0] == answers[1] == answers[2]  # one run, one answer
    ran = wait_for(lambda: executions(nodes, cluster_key(key)), 10, "the run's event")
    assert len(ran) == 1

    # Each retry queued its own message beside its claim, and each ended unrun: dropped for its
    # claim, or, come while a node held the key to read the other's claim, answered by the
    # stored outcome once that node let go.
    def unrun():
        answered = [e for n in nodes for e in n.events() if e["event"] == "cluster_rerun_waited"]
        answered = [e for e in answered if e.get("key") == cluster_key(key) and e["outcome"] == "stored"]
        return drops(nodes, cluster_key(key)), answered

    wait_for(lambda: sum(map(len, unrun())) == 2, 10, "the retries' messages to end unrun")
    assert all("claim names another run" in e["reason"] for _, e in unrun()[0])
    # A node woken for a run whose claim holds (the wake says so) starts it without reading it.
    starts = [e for n in nodes for e in n.events() if e["event"] == "cluster_request_started" and "claim_read" in e]
    assert any(not e["claim_read"] for e in starts), starts


def test_requests_with_one_key_sent_at_once_to_every_node_run_once(nodes):
    """The claim is written beside the message, not before it: three entry nodes racing for one
    key each queue a message, and only the one whose nonce won the claim runs."""
    from kcoral import Client

    source = "import os, time\ndef main():\n    time.sleep(0.5)\n    return [os.getpid(), time.time()]\n"
    key = f"race-{time.time_ns()}"
    answers = [None] * 3
    start = threading.Barrier(3)

    def send(i):
        with Client(nodes[i].url) as client:
            start.wait()
            result = client.execute(call(source), timeout_seconds=60, idempotency_key=key)
        assert result.completed, result.error
        answers[i] = result.results["out"]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert answers[0] is not None and answers[0] == answers[1] == answers[2]
    ran = wait_for(lambda: executions(nodes, cluster_key(key)), 10, "the run's event")
    assert len(ran) == 1
    wait_for(lambda: len(drops(nodes, cluster_key(key))) == 2, 10, "the two other messages dropped")


def drops(nodes, key: str) -> list[tuple[int, dict]]:
    """(node index, event) of every message of `key` dropped unrun."""
    return [
        (i, e)
        for i, n in enumerate(nodes)
        for e in n.events()
        if e["event"] == "cluster_request_dropped" and e.get("key") == key
    ]


def test_the_same_key_with_another_program_is_409(nodes):
    from kcoral import Client, KCoralError

    key = f"conflict-{time.time_ns()}"
    with Client(nodes[0].url) as client:
        assert client.execute(call("def main():\n    return 1\n"), idempotency_key=key).completed
    with Client(nodes[1].url) as client, pytest.raises(KCoralError) as raised:
        client.execute(call("def main():\n    return 2\n"), idempotency_key=key)
    assert raised.value.status_code == 409 and "Idempotency-Key" in str(raised.value)
    # The refused program's message, queued beside its failed claim, never ran.
    wait_for(lambda: drops(nodes, cluster_key(key)), 10, "the refused program's message dropped")
    assert len(executions(nodes, cluster_key(key))) == 1


def test_cluster_routes_refuse_strangers(nodes):
    sha = "0" * 64
    got = httpx.get(f"{nodes[0].url}/cluster/blobs/{sha}", timeout=10)
    assert got.status_code == 403
    forged = httpx.get(
        f"{nodes[0].url}/cluster/blobs/{sha}", headers={"X-KCoral-Peer": f"{int(time.time())}.{'a' * 64}"}
    )
    assert forged.status_code == 403 and "secret" in forged.text
    pushed = httpx.post(f"{nodes[0].url}/cluster/blobs", content=b"x" * 1000, headers={
        "Content-Type": "application/octet-stream"})  # fmt: skip
    assert pushed.status_code == 403


def test_a_node_sends_a_blob_from_its_memfd_without_copying_it(nodes):
    """GET /cluster/blobs/<sha256>, as a node fetches a blob it lacks: the right bytes, written
    from a mapping of the blob's memfd. A node copied the whole blob into its own memory before
    sending it (on its event loop, before the first byte): while the reader has taken none of
    the body, the sending node's anonymous memory grows by far less than the blob."""
    data = os.urandom(96 << 20)
    digest = hashlib.sha256(data).hexdigest()
    node = nodes[2]
    stored = httpx.post(node.url + "/blobs", content=data, headers={"Content-Type": "application/octet-stream"},
                        timeout=60)  # fmt: skip
    assert stored.status_code == 200 and stored.json()["cached"] is True, stored.text
    del data
    target = f"/cluster/blobs/{digest}"

    def anonymous_mib() -> float:
        status = open(f"/proc/{node.process.pid}/status").read()
        return int(status.split("RssAnon:")[1].split()[0]) / 1024

    before = anonymous_mib()
    headers = {"X-KCoral-Peer": peer_signature("GET", target)}
    with httpx.stream("GET", node.url + target, headers=headers, timeout=60) as fetched:
        assert fetched.status_code == 200
        time.sleep(0.5)  # the reply is under way, held by the socket's buffers
        grown = anonymous_mib() - before
        body = fetched.read()
    assert hashlib.sha256(body).hexdigest() == digest
    assert grown < 32, f"the node's anonymous memory grew {grown:.0f} MiB to send a 96 MiB blob"


def test_the_reference_client_works_unchanged_through_a_node(nodes):
    python = reference_python()
    run = subprocess.run(
        [str(python), str(HERE / "reference_programs.py"), nodes[1].url],
        capture_output=True, text=True, timeout=180, cwd="/", env=reference_environment(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["module_run_return"]["status"] == "COMPLETED"
    assert report["module_run_return"]["total"] == {"sum": 42, "items": [2, 40]}
    assert report["bytes_cache_miss"] == {"status": "COMPLETED", "digest_ok": True, "echo_ok": True}
    assert report["file_upload_folder_return"]["b"] == "HELLO FILE"
    assert report["benchmark"]["status"] == "COMPLETED"


# A key-value bucket's stream as cnats 3.4 makes one, without republish: what a KCoral node of
# before the servers announced outcomes left behind (NATS 2.9 cannot add republish later).
OLD_OUTCOMES_BUCKET = {
    "name": "KV_kcoral_outcomes", "subjects": ["$KV.kcoral_outcomes.>"], "retention": "limits",
    "max_msgs_per_subject": 1, "max_age": 3600 * 10**9, "storage": "file", "num_replicas": 1,
    "discard": "new", "allow_rollup_hdrs": True, "deny_delete": True, "allow_direct": True,
}  # fmt: skip


@pytest.mark.serial  # each answer within 1 s
@pytest.mark.parametrize("bucket", ["made by the node", "made without republish"])
def test_each_outcome_is_announced_once_and_at_once(tmp_path_factory, bucket):
    """The NATS servers announce each stored outcome as they store it (the outcomes bucket
    republishes on kcoral.outcome.<key>); in a bucket made without that, the node that stored it
    announces it. Either way exactly one announcement per request, and the entry node answers
    at once, not at its look at the store every 2 s. Fresh NATS: the bucket is made once."""
    nats = NatsCluster(tmp_path_factory.mktemp("nats"), size=1)
    wire = NatsWire(nats.client_ports[0])
    node = None
    try:
        if bucket == "made without republish":
            made = json.loads(
                wire.request("$JS.API.STREAM.CREATE.KV_kcoral_outcomes", json.dumps(OLD_OUTCOMES_BUCKET).encode())
            )
            assert "error" not in made, made
        node = start_node(tmp_path_factory, nats, "--cluster-replicas", "1")
        info = json.loads(wire.request("$JS.API.STREAM.INFO.KV_kcoral_outcomes"))
        republish = info["config"].get("republish")
        if bucket == "made by the node":
            assert republish == {"src": "$KV.kcoral_outcomes.>", "dest": "kcoral.outcome.>"}, info["config"]
        else:
            assert republish is None, info["config"]
        wire.listen("kcoral.outcome.>")
        for _ in range(5):
            started = time.monotonic()
            response = execute(node.url, TRIVIAL)
            assert response.status_code == 200 and response.json()["results"]["out"]["value"] == 7, response.text
            assert time.monotonic() - started < 1.0

        def executed():  # logged after the acknowledgement, which may follow the answer
            return [e["key"] for e in node.events() if e["event"] == "cluster_request_executed"]

        wait_for(lambda: len(executed()) == 5 and len(wire.messages) >= 5, 5, "every outcome stored and announced")
        time.sleep(0.3)  # a second announcement would have come by now
        keys = executed()
        assert sorted(subject for subject, _ in wire.messages) == sorted(f"kcoral.outcome.{k}" for k in keys)
        assert all(json.loads(record)["status"] == 200 for _, record in wire.messages)
    finally:
        wire.close()
        if node is not None:
            node.stop()
        nats.stop()


def test_a_node_killed_mid_request_loses_nothing(tmp_path_factory):
    """Fresh NATS and nodes (the module's would pull the work too): the node running a request
    is SIGKILLed; JetStream gives the request to another node after AckWait, and the entry node
    answers with its outcome."""
    from kcoral import Client

    own_nats = NatsCluster(tmp_path_factory.mktemp("nats-fault"))
    fresh = []
    try:
        # The entry is a front door (it runs nothing), so the request runs on node 1 or 2.
        fresh = [start_node(tmp_path_factory, own_nats, *flags) for flags in (("--cluster-entry-only",), (), ())]
        wait_for_view(fresh)
        source = "import time\ndef main(x):\n    time.sleep(4)\n    return x + 1\n"

        def started_counts():
            return [sum(e["event"] == "cluster_request_started" for e in n.events()) for n in fresh]

        box = {}

        def send():
            with Client(fresh[0].url, max_attempts=1) as client:
                box["result"] = client.execute(call(source, [41]), timeout_seconds=120)

        sender = threading.Thread(target=send)
        sender.start()
        counts = wait_for(lambda: (c := started_counts()) != [0, 0, 0] and c, 30, "the request to start")
        index = next(i for i in range(3) if counts[i] > 0)
        assert index != 0, "the front door ran a request"
        victim = fresh[index]
        os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        started = time.monotonic()
        sender.join(timeout=90)
        assert not sender.is_alive()
        result = box["result"]
        assert result.completed, result.error
        assert result.results["out"] == 42
        assert time.monotonic() - started < 60
        survivor = fresh[3 - index]

        def redelivered_run():
            # The event follows the stored outcome, so the answer can reach the client first.
            return [e for e in survivor.events() if e["event"] == "cluster_request_executed" and e["delivered"] >= 2]

        wait_for(redelivered_run, 10, "a redelivered run's event")
    finally:
        for n in fresh:
            n.stop()
        own_nats.stop()


def test_when_the_entry_node_dies_our_client_gets_the_answer_from_another(tmp_path_factory):
    """The entry node is SIGKILLed while its request runs: our client retries on the other node
    with the same Idempotency-Key and gets the one run's outcome (the reference client, which
    never retries, would get a transport error: docs/cluster.md)."""
    from kcoral import Client

    own_nats = NatsCluster(tmp_path_factory.mktemp("nats-entry"))
    fresh = []
    try:
        fresh = [start_node(tmp_path_factory, own_nats) for _ in range(2)]
        wait_for_view(fresh)
        entry, other = fresh
        box = {}

        def send():
            with Client(urls=[entry.url, other.url]) as client:
                box["result"] = client.execute(
                    call("import time\ndef main():\n    time.sleep(3)\n    return 'done'\n"), timeout_seconds=120
                )
                box["retries"] = client.retries

        sender = threading.Thread(target=send)
        sender.start()
        wait_for(
            lambda: any(e["event"] == "cluster_request_started" for n in fresh for e in n.events()),
            30,
            "the request to start",
        )
        os.killpg(entry.process.pid, signal.SIGKILL)
        entry.process.wait()
        sender.join(timeout=90)
        assert not sender.is_alive()
        assert box["result"].completed, box["result"].error
        assert box["result"].results["out"] == "done"
        assert box["retries"] >= 1
        firsts = [e for e in other.events() if e["event"] == "cluster_request_executed" and e["first_outcome"]]
        assert len(firsts) <= 1
    finally:
        for n in fresh:
            n.stop()
        own_nats.stop()


def timed_probe(send) -> tuple[float, httpx.Response | None]:
    """Seconds `send` took (infinite when it timed out), and its answer."""
    began = time.monotonic()
    try:
        answer = send()
    except httpx.TimeoutException:
        return float("inf"), None
    return time.monotonic() - began, answer


@pytest.mark.serial  # /health and an upload within 1.5 s
def test_a_node_stays_responsive_while_nats_stalls(tmp_path_factory):
    """The NATS servers are SIGSTOPped while requests wait on them (their claim, queue and the
    quota ledger's read): the node's blocking cluster calls have threads of their own, so its
    event loop and parse pool go on (/health, a blob upload), and once NATS resumes every
    request is answered."""
    from conftest import write_tenant_keys

    own_nats = NatsCluster(tmp_path_factory.mktemp("nats-stall"))
    node = None
    try:
        keys_file = tmp_path_factory.mktemp("stall-keys") / "keys.txt"
        keys = write_tenant_keys(keys_file, ("free", "limited"))
        with keys_file.open("a") as f:
            f.write("limits limited cpu_seconds=1000\n")  # its admission reads the cluster's ledger
        node = start_node(tmp_path_factory, own_nats, "--auth-keys", str(keys_file))
        wait_for_view([node])

        def bearer(tenant: str, **more) -> dict:
            return {"Authorization": f"Bearer {keys[tenant]}", **more}

        warm = execute(node.url, TRIVIAL, headers=bearer("limited"), timeout=60)
        assert warm.status_code == 200, warm.text
        answers = {}

        def ask(name, send):
            try:
                answers[name] = send()
            except httpx.HTTPError as error:
                answers[name] = error

        def keyed(name: str):  # a claim and a queue at once: two of the node's blocking calls
            key = f"{name}-{time.time_ns()}"
            return lambda: execute(node.url, TRIVIAL, headers=bearer("free", **{"Idempotency-Key": key}), timeout=60)

        stalled = {
            "keyed-1": keyed("stall-1"),
            "keyed-2": keyed("stall-2"),
            "limited": lambda: execute(node.url, TRIVIAL, headers=bearer("limited"), timeout=60),
            "usage": lambda: httpx.get(node.url + "/usage", headers=bearer("limited"), timeout=60),
        }
        for process in own_nats.processes:
            os.killpg(process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            threads = [threading.Thread(target=ask, args=item) for item in stalled.items()]
            for t in threads:
                t.start()
            time.sleep(0.3)  # every one of them is waiting on NATS
            data = os.urandom(1 << 20)
            octets = bearer("free", **{"Content-Type": "application/octet-stream"})
            health_s, health = timed_probe(lambda: httpx.get(node.url + "/health", timeout=5))
            upload_s, upload = timed_probe(
                lambda: httpx.post(node.url + "/blobs", content=data, headers=octets, timeout=5)
            )
            still_waiting = sum(t.is_alive() for t in threads)
        finally:
            time.sleep(max(0.0, 2.5 - (time.monotonic() - stopped)))
            for process in own_nats.processes:
                os.killpg(process.pid, signal.SIGCONT)
        for t in threads:
            t.join(90)
        # Waiting with NATS, each would take the rest of the stall (over 2 s), or time out.
        assert health_s < 1.5 and upload_s < 1.5, f"/health took {health_s:.2f} s, the upload {upload_s:.2f} s"
        assert health.status_code == 200 and upload.status_code == 200, (health.text, upload.text)
        assert upload.json()["sha256"] == hashlib.sha256(data).hexdigest()
        assert still_waiting == len(stalled), "a request did not wait on NATS: the test shows nothing"
        assert sorted(answers) == sorted(stalled)
        for name, answer in answers.items():
            assert isinstance(answer, httpx.Response) and answer.status_code == 200, (name, answer)
            if name != "usage":
                assert answer.json()["status"] == "COMPLETED", answer.text
    finally:
        if node is not None:
            node.stop()
        own_nats.stop()
