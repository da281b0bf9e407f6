"""The reference client (PyPI kcoral==0.1.1), in its own virtual environment,
runs unchanged against our server (spec/protocol.md, compatibility target (a))."""

import fcntl
import json
import subprocess
import venv
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VENV = HERE.parents[1] / "build" / "reference-client-venv"


def reference_python() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / ".kcoral-0.1.1"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:  # tests/client/test_remote_function.py's too
        fcntl.flock(lock, fcntl.LOCK_EX)  # under pytest-xdist another worker may be making it
        if not marker.exists():
            venv.create(VENV, with_pip=True, clear=True)
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "kcoral==0.1.1"], capture_output=True, text=True
            )
            if install.returncode != 0:
                pytest.fail(f"cannot install the reference client: {install.stderr[-2000:]}")
            marker.touch()
    return python


def test_reference_client_runs_unchanged(make_server):
    python = reference_python()
    server = make_server("--num-workers", "2")
    run = subprocess.run(
        [str(python), str(HERE / "reference_programs.py"), server.url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=reference_environment(),
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])

    assert report["module_run_return"] == {
        "status": "COMPLETED",
        "total": {"sum": 42, "items": [2, 40]},
        "stdout": "adding\n",
    }
    assert report["bytes_cache_miss"] == {"status": "COMPLETED", "digest_ok": True, "echo_ok": True}
    folder = report["file_upload_folder_return"]
    assert folder["status"] == "COMPLETED"
    assert folder["files"] == [".hidden", "sub/b.txt"]
    assert folder["directories"] == ["sub"]
    assert folder["b"] == "HELLO FILE"
    assert folder["a"] == "hello file"
    benchmark = report["benchmark"]
    assert benchmark["status"] == "COMPLETED"
    timing = benchmark["timing"]
    assert {
        "latency_ms_median",
        "latency_ms_mean",
        "latency_ms_min",
        "latency_ms_max",
        "activities_stable",
        "flush_l2",
        "warmup",
        "repeat",
    } <= set(timing)
    assert timing["repeat"] == 20 and timing["warmup"] == 2 and timing["timer"] == "host"
    assert timing["integrity"]["verified"] is True and timing["integrity"]["trusted"] is True
    # The bytes upload really went through CACHE_MISS first.
    finishes = [e["finish_reason"] for e in server.events() if e["event"] == "request_finished"]
    assert "cache_miss" in finishes


def write_fetching_job(tmp_path: Path) -> Path:
    """A `kcoral run python` script: prints its arguments, $FOO and whether it
    runs in $KCORAL_DIR, writes res/sub/r.txt for --fetch, exits 3."""
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "print('args', sys.argv[1:], os.environ['FOO'], os.getcwd() == os.environ['KCORAL_DIR'])\n"
        "os.makedirs('res/sub')\n"
        "open('res/sub/r.txt', 'w').write('result')\n"
        "sys.exit(3)\n"
    )
    return script


def reference_environment() -> dict:
    """The environment without PYTHONPATH, which points at this checkout's
    kcoral (tests/conftest.py): with it, the venv would import ours."""
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_reference_kcoral_run_python_against_our_server(shared_server, tmp_path):
    """The reference CLI's `kcoral run python` (spec/benchmark.md §3): --send,
    arguments, -e, --fetch/--out, a missing artifact and the exit status."""
    reference_python()
    script = write_fetching_job(tmp_path)
    out = tmp_path / "out"
    run = subprocess.run(
        [
            str(VENV / "bin" / "kcoral"),
            "run",
            "python",
            "--url",
            shared_server.url,
            "--send",
            str(script),
            "-e",
            "FOO=bar",
            "--out",
            str(out),
            "--fetch",
            "res",
            "--fetch",
            "absent",
            "--",
            "job.py",
            "a b",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=reference_environment(),
    )
    assert run.returncode == 3, run.stderr[-4000:]
    assert run.stdout == "args ['a b'] bar True\n"
    assert (out / "res" / "sub" / "r.txt").read_text() == "result"
    assert "absent" in run.stderr
