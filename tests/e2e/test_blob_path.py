"""The data path (issue 11): blob endpoints, streamed ingest, zero-copy values.

POST /blobs and HEAD /blobs/<sha256> are ours (docs/data-path.md "Blob
endpoints"); POST /execute bodies are parsed as they arrive, so these tests
also send bodies in odd pieces, large parts that cross the server's chunks,
and check that the server never holds a large upload in its own memory.
"""

from __future__ import annotations

import os
import socket
import time

import httpx

from wire import assert_error, blob_part, execute, program_part, post, ref, sha

MIB = 1 << 20

# Returns what a bytes upload is inside the program, and its length and checksum.
DESCRIBE = (
    "import hashlib\ndef main(data):\n    return [type(data).__name__, len(data), hashlib.sha256(data).hexdigest()]\n"
)


def describe_program(blob: str) -> dict:
    return {
        "instructions": [
            {"op": "upload", "id": "d", "kind": "bytes", "blob": blob},
            {"op": "upload", "id": "m", "kind": "module", "source": DESCRIBE},
            {"op": "get_function", "id": "f", "module": ref("m"), "name": "main"},
            {"op": "run", "id": "r", "fn": ref("f"), "args": [ref("d")]},
            {"op": "return", "key": "out", "value": ref("r")},
        ]
    }


def described(response: httpx.Response) -> list:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "COMPLETED", body
    return [item["value"] for item in body["results"]["out"]["value"]]


def upload(url: str, data: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        url + "/blobs", content=data, timeout=60, headers={"Content-Type": "application/octet-stream", **headers}
    )


def test_lookup_tells_missing_from_present(shared_server):
    data = os.urandom(3 * MIB)
    missing = httpx.head(f"{shared_server.url}/blobs/{sha(data)}", timeout=30)
    assert missing.status_code == 404 and missing.headers["X-KCoral-Blob"] == "missing"
    stored = upload(shared_server.url, data)
    assert stored.status_code == 200 and stored.headers["X-KCoral-Blob"] == "stored"
    assert stored.json() == {"sha256": sha(data), "size": len(data), "cached": True}
    present = httpx.head(f"{shared_server.url}/blobs/{sha(data)}", timeout=30)
    assert present.status_code == 200 and present.headers["X-KCoral-Blob"] == "present"
    assert httpx.head(f"{shared_server.url}/blobs/NOT-A-HASH", timeout=30).status_code == 400


def test_a_blob_sent_ahead_needs_no_cache_miss(shared_server):
    data = os.urandom(2 * MIB + 5)
    assert upload(shared_server.url, data).status_code == 200
    # The program alone: the blob is found, and a large bytes value is a view, not a copy.
    assert described(execute(shared_server.url, describe_program(sha(data)))) == ["memoryview", len(data), sha(data)]


def test_small_bytes_uploads_stay_bytes(shared_server):
    data = b"small payload"
    assert described(execute(shared_server.url, describe_program(sha(data)), [data])) == ["bytes", len(data), sha(data)]


def test_a_claimed_hash_is_checked_and_a_mismatch_not_stored(shared_server):
    data = os.urandom(MIB)
    wrong = sha(b"something else")
    response = upload(shared_server.url, data, **{"X-KCoral-Blob-SHA256": wrong})
    message = assert_error(response, 400, "parse")
    assert wrong in message and sha(data) in message
    assert httpx.head(f"{shared_server.url}/blobs/{sha(data)}", timeout=30).status_code == 404
    assert upload(shared_server.url, data, **{"X-KCoral-Blob-SHA256": sha(data)}).status_code == 200


def test_blob_upload_needs_octet_stream(shared_server):
    response = httpx.post(
        shared_server.url + "/blobs", content=b"x", timeout=30, headers={"Content-Type": "text/plain"}
    )
    assert "application/octet-stream" in assert_error(response, 400, "parse")
    assert httpx.get(shared_server.url + "/blobs", timeout=30).status_code == 405


def test_a_blob_part_across_many_chunks_is_checked_whole(shared_server):
    data = os.urandom(5 * MIB + 3)
    good = execute(shared_server.url, describe_program(sha(data)), [data])
    assert described(good) == ["memoryview", len(data), sha(data)]
    # The same part named by another hash: refused once all of it has arrived.
    other = os.urandom(5 * MIB + 3)
    response = post(shared_server.url, [program_part(describe_program(sha(other))), blob_part(data, sha(other))])
    message = assert_error(response, 400, "parse")
    assert "does not match its bytes" in message and sha(data) in message


