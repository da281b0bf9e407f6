from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kcoral import ProgramResult, ProtocolError, ReturnedFile, ReturnedFolder
from kcoral.result import decode_program_result, decode_response, parse_multipart
from wire_helpers import bytes_node, file_node, multipart, outcome, sha, tensor_node

JSON = "application/json"


def decode_json(body: dict) -> ProgramResult:
    obj, parts = decode_response(JSON, json.dumps(body).encode())
    assert parts is None
    return decode_program_result(obj, parts)


def decode_mp(body: dict, parts: list[tuple[str, bytes]], **kw) -> ProgramResult:
    ctype, raw = multipart(body, parts, **kw)
    obj, decoded_parts = decode_response(ctype, raw)
    return decode_program_result(obj, decoded_parts)


def test_scalar_values_and_fields():
    results = {
        "n": {"type": "null"},
        "b": {"type": "boolean", "value": True},
        "i": {"type": "integer", "value": 2**80},
        "f": {"type": "number", "value": 3},
        "s": {"type": "string", "value": "é"},
        "a": {"type": "array", "value": [{"type": "integer", "value": 1}, {"type": "null"}]},
        "o": {"type": "object", "value": {"$ref": {"type": "string", "value": "x"}}},
    }
    r = decode_json(outcome(results=results, extra_top_level_key={"ignored": True}))
    assert r.completed and r.error is None and r.gpu_ids == ()
    assert r.results == {"n": None, "b": True, "i": 2**80, "f": 3.0, "s": "é", "a": [1, None], "o": {"$ref": "x"}}
    assert isinstance(r["f"], float) and isinstance(r.lease_held_ms, float)
    assert r.stdout == "hello\n" and r.stdout_truncated is False
    with pytest.raises(KeyError):
        r["missing"]


def test_truncation_flags_default_to_false():
    body = outcome()
    del body["stdout_truncated"], body["stderr_truncated"]
    r = decode_json(body)
    assert r.stdout_truncated is False and r.stderr_truncated is False


@pytest.mark.parametrize(
    "node",
    [
        {"type": "null", "value": None},
        {"type": "integer", "value": 1, "extra": 0},
        {"type": "integer", "value": True},
        {"type": "integer", "value": 1.5},
        {"type": "number", "value": False},
        {"type": "boolean", "value": 1},
        {"type": "string"},
        {"type": "array", "value": {}},
        {"type": "object", "value": []},
        {"type": "mystery", "value": 1},
        {"value": 1},
        [1],
    ],
)
def test_bad_value_nodes_rejected(node):
    with pytest.raises(ProtocolError):
        decode_json(outcome(results={"x": node}))


def test_extra_key_in_nested_node_rejected():
    node = {"type": "array", "value": [{"type": "string", "value": "a", "note": "x"}]}
    with pytest.raises(ProtocolError):
        decode_json(outcome(results={"x": node}))


def test_failed_with_error_object():
    err = {
        "kind": "runtime",
        "message": "boom",
        "instruction_index": 3,
        "instruction_op": "run",
        "instruction_id": "check",
        "traceback": "Traceback ...",
    }
    r = decode_json(outcome("FAILED", error=err))
    assert not r.completed and r.error == err
    # gpu_access carries exactly three extra keys
    gerr = dict(err, kind="gpu_access", cuda_call="cudaMalloc", location="x.py:1", interfered_request_id=None)
    assert decode_json(outcome("FAILED", error=gerr)).error["cuda_call"] == "cudaMalloc"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update(extra=1),
        lambda e: e.pop("traceback"),
        lambda e: e.update(kind="weird"),
        lambda e: e.update(instruction_op="compile"),
        lambda e: e.update(instruction_index=True),
        lambda e: e.update(instruction_id=5),
        lambda e: e.update(cuda_call="cudaMalloc"),  # gpu_access extras on another kind
    ],
)
def test_bad_error_objects_rejected(mutate):
    err = {
        "kind": "engine",
        "message": "ValueError: x",
        "instruction_index": 0,
        "instruction_op": "return",
        "instruction_id": None,
        "traceback": "",
    }
    mutate(err)
    with pytest.raises(ProtocolError):
        decode_json(outcome("FAILED", error=err))


def test_completed_with_error_and_failed_without_error_rejected():
    err = {
        "kind": "engine",
        "message": "m",
        "instruction_index": 0,
        "instruction_op": "run",
        "instruction_id": "r",
        "traceback": "",
    }
    with pytest.raises(ProtocolError):
        decode_json(outcome("COMPLETED", error=err))
    with pytest.raises(ProtocolError):
        decode_json(outcome("FAILED"))


