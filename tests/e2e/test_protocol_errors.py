"""Wire-level contract of POST /execute and GET /health (protocol §1.5-1.6, §2, §3, §13).

Everything here is raw HTTP with hand-built multipart bodies, so the client
package cannot mask a server deviation.
"""

from __future__ import annotations

import json
import socket
import uuid

import httpx
import pytest

from wire import (
    BOUNDARY,
    TRIVIAL,
    UUID_RE,
    assert_error,
    blob_part,
    body_of,
    execute,
    module_program,
    part,
    post,
    program_part,
    ref,
    sha,
)

MODULE = {"op": "upload", "id": "m", "kind": "module", "source": "def main():\n    return 1\n"}
DATA = b"some file bytes"


def file_upload(id: str, path: str, data: bytes = DATA) -> dict:
    return {"op": "upload", "id": id, "kind": "file", "blob": sha(data), "path": path}


def parse_error(response: httpx.Response) -> str:
    return assert_error(response, 400, "parse")


# ---------------------------------------------------------------- framing
def test_json_content_type_is_rejected(shared_server):
    response = httpx.post(
        shared_server.url + "/execute",
        content=json.dumps(TRIVIAL),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    message = parse_error(response)
    assert "Content-Type" in message or "multipart" in message


def test_missing_program_part(shared_server):
    message = parse_error(post(shared_server.url, [blob_part(DATA)]))
    assert "program" in message


def test_program_part_with_wrong_content_type(shared_server):
    response = post(shared_server.url, [part("program", "text/plain", json.dumps(TRIVIAL).encode())])
    message = parse_error(response)
    assert "program" in message and "application/json" in message


def test_program_part_without_content_type(shared_server):
    response = post(shared_server.url, [part("program", None, json.dumps(TRIVIAL).encode())])
    parse_error(response)


def test_unsupported_part_name(shared_server):
    response = post(shared_server.url, [program_part(TRIVIAL), part("extra", "application/json", b"{}")])
    parse_error(response)


def test_duplicate_program_part(shared_server):
    response = post(shared_server.url, [program_part(TRIVIAL), program_part(TRIVIAL)])
    assert "program" in parse_error(response)


# ------------------------------------------------------------ strict JSON
def test_duplicate_json_keys(shared_server):
    text = b'{"instructions":[{"op":"upload","id":"m","id":"n","kind":"module","source":""}]}'
    message = parse_error(execute(shared_server.url, text))
    assert "duplicate" in message and "id" in message


def test_nested_duplicate_json_keys_in_run_args(shared_server):
    program = json.dumps(module_program("def main(x):\n    return x\n", args=["ARG"]))
    text = program.replace('"ARG"', '{"k": 1, "k": 2}').encode()
    assert "duplicate" in parse_error(execute(shared_server.url, text))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals(shared_server, literal):
    program = json.dumps(module_program("def main(x):\n    return x\n", args=["ARG"]))
    text = program.replace('"ARG"', literal).encode()
    message = parse_error(execute(shared_server.url, text))
    assert "program" in message or "JSON" in message


def test_number_literal_overflowing_to_infinity(shared_server):
    program = json.dumps(module_program("def main(x):\n    return x\n", args=["ARG"]))
    text = program.replace('"ARG"', "1e999").encode()
    parse_error(execute(shared_server.url, text))


def test_invalid_utf8_program(shared_server):
    text = json.dumps(module_program("def main(x):\n    return x\n", args=["ARG"])).encode()
    text = text.replace(b"ARG", b"\xff\xfe")
    parse_error(execute(shared_server.url, text))


# ----------------------------------------------------- program validation
def test_unknown_top_level_key(shared_server):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "extra": 1}))
    assert "extra" in message


def test_missing_instructions(shared_server):
    assert "instructions" in parse_error(execute(shared_server.url, {"options": {}}))


def test_empty_instructions(shared_server):
    assert "instructions" in parse_error(execute(shared_server.url, {"instructions": []}))


def test_unknown_op(shared_server):
    message = parse_error(execute(shared_server.url, {"instructions": [MODULE, {"op": "frobnicate", "id": "x"}]}))
    assert "instructions[1]" in message and "op" in message


def test_duplicate_id(shared_server):
    message = parse_error(execute(shared_server.url, {"instructions": [MODULE, dict(MODULE)]}))
    assert "instructions[1]" in message and "id" in message


def test_duplicate_id_across_ops(shared_server):
    program = {"instructions": [MODULE, {"op": "get_function", "id": "m", "module": ref("m"), "name": "main"}]}
    assert "instructions[1]" in parse_error(execute(shared_server.url, program))


