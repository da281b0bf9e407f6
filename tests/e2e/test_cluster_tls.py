"""Issue 26 item 7, TLS between nodes (docs/cluster.md "Node-to-node trust"): nodes started with
--tls-cert announce https:// URLs, and their blob fetches and result pushes to each other are
TLS, each peer's certificate checked against --cluster-peer-ca (a CA pki.py makes at test time)
and the host of its URL. A real 3-server NATS cluster and three HTTPS CPU nodes for the module;
a peer whose certificate another CA signed is refused (it joins for that test only); a node with
--tls-cert in a cluster and no way to check its peers does not start."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import httpx
import numpy as np
import pytest
from conftest import Server, call, free_port, wait_for
from nats_cluster import CLUSTER_SECRET, NatsCluster, peer_signature
from pki import make_pki

from kcoral import Client, KCoralError, Program

SECRET = CLUSTER_SECRET
ENV = {"KCORAL_CLUSTER_SECRET": SECRET}
MIB = 1 << 20


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    cluster = NatsCluster(tmp_path_factory.mktemp("nats"))
    yield cluster
    cluster.stop()


def start_tls_node(tmp_path_factory, nats, identity, peer_ca, *flags):
    return Server(
        tmp_path_factory.mktemp("tls-node"),
        *("--tls-cert", str(identity.cert), "--tls-key", str(identity.key), "--num-workers", "2"),
        *("--cluster", nats.flag, "--cluster-heartbeat-seconds", "1", "--cluster-peer-ca", str(peer_ca)),
        *flags,
        ca=identity.ca,
        env=ENV,
    )


def wait_for_view(nodes, timeout=20):
    urls = {n.url for n in nodes}

    def everyone_sees_everyone():
        for n in nodes:
            health = httpx.get(n.url + "/health", timeout=10, verify=n.verify).json()
            if not urls <= {r["url"] for r in health["cluster"]["nodes"]}:
                return False
        return True

    wait_for(everyone_sees_everyone, timeout, "every node in every node's view", every=0.2)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, nats, pki):
    """Two nodes that run requests, and a front door (--cluster-entry-only) whose requests always
    run on another node: an idle entry node would win its own request's pull."""
    started = []
    try:
        for flags in ((), (), ("--cluster-entry-only",)):
            started.append(start_tls_node(tmp_path_factory, nats, pki, pki.ca, *flags))
        wait_for_view(started)
        yield started
    finally:
        for n in started:
            n.stop()


def events(nodes, name: str) -> list[tuple[int, dict]]:
    return [(i, e) for i, n in enumerate(nodes) for e in n.events() if e["event"] == name]


def executed_on(nodes, request_id: str) -> int:
    """Index of the node that ran the request (its event may reach the log just after the answer)."""
    ran = wait_for(
        lambda: [i for i, e in events(nodes, "cluster_request_executed") if e.get("request_id") == request_id],
        10,
        "the run's cluster_request_executed",
    )
    return ran[0]


def event_of(nodes, name: str, request_id: str) -> dict:
    found = wait_for(lambda: [e for _, e in events(nodes, name) if e.get("request_id") == request_id], 10, f"{name}")
    assert len(found) == 1, found
    return found[0]


def sum_program(data: np.ndarray) -> Program:
    program = Program()
    x = program.upload(id="x", kind="tensor", value=data)
    module = program.upload(id="m", kind="module", source="def main(x):\n    return float(x.sum())\n")
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[x]))
    return program


def test_nodes_announce_https_urls(nodes):
    health = httpx.get(nodes[0].url + "/health", timeout=10, verify=nodes[0].verify).json()
    assert health["tls"] is True
    assert sorted(r["url"] for r in health["cluster"]["nodes"]) == sorted(n.url for n in nodes)
    assert all(n.url.startswith("https://") for n in nodes)


def test_a_tensor_over_a_mebibyte_is_fetched_over_https_by_the_node_that_runs_it(nodes, pki):
    """A 3 MiB tensor sent to one node runs where the queue puts it; off its entry node, the
    executing node fetches it from the entry node over TLS, checked by its SHA-256."""
    data = np.arange(3 << 18, dtype=np.float32)  # 3 MiB
    entry = nodes[2]
    with Client(entry.url, ca=pki.ca) as client:
        result = client.execute(sum_program(data), timeout_seconds=60)
    assert result.completed, result.error
    assert result.results["out"] == pytest.approx(float(data.sum()), rel=1e-6)
    assert executed_on(nodes, result.request_id) in (0, 1)
    event = event_of(nodes, "cluster_blob_fetched", result.request_id)
    assert event["from"] == entry.url and event["from"].startswith("https://")
    assert event["bytes"] == data.nbytes