def test_gpu_ids_and_gpu_count():
    assert decode_json(outcome(gpu_ids=[0, 3], gpu_count=2)).gpu_ids == (0, 3)
    for extra in (
        {"gpu_ids": [0]},
        {"gpu_count": 1},
        {"gpu_ids": [0, 0], "gpu_count": 2},
        {"gpu_ids": [], "gpu_count": 0},
        {"gpu_ids": [0, 1], "gpu_count": 3},
        {"gpu_ids": [-1], "gpu_count": 1},
        {"gpu_ids": list(range(9)), "gpu_count": 9},
    ):
        with pytest.raises(ProtocolError):
            decode_json(outcome(**extra))


def test_timing_spans():
    spans = {"count": 1, "held_ms": 131.5, "waited_ms": 0.0, "housekeeping_beside": 2, "foreign_processes": []}
    assert decode_json(outcome(timing_spans=spans)).timing_spans == spans
    foreign = {**spans, "foreign_processes": [{"pid": 4242, "name": "python3"}]}
    assert decode_json(outcome(timing_spans=foreign)).timing_spans == foreign
    assert decode_json(outcome()).timing_spans is None
    for bad in (
        {**spans, "count": -1},
        {**spans, "held_ms": -2.0},
        {**spans, "housekeeping_beside": 1.5},
        {"count": 1},
        {**spans, "extra": 0},
        {**spans, "foreign_processes": [{"pid": "4242", "name": "python3"}]},
        {**spans, "foreign_processes": {}},
        [1],
    ):
        with pytest.raises(ProtocolError):
            decode_json(outcome(timing_spans=bad))


@pytest.mark.parametrize(
    "field,value",
    [
        ("request_id", ""),
        ("queue_ms", "1"),
        ("elapsed_ms", True),
        ("stdout", None),
        ("stderr_truncated", 0),
        ("results", []),
        ("status", "ERROR"),
    ],
)
def test_bad_top_level_fields(field, value):
    with pytest.raises(ProtocolError):
        decode_json(outcome(**{field: value}))


def test_strict_json():
    with pytest.raises(ProtocolError):
        decode_response(JSON, b'{"status": "COMPLETED", "status": "FAILED"}')
    with pytest.raises(ProtocolError):
        decode_response(JSON, b'{"x": NaN}')
    with pytest.raises(ProtocolError):
        decode_response(JSON, b"\xff")
    with pytest.raises(ProtocolError):
        decode_response(JSON, b"[]")
    with pytest.raises(ProtocolError):
        decode_response("text/html", b"{}")


def test_tensor_round_trip_and_binary_order():
    x = np.arange(12, dtype="<f4").reshape(3, 4)
    i = np.array([[1, -2]], dtype="<i8")
    blob = b"\x00\x01raw"
    results = {
        "first": {
            "type": "object",
            "value": {
                "y": tensor_node("float32", [3, 4], x.tobytes(), 0),
                "n": {"type": "integer", "value": 12},
                "b": bytes_node(blob, 1),
            },
        },
        "second": {"type": "array", "value": [tensor_node("int64", [1, 2], i.tobytes(), 2)]},
        "scalar": tensor_node("float64", [], np.float64(2.5).tobytes(), 3),
        "empty": tensor_node("float16", [0, 3], b"", 4),
    }
    parts = [
        ("return:0", x.tobytes()),
        ("return:1", blob),
        ("return:2", i.tobytes()),
        ("return:3", np.float64(2.5).tobytes()),
        ("return:4", b""),
    ]
    r = decode_mp(outcome(results=results), parts)
    y = r["first"]["y"]
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (3, 4)
    np.testing.assert_array_equal(y, x)
    assert y.flags.writeable
    y[0, 0] = 42.0
    assert r["first"]["b"] == blob and isinstance(r["first"]["b"], bytes)
    np.testing.assert_array_equal(r["second"][0], i)
    assert r["scalar"].shape == () and float(r["scalar"]) == 2.5
    assert r["empty"].shape == (0, 3)


def test_bfloat16_and_bool_tensors():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = np.array([1.0, -2.5], dtype=ml_dtypes.bfloat16)
    f8 = np.array([0.5], dtype=ml_dtypes.float8_e5m2)
    bo = np.array([True, False, True])
    results = {
        "bf": tensor_node("bfloat16", [2], bf.tobytes(), 0),
        "f8": tensor_node("float8_e5m2", [1], f8.tobytes(), 1),
        "bo": tensor_node("bool", [3], bo.tobytes(), 2),
    }
    r = decode_mp(
        outcome(results=results), [("return:0", bf.tobytes()), ("return:1", f8.tobytes()), ("return:2", bo.tobytes())]
    )
    assert r["bf"].dtype == ml_dtypes.bfloat16 and r["bf"].astype(np.float32).tolist() == [1.0, -2.5]
    assert r["f8"].dtype == ml_dtypes.float8_e5m2
    assert r["bo"].dtype == np.bool_ and r["bo"].tolist() == [True, False, True]


