from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from kcoral import Program, Register
from kcoral.artifacts import normalize_remote_path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_generated_ids_share_one_counter_and_skip_taken_ids():
    p = Program()
    m = p.upload(kind="module", source="def f(x):\n    return x\n")
    f = p.get_function(module=m, name="f")
    r = p.run(fn=f)
    assert (m, f, r) == (Register("upload_0"), Register("get_function_1"), Register("run_2"))
    explicit = p.upload(id="upload_3", kind="bytes", value=b"x")
    assert explicit.id == "upload_3"
    # explicit ids do not advance the counter; the taken upload_3 is skipped
    assert p.upload(kind="bytes", value=b"y").id == "upload_4"
    assert p.run(fn=f).id == "run_5"
    p.return_(key="out", value=r)  # returns consume no ids
    assert p.run(fn=f).id == "run_6"


def test_explicit_id_errors_leave_program_unchanged():
    p = Program()
    p.upload(id="a", kind="module", source="")
    with pytest.raises(ValueError):
        p.upload(id="a", kind="module", source="")
    with pytest.raises(ValueError):
        p.upload(id="", kind="module", source="")
    with pytest.raises(ValueError):
        p.get_function(module=Register("nope"), name="f")
    assert len(p.instructions) == 1
    # a failing builder must not consume a generated id
    with pytest.raises(TypeError):
        p.upload(kind="module", source=None)
    assert p.upload(kind="bytes", value=b"").id == "upload_0"


def test_upload_kinds_and_field_checks():
    p = Program()
    with pytest.raises(ValueError):
        p.upload(kind="file", value=b"x")
    with pytest.raises(ValueError):
        p.upload(kind="object", value=b"x")
    with pytest.raises(TypeError):
        p.upload(kind="module", source="x", value=b"1")
    with pytest.raises(TypeError):
        p.upload(kind="bytes", value=b"1", dtype="uint8")
    with pytest.raises(TypeError):
        p.upload(kind="bytes", value="text")
    with pytest.raises(TypeError):
        p.upload(kind="library", value=b"x", language="cuda")
    with pytest.raises(ValueError):
        p.upload(kind="module", source="x", language="rust")
    assert p.instructions == []


def test_module_language_written_only_when_passed():
    p = Program()
    p.upload(id="py", kind="module", source="x = 1")
    p.upload(id="cu", kind="module", source="__global__ void k() {}", language="cuda")
    p.upload(id="py2", kind="module", source="y = 2", language="python")
    assert p.instructions[0] == {"op": "upload", "id": "py", "kind": "module", "source": "x = 1"}
    assert list(p.instructions[1]) == ["op", "id", "kind", "source", "language"]
    assert p.instructions[1]["language"] == "cuda"
    assert p.instructions[2]["language"] == "python"
    assert p._blobs == {}


def test_bytes_and_library_blobs_are_deduplicated_and_snapshotted():
    p = Program()
    data = bytearray(b"payload")
    a = p.upload(kind="bytes", value=data)
    data[0:1] = b"X"  # snapshot: later mutation has no effect
    b = p.upload(kind="library", value=memoryview(b"payload"))
    ia, ib = p.instructions
    assert ia == {"op": "upload", "id": a.id, "kind": "bytes", "blob": sha(b"payload")}
    assert ib == {"op": "upload", "id": b.id, "kind": "library", "blob": sha(b"payload")}
    assert p._blobs == {sha(b"payload"): b"payload"}


def test_numpy_tensor_upload_is_little_endian_and_contiguous():
    p = Program()
    arr = np.arange(6, dtype=">f4").reshape(2, 3).T  # big-endian, non-contiguous
    p.upload(id="x", kind="tensor", value=arr)
    inst = p.instructions[0]
    assert inst["dtype"] == "float32" and inst["shape"] == [3, 2]
    expected = np.ascontiguousarray(arr).astype("<f4").tobytes()
    assert inst["blob"] == sha(expected)
    assert p._blobs[inst["blob"]] == expected
    assert list(inst) == ["op", "id", "kind", "blob", "dtype", "shape"]