def test_duplicate_return_key(shared_server):
    program = module_program("def main():\n    return 1\n", extra=[{"op": "return", "key": "out", "value": ref("r")}])
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[4]" in message and "key" in message


def test_forward_reference(shared_server):
    program = {"instructions": [{"op": "get_function", "id": "f", "module": ref("m"), "name": "main"}, MODULE]}
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[0]" in message and "module" in message


def test_unknown_reference(shared_server):
    program = {"instructions": [MODULE, {"op": "return", "key": "k", "value": ref("nope")}]}
    assert "instructions[1]" in parse_error(execute(shared_server.url, program))


def test_run_fn_as_builtin_string(shared_server):
    program = {"instructions": [MODULE, {"op": "run", "id": "r", "fn": "builtin.zeros", "args": []}]}
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[1]" in message and "fn" in message


def test_unknown_instruction_field(shared_server):
    program = {"instructions": [{**MODULE, "entry": "main"}]}
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[0]" in message and "entry" in message


def test_bad_blob_hash(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": "ABC"}]}
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[0]" in message and "blob" in message


def test_uppercase_blob_hash(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(DATA).upper()}]}
    assert "blob" in parse_error(execute(shared_server.url, program))


def test_bad_dtype(shared_server):
    program = {
        "instructions": [
            {"op": "upload", "id": "t", "kind": "tensor", "blob": sha(b"abcd"), "dtype": "float128", "shape": [1]}
        ]
    }
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[0]" in message and "dtype" in message


def test_bool_in_shape(shared_server):
    program = {
        "instructions": [
            {"op": "upload", "id": "t", "kind": "tensor", "blob": sha(b"abcd"), "dtype": "uint8", "shape": [True]}
        ]
    }
    assert "shape" in parse_error(execute(shared_server.url, program))


@pytest.mark.parametrize("path", ["a/../b", "..", "/abs", "a\\b", "./.", ""])
def test_bad_file_path(shared_server, path):
    message = parse_error(execute(shared_server.url, {"instructions": [file_upload("a", path)]}))
    assert "instructions[0]" in message and "path" in message


@pytest.mark.parametrize(
    "first, second", [("data", "data/x.bin"), ("data/x.bin", "data"), ("x", "./x"), ("d/x", "d//x")]
)
def test_conflicting_file_paths(shared_server, first, second):
    program = {"instructions": [file_upload("a", first), file_upload("b", second)]}
    message = parse_error(execute(shared_server.url, program))
    assert "instructions[1]" in message and "path" in message


def test_unreferenced_blob_part(shared_server):
    message = parse_error(execute(shared_server.url, TRIVIAL, [b"nobody uses me"]))
    assert "unreferenced blob part" in message
    assert sha(b"nobody uses me") in message


def test_blob_bytes_do_not_match_hash_name(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(b"abc")}]}
    response = post(shared_server.url, [program_part(program), blob_part(b"abd", name=sha(b"abc"))])
    message = parse_error(response)
    assert sha(b"abc") in message


def test_malformed_blob_part_name(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(b"abc")}]}
    response = post(shared_server.url, [program_part(program), blob_part(b"abc", name="xyz")])
    parse_error(response)


def test_duplicate_blob_part(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(b"abc")}]}
    response = post(shared_server.url, [program_part(program), blob_part(b"abc"), blob_part(b"abc")])
    parse_error(response)


def test_blob_part_with_wrong_content_type(shared_server):
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(b"abc")}]}
    response = post(shared_server.url, [program_part(program), part("blob:" + sha(b"abc"), "text/plain", b"abc")])
    parse_error(response)


def test_tensor_length_mismatch_beats_cache_miss(shared_server):
    never_sent = b"a blob the server has never seen " + uuid.uuid4().bytes
    program = {
        "instructions": [
            {"op": "upload", "id": "b", "kind": "bytes", "blob": sha(never_sent)},
            {"op": "upload", "id": "t", "kind": "tensor", "blob": sha(b"abc"), "dtype": "float32", "shape": [2]},
        ]
    }
    message = parse_error(execute(shared_server.url, program, [b"abc"]))
    assert "'t'" in message and "8" in message and "3" in message


def test_gpu_count_on_cpu_server(shared_server):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"gpu_count": 1}}))
    assert "gpu_count" in message


def test_gpu_arch_on_a_cpu_server_is_refused_naming_it(shared_server):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"gpu_arch": "sm_90a"}}))
    assert "options.gpu_arch" in message and "CPU server" in message and "sm_90a" in message


