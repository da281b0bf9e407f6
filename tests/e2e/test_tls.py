"""HTTPS (issue 27): a server started with --tls-cert/--tls-key serves every
request over TLS 1.2+, with a CA made by pki.py at test time; our client
verifies it against ca=, $KCORAL_CA_BUNDLE or the default roots; what does
not verify or is not TLS is refused cleanly, and the server keeps serving.
A cluster node (issue 26) serves its cluster routes and Idempotency-Key over
HTTPS too, and the client's entry-node failover works with ca=."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import ssl
import subprocess
import sys
import time
import warnings

import httpx
import pytest
from conftest import Server, call, free_port, wait_for
from nats_cluster import CLUSTER_SECRET, NatsCluster, cluster_key, peer_signature
from pki import make_pki
from wire import BOUNDARY, blob_part, body_of, module_program, program_part, ref
from wire import execute as raw_execute

from kcoral import AsyncClient, Client, KCoralError, Program, TransportError

MIB = 1 << 20
DESCRIBE = "import hashlib\ndef main(data):\n    return [len(data), hashlib.sha256(data).hexdigest()]\n"
ADD = "def main(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    """A CA that signed nothing of the server's."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), name="another").ca


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, pki):
    server = Server(
        tmp_path_factory.mktemp("tls"),
        *("--tls-cert", str(pki.cert), "--tls-key", str(pki.key)),
        *("--num-workers", "2", "--max-timeout-seconds", "30"),
        ca=pki.ca,
    )
    yield server
    server.stop()


def events_named(server: Server, name: str) -> list[dict]:
    return [e for e in server.events() if e["event"] == name]


def test_our_client_runs_a_program_over_https(tls_server, pki):
    assert tls_server.url.startswith("https://")
    with Client(tls_server.url, ca=pki.ca) as client:
        result = client.execute(call(ADD, [2, 40]))
        assert result.completed, result.error
        assert result.results["out"] == 42
        assert client.health()["tls"] is True
    [started] = events_named(tls_server, "server_started")
    assert started["tls"] is True and started["url"] == tls_server.url


def test_kcoral_ca_bundle_is_trusted_when_no_ca_is_passed(tls_server, pki, monkeypatch):
    monkeypatch.setenv("KCORAL_CA_BUNDLE", str(pki.ca))
    with Client(tls_server.url) as client:
        assert client.health()["status"] == "ok"

    async def ask() -> dict:
        async with AsyncClient(tls_server.url) as client:
            return await client.health()

    assert asyncio.run(ask())["tls"] is True