def test_a_result_over_the_inline_limit_is_pushed_back_over_https(nodes, pki):
    """A 3 MiB result (past 256 KiB, so not inline in the outcome record) run off its entry node
    is pushed to the entry node over TLS, which answers from its own copy."""
    source = "def main(n, salt):\n    return bytes([salt]) + bytes(range(256)) * (n // 256)\n"
    entry = nodes[2]
    with Client(entry.url, ca=pki.ca) as client:
        result = client.execute(call(source, [3 << 20, 7]), timeout_seconds=60)
    assert result.completed, result.error
    assert result.results["out"] == bytes([7]) + bytes(range(256)) * ((3 << 20) // 256)
    assert executed_on(nodes, result.request_id) in (0, 1)
    event = event_of(nodes, "cluster_blob_pushed", result.request_id)
    assert event["to"] == entry.url and event["to"].startswith("https://")
    assert event["bytes"] > 3 << 20
    assert not [e for _, e in events(nodes, "cluster_blob_push_failed")]


def test_a_peer_whose_certificate_the_ca_did_not_sign_is_refused(tmp_path_factory, nodes, nats, pki):
    """An impostor joins the module's cluster (it has the secret, and trusts the CA itself, so it
    can fetch from the others) with a certificate another CA signed. A request entering at the
    impostor and run on a good node cannot fetch its tensor from it: the handshake fails on the
    certificate, no blob is accepted, and the client gets a 503 that says why."""
    rogue_pki = make_pki(tmp_path_factory.mktemp("rogue-pki"), name="rogue")
    rogue = start_tls_node(tmp_path_factory, nats, rogue_pki, pki.ca, "--cluster-entry-only")
    try:
        wait_for_view([*nodes, rogue])
        tensor = np.arange(MIB // 2, dtype=np.float32)  # 2 MiB
        with Client(rogue.url, ca=rogue_pki.ca, max_attempts=1) as client:
            with pytest.raises(KCoralError) as raised:  # run on a good node: it runs nothing itself
                client.execute(sum_program(tensor), timeout_seconds=60)
        refused = raised.value
        assert refused.status_code == 503, refused
        assert "certificate verify failed" in str(refused), refused
        sha = hashlib.sha256(tensor.tobytes()).hexdigest()
        assert not [e for _, e in events(nodes, "cluster_blob_fetched") if e["sha256"] == sha]
        target = f"/cluster/blobs/{sha}"
        for good in nodes:  # nothing of the impostor's was accepted
            kept = httpx.get(
                good.url + target,
                headers={"X-KCoral-Peer": peer_signature("GET", target)},
                verify=good.verify,
                timeout=10,
            )
            assert kept.status_code == 404
    finally:
        rogue.stop()


def run_server(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--host", "127.0.0.1", "--port", str(free_port()), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **ENV, **(env or {})},
    )  # fmt: skip


def test_an_https_node_without_a_peer_ca_refuses_to_start(pki):
    run = run_server("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--cluster", "nats://127.0.0.1:1")
    assert run.returncode == 2, run.stderr
    assert "--tls-cert in a cluster needs --cluster-peer-ca" in run.stderr


def test_a_peer_ca_file_that_is_not_pem_stops_the_server_naming_it(tmp_path, pki):
    bad = tmp_path / "peer-ca.pem"
    bad.write_text("not a certificate\n")
    run = run_server(
        "--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--cluster", "nats://127.0.0.1:1",
        "--cluster-peer-ca", str(bad), "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert run.returncode != 0
    assert "--cluster-peer-ca" in run.stderr and str(bad) in run.stderr, run.stderr


def test_peer_no_verify_and_a_peer_ca_together_are_refused(pki):
    run = run_server("--cluster", "nats://127.0.0.1:1", "--cluster-peer-ca", str(pki.ca), "--cluster-peer-no-verify")
    assert run.returncode != 0
    assert "excludes" in run.stderr, run.stderr