def test_tensor_scalar_bool_and_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    p = Program()
    p.upload(kind="tensor", value=np.array(3, dtype=np.int64))
    p.upload(kind="tensor", value=np.array([True, False]))
    p.upload(kind="tensor", value=np.ones(3, dtype=ml_dtypes.bfloat16))
    p.upload(kind="tensor", value=np.ones(2, dtype=ml_dtypes.float8_e4m3fn))
    got = [(i["dtype"], i["shape"]) for i in p.instructions]
    assert got == [("int64", []), ("bool", [2]), ("bfloat16", [3]), ("float8_e4m3fn", [2])]


def test_raw_bytes_tensor_needs_dtype_and_shape():
    p = Program()
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=b"\0" * 8)
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=b"\0" * 8, dtype="float32", shape=[3])
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=b"\0" * 8, dtype="complex64", shape=[1])
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=b"\0" * 8, dtype="float32", shape=[True, 2])
    r = p.upload(kind="tensor", value=b"\0" * 8, dtype="float32", shape=(2,))
    assert p.instructions == [
        {"op": "upload", "id": r.id, "kind": "tensor", "blob": sha(b"\0" * 8), "dtype": "float32", "shape": [2]}
    ]


def test_declared_dtype_or_shape_must_match_value():
    p = Program()
    arr = np.zeros((2, 2), dtype=np.float16)
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=arr, dtype="float32")
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=arr, shape=[4])
    with pytest.raises(ValueError):
        p.upload(kind="tensor", value=np.zeros(2, dtype=np.complex64))
    p.upload(kind="tensor", value=arr, dtype=np.float16, shape=[2, 2])
    assert len(p.instructions) == 1


def test_dlpack_and_duck_typed_tensors():
    class DLPackOnly:
        def __init__(self, a):
            self._a = a

        def __dlpack__(self, *args, **kwargs):
            return self._a.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    class Duck:
        dtype = "int16"
        shape = (2,)

        def tobytes(self):
            return b"\x01\x00\x02\x00"

    p = Program()
    p.upload(kind="tensor", value=DLPackOnly(np.arange(3, dtype=np.int32)))
    p.upload(kind="tensor", value=Duck())
    assert p.instructions[0]["dtype"] == "int32" and p.instructions[0]["shape"] == [3]
    assert p.instructions[1]["dtype"] == "int16" and p._blobs[p.instructions[1]["blob"]] == b"\x01\x00\x02\x00"
    with pytest.raises(TypeError):
        p.upload(kind="tensor", value=[1, 2, 3])


