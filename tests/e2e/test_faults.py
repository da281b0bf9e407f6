"""Faults on dedicated servers: timeouts, crashes, floods, leaked children,
saturation and shutdown (protocol §1.6, §4.4, §4.5, §7.2, §7.3, §10)."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import LEAK_TAG, Server, alive, call, describe, processes_tagged, tree_of, wait_for
from kcoral import Client, KCoralError, Program
from wire import TRIVIAL, assert_error, execute as raw_execute, module_program


def trivial_ok(url: str) -> None:
    with Client(url) as c:
        result = c.execute(call("def main():\n    return 'alive'\n"), timeout_seconds=20)
    assert result.status == "COMPLETED" and result["out"] == "alive", result


def wait_gone(pids, timeout: float = 2.0) -> set[int]:
    deadline = time.monotonic() + timeout
    remaining = set(pids)
    while remaining and time.monotonic() < deadline:
        remaining = {pid for pid in remaining if alive(pid)}
        if remaining:
            time.sleep(0.05)
    return {pid for pid in remaining if alive(pid)}


def load(url: str) -> dict:
    return httpx.get(url + "/health", timeout=5).json()["load"]


# Processes a program starts are found from the host by the leak tag and their command line:
# with the sandbox a program knows only pids of its own PID namespace and cannot write to a
# host path, so it cannot report a host pid.
def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def left_running(server, command: str, grace: float = 2.0) -> str:
    """'' once no process of `server` runs `command` (polled for `grace`), else who is left."""
    deadline = time.monotonic() + grace
    while (
        left := {p for p in processes_tagged(server.tag) if command_line(p) == command}
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    return describe(left)


def routed_pid(server, request_id: str, timeout: float = 10) -> int:
    """The host pid of the worker the server gave `request_id` to (its request_routed event)."""

    def find():
        return next(
            (e["pid"] for e in server.events() if e["event"] == "request_routed" and e.get("request_id") == request_id),
            None,
        )

    return wait_for(find, timeout, f"request {request_id} to reach a worker")


SPAWN_SESSION_CHILD_AND_SPIN = (
    "import subprocess\n"
    "def main():\n"
    "    subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
    "    while True:\n"
    "        pass\n"
)


# ----------------------------------------------------------------- timeouts
def test_timeout_is_504_and_server_keeps_serving(make_server):
    server = make_server("--num-workers", "1")
    with Client(server.url) as c:
        start = time.monotonic()
        with pytest.raises(KCoralError) as info:
            c.execute(call("def main():\n    while True:\n        pass\n"), timeout_seconds=1)
        elapsed = time.monotonic() - start
    assert info.value.status_code == 504
    assert info.value.kind == "timeout"
    assert info.value.message == "execution timed out"
    assert 0.9 <= elapsed < 3.5, elapsed
    trivial_ok(server.url)


def test_timeout_raw_body_has_no_output(make_server):
    server = make_server("--num-workers", "1")
    program = module_program("import time\ndef main():\n    print('lost')\n    time.sleep(60)\n")
    program["options"] = {"timeout_seconds": 0.5}
    response = raw_execute(server.url, program)
    assert assert_error(response, 504, "timeout") == "execution timed out"
    trivial_ok(server.url)


def test_timeout_kills_a_child_in_its_own_session(make_server):
    server = make_server("--num-workers", "1")
    with Client(server.url) as c:
        with pytest.raises(KCoralError) as info:
            c.execute(call(SPAWN_SESSION_CHILD_AND_SPIN), timeout_seconds=1.5)
    assert info.value.status_code == 504 and info.value.kind == "timeout"
    # The program spins only once Popen has returned: the child was running.
    assert not (left := left_running(server, "sleep 1000")), f"setsid child survived the timeout: {left}"
    trivial_ok(server.url)


# ------------------------------------------------------------------ crashes
CRASHERS = {
    "abort": "import os\ndef main():\n    os.abort()\n",
    "segfault": "import ctypes\ndef main():\n    ctypes.string_at(0)\n",
    "exit3": "import os\ndef main():\n    os._exit(3)\n",
    "sigkill_self": "import os, signal\ndef main():\n    os.kill(os.getpid(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("name", sorted(CRASHERS))
def test_worker_dying_in_run_is_failed_runtime(make_server, name):
    server = make_server("--num-workers", "1")
    with Client(server.url) as c:
        program = Program()
        module = program.upload(id="m", kind="module", source=CRASHERS[name] + "def first():\n    return 'kept'\n")
        first = program.run(id="first", fn=program.get_function(module=module, name="first"))
        program.return_(key="first", value=first)
        program.run(id="boom", fn=program.get_function(id="main", module=module, name="main"))
        result = c.execute(program, timeout_seconds=20)
    assert result.status == "FAILED"
    error = result.error
    assert error["kind"] == "runtime"
    assert "worker exited while executing the instruction" in error["message"]
    assert error["traceback"] == ""
    assert error["instruction_index"] == 5 and error["instruction_op"] == "run"
    assert error["instruction_id"] == "boom"
    # Results held by the dead worker are lost with it (the spec does not promise them).
    assert result.results in ({}, {"first": "kept"})
    trivial_ok(server.url)
    trivial_ok(server.url)


PROCESS_IDENTITY = (  # (pid, start time): a sandboxed worker's pid is the same in every namespace
    "import os\n"
    "def main():\n"
    "    with open('/proc/self/stat') as f:\n"
    "        return [os.getpid(), int(f.read().rsplit(')', 1)[1].split()[19])]\n"
)


def test_crash_with_worker_reuse_replaces_the_worker(make_server):
    server = make_server("--num-workers", "1", "--max-requests-per-worker", "0")
    with Client(server.url) as c:
        first = c.execute(call(PROCESS_IDENTITY))
        second = c.execute(call(PROCESS_IDENTITY))
        before = routed_pid(server, first.request_id)  # host pids, from the server's events
        assert second["out"] == first["out"] and routed_pid(server, second.request_id) == before  # reused
        result = c.execute(call(CRASHERS["segfault"]))
        assert result.status == "FAILED" and result.error["kind"] == "runtime"
        third = c.execute(call(PROCESS_IDENTITY))
    assert third["out"] != first["out"]
    after = routed_pid(server, third.request_id)
    assert after != before
    assert not alive(before)


# ------------------------------------------------------- memory exhaustion
def test_memory_cap_turns_a_runaway_allocation_into_memory_error(make_server):
    server = make_server("--num-workers", "1", "--worker-memory-limit-mbytes", "1024")
    source = (
        "import subprocess\n"
        "def main():\n"
        "    return open('/proc/self/oom_score_adj').read().strip()\n"
        "def child_cap():\n"
        "    return subprocess.run(['sh', '-c', 'ulimit -v'], capture_output=True, text=True).stdout.strip()\n"
        "def hog():\n"
        "    return len(bytearray(4 << 30))\n"
    )
    with Client(server.url) as c:
        program = Program()
        module = program.upload(id="m", kind="module", source=source)
        program.return_(key="oom", value=program.run(fn=program.get_function(module=module, name="main")))
        program.return_(key="cap", value=program.run(fn=program.get_function(module=module, name="child_cap")))
        program.run(id="hog", fn=program.get_function(module=module, name="hog"))
        result = c.execute(program, timeout_seconds=20)
    assert result.status == "FAILED"
    assert result.error["instruction_id"] == "hog"
    assert "MemoryError" in result.error["message"] + result.error["traceback"]
    assert result.results == {"oom": "1000", "cap": str(1024 * 1024)}  # ulimit -v is in KiB
    trivial_ok(server.url)


def test_memory_cap_is_refused_on_a_gpu_server_without_the_sandbox(tmp_path):
    # With the sandbox a GPU server caps a worker's memory with its cgroup; without it there is
    # no cap that leaves CUDA's address-space reservations alone, so the flag is refused.
    with pytest.raises(RuntimeError, match="--worker-memory-limit-mbytes"):
        Server(tmp_path, "--sandbox", "none", "--worker-memory-limit-mbytes", "1024", device="gpu")


# --------------------------------------------------------- client hang-up
def finished_reasons(server) -> dict[str, str]:
    return {e["request_id"]: e["finish_reason"] for e in server.events() if e["event"] == "request_finished"}


GONE_RUNNING = "0b6a3c1e-7f2d-4c59-9e1a-3d5b8f0c2a71"
GONE_QUEUED = "5e9d2b7a-1c4f-4a83-b6e0-8f3a2d9c1b64"


def test_client_hang_up_cancels_its_running_program(make_server):
    server = make_server("--num-workers", "1")
    source = "import time\ndef main():\n    time.sleep(60)\n"
    program = module_program(source)
    program["options"] = {"timeout_seconds": 120}
    with pytest.raises(httpx.ReadTimeout):
        raw_execute(server.url, program, timeout=3, headers={"X-Request-ID": GONE_RUNNING})
    pid = routed_pid(server, GONE_RUNNING, 5)  # the worker's host pid
    assert not wait_gone([pid], 5.0), "the abandoned program is still running"
    started = time.monotonic()
    trivial_ok(server.url)  # the seat is free again, long before the 60 s sleep would end
    assert time.monotonic() - started < 10
    wait_for(lambda: finished_reasons(server).get(GONE_RUNNING) == "cancelled", 5, "the cancelled event")
    retired = [e for e in server.events() if e["event"] == "worker_retired" and e["request_id"] == GONE_RUNNING]
    assert [e["reason"] for e in retired] == ["cancelled"]


def test_client_hang_up_while_queued_skips_the_program(make_server):
    server = make_server("--num-workers", "1")
    blocker = module_program(SLEEP, args=[2.5])
    blocker["options"] = {"timeout_seconds": 20}
    # Were it run, the queued program would keep a `sleep 77.5` child for 3 s, in sight of the
    # host (a file in a host path, the old evidence, is out of a sandboxed program's reach).
    queued = module_program(
        "import subprocess, time\ndef main():\n" "    subprocess.Popen(['sleep', '77.5'])\n    time.sleep(3)\n"
    )
    seen = set()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(raw_execute, server.url, blocker, timeout=30)
        wait_for(lambda: load(server.url)["requests_in_progress"] == 1, 10, "the blocker to take the only seat")
        with pytest.raises(httpx.ReadTimeout):
            raw_execute(server.url, queued, timeout=0.5, headers={"X-Request-ID": GONE_QUEUED})
        assert first.result().status_code == 200
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            seen |= {p for p in processes_tagged(server.tag) if command_line(p) == "sleep 77.5"}
            time.sleep(0.05)
    wait_for(lambda: finished_reasons(server).get(GONE_QUEUED) == "cancelled", 5, "the cancelled event")
    assert not seen, "a program whose client left while it was queued still ran"
    assert not [e for e in server.events() if e["event"] == "request_routed" and e.get("request_id") == GONE_QUEUED]
    trivial_ok(server.url)


# ---------------------------------------------------------- output flooding
def test_stdout_flood_is_truncated_and_server_stays_healthy(make_server):
    server = make_server("--num-workers", "1")
    source = (
        "import os\n"
        "def main():\n"
        "    chunk = b'F' * (1 << 20)\n"
        "    for _ in range(200):\n"
        "        os.write(1, chunk)\n"
        "    return 'flooded'\n"
    )
    with Client(server.url) as c:
        result = c.execute(call(source), timeout_seconds=25, output_limit_bytes=4096)
    assert result.status == "COMPLETED", result.error
    assert result["out"] == "flooded"
    assert result.stdout == "F" * 4096
    assert result.stdout_truncated is True
    trivial_ok(server.url)
    assert httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"


def test_stdout_flood_default_limit(make_server):
    server = make_server("--num-workers", "1", "--output-limit-bytes", "1000")
    source = "import sys\ndef main():\n    for i in range(100000):\n        print('line', i)\n"
    with Client(server.url) as c:
        result = c.execute(call(source), timeout_seconds=25)
    assert result.status == "COMPLETED"
    assert len(result.stdout) == 1000 and result.stdout.startswith("line 0\nline 1\n")
    assert result.stdout_truncated is True


# ------------------------------------------------------ leaked child processes
def test_background_child_is_killed_after_the_response(make_server, tmp_path):
    server = make_server("--num-workers", "1")
    source = (
        "import subprocess\n"
        "def main():\n"
        "    return [subprocess.Popen(['sleep', '1000']).pid,\n"
        "            subprocess.Popen(['sleep', '1000'], start_new_session=True).pid]\n"
    )
    # Several rounds: a worker that exits on its own before it is killed
    # orphans its children to init, and that race does not lose every time.
    # The children are looked for by the leak tag: the pids the program returns are pids of
    # the sandbox's namespace.
    with Client(server.url) as c:
        for _ in range(5):
            result = c.execute(call(source), timeout_seconds=20)
            assert result.status == "COMPLETED", result.error
            assert len(result["out"]) == 2  # both were started
            survivors = left_running(server, "sleep 1000")
            assert not survivors, f"background children outlived their request: {survivors}"
    trivial_ok(server.url)


def test_leak_probe_catches_a_process_that_outlives_its_server(tmp_path):
    """The probe every server's stop runs must be able to fail."""
    server = Server(tmp_path, "--num-workers", "1")
    server.stop()  # its own probe passes: nothing of the server is left
    straggler = subprocess.Popen(["sleep", "1000"], env={**os.environ, LEAK_TAG: server.tag})
    try:
        with pytest.raises(AssertionError) as failure:
            server._assert_nothing_left(grace=0.2)
        assert f"{straggler.pid} (sleep 1000)" in str(failure.value)
    finally:
        straggler.wait(timeout=5)  # the probe killed it