def test_a_body_sent_in_odd_pieces_parses_the_same(shared_server):
    """Chunked transfer, pieces of 1 to 7 bytes around every boundary line."""
    from wire import BOUNDARY, body_of

    data = os.urandom(300)
    body = body_of([program_part(describe_program(sha(data))), blob_part(data)])
    head = (
        f"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", shared_server.port), timeout=30) as s:
        s.sendall(head)
        at, size = 0, 1
        while at < len(body):
            piece = body[at : at + size]
            s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            at += len(piece)
            size = size % 7 + 1
        s.sendall(b"0\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert b'"COMPLETED"' in reply and sha(data).encode() in reply


def test_a_refused_body_is_still_read_so_the_client_gets_its_400(shared_server):
    """A bad part name early in an 8 MiB body: the answer comes after the body, not a reset."""
    data = os.urandom(8 * MIB)
    response = post(shared_server.url, [blob_part(data, "not-a-hash"), program_part(describe_program(sha(data)))])
    assert "malformed blob part name" in assert_error(response, 400, "parse")


def test_a_large_upload_is_never_held_in_server_memory(make_server):
    """192 MiB streamed in: the server's peak RSS stays far below it (the blob
    lives in a memfd, which is not mapped by the server)."""
    server = make_server("--num-workers", "1")
    data = os.urandom(192 * MIB)
    stored = upload(server.url, data)
    assert stored.status_code == 200 and stored.json()["size"] == len(data)
    response = execute(server.url, describe_program(sha(data)))
    assert described(response) == ["memoryview", len(data), sha(data)]
    status = dict(line.split(":", 1) for line in open(f"/proc/{server.process.pid}/status").read().splitlines())
    peak_mib = int(status["VmHWM"].split()[0]) / 1024
    assert peak_mib < 96, f"server peak RSS {peak_mib:.0f} MiB for a 192 MiB upload"


def test_the_client_sends_a_large_blob_once_and_then_only_asks(make_server):
    from kcoral import Client, Program

    server = make_server("--num-workers", "1")
    data = os.urandom(4 * MIB)

    def program() -> Program:
        p = Program()
        d = p.upload(kind="bytes", value=data)
        m = p.upload(kind="module", source=DESCRIBE)
        f = p.get_function(module=m, name="main")
        p.return_(key="out", value=p.run(fn=f, args=[d]))
        return p

    with Client(server.url) as client:
        for _ in range(2):
            result = client.execute(program())
            assert result.completed, result.error
            assert result.results["out"] == ["memoryview", len(data), sha(data)]
    time.sleep(0.2)
    events = server.events()
    received = [e for e in events if e.get("event") == "blob_received"]
    finished = [e for e in events if e.get("event") == "request_finished"]
    assert [e["sha256"] for e in received] == [sha(data)]  # sent once, by POST /blobs
    assert [e["finish_reason"] for e in finished] == ["completed", "completed"]  # no CACHE_MISS


def test_a_large_result_goes_out_without_server_copies(make_server):
    """A 160 MiB returned value: right bytes, and the server never holds it in
    its own memory (it writes the worker's sealed memfd as it is)."""
    server = make_server("--num-workers", "1", "--max-response-bytes", str(512 * MIB))
    source = "def main():\n    return bytes(range(256)) * (640 * 1024)\n"
    program = {
        "instructions": [
            {"op": "upload", "id": "m", "kind": "module", "source": source},
            {"op": "get_function", "id": "f", "module": ref("m"), "name": "main"},
            {"op": "run", "id": "r", "fn": ref("f"), "args": []},
            {"op": "return", "key": "out", "value": ref("r")},
        ]
    }
    from kcoral.result import decode_response

    response = execute(server.url, program, timeout=120)
    assert response.status_code == 200, response.text[:500]
    body, parts = decode_response(response.headers["Content-Type"], response.content)
    assert body["status"] == "COMPLETED", body
    node = body["results"]["out"]
    data = parts[node["part"]]
    assert len(data) == 160 * MIB and data == bytes(range(256)) * (640 * 1024)
    assert node["sha256"] == sha(data)
    status = dict(line.split(":", 1) for line in open(f"/proc/{server.process.pid}/status").read().splitlines())
    peak_mib = int(status["VmHWM"].split()[0]) / 1024
    # The mapping is counted while it is written (shared pages), once; two copies were 320 MiB more.
    assert peak_mib < 220, f"server peak RSS {peak_mib:.0f} MiB for a 160 MiB result"


def test_a_blob_too_large_to_keep_travels_inline(make_server):
    """The memory tier keeps nothing over a quarter of its size: POST /blobs
    says so, and the client sends that blob with its program (no CACHE_MISS)."""
    from kcoral import Client, Program

    server = make_server("--num-workers", "1", "--cache-capacity-bytes", str(4 * MIB))
    data = os.urandom(2 * MIB)
    assert upload(server.url, data).json()["cached"] is False
    p = Program()
    d = p.upload(kind="bytes", value=os.urandom(2 * MIB))
    m = p.upload(kind="module", source=DESCRIBE)
    p.return_(key="out", value=p.run(fn=p.get_function(module=m, name="main"), args=[d]))
    with Client(server.url) as client:
        result = client.execute(p)
    assert result.completed, result.error
    assert result.results["out"][:2] == ["memoryview", 2 * MIB]
    time.sleep(0.2)
    finished = [e["finish_reason"] for e in server.events() if e.get("event") == "request_finished"]
    assert finished == ["completed"]
