"""Program semantics through kcoral.Client (protocol §2, §3, §4, §7.5, §10)."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from conftest import call
from kcoral import Client, Program
from wire import execute as raw_execute, sha


def failed(result, kind: str, index: int, op: str) -> dict:
    assert result.status == "FAILED", result
    error = result.error
    assert error["kind"] == kind, error
    assert error["instruction_index"] == index, error
    assert error["instruction_op"] == op, error
    return error


# ------------------------------------------------------------- value types
IDENTITY = "def main(x):\n    return x\n"


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63 - 1,
        -(2**63),
        1.5,
        -0.0,
        1e300,
        "",
        "héllo ✓ \u0000 nul",
        [],
        [1, "a", None, [2.5, {"k": False}]],
        {},
        {"a": {"b": {"c": [1, 2, {"d": None}]}}},
    ],
)
def test_value_round_trip(client, value):
    result = client.execute(call(IDENTITY, args=[value]))
    assert result.status == "COMPLETED", result.error
    assert result["out"] == value
    assert type(result["out"]) is type(value)


@pytest.mark.parametrize("value", [2**80, -(2**70)])
def test_big_int_round_trip(client, value):
    result = client.execute(call(f"def main():\n    return {value}\n"))
    assert result.status == "COMPLETED", result.error
    assert result["out"] == value


def test_bool_is_not_int_and_int_is_not_float(client):
    result = client.execute(call("def main():\n    return [True, 1, 1.0]\n"))
    out = result["out"]
    assert [type(v) for v in out] == [bool, int, float]


def test_tuple_comes_back_as_list(client):
    result = client.execute(call("def main():\n    return (1, (2, 3), 'x')\n"))
    assert result["out"] == [1, [2, 3], "x"]


def test_bytes_round_trip(client):
    payload = bytes(range(256)) * 4
    program = Program()
    blob = program.upload(id="b", kind="bytes", value=payload)
    module = program.upload(
        id="m", kind="module", source="def main(b):\n    return [b[::-1], bytearray(b'ab'), memoryview(b'cd'), b'']\n"
    )
    fn = program.get_function(id="f", module=module, name="main")
    out = program.run(id="r", fn=fn, args=[blob])
    program.return_(key="raw", value=blob)
    program.return_(key="out", value=out)
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    assert result["raw"] == payload
    assert result["out"] == [payload[::-1], b"ab", b"cd", b""]
    assert all(type(v) is bytes for v in result["out"])


@pytest.mark.parametrize(
    "expression",
    ["float('nan')", "float('inf')", "{1: 'int key'}", "object()", "[1, {'deep': float('-inf')}]", "(lambda: 0)"],
)
def test_unencodable_values_fail_serialization(client, expression):
    result = client.execute(call(f"def main():\n    return {expression}\n"))
    error = failed(result, "serialization", 3, "return")
    assert error["instruction_id"] is None
    assert result.results == {}


def test_return_of_module_handle_fails_serialization(client):
    program = Program()
    module = program.upload(id="m", kind="module", source="X = 1\n")
    program.return_(key="mod", value=module)
    error = failed(client.execute(program), "serialization", 1, "return")
    assert error["instruction_id"] is None


def test_return_of_function_handle_fails_serialization(client):
    program = Program()
    module = program.upload(id="m", kind="module", source="def main():\n    return 1\n")
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="fn", value=fn)
    failed(client.execute(program), "serialization", 2, "return")


def test_run_on_non_callable_fails_runtime(client):
    program = Program()
    module = program.upload(id="m", kind="module", source="NOT_CALLABLE = 42\n")
    value = program.get_function(id="v", module=module, name="NOT_CALLABLE")
    program.return_(key="value", value=value)  # get_function may select non-callables
    program.run(id="r", fn=value)
    result = client.execute(program)
    error = failed(result, "runtime", 3, "run")
    assert error["instruction_id"] == "r"
    assert "callable" in error["message"]
    assert result["value"] == 42


# ------------------------------------------------------------------ errors
def test_uploaded_function_raising_value_error_is_engine(client):
    source = "def helper():\n    raise ValueError('bad thing 123')\n\ndef main():\n    helper()\n"
    result = client.execute(call(source))
    error = failed(result, "engine", 2, "run")
    assert set(error) == {"kind", "message", "instruction_index", "instruction_op", "instruction_id", "traceback"}
    assert error["message"] == "ValueError: bad thing 123"
    assert error["instruction_id"] == "r"
    assert "<uploaded:" in error["traceback"]
    assert "ValueError: bad thing 123" in error["traceback"]
    assert result.results == {}


def test_execution_error_carries_its_kind(client):
    source = (
        "from kcoral.errors import ExecutionError\n"
        "def main():\n    raise ExecutionError('correctness', 'mismatch at 3')\n"
    )
    error = failed(client.execute(call(source)), "correctness", 2, "run")
    assert "mismatch at 3" in error["message"]


def test_module_syntax_error_is_parse_at_the_upload(client):
    program = Program()
    program.upload(id="ok", kind="module", source="A = 1\n")
    program.upload(id="broken", kind="module", source="def main(:\n    pass\n")
    error = failed(client.execute(program), "parse", 1, "upload")
    assert error["instruction_id"] == "broken"
    assert "SyntaxError" in error["message"] or "syntax" in error["message"].lower()


def test_module_import_exception_is_parse(client):
    program = Program()
    program.upload(id="boom", kind="module", source="raise RuntimeError('at import')\n")
    error = failed(client.execute(program), "parse", 0, "upload")
    assert "at import" in error["message"]


def test_get_function_missing_name_is_parse(client):
    program = Program()
    module = program.upload(id="m", kind="module", source="def main():\n    return 1\n")
    program.get_function(id="g", module=module, name="nope")
    error = failed(client.execute(program), "parse", 1, "get_function")
    assert error["instruction_id"] == "g"
    assert "nope" in error["message"]


def test_results_before_a_failure_are_kept(client):
    program = Program()
    module = program.upload(
        id="m", kind="module", source="def ok():\n    return 'first'\n\ndef bad():\n    raise KeyError('x')\n"
    )
    ok = program.get_function(id="ok", module=module, name="ok")
    bad = program.get_function(id="bad", module=module, name="bad")
    first = program.run(id="r1", fn=ok)
    program.return_(key="first", value=first)
    program.run(id="r2", fn=bad)
    program.return_(key="never", value=first)
    result = client.execute(program)
    failed(result, "engine", 5, "run")
    assert result.results == {"first": "first"}


def test_failed_return_keeps_binary_numbering(client):
    program = Program()
    module = program.upload(
        id="m", kind="module", source="def good():\n    return b'one'\n\ndef bad():\n    return [b'two', object()]\n"
    )
    good = program.run(id="g", fn=program.get_function(module=module, name="good"))
    bad = program.run(id="b", fn=program.get_function(module=module, name="bad"))
    program.return_(key="good", value=good)
    program.return_(key="bad", value=bad)
    result = client.execute(program)  # the client enforces contiguous return:N numbering
    failed(result, "serialization", 6, "return")
    assert result.results == {"good": b"one"}


# ------------------------------------------------------------------- files
def test_file_upload_and_file_return(client):
    data = os.urandom(5000)
    program = Program()
    path = program.upload_file(id="p", blob=data, path="./in//data.bin")
    module = program.upload(
        id="m",
        kind="module",
        source=(
            "import os\n"
            "def main(path):\n"
            "    os.makedirs('out', exist_ok=True)\n"
            "    with open(path, 'rb') as f:\n        data = f.read()\n"
            "    with open('out/rev.bin', 'wb') as f:\n        f.write(data[::-1])\n"
            "    return [path, len(data), oct(os.stat(path).st_mode & 0o777)]\n"
        ),
    )
    out = program.run(id="r", fn=program.get_function(module=module, name="main"), args=[path])
    program.return_(key="info", value=out)
    program.return_(key="path", value=path)
    program.return_file(key="rev", path="out/rev.bin")
    program.return_file(key="orig", path=path)
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    assert result["info"] == ["in/data.bin", 5000, "0o600"]
    assert result["path"] == "in/data.bin"
    assert result["rev"].read_bytes() == data[::-1]
    assert result["rev"].size == 5000
    assert result["orig"].read_bytes() == data


def test_folder_return_with_hidden_files_and_empty_dirs(client, tmp_path):
    source = (
        "import os\n"
        "def main():\n"
        "    os.makedirs('tree/a/b', exist_ok=True)\n"
        "    os.makedirs('tree/empty/inner', exist_ok=True)\n"
        "    os.makedirs('tree/.hidden_dir', exist_ok=True)\n"
        "    open('tree/a/b/deep.txt', 'w').write('deep')\n"
        "    open('tree/.hidden', 'w').write('secret')\n"
        "    open('tree/top.txt', 'w').write('top')\n"
        "    open('tree/zero', 'w').close()\n"
    )
    program = Program()
    module = program.upload(id="m", kind="module", source=source)
    program.run(id="r", fn=program.get_function(module=module, name="main"))
    program.return_folder(key="tree", path="tree")
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    folder = result["tree"]
    assert sorted(folder.files) == [".hidden", "a/b/deep.txt", "top.txt", "zero"]
    assert folder.files["a/b/deep.txt"].read_bytes() == b"deep"
    assert folder.files[".hidden"].read_bytes() == b"secret"
    assert folder.files["zero"].read_bytes() == b""
    assert list(folder.directories) == [".hidden_dir", "a", "a/b", "empty", "empty/inner"]
    saved = folder.save(tmp_path / "saved")
    assert (saved / "a/b/deep.txt").read_bytes() == b"deep"
    assert (saved / "empty/inner").is_dir()


def test_folder_return_of_workspace_root_via_reference(client):
    program = Program()
    path = program.upload_file(id="p", blob=b"x", path="sub/x.txt")
    module = program.upload(id="m", kind="module", source="def main():\n    return 'sub'\n")
    where = program.run(id="r", fn=program.get_function(module=module, name="main"))
    program.return_folder(key="sub", path=where)
    program.return_file(key="x", path=path)
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    assert dict(result["sub"].files) == {"x.txt": result["x"]}
    assert result["sub"].directories == ()


def test_file_return_of_symlink_fails_serialization(client):
    source = "import os\ndef main():\n    os.symlink('/etc/hostname', 'link')\n"
    program = Program()
    module = program.upload(id="m", kind="module", source=source)
    program.run(id="r", fn=program.get_function(module=module, name="main"))
    program.return_file(key="f", path="link")
    failed(client.execute(program), "serialization", 3, "return")


def test_folder_return_containing_symlink_fails_serialization(client):
    source = (
        "import os\ndef main():\n    os.makedirs('d')\n    open('d/a', 'w').write('a')\n    os.symlink('a', 'd/l')\n"
    )
    program = Program()
    module = program.upload(id="m", kind="module", source=source)
    program.run(id="r", fn=program.get_function(module=module, name="main"))
    program.return_folder(key="d", path="d")
    failed(client.execute(program), "serialization", 3, "return")


def test_file_return_of_missing_file_fails_serialization(client):
    program = Program()
    program.upload_file(id="p", blob=b"x", path="x.txt")
    program.return_file(key="f", path="missing.txt")
    failed(client.execute(program), "serialization", 1, "return")


def test_uploaded_python_file_is_importable(client):
    program = Program()
    program.upload_file(id="h", blob=b"def triple(x):\n    return 3 * x\nVALUE = 'from helper'\n", path="helper.py")
    program.upload_file(id="pkg", blob=b"NAME = 'pkg.sub'\n", path="pkg/sub.py")
    source = "import helper\nfrom pkg import sub\ndef main():\n    return [helper.triple(14), helper.VALUE, sub.NAME]\n"
    result = client.execute(_with_uploads(program, source))
    assert result.status == "COMPLETED", result.error
    assert result["out"] == [42, "from helper", "pkg.sub"]


def _with_uploads(program: Program, source: str) -> Program:
    module = program.upload(id="m", kind="module", source=source)
    out = program.run(id="r", fn=program.get_function(id="f", module=module, name="main"))
    program.return_(key="out", value=out)
    return program


# A workspace seen from inside: its listing without `.kcoral` (the sandbox keeps the worker's
# HOME and temporary files there), and its directory's device and inode, which are the host's
# (a sandboxed worker's cwd is /work, a bind mount, so its path says nothing on the host).
WORKSPACE = (
    "import os, time\n"
    "def main(pause):\n"
    "    time.sleep(pause)\n"
    "    here = os.stat('.')\n"
    "    return [sorted(set(os.listdir('.')) - {'.kcoral'}), here.st_dev, here.st_ino]\n"
)


def test_workspace_is_fresh_and_removed_after_the_request(client, shared_server):
    from concurrent.futures import ThreadPoolExecutor

    from conftest import processes_tagged

    program = Program()
    program.upload_file(id="a", blob=b"1", path="a.txt")
    module = program.upload(id="m", kind="module", source=WORKSPACE)
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[1.5]))  # time to find its cwd
    held = []  # directory fds on the cwd of every process of the server while the program runs
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(client.execute, program)
            deadline = time.monotonic() + 1.2
            while time.monotonic() < deadline and not running.done():
                for pid in processes_tagged(shared_server.tag) - {shared_server.process.pid}:
                    try:
                        held.append(os.open(f"/proc/{pid}/cwd", os.O_RDONLY | os.O_DIRECTORY))
                    except OSError:
                        pass
                time.sleep(0.1)
            first = running.result(timeout=60)
        assert first.status == "COMPLETED", first.error
        listing, device, inode = first["out"]
        assert listing == ["a.txt"]
        workspace = [fd for fd in held if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (device, inode)]
        assert workspace, "no process of the server had the workspace as its cwd"
        deadline = time.monotonic() + 5
        while os.fstat(workspace[0]).st_nlink > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.fstat(workspace[0]).st_nlink == 0, "the workspace was not removed after the request"
    finally:
        for fd in held:
            os.close(fd)
    second = client.execute(call(WORKSPACE, args=[0]))
    assert second["out"][0] == []


# ------------------------------------------------------------------ output
def test_output_capture_includes_children_and_raw_fds(client):
    source = (
        "import os, subprocess, sys\n"
        "print('module import')\n"
        "def main():\n"
        "    print('python print', flush=True)\n"
        "    subprocess.run(['echo', 'child stdout'], check=True)\n"
        "    subprocess.run('echo child stderr >&2', shell=True, check=True)\n"
        "    os.write(1, b'raw fd1\\n')\n"
        "    os.write(2, b'raw fd2\\n')\n"
        "    sys.stderr.write('py stderr\\n')\n"
        "    return 0\n"
    )
    result = client.execute(call(source))
    assert result.status == "COMPLETED", result.error
    assert result.stdout == "module import\npython print\nchild stdout\nraw fd1\n"
    assert result.stderr == "child stderr\nraw fd2\npy stderr\n"
    assert result.stdout_truncated is False and result.stderr_truncated is False


def test_output_limit_keeps_the_head(client):
    source = "import os\ndef main():\n    os.write(1, b'HEAD' + b'x' * 5000 + b'TAIL')\n" "    os.write(2, b'e' * 30)\n"
    result = client.execute(call(source), output_limit_bytes=100)
    assert result.status == "COMPLETED", result.error
    assert result.stdout == "HEAD" + "x" * 96
    assert result.stdout_truncated is True
    assert result.stderr == "e" * 30
    assert result.stderr_truncated is False


def test_output_limit_exactly_at_size_is_not_truncated(client):
    result = client.execute(call("import os\ndef main():\n    os.write(1, b'a' * 64)\n"), output_limit_bytes=64)
    assert result.stdout == "a" * 64 and result.stdout_truncated is False


def test_output_limit_zero_disables_capture(client):
    source = "import os\ndef main():\n    print('lots ' * 1000)\n    os.write(2, b'err' * 100)\n"
    result = client.execute(call(source), output_limit_bytes=0)
    assert result.status == "COMPLETED", result.error
    assert result.stdout == "" and result.stderr == ""
    assert result.stdout_truncated is False and result.stderr_truncated is False


def test_invalid_utf8_output_is_replaced(client):
    result = client.execute(call("import os\ndef main():\n    os.write(1, b'ok\\xff\\xfe!')\n"))
    assert result.stdout == "ok\ufffd\ufffd!"


def test_output_is_captured_on_failure(client):
    result = client.execute(call("def main():\n    print('before')\n    raise ValueError('x')\n"))
    assert result.status == "FAILED"
    assert result.stdout == "before\n"


# ------------------------------------------------------- runtime environment
def test_kcoral_builtins_and_errors_import_inside_uploaded_code(client):
    source = (
        "import kcoral.builtins\n"
        "from kcoral.builtins import benchmark, compile_tirx\n"
        "from kcoral.errors import ExecutionError\n"
        "def main():\n"
        "    return [callable(benchmark), callable(compile_tirx), issubclass(ExecutionError, Exception)]\n"
    )
    result = client.execute(call(source))
    assert result.status == "COMPLETED", result.error
    assert result["out"] == [True, True, True]


def test_cuda_language_module_gives_name_and_source(client):
    cuda = 'extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1; }\n'
    program = Program()
    kernels = program.upload(id="k", kind="module", source=cuda, language="cuda")
    add_one = program.get_function(id="add_one", module=kernels, name="add_one")
    compiler = program.upload(
        id="c", kind="module", source="def compile(fn):\n    return {'name': fn.name, 'source': fn.source}\n"
    )
    out = program.run(id="r", fn=program.get_function(module=compiler, name="compile"), args=[add_one])
    program.return_(key="out", value=out)
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    assert result["out"] == {"name": "add_one", "source": cuda}


def test_nested_refs_in_args_stay_literal(client):
    program = Program()
    module = program.upload(
        id="m", kind="module", source="def main(*args):\n    return [type(args[0]).__name__, list(args[1:])]\n"
    )
    fn = program.get_function(id="f", module=module, name="main")
    literal = [{"inner": {"$ref": "m"}}, [{"$ref": "f"}], {"$ref": ""}, {"$ref": "f", "extra": 1}]
    out = program.run(id="r", fn=fn, args=[{"$ref": "f"}, *literal])  # only the top-level ref resolves
    program.return_(key="out", value=out)
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    assert result["out"] == ["function", literal]


def test_handles_do_not_persist_between_requests(client):
    first = Program()
    first.upload(id="m", kind="module", source="X = 1\n")
    assert client.execute(first).status == "COMPLETED"
    response = raw_execute(client.base_url, {"instructions": [{"op": "return", "key": "k", "value": {"$ref": "m"}}]})
    assert response.status_code == 400


def test_module_state_is_not_shared_between_requests(client):
    source = "import sys\nsys.modules.setdefault('kcoral_e2e_marker', type(sys)('marker'))\nCOUNT = []\ndef main():\n    COUNT.append(1)\n    return len(COUNT)\n"
    results = [client.execute(call(source))["out"] for _ in range(3)]
    assert results == [1, 1, 1]


# ------------------------------------------------------------------- cache
def test_same_bytes_used_twice_are_sent_once(client, shared_server):
    data = b"shared bytes " + uuid.uuid4().bytes
    program = Program()
    program.upload(id="a", kind="bytes", value=data)
    program.upload(id="b", kind="bytes", value=data)
    program.upload_file(id="c", blob=data, path="c.bin")
    assert len(program._blobs) == 1
    result = client.execute(program)
    assert result.status == "COMPLETED", result.error
    # A second execute is served from the cache: a raw request with no blob parts completes.
    response = raw_execute(shared_server.url, {"instructions": program.instructions})
    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED", response.text


def test_cache_hit_after_successful_execute(client, shared_server):
    data = os.urandom(1000)
    program = Program()
    blob = program.upload(id="b", kind="bytes", value=data)
    path = program.upload_file(id="p", blob=os.urandom(100), path="f.bin")
    program.return_(key="b", value=blob)
    program.return_(key="p", value=path)
    first = raw_execute(shared_server.url, {"instructions": program.instructions})
    assert first.json()["status"] == "CACHE_MISS"
    result = client.execute(program)
    assert result.status == "COMPLETED" and result["b"] == data
    again = raw_execute(shared_server.url, {"instructions": program.instructions})
    assert again.status_code == 200
    assert again.headers["content-type"].startswith("multipart/form-data")  # bytes come back as a part


def test_file_blob_survives_restart_on_the_same_disk_cache(tmp_path):
    from conftest import Server

    data = b"persisted file " + uuid.uuid4().bytes
    memory_only = b"memory only " + uuid.uuid4().bytes
    file_program = {
        "instructions": [
            {"op": "upload", "id": "p", "kind": "file", "blob": sha(data), "path": "x.bin"},
            {"op": "return", "key": "x", "kind": "file", "path": {"$ref": "p"}},
        ]
    }
    bytes_program = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": sha(memory_only)}]}

    first = Server(tmp_path, "--num-workers", "1")
    try:
        assert raw_execute(first.url, file_program).json()["status"] == "CACHE_MISS"
        assert raw_execute(first.url, file_program, [data]).status_code == 200
        assert raw_execute(first.url, bytes_program, [memory_only]).json()["status"] == "COMPLETED"
        assert raw_execute(first.url, bytes_program).json()["status"] == "COMPLETED"
    finally:
        assert first.stop() == 0
    cached = list((tmp_path / "disk-cache").rglob(sha(data)))
    assert cached, "file blob was not written to the disk cache"

    # conftest's Server derives --disk-cache-dir from its directory and CLI11 rejects a repeated
    # flag ("At Most 1 required but received 2"), so the restart reuses the same directory.
    second = Server(tmp_path, "--num-workers", "1")
    try:
        response = raw_execute(second.url, file_program)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("multipart/form-data"), response.text
        with Client(second.url) as c:
            from kcoral import Program as P

            program = P()
            path = program.upload_file(id="p", blob=data, path="x.bin")
            program.return_file(key="x", path=path)
            assert c.execute(program)["x"].read_bytes() == data
        # The memory tier is lost on restart.
        missing = raw_execute(second.url, bytes_program).json()
        assert missing["status"] == "CACHE_MISS" and missing["missing_blobs"] == [sha(memory_only)]
    finally:
        second.stop()


def test_disk_cache_disabled_with_empty_dir(make_server):
    # (conftest's Server always passes --disk-cache-dir and CLI11 rejects a repeated flag, so the
    # tier is disabled through its capacity instead.)
    server = make_server("--num-workers", "1", "--disk-cache-capacity-mbytes", "0")
    data = b"no disk " + uuid.uuid4().bytes
    program = {"instructions": [{"op": "upload", "id": "p", "kind": "file", "blob": sha(data), "path": "x"}]}
    assert raw_execute(server.url, program, [data]).json()["status"] == "COMPLETED"
    assert raw_execute(server.url, program).json()["status"] == "CACHE_MISS"