def test_part_numbering_must_follow_depth_first_order():
    a, b = b"aaa", b"bbb"
    # the first node met refers to return:1: rejected
    results = {"x": bytes_node(a, 1), "y": bytes_node(b, 0)}
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results=results), [("return:0", b), ("return:1", a)])


def test_parts_out_of_wire_order_rejected():
    a, b = b"aaa", b"bbb"
    results = {"x": bytes_node(a, 0), "y": bytes_node(b, 1)}
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results=results), [("return:1", b), ("return:0", a)])


def test_unreferenced_missing_and_duplicate_parts_rejected():
    a = b"aaa"
    with pytest.raises(ProtocolError):  # extra part
        decode_mp(outcome(results={"x": bytes_node(a, 0)}), [("return:0", a), ("return:1", a)])
    with pytest.raises(ProtocolError):  # missing part
        decode_mp(outcome(results={"x": bytes_node(a, 0), "y": bytes_node(a, 1)}), [("return:0", a)])
    with pytest.raises(ProtocolError):  # same part referenced twice
        decode_mp(outcome(results={"x": bytes_node(a, 0), "y": bytes_node(a, 0)}), [("return:0", a)])
    with pytest.raises(ProtocolError):  # duplicate part name
        decode_mp(outcome(results={"x": bytes_node(a, 0)}), [("return:0", a), ("return:0", a)])
    with pytest.raises(ProtocolError):  # binary node in a plain JSON body
        decode_json(outcome(results={"x": bytes_node(a, 0)}))


def test_sha_and_length_mismatch_rejected():
    a = b"aaa"
    node = bytes_node(a, 0)
    node["sha256"] = sha(b"other")
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"x": node}), [("return:0", a)])
    node = bytes_node(a, 0)
    node["sha256"] = node["sha256"].upper()
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"x": node}), [("return:0", a)])
    t = tensor_node("float32", [2], a, 0)
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"x": t}), [("return:0", a)])
    f = file_node(a, 0)
    f["size"] = 4
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"x": f}), [("return:0", a)])
    t = tensor_node("complex64", [0], b"", 0)
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"x": t}), [("return:0", b"")])


def test_file_and_folder_nodes(tmp_path):
    rep, x, y = b"report", b"X", b"Y"
    results = {
        "report": file_node(rep, 0),
        "dbg": {
            "type": "folder",
            "files": {".h": file_node(x, 1), "sub/deep/y.bin": file_node(y, 2)},
            "directories": ["empty", "sub", "sub/deep"],
        },
    }
    r = decode_mp(outcome(results=results), [("return:0", rep), ("return:1", x), ("return:2", y)])
    f = r["report"]
    assert isinstance(f, ReturnedFile) and f.read_bytes() == rep
    folder = r["dbg"]
    assert isinstance(folder, ReturnedFolder)
    assert list(folder.files) == [".h", "sub/deep/y.bin"]
    assert folder.directories == ("empty", "sub", "sub/deep")
    with pytest.raises(TypeError):
        folder.files["new"] = f  # type: ignore[index]
    out = folder.save(tmp_path / "out")
    assert (out / "sub/deep/y.bin").read_bytes() == y and (out / "empty").is_dir()
    assert (out / ".h").read_bytes() == x


@pytest.mark.parametrize(
    "files,directories",
    [
        ({"a/b": 0}, []),  # missing ancestor
        ({"b": 0, "a": 1}, []),  # unsorted files
        ({"a": 0}, ["a"]),  # file/directory conflict
        ({"./a": 0}, []),  # not canonical
        ({"a": 0}, ["d", "d"]),  # duplicate directory
        ({"a": 0}, ["z", "d"]),  # unsorted directories
        ({"a": 0}, ["d/e"]),  # directory ancestor missing
        ({"../a": 0}, []),
        ({"/a": 0}, []),
    ],
)
def test_bad_folder_manifests_rejected(files, directories):
    data = [b"%d" % i for i in range(len(files))]
    node = {"type": "folder", "files": {k: file_node(data[v], v) for k, v in files.items()}, "directories": directories}
    parts = [(f"return:{i}", d) for i, d in enumerate(data)]
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"f": node}), parts)


