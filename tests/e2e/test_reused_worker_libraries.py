"""A reused worker that loads library after library (--max-requests-per-worker 0)
runs each upload's own code, even when the libraries share a name and each
blob's descriptor number is reused by the next request. glibc knows a loaded
library by its path, so a /proc/self/fd/N path must never name another library
later (found by bench/eval_mix.py on the H200: wrong kernels passed)."""

from pathlib import Path

import pytest

from kcoral import Client, Program

SOURCE = "int64_t answer() {{ return {value}; }}\n"


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[int, bytes]:
    import os

    tvm_ffi_cpp = pytest.importorskip("tvm_ffi.cpp")
    os.environ["TVM_FFI_CACHE_DIR"] = str(tmp_path_factory.mktemp("tvm-ffi-cache"))
    built = {}
    for value in (1, 2, 3):
        # One name for both, as a generator's candidates have: only the bytes differ.
        directory = tmp_path_factory.mktemp(f"build{value}")
        path = tvm_ffi_cpp.build_inline(
            name="candidate", cpp_sources=SOURCE.format(value=value), functions="answer", build_directory=str(directory)
        )
        built[value] = Path(path).read_bytes()
    return built


def answer_program(library: bytes) -> Program:
    program = Program()
    module = program.upload(kind="library", value=library)
    out = program.run(fn=program.get_function(module=module, name="answer"), args=[])
    program.return_(key="answer", value=out)
    return program


def test_each_request_runs_its_own_library_on_a_reused_worker(make_server, libraries):
    server = make_server("--num-workers", "1", "--max-requests-per-worker", "0")
    with Client(server.url) as client:
        for value in (1, 2, 1, 2, 2, 1):
            result = client.execute(answer_program(libraries[value]), timeout_seconds=60)
            assert result.completed, result.error
            assert result.results["answer"] == value
    assert len({e["pid"] for e in server.events() if e["event"] == "request_routed"}) == 1  # one worker did it all


def test_a_reused_worker_is_retired_once_it_holds_its_limit_of_libraries(make_server, libraries, monkeypatch):
    monkeypatch.setenv("KCORAL_MAX_LIBRARIES_PER_WORKER", "2")  # the server tells its workers
    server = make_server("--num-workers", "1", "--max-requests-per-worker", "0")
    with Client(server.url) as client:
        for value in (1, 1, 2, 3):  # the second library fills the first worker
            assert client.execute(answer_program(libraries[value]), timeout_seconds=60).results["answer"] == value
    events = server.events()
    pids = [e["pid"] for e in events if e["event"] == "request_routed"]
    assert pids[0] == pids[1] == pids[2] != pids[3]
    assert [e["reason"] for e in events if e["event"] == "worker_retired"] == ["library_limit"]