@pytest.mark.parametrize("value", ["hopper", "sm_9", 90, None])
def test_bad_gpu_arch(shared_server, value):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"gpu_arch": value}}))
    assert "options.gpu_arch" in message and "sm_90a" in message


@pytest.mark.parametrize("value", [0, -1, -0.5, True, False, "10", None])
def test_bad_timeout_seconds(shared_server, value):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"timeout_seconds": value}}))
    assert "timeout_seconds" in message


@pytest.mark.parametrize("value", [-1, True, 1.5, "10"])
def test_bad_output_limit_bytes(shared_server, value):
    message = parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"output_limit_bytes": value}}))
    assert "output_limit_bytes" in message


def test_unknown_option(shared_server):
    assert "nope" in parse_error(execute(shared_server.url, {**TRIVIAL, "options": {"nope": 1}}))


def test_timeout_above_cap_is_clamped_not_rejected(shared_server):
    response = execute(shared_server.url, {**TRIVIAL, "options": {"timeout_seconds": 10**6}})
    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED"


def test_valid_program_completes_raw(shared_server):
    response = execute(shared_server.url, TRIVIAL)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "COMPLETED"
    assert body["results"] == {"out": {"type": "integer", "value": 7}}
    assert response.headers.get_list("x-request-id") == [body["request_id"]]
    assert "error" not in body
    for key in ("queue_ms", "elapsed_ms", "lease_wait_ms", "lease_held_ms"):
        assert isinstance(body[key], (int, float))
    assert body["lease_held_ms"] == 0


# ------------------------------------------------------------ size limits
@pytest.fixture(scope="module")
def small_cap_server(tmp_path_factory):
    from conftest import Server

    server = Server(tmp_path_factory.mktemp("smallcap"), "--num-workers", "1", "--max-request-bytes", "100000")
    yield server
    server.stop()