def test_get_function_and_run_wire_shape():
    p = Program()
    m = p.upload(id="m", kind="module", source="")
    f = p.get_function(id="f", module={"$ref": "m"}, name="main")
    g = p.get_function(id="g", module=m, name="main", cpu_only=True)
    x = p.upload(id="x", kind="bytes", value=b"1")
    y = p.run(id="y", fn=f, args=[x, 2, {"nested": {"$ref": "x"}}, [x.id]])
    z = p.run(id="z", fn=g)
    insts = p.instructions
    assert insts[1] == {"op": "get_function", "id": "f", "module": {"$ref": "m"}, "name": "main"}
    assert insts[2]["cpu_only"] is True
    assert insts[4] == {
        "op": "run",
        "id": "y",
        "fn": {"$ref": "f"},
        "args": [{"$ref": "x"}, 2, {"nested": {"$ref": "x"}}, ["x"]],
    }
    assert insts[5]["args"] == []
    with pytest.raises(TypeError):
        p.run(fn={"$ref": "f"})
    with pytest.raises(TypeError):
        p.run(fn="f")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.run(fn=Register("unknown"))
    with pytest.raises(ValueError):
        p.run(fn=f, args=[Register("unknown")])
    with pytest.raises(TypeError):
        p.get_function(module=m, name="main", cpu_only=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        p.get_function(module={"$ref": "m", "x": 1}, name="main")
    with pytest.raises(ValueError):
        p.get_function(module=m, name="")
    assert (y.id, z.id) == ("y", "z")
    assert len(p.instructions) == 6


def test_returns():
    p = Program()
    x = p.upload(id="x", kind="bytes", value=b"1")
    p.return_(key="a", value=x)
    p.return_(key="b", value={"$ref": "x"})
    p.return_file(key="c", path="./out//report.txt")
    p.return_folder(key="d", path=x)
    with pytest.raises(ValueError):
        p.return_(key="a", value=x)
    with pytest.raises(ValueError):
        p.return_(key="", value=x)
    with pytest.raises(ValueError):
        p.return_(key="e", value=Register("nope"))
    with pytest.raises(ValueError):
        p.return_file(key="f", path="../x")
    with pytest.raises(TypeError):
        p.return_folder(key="g", path=3)  # type: ignore[arg-type]
    assert p.instructions[1:] == [
        {"op": "return", "key": "a", "value": {"$ref": "x"}},
        {"op": "return", "key": "b", "value": {"$ref": "x"}},
        {"op": "return", "key": "c", "kind": "file", "path": "out/report.txt"},
        {"op": "return", "key": "d", "kind": "folder", "path": {"$ref": "x"}},
    ]
    # a failed key check must not reserve the key
    p.return_(key="e", value=x)


def test_instructions_is_a_shallow_copy():
    p = Program()
    p.upload(kind="module", source="")
    insts = p.instructions
    insts.append({"op": "bogus"})
    assert len(p.instructions) == 1
    assert p.instructions[0] is insts[0]


@pytest.mark.parametrize(
    "path,expected",
    [("a", "a"), ("./data//x.bin", "data/x.bin"), ("a/./b/", "a/b"), ("é/ü", "é/ü")],
)
def test_normalize_remote_path_ok(path, expected):
    assert normalize_remote_path(path) == expected


@pytest.mark.parametrize(
    "path", ["", "/abs", "a/../b", "..", "a\\b", "a\x00b", ".", "./", "//", "x" * 256, "a/" * 2100 + "b"]
)
def test_normalize_remote_path_rejects(path):
    with pytest.raises(ValueError):
        normalize_remote_path(path)


def test_upload_file_normalizes_and_checks_conflicts():
    p = Program()
    r = p.upload_file(blob=b"abc", path="./data//x.bin")
    assert r == Register("upload_0")
    assert p.instructions[0] == {
        "op": "upload",
        "id": "upload_0",
        "kind": "file",
        "blob": sha(b"abc"),
        "path": "data/x.bin",
    }
    for bad in ["data/x.bin", "data", "data/x.bin/y", "data/./x.bin"]:
        with pytest.raises(ValueError):
            p.upload_file(blob=b"", path=bad)
    with pytest.raises(ValueError):
        p.upload_file(blob=b"", path="a/../b")
    with pytest.raises(TypeError):
        p.upload_file(blob="text", path="t")  # type: ignore[arg-type]
    p.upload_file(blob=b"abc", path="data/y.bin", id="y")
    assert len(p.instructions) == 2
    assert len(p._blobs) == 1


def test_upload_folder_sorted_hidden_files_and_empty_dirs(tmp_path):
    root = tmp_path / "src"
    (root / "b" / "empty").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"A")
    (root / ".hidden").write_bytes(b"H")
    (root / "b" / "c.txt").write_bytes(b"C")
    p = Program()
    m = p.upload(kind="module", source="")
    assert p.upload_folder(root, path="./inputs/") is None
    files = [(i["id"], i["path"]) for i in p.instructions[1:]]
    assert files == [("upload_1", "inputs/.hidden"), ("upload_2", "inputs/a.txt"), ("upload_3", "inputs/b/c.txt")]
    assert p._blobs[sha(b"C")] == b"C"
    assert m.id == "upload_0"
    # conflicts with the folder's files are detected afterwards
    with pytest.raises(ValueError):
        p.upload_file(blob=b"", path="inputs/b")
    # "." puts the files at the workspace root
    q = Program()
    q.upload_folder(str(root), path=".")
    assert [i["path"] for i in q.instructions] == [".hidden", "a.txt", "b/c.txt"]
    # an empty folder adds nothing
    (tmp_path / "empty").mkdir()
    q.upload_folder(tmp_path / "empty", path="e")
    assert len(q.instructions) == 3