def test_folder_file_entries_must_be_exact_file_nodes():
    node = {"type": "folder", "files": {"a": bytes_node(b"a", 0)}, "directories": []}
    with pytest.raises(ProtocolError):
        decode_mp(outcome(results={"f": node}), [("return:0", b"a")])
    node = {"type": "folder", "files": {}, "directories": [], "root": "."}
    with pytest.raises(ProtocolError):
        decode_json(outcome(results={"f": node}))


def test_multipart_framing_errors():
    body = outcome(results={"x": bytes_node(b"a", 0)})
    ctype, raw = multipart(body, [("return:0", b"a")])
    assert decode_response(ctype, raw)[1] == {"return:0": b"a"}
    for bad in [raw[:-2] + b"xx", b"preamble\r\n" + raw, raw.replace(b"--\r\n", b"\r\n"), raw[:-20]]:
        with pytest.raises(ProtocolError):
            decode_response(ctype, bad)
    with pytest.raises(ProtocolError):  # no boundary parameter
        decode_response("multipart/form-data", raw)
    with pytest.raises(ProtocolError):  # first part is not result/application/json
        c2, r2 = multipart(body, [("return:0", b"a")], result_type="text/plain")
        decode_response(c2, r2)
    with pytest.raises(ProtocolError):
        c2, r2 = multipart(body, [("return:0", b"a")], part_type="application/json")
        decode_response(c2, r2)
    with pytest.raises(ProtocolError):  # unexpected extra header in a part
        decode_response(
            ctype,
            raw.replace(
                b"Content-Type: application/octet-stream", b"Content-Type: application/octet-stream\r\nX-Extra: 1"
            ),
        )


def test_multipart_content_that_starts_with_boundary_is_data():
    boundary = "kcoral-abc"
    tricky = b"\r\n--kcoral-abcdef and more"
    body = outcome(results={"x": bytes_node(tricky, 0)})
    ctype, raw = multipart(body, [("return:0", tricky)], boundary=boundary)
    obj, parts = decode_response(ctype, raw)
    assert decode_program_result(obj, parts)["x"] == tricky
    # quoted boundary parameter is accepted too
    obj, parts = decode_response(f'multipart/form-data; boundary="{boundary}"', raw)
    assert parts == {"return:0": tricky}


def test_parse_multipart_names_and_types():
    parts = parse_multipart(
        b'--B\r\nContent-Disposition: form-data; name="result"\r\ncontent-type: application/json; charset=utf-8'
        b"\r\n\r\n{}\r\n--B--",
        "B",
    )
    assert parts == [("result", "application/json", b"{}")]


def test_returned_file_save(tmp_path):
    f = ReturnedFile(b"data")
    dest = f.save(tmp_path / "a.bin")
    assert dest.read_bytes() == b"data"
    with pytest.raises(FileExistsError):
        f.save(tmp_path / "a.bin")
    ReturnedFile(b"new").save(tmp_path / "a.bin", overwrite=True)
    assert (tmp_path / "a.bin").read_bytes() == b"new"
    (tmp_path / "d").mkdir()
    with pytest.raises(FileExistsError):
        f.save(tmp_path / "d", overwrite=True)  # only regular files may be replaced
    (tmp_path / "target").write_bytes(b"keep")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(FileExistsError):
        f.save(tmp_path / "link", overwrite=True)
    assert (tmp_path / "target").read_bytes() == b"keep"
    with pytest.raises(ValueError):
        f.save(tmp_path / "d" / ".." / "x.bin")
    with pytest.raises(FileNotFoundError):
        f.save(tmp_path / "missing" / "x.bin")
    (tmp_path / "dirlink").symlink_to(tmp_path / "d")
    with pytest.raises(NotADirectoryError):
        f.save(tmp_path / "dirlink" / "x.bin")
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "d", "dirlink", "link", "target"]  # no staging leftovers


def test_returned_folder_save_requires_new_dest_and_cleans_up(tmp_path):
    folder = ReturnedFolder({"a/b.txt": ReturnedFile(b"B"), "c": ReturnedFile(b"C")}, ["a"])
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError):
        folder.save(tmp_path / "exists")

    class Exploding(ReturnedFile):
        def read_bytes(self) -> bytes:
            raise OSError("disk full")

    bad = ReturnedFolder({"a/b.txt": ReturnedFile(b"B"), "z": Exploding(b"")}, ["a"])
    with pytest.raises(OSError):
        bad.save(tmp_path / "partial")
    assert not (tmp_path / "partial").exists()
    out = folder.save(tmp_path / "new")
    assert (out / "a" / "b.txt").read_bytes() == b"B" and (out / "c").read_bytes() == b"C"