# --------------------------------------------------------------- saturation
SLEEP = "import time\ndef main(s):\n    time.sleep(s)\n    return s\n"


def test_queue_full_is_503_busy_with_retry_after(make_server):
    server = make_server("--num-workers", "1", "--max-queued-requests", "1")
    program = module_program(SLEEP, args=[1.5])
    program["options"] = {"timeout_seconds": 20}

    def post(_):
        return raw_execute(server.url, program, timeout=30)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        responses = list(pool.map(post, range(3)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(503) >= 1, statuses
    assert statuses.count(200) >= 1, statuses
    for response in responses:
        if response.status_code == 503:
            assert assert_error(response, 503, "busy") == "server saturated"
            assert response.headers.get_list("retry-after") == ["1"]
        else:
            assert response.status_code == 200 and response.json()["status"] == "COMPLETED"
    wait_for(
        lambda: load(server.url) == {**load(server.url), "requests_in_progress": 0, "requests_waiting": 0},
        10,
        "idle load",
    )
    trivial_ok(server.url)


def test_worker_wait_timeout_is_503_busy(make_server):
    server = make_server("--num-workers", "1", "--worker-wait-timeout-seconds", "1")
    program = module_program(SLEEP, args=[3])
    program["options"] = {"timeout_seconds": 20}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(raw_execute, server.url, program, timeout=30)
        wait_for(lambda: load(server.url)["requests_in_progress"] == 1, 10, "first request to start")
        start = time.monotonic()
        second = raw_execute(server.url, TRIVIAL, timeout=30)
        waited = time.monotonic() - start
        assert assert_error(second, 503, "busy") == "server saturated"
        assert second.headers.get("retry-after") == "1"
        assert 0.8 <= waited < 2.9, waited
        assert first.result().status_code == 200
        assert first.result().json()["status"] == "COMPLETED"
    trivial_ok(server.url)


def test_cache_miss_is_answered_while_every_worker_is_busy(make_server):
    server = make_server("--num-workers", "1")
    program = module_program(SLEEP, args=[2])
    missing = {"instructions": [{"op": "upload", "id": "b", "kind": "bytes", "blob": "ab" * 32}]}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(raw_execute, server.url, program, timeout=30)
        wait_for(lambda: load(server.url)["requests_in_progress"] == 1, 10, "first request to start")
        start = time.monotonic()
        response = raw_execute(server.url, missing, timeout=30)
        assert time.monotonic() - start < 1.0
        assert response.json() == {
            "status": "CACHE_MISS",
            "request_id": response.json()["request_id"],
            "missing_blobs": ["ab" * 32],
        }
        assert first.result().status_code == 200


# ------------------------------------------------------------------ shutdown
def test_sigterm_lets_running_request_finish_and_rejects_new_ones(make_server):
    server = make_server("--num-workers", "2")
    program = module_program(SLEEP, args=[2])
    program["options"] = {"timeout_seconds": 20}
    tree = tree_of(server.process.pid)
    assert tree, "server has no worker processes"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(raw_execute, server.url, program, timeout=30)
        wait_for(lambda: load(server.url)["requests_in_progress"] == 1, 10, "request to start")
        tree |= tree_of(server.process.pid)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        time.sleep(0.2)
        try:
            late = raw_execute(server.url, TRIVIAL, timeout=10)
        except httpx.TransportError:
            late = None  # connection refused: the listener is already closed
        if late is not None:
            assert assert_error(late, 503, "busy")
            assert late.headers.get("retry-after") == "1"
        response = running.result(timeout=15)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "COMPLETED"
    assert response.json()["results"]["out"] == {"type": "integer", "value": 2}
    assert server.process.wait(timeout=10) == 0
    assert time.monotonic() - signalled < 10
    survivors = wait_gone(tree, 2.0)
    assert not survivors, f"processes of the server tree survived shutdown: {survivors}"


def test_stop_leaves_no_process_of_the_tree(make_server):
    server = make_server("--num-workers", "3", "--max-requests-per-worker", "0")
    trivial_ok(server.url)
    tree = wait_for(lambda: (t := tree_of(server.process.pid)) and len(t) >= 3 and t, 10, "three workers")
    tree |= {server.process.pid}
    assert server.stop() == 0
    assert not wait_gone(tree, 2.0)


def test_health_reports_shutdown_capacity_zero_or_refuses(make_server):
    server = make_server("--num-workers", "1")
    program = module_program(SLEEP, args=[1.5])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(raw_execute, server.url, program, timeout=30)
        wait_for(lambda: load(server.url)["requests_in_progress"] == 1, 10, "request to start")
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        try:
            health = httpx.get(server.url + "/health", timeout=5)
        except httpx.TransportError:
            health = None
        if health is not None and health.status_code == 200:
            assert health.json()["load"]["request_capacity"] == 0
        assert running.result(timeout=15).status_code == 200
    assert server.process.wait(timeout=10) == 0