def test_upload_folder_is_all_or_nothing(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    (root / "a.txt").write_bytes(b"A")
    (root / "z").symlink_to(root / "a.txt")
    p = Program()
    with pytest.raises(ValueError):
        p.upload_folder(root, path="in")
    assert p.instructions == [] and p._blobs == {}
    # symlinked root is rejected
    os.unlink(root / "z")
    (tmp_path / "link").symlink_to(root)
    with pytest.raises(ValueError):
        p.upload_folder(tmp_path / "link", path="in")
    # special file (fifo) is rejected
    os.mkfifo(root / "fifo")
    with pytest.raises(ValueError):
        p.upload_folder(root, path="in")
    os.unlink(root / "fifo")
    # conflict with an earlier file upload: nothing is added
    p.upload_file(blob=b"x", path="in/a.txt")
    with pytest.raises(ValueError):
        p.upload_folder(root, path="in")
    assert len(p.instructions) == 1
    p.upload_folder(root, path="other")
    assert [i["path"] for i in p.instructions] == ["in/a.txt", "other/a.txt"]


def test_program_json_is_serializable():
    p = Program()
    m = p.upload(kind="module", source="é")
    f = p.get_function(module=m, name="f")
    p.run(fn=f, args=[1.5, "ü", None, True])
    text = json.dumps({"instructions": p.instructions}, ensure_ascii=False, allow_nan=False)
    assert "é" in text


def test_a_large_blob_is_named_when_needed_and_remembered():
    from kcoral import blob_names

    data = bytes(range(256)) * (blob_names.LARGE_BLOB_BYTES // 256 + 1)
    p = Program()
    p.upload(id="d", kind="bytes", value=data)
    assert p._unnamed and not p._blobs  # not hashed at call time
    assert p.instructions[0]["blob"] == sha(data)  # hashed when the wire form is asked for
    assert blob_names.known_name(data) == sha(data)
    again = Program()
    again.upload(id="d", kind="bytes", value=data)
    assert not again._unnamed and again._blobs == {sha(data): data}  # remembered by identity
    assert blob_names.known_name(bytearray(data)) is None  # only exact bytes objects


def test_remembered_blobs_are_bounded_in_bytes_but_the_newest_is_kept(monkeypatch):
    from kcoral import blob_names

    monkeypatch.setattr(blob_names, "_MEMO_BYTES", 3 * blob_names.LARGE_BLOB_BYTES)
    monkeypatch.setattr(blob_names, "_memo", type(blob_names._memo)())
    blobs = [bytes([i]) * blob_names.LARGE_BLOB_BYTES for i in range(4)]
    for data in blobs:
        blob_names.remember(data, sha(data))
    assert [blob_names.known_name(d) for d in blobs] == [None] + [sha(d) for d in blobs[1:]]
    huge = b"h" * (4 * blob_names.LARGE_BLOB_BYTES)  # over the bound alone: kept, the rest dropped
    blob_names.remember(huge, sha(huge))
    assert blob_names.known_name(huge) == sha(huge)
    assert all(blob_names.known_name(d) is None for d in blobs)


def test_a_caller_supplied_hash_is_used_as_is():
    digest = "ab" * 32
    p = Program()
    p.upload(id="d", kind="bytes", value=b"payload", sha256=digest)
    p.upload_file(blob=b"file", path="f.txt", sha256="cd" * 32)
    assert p.instructions[0]["blob"] == digest and p._blobs[digest] == b"payload"
    assert p.instructions[1]["blob"] == "cd" * 32
    with pytest.raises(ValueError, match="sha256"):
        p.upload(kind="bytes", value=b"x", sha256="ABC")
    with pytest.raises(ValueError, match="sha256"):
        p.upload_file(blob=b"x", path="g.txt", sha256="0" * 63)
    assert len(p) == 2 and "g.txt" not in p._file_paths
    with pytest.raises(TypeError, match="sha256"):
        p.upload(kind="module", source="x = 1", sha256=digest)
