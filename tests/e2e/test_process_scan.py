"""kcoral._native.scan_processes: the helper-process side channel of issue 9.

The real scan runs as pid 2 of a fresh PID namespace beside its reaper at pid 1, both children
of a process outside, as a sandboxed worker does (docs/sandbox.md): LAUNCH starts them as the
zygote does (kcoral._core), and pid 2 execs `unshare --mount --mount-proc python ...` (an exec
keeps pid 2). Inside, a private tmpfs /dev with a character device named /dev/nvidia0 (the null device's numbers)
stands in for a GPU, so "holds a GPU" is tested without one. Needs root for the namespaces.
The last tests run the scan inside real sandboxed (and unsandboxed) CPU-server workers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

_native = pytest.importorskip("kcoral._native", reason="kcoral._native is not built here")

INSIDE = textwrap.dedent(r"""
    import ctypes, json, os, signal, subprocess, sys, threading, time
    from kcoral import _native

    assert os.getpid() == 2 and os.getppid() == 0, (os.getpid(), os.getppid())
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/dev"], check=True)  # private: our mount ns
    for name in ("nvidia0", "null"):
        os.mknod("/dev/" + name, 0o666 | 0o020000, os.makedev(1, 3))
        os.chmod("/dev/" + name, 0o666)  # past the umask: uid 65534 opens it too

    def helper(body):
        # A forked child that runs body(), reports ready on a pipe, then sleeps.
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                body()
                os.write(write_end, b"x")
                time.sleep(60)
            finally:
                os._exit(0)
        os.close(write_end)
        assert os.read(read_end, 1) == b"x"
        os.close(read_end)
        return pid

    libc = ctypes.CDLL(None, use_errno=True)
    opened = []
    gpu = helper(lambda: opened.append(os.open("/dev/nvidia0", os.O_RDWR)))
    def hide():
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<pid>/fd becomes root's
        opened.append(os.open("/dev/nvidia0", os.O_RDWR))
    hidden = helper(hide)
    def as_nobody():
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        libc.prctl(4, 1, 0, 0, 0)  # dumpable again after the uid change, as the sandbox does
    plain = helper(as_nobody)
    sleeper = subprocess.Popen(["sleep", "60"])
    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()  # a thread is not a process
    time.sleep(0.2)  # the zombie has exited (and is not reaped)

    as_root = _native.scan_processes()
    os.setresgid(65534, 65534, 65534)  # now a scan that cannot read everything
    os.setresuid(65534, 65534, 65534)
    as_nobody = _native.scan_processes()
    print(json.dumps({"pids": {"gpu": gpu, "hidden": hidden, "plain": plain, "sleeper": sleeper.pid,
                               "zombie": zombie},
                      "as_root": as_root, "as_nobody": as_nobody}))
    for pid in (gpu, hidden, plain, sleeper.pid):
        os.kill(pid, signal.SIGKILL)
""")


def test_outside_a_pid_namespace_the_scan_says_it_means_nothing():
    if os.getpid() == 2:
        pytest.skip("this test process is itself pid 2 of a namespace")
    scan = _native.scan_processes()
    assert scan["meaningful"] is False and scan["processes"] == []
    assert f"this process is pid {os.getpid()}, not pid 2" in scan["reason_if_not"]


LAUNCH = textwrap.dedent(r"""
    import os, sys
    from kcoral import _core

    _core.unshare_pid_namespace()
    init = _core.start_namespace_init()
    worker = os.fork()
    if worker == 0:
        os.execvp("unshare", ["unshare", "--mount", "--mount-proc", sys.executable, "-c",
                              os.environ["KC_INSIDE"]])
    _core.restore_pid_namespace()
    _, status = os.waitpid(worker, 0)
    os.kill(init, 9)
    os.waitpid(init, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


@pytest.fixture(scope="module")
def namespace_scan():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, KC_INSIDE=INSIDE),
    )
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"no PID namespace here: {done.stderr.strip()}")
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def by_pid(scan: dict) -> dict[int, dict]:
    return {process["pid"]: process for process in scan["processes"]}