def _raw_request(port: int, head: bytes, body: bytes = b"", timeout: float = 10) -> tuple[int, dict, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(head + body)
        except OSError:  # the server may answer and close before the body is sent
            pass
        data = b""
        while b"\r\n\r\n" not in data:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        assert data, "the server closed the connection without sending a response"
        head_text, _, rest = data.partition(b"\r\n\r\n")
        lines = head_text.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, headers, rest


@pytest.mark.parametrize("send_body", [False, True])
def test_413_when_declared_length_exceeds_cap(small_cap_server, send_body):
    head = (
        f"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 200000\r\n\r\n"
    ).encode()
    status, headers, body = _raw_request(small_cap_server.port, head, b"x" * 200000 if send_body else b"")
    assert status == 413
    decoded = json.loads(body)
    assert set(decoded) == {"status", "request_id", "error"}
    assert decoded["status"] == "ERROR"
    assert decoded["error"]["kind"] == "request_too_large"
    assert headers["x-request-id"] == decoded["request_id"]


def test_chunked_body_over_cap_is_413(small_cap_server):
    data = b"y" * 150_000
    program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(data)}]}
    payload = body_of([program_part(program), blob_part(data)])

    def chunks():
        for i in range(0, len(payload), 16384):
            yield payload[i : i + 16384]

    try:
        response = httpx.post(
            small_cap_server.url + "/execute",
            content=chunks(),
            timeout=30,
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
    except httpx.TransportError:
        pytest.skip("connection closed before httpx could read the 413")
    assert_error(response, 413, "request_too_large")


def test_body_under_cap_is_accepted(small_cap_server):
    data = b"z" * 50_000
    program = {
        "instructions": [
            {"op": "upload", "id": "b", "kind": "bytes", "blob": sha(data)},
            {"op": "return", "key": "n", "value": ref("b")},
        ]
    }
    response = execute(small_cap_server.url, program, [data])
    assert response.status_code == 200, response.text
    # bytes come back as a multipart response
    assert response.headers["content-type"].startswith("multipart/form-data")


# ------------------------------------------------------------ misc routes
def test_unknown_path_is_404(shared_server):
    assert httpx.get(shared_server.url + "/nope", timeout=10).status_code == 404
    assert httpx.post(shared_server.url + "/execute/extra", content=b"", timeout=10).status_code == 404


def test_get_execute_is_not_ok(shared_server):
    assert httpx.get(shared_server.url + "/execute", timeout=10).status_code in (404, 405)


# ------------------------------------------------------------ request ids
def test_canonical_request_id_is_echoed(shared_server):
    rid = str(uuid.uuid4())
    response = execute(shared_server.url, TRIVIAL, headers={"X-Request-ID": rid})
    assert response.status_code == 200
    assert response.json()["request_id"] == rid
    assert response.headers["x-request-id"] == rid


def test_canonical_request_id_is_echoed_on_errors(shared_server):
    rid = str(uuid.uuid4())
    response = execute(shared_server.url, {"instructions": []}, headers={"X-Request-ID": rid})
    parse_error(response)
    assert response.json()["request_id"] == rid


@pytest.mark.parametrize(
    "make",
    [
        lambda u: u.upper(),
        lambda u: "{" + u + "}",
        lambda u: u.replace("-", ""),
        lambda u: "not-a-uuid",
        lambda u: "",
        lambda u: "urn:uuid:" + u,
    ],
)
def test_non_canonical_request_id_is_replaced(shared_server, make):
    sent = make(str(uuid.uuid4()))
    response = execute(shared_server.url, TRIVIAL, headers={"X-Request-ID": sent})
    assert response.status_code == 200
    rid = response.json()["request_id"]
    assert rid != sent and rid != sent.strip()
    assert UUID_RE.match(rid)
    assert response.headers.get_list("x-request-id") == [rid]


def test_two_request_id_headers_give_a_fresh_id(shared_server):
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    response = httpx.post(
        shared_server.url + "/execute",
        content=body_of([program_part(TRIVIAL)]),
        timeout=30,
        headers=[
            ("Content-Type", f"multipart/form-data; boundary={BOUNDARY}"),
            ("X-Request-ID", first),
            ("X-Request-ID", second),
        ],
    )
    assert response.status_code == 200
    rid = response.json()["request_id"]
    assert rid not in (first, second)
    assert UUID_RE.match(rid)
    assert response.headers.get_list("x-request-id") == [rid]


def test_request_ids_are_distinct(shared_server):
    ids = {execute(shared_server.url, TRIVIAL).json()["request_id"] for _ in range(5)}
    assert len(ids) == 5


# ------------------------------------------------------------------ health
def test_health_shape(shared_server):
    response = httpx.get(shared_server.url + "/health", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "x-request-id" not in response.headers
    body = response.json()
    for key in ("status", "instance_id", "started_at", "gpu_count", "load", "target", "versions"):
        assert key in body, key
    assert body["status"] == "ok"
    assert str(uuid.UUID(body["instance_id"])) == body["instance_id"]
    assert body["started_at"].endswith("Z")
    assert body["gpu_count"] == 0
    assert body["target"] == {}
    assert isinstance(body["versions"], dict)
    assert all(isinstance(v, str) for v in body["versions"].values())
    load = body["load"]
    assert set(load) >= {"request_capacity", "requests_in_progress", "requests_waiting"}
    assert load["request_capacity"] == 4
    assert load["requests_in_progress"] >= 0 and load["requests_waiting"] >= 0


def test_health_instance_id_is_stable_within_a_lifecycle(shared_server):
    a = httpx.get(shared_server.url + "/health", timeout=10).json()
    b = httpx.get(shared_server.url + "/health", timeout=10).json()
    assert a["instance_id"] == b["instance_id"] and a["started_at"] == b["started_at"]


def test_health_instance_id_changes_across_servers(shared_server, make_server):
    other = make_server("--num-workers", "1")
    a = httpx.get(shared_server.url + "/health", timeout=10).json()
    b = httpx.get(other.url + "/health", timeout=10).json()
    assert a["instance_id"] != b["instance_id"]
    assert b["load"]["request_capacity"] == 1


# -------------------------------------------------------------- CACHE_MISS
def test_cache_miss_shape_and_order(shared_server):
    tag = uuid.uuid4().bytes
    first, second, third = b"first" + tag, b"second" + tag, b"third" + tag
    program = {
        "instructions": [
            {"op": "upload", "id": "b2", "kind": "bytes", "blob": sha(second)},
            {"op": "upload", "id": "f1", "kind": "file", "blob": sha(first), "path": "x.bin"},
            {"op": "upload", "id": "b2again", "kind": "bytes", "blob": sha(second)},
            {"op": "upload", "id": "t3", "kind": "bytes", "blob": sha(third)},
        ]
    }
    response = execute(shared_server.url, program)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"status", "request_id", "missing_blobs"}
    assert body["status"] == "CACHE_MISS"
    assert body["missing_blobs"] == [sha(second), sha(first), sha(third)]
    assert response.headers.get_list("x-request-id") == [body["request_id"]]

    # A partial resend warms the cache with what was supplied; only the rest is missing.
    response = execute(shared_server.url, program, [first])
    assert response.json()["status"] == "CACHE_MISS"
    assert response.json()["missing_blobs"] == [sha(second), sha(third)]

    response = execute(shared_server.url, program, [second, third])
    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED", response.text