def test_a_certificate_that_does_not_verify_is_a_transport_error_naming_the_host(tls_server, other_ca, monkeypatch):
    host = tls_server.url.removeprefix("https://")
    with Client(tls_server.url, ca=other_ca) as client, pytest.raises(TransportError) as refused:
        client.health()
    message = str(refused.value)
    assert f"TLS verification failed for {host}" in message and str(other_ca) in message, message
    monkeypatch.delenv("KCORAL_CA_BUNDLE", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with Client(tls_server.url) as client, pytest.raises(TransportError, match="TLS verification failed"):
        client.health()  # the default roots do not know our test CA either
    # The server saw the client's refusal.
    wait_for(lambda: events_named(tls_server, "tls_handshake_failed"), 5, "tls_handshake_failed")
    with pytest.raises(ValueError, match="cannot be loaded"):
        Client(tls_server.url, ca=tls_server.stderr_path)  # not a CA bundle


def test_plain_http_on_the_https_port_fails_cleanly_and_the_server_keeps_serving(tls_server, pki):
    plain = tls_server.url.replace("https://", "http://")
    with Client(plain) as client, pytest.raises(KCoralError) as answered:
        client.health()
    assert answered.value.status_code == 400 and "https://" in answered.value.message
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as raw:
        raw.sendall(b"\x00\x01 not TLS, not HTTP\r\n\r\n")
        assert raw.recv(100) == b""  # closed without an answer
    silent = socket.create_connection(("127.0.0.1", tls_server.port), timeout=10)  # holds no slot
    try:
        with Client(tls_server.url, ca=pki.ca) as client:
            assert client.execute(call(ADD, [1, 2])).results["out"] == 3
    finally:
        silent.close()
    errors = [e["error"] for e in events_named(tls_server, "tls_handshake_failed")]
    assert "plain HTTP request on the HTTPS port" in errors


def tls_client(pki, highest: ssl.TLSVersion) -> ssl.SSLContext:
    """A client that offers TLS 1.0 up to `highest` and any cipher OpenSSL still has."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(pki.ca)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():  # Python deprecates the old versions: the point here
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = highest
    return context


def test_the_status_stream_over_https_says_to_poll_and_polling_works(tls_server, pki):
    verify = ssl.create_default_context(cafile=str(pki.ca))
    refused = httpx.get(tls_server.url + "/api/status/stream", verify=verify, timeout=10)
    assert refused.status_code == 501
    assert "poll GET /api/status" in refused.json()["detail"]
    assert httpx.get(tls_server.url + "/api/status", verify=verify, timeout=10).status_code == 200


def test_tls_1_1_is_refused_by_the_server_and_tls_1_2_is_served(tls_server, pki):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLError) as refused:
            tls_client(pki, ssl.TLSVersion.TLSv1_1).wrap_socket(raw, server_hostname="127.0.0.1")
    assert refused.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION"  # the server's alert, not ours
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as raw:
        with tls_client(pki, ssl.TLSVersion.TLSv1_2).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() == "TLSv1.2"
            assert tls.cipher()[0].startswith("ECDHE-ECDSA-") and "GCM" in tls.cipher()[0]
            tls.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert tls.recv(100).startswith(b"HTTP/1.1 200")
    # The server writes its event after its alert has gone out, so the client may read the
    # alert first: the event is waited for, not looked up once.
    wait_for(
        lambda: any("unsupported protocol" in e["error"] for e in events_named(tls_server, "tls_handshake_failed")),
        10,
        "the server's event naming the refused protocol",
    )


def test_a_large_upload_streams_in_and_a_large_result_out_over_https(tls_server, pki):
    data = os.urandom(96 * MIB)
    program = Program()
    blob = program.upload(kind="bytes", value=data)
    module = program.upload(
        kind="module", source=DESCRIBE + "def make(n):\n    return bytes(range(256)) * (n // 256)\n"
    )
    program.return_(
        key="described", value=program.run(fn=program.get_function(module=module, name="main"), args=[blob])
    )
    made = program.run(fn=program.get_function(module=module, name="make"), args=[32 * MIB])
    program.return_(key="made", value=made)
    with Client(tls_server.url, ca=pki.ca) as client:
        result = client.execute(program)
    assert result.completed, result.error
    assert result.results["described"] == [len(data), hashlib.sha256(data).hexdigest()]
    assert bytes(result.results["made"]) == bytes(range(256)) * (32 * MIB // 256)


def test_a_chunked_body_in_odd_pieces_parses_over_tls(tls_server, pki):
    """Chunked transfer goes through Beast's parser, not the direct read: over TLS too."""
    data = os.urandom(3000)
    digest = hashlib.sha256(data).hexdigest()
    program = module_program(DESCRIBE, args=[ref("d")])
    program["instructions"].insert(0, {"op": "upload", "id": "d", "kind": "bytes", "blob": digest})
    body = body_of([program_part(program), blob_part(data)])
    head = (
        f"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    context = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(head)
            at, size = 0, 1
            while at < len(body):  # pieces of 97 to 679 bytes, each its own TLS record
                piece = body[at : at + size * 97]
                tls.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                at += len(piece)
                size = size % 7 + 1
            tls.sendall(b"0\r\n\r\n")
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert b'"COMPLETED"' in reply and digest.encode() in reply


def test_a_client_hanging_up_over_tls_cancels_its_program(tls_server, pki):
    request_id = "7d1f4e2a-9b3c-4f60-8a2d-5c7e1b9f0a34"
    sleeping = module_program("import time\ndef main():\n    time.sleep(60)\n")
    verify = ssl.create_default_context(cafile=str(pki.ca))
    with pytest.raises(httpx.ReadTimeout):  # then httpx closes the connection
        raw_execute(tls_server.url, sleeping, timeout=3, headers={"X-Request-ID": request_id}, verify=verify)

    def finish_reason() -> str | None:
        finished = {e["request_id"]: e["finish_reason"] for e in events_named(tls_server, "request_finished")}
        return finished.get(request_id)

    wait_for(lambda: finish_reason() == "cancelled", 10, "the cancelled event")


# ---------------------------------------------------------------- the flags
def start_refused(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    """A CPU server that must refuse to start; it gets no further than its flags and files."""
    command = [sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--log-dir", str(tmp_path / "logs")]
    run = subprocess.run([*command, *flags], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0, run.stderr
    return run


@pytest.mark.parametrize("given,missing", [("--tls-cert", "--tls-key"), ("--tls-key", "--tls-cert")])
def test_one_tls_flag_alone_is_refused_naming_the_other(tmp_path, pki, given, missing):
    run = start_refused(tmp_path, given, str(pki.cert))
    assert f"{given} requires {missing}" in run.stderr, run.stderr


def test_tls_files_that_cannot_serve_stop_the_server_naming_the_file(tmp_path, pki, other_ca):
    absent = tmp_path / "absent.pem"
    run = start_refused(tmp_path, "--tls-cert", str(absent), "--tls-key", str(pki.key))
    assert f"TLS certificate file '{absent}'" in run.stderr and "No such file or directory" in run.stderr, run.stderr
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    run = start_refused(tmp_path, "--tls-cert", str(garbage), "--tls-key", str(pki.key))
    assert f"TLS certificate file '{garbage}'" in run.stderr and "no start line" in run.stderr, run.stderr
    run = start_refused(tmp_path, "--tls-cert", str(pki.cert), "--tls-key", str(garbage))
    assert f"TLS key file '{garbage}'" in run.stderr, run.stderr
    run = start_refused(tmp_path, "--tls-cert", str(other_ca), "--tls-key", str(pki.key))
    assert "does not belong to the certificate" in run.stderr, run.stderr


# ------------------------------------------------------------ other clients
def test_kcoral_run_takes_ca(tls_server, pki, monkeypatch):
    monkeypatch.delenv("KCORAL_CA_BUNDLE", raising=False)
    command = [sys.executable, "-m", "kcoral", "run", "python", "--url", tls_server.url]
    ran = subprocess.run([*command, "--ca", str(pki.ca), "--", "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == "42\n", ran.stderr
    refused = subprocess.run([*command, "--", "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert refused.returncode == 1 and "TLS verification failed" in refused.stderr, refused.stderr


def test_kcoral_run_takes_entry_nodes_and_ca_together(tls_server, pki, monkeypatch):
    """--url with a cluster's entry nodes (the first one dead) and --ca: the failover's retry is verified too."""
    monkeypatch.delenv("KCORAL_CA_BUNDLE", raising=False)
    urls = f"https://127.0.0.1:{free_port()},{tls_server.url}"
    command = [sys.executable, "-m", "kcoral", "run", "python", "--url", urls, "--ca", str(pki.ca)]
    ran = subprocess.run([*command, "--", "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == "42\n", ran.stderr


# ------------------------------------------------------------ a cluster node over HTTPS


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory, pki):
    """One node of a cluster (on a real 3-server NATS JetStream cluster) that serves HTTPS."""
    nats = NatsCluster(tmp_path_factory.mktemp("nats"))
    try:
        node = Server(
            tmp_path_factory.mktemp("tls-node"),
            *("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--num-workers", "2"),
            *("--cluster", nats.flag, "--cluster-heartbeat-seconds", "1", "--cluster-peer-ca", str(pki.ca)),
            ca=pki.ca,
            env={"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET},
        )
        try:
            yield node
        finally:
            node.stop()
    finally:
        nats.stop()


def test_a_cluster_node_announces_its_https_url(tls_node, pki):
    health = httpx.get(tls_node.url + "/health", verify=tls_node.verify, timeout=10).json()
    assert health["tls"] is True
    assert tls_node.url in [n["url"] for n in health["cluster"]["nodes"]]


def test_the_cluster_blob_routes_answer_over_https(tls_node, pki):
    data = os.urandom(MIB)
    sha = hashlib.sha256(data).hexdigest()
    with httpx.Client(base_url=tls_node.url, verify=tls_node.verify, timeout=30) as http:
        octets = {"Content-Type": "application/octet-stream"}
        assert http.post("/blobs", content=data, headers=octets).json()["sha256"] == sha
        target = f"/cluster/blobs/{sha}"
        assert http.get(target).status_code == 403  # unsigned
        fetched = http.get(target, headers={"X-KCoral-Peer": peer_signature("GET", target)})
        assert fetched.status_code == 200 and fetched.content == data
        absent = f"/cluster/blobs/{'0' * 64}"
        assert http.get(absent, headers={"X-KCoral-Peer": peer_signature("GET", absent)}).status_code == 404

        pushed_data = os.urandom(MIB)
        pushed_sha = hashlib.sha256(pushed_data).hexdigest()
        assert http.post("/cluster/blobs", content=pushed_data, headers=octets).status_code == 403
        pushed = http.post(
            "/cluster/blobs",
            content=pushed_data,
            headers={**octets, "X-KCoral-Blob-SHA256": pushed_sha,
                     "X-KCoral-Peer": peer_signature("POST", "/cluster/blobs")},
        )  # fmt: skip
        assert pushed.status_code == 200, pushed.text
        assert http.head(f"/blobs/{pushed_sha}").status_code == 200


def test_an_idempotency_key_over_https_gets_the_first_outcome(tls_node, pki):
    """Client(urls=..., ca=...): the first entry node is dead, so the key travels with a retry;
    a second call with the same key gets the first run's outcome, not a second run."""
    source = "import os, time\ndef main():\n    return [os.getpid(), time.time()]\n"
    key = f"tls-retry-{time.time_ns()}"
    with Client(urls=[f"https://127.0.0.1:{free_port()}", tls_node.url], ca=pki.ca) as client:
        first = client.execute(call(source), timeout_seconds=30, idempotency_key=key)
        assert first.completed, first.error
        assert client.retries >= 1
    with Client(tls_node.url, ca=pki.ca) as client:
        again = client.execute(call(source), timeout_seconds=30, idempotency_key=key)
    assert again.completed and again.results["out"] == first.results["out"]
    runs = [
        e for e in tls_node.events() if e["event"] == "cluster_request_executed" and e.get("key") == cluster_key(key)
    ]
    assert len(runs) == 1, runs


REFERENCE_OVER_HTTPS = """
import sys
from kcoral import Client, Program

program = Program()
module = program.upload(kind="module", source="def add(a, b):\\n    return a + b\\n")
add = program.get_function(module=module, name="add")
program.return_(key="sum", value=program.run(fn=add, args=[2, 40]))
with Client(sys.argv[1]) as client:
    result = client.execute(program, timeout_seconds=30)
print(result.status, result.results.get("sum"))
"""


def test_the_reference_client_works_over_https_trusting_ssl_cert_file(tls_server, pki):
    """The reference Client (kcoral 0.1.1) takes no CA argument; its httpx trusts $SSL_CERT_FILE."""
    from test_reference_client import reference_environment, reference_python

    python = reference_python()
    environment = reference_environment()
    command = [str(python), "-c", REFERENCE_OVER_HTTPS, tls_server.url]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/",
                         env={**environment, "SSL_CERT_FILE": str(pki.ca)})  # fmt: skip
    assert ran.returncode == 0 and ran.stdout.split() == ["COMPLETED", "42"], ran.stderr[-3000:]
    environment.pop("SSL_CERT_FILE", None)
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/", env=environment)
    assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr, refused.stderr[-3000:]