def test_pid_two_beside_its_reaper_lists_every_helper_and_no_thread(namespace_scan):
    scan, pids = namespace_scan["as_root"], namespace_scan["pids"]
    assert scan["meaningful"] is True and scan["reason_if_not"] is None
    listed = by_pid(scan)
    # pid 1 (the reaper) and pid 2 (the scanner, threads included) are never listed.
    assert set(listed) == set(pids.values()), listed
    assert listed[pids["sleeper"]]["comm"] == "sleep"
    assert listed[pids["sleeper"]]["ppid"] == 2
    assert listed[pids["zombie"]]["state"] == "Z"


def test_a_helper_holding_a_gpu_device_is_found(namespace_scan):
    listed, pids = by_pid(namespace_scan["as_root"]), namespace_scan["pids"]
    assert listed[pids["gpu"]]["holds_gpu"] is True
    assert listed[pids["hidden"]]["holds_gpu"] is True  # root reads a non-dumpable process too
    assert listed[pids["plain"]]["holds_gpu"] is False
    assert listed[pids["sleeper"]]["holds_gpu"] is False
    assert listed[pids["zombie"]]["holds_gpu"] is False


def test_unreadable_descriptors_are_unknown_and_say_why(namespace_scan):
    # As uid 65534 (the sandbox's user): another user's process, or one of ours that made itself
    # non-dumpable, cannot be inspected; the scan says so instead of answering "no GPU".
    listed, pids = by_pid(namespace_scan["as_nobody"]), namespace_scan["pids"]
    for name in ("hidden", "gpu"):
        assert listed[pids[name]]["holds_gpu"] is None, listed[pids[name]]
        assert "Permission denied" in listed[pids[name]]["fd_error"]
    assert listed[pids["plain"]]["holds_gpu"] is False  # same user, dumpable: readable


# ------------------------------------------------- through a real sandboxed worker (CPU server)
SCANS_BESIDE_HELPERS = r"""
import ctypes, os, subprocess, time

def main():
    from kcoral import _native
    sleeper = subprocess.Popen(["sleep", "30"])
    read_end, write_end = os.pipe()
    hidden = os.fork()
    if hidden == 0:  # a helper that hides its descriptors
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        os.write(write_end, b"x")
        time.sleep(30)
        os._exit(0)
    os.read(read_end, 1)
    try:
        return {"scan": _native.scan_processes(), "sleeper": sleeper.pid, "hidden": hidden}
    finally:
        sleeper.kill()
        os.kill(hidden, 9)
        sleeper.wait()
        os.waitpid(hidden, 0)
"""


def run_on_server(make_server, *flags: str) -> dict:
    from conftest import call
    from kcoral import Client

    if os.geteuid() != 0 and "none" not in flags:
        pytest.skip("the worker sandbox needs a root server")
    server = make_server("--num-workers", "1", "--max-timeout-seconds", "60", *flags)
    with Client(server.url) as client:
        result = client.execute(call(SCANS_BESIDE_HELPERS), timeout_seconds=60)
    assert result.status == "COMPLETED", (result.error, result.stderr)
    return result["out"]


def test_a_sandboxed_worker_sees_its_helpers(make_server):
    out = run_on_server(make_server)
    scan = out["scan"]
    assert scan["meaningful"] is True, scan["reason_if_not"]
    listed = by_pid(scan)
    assert set(listed) == {out["sleeper"], out["hidden"]}, listed  # not the reaper, not itself
    assert listed[out["sleeper"]]["comm"] == "sleep"
    assert listed[out["sleeper"]]["holds_gpu"] is False  # a CPU server: no /dev/nvidia* at all
    assert listed[out["hidden"]]["holds_gpu"] is None
    assert "Permission denied" in listed[out["hidden"]]["fd_error"]


def test_an_unsandboxed_worker_says_the_scan_means_nothing(make_server):
    scan = run_on_server(make_server, "--sandbox", "none")["scan"]
    assert scan["meaningful"] is False and scan["processes"] == []
    assert "not pid 2" in scan["reason_if_not"]
