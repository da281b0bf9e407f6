"""`kcoral run TOOL` against our real CPU server (spec/benchmark.md §3): the CLI
is run as a subprocess (`python -m kcoral run ...`), as a user runs it, against
one sandboxed server shared by the module."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO


def kcoral_run(
    server, tool: str, *args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kcoral", "run", tool, "--url", server.url, *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})}
    )


def test_python_c_replays_output_and_passes_the_exit_status_through(shared_server):
    run = kcoral_run(
        shared_server,
        "python",
        "--",
        "-c",
        "import sys; print('to stdout'); print('to stderr', file=sys.stderr); "
        "print(repr(sys.stdin.read())); sys.exit(3)",
    )
    assert run.returncode == 3, run.stderr
    assert run.stdout == "to stdout\n''\n"  # stdin is /dev/null
    assert run.stderr == "to stderr\n"


def test_python_script_sent_with_send_keeps_argument_boundaries(shared_server, tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    run = kcoral_run(shared_server, "python", "--send", str(script), "--", "show.py", "a b", "--help", "-e", "--")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "['a b', '--help', '-e', '--']\n"


def test_python_module_from_a_sent_directory(shared_server, tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text("import sys\nprint('main', __name__, sys.argv[1:])\n")
    run = kcoral_run(shared_server, "python", "--send", str(package), "--", "-m", "pkg.main", "x")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "main __main__ ['x']\n"


def test_shell_runs_pipes_through_bash_c_and_passes_the_status(shared_server):
    run = kcoral_run(shared_server, "shell", "--", "bash", "-c", "echo hello | tr a-z A-Z; echo oops >&2; exit 5")
    assert (run.returncode, run.stdout, run.stderr) == (5, "HELLO\n", "oops\n")


def test_a_signal_gives_128_plus_n(shared_server):
    run = kcoral_run(shared_server, "shell", "--", "bash", "-c", "kill -TERM $$")
    assert run.returncode == 128 + 15, run.stderr


def test_send_a_directory_keeps_its_name_and_exec_bits(shared_server, tmp_path):
    tree = tmp_path / "exp"
    (tree / "sub").mkdir(parents=True)
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "x.pyc").write_bytes(b"skip me")
    (tree / ".hidden").write_text("h")
    (tree / "sub" / "data.txt").write_text("data")
    (tree / "empty").mkdir()
    runner = tree / "go.sh"
    runner.write_text('#!/bin/sh\necho ran from "$PWD"\n')
    runner.chmod(0o755)
    listing = (
        "import os\nfor root, dirs, files in sorted(os.walk('.')):\n"
        "    for name in sorted(files):\n"
        "        path = os.path.join(root, name)\n"
        "        print(path, oct(os.stat(path).st_mode & 0o777))\n"
    )
    run = kcoral_run(shared_server, "python", "--send", str(tree), "--", "-c", listing)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["./exp/.hidden 0o600", "./exp/go.sh 0o700", "./exp/sub/data.txt 0o600"]
    run = kcoral_run(shared_server, "shell", "--send", str(tree), "--", "./exp/go.sh")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ran from /") and run.stdout.rstrip().endswith("/inputs")


def test_fetch_round_trip_with_nested_and_missing_paths(shared_server, tmp_path):
    out = tmp_path / "new" / "results"
    make = "mkdir -p deep/er empty/inner; echo report > report.txt; echo x > deep/er/f.txt; ln -s report.txt link"
    run = kcoral_run(
        shared_server,
        "shell",
        "--out",
        str(out),
        "--fetch",
        "report.txt",
        "--fetch",
        "deep",
        "--fetch",
        "empty",
        "--fetch",
        "nothere/at/all",
        "--fetch",
        "link",
        "--",
        "bash",
        "-c",
        make,
    )
    assert run.returncode == 1, run.stderr  # the command succeeded, two artifacts are missing
    assert f"kcoral: saved artifacts to {out}" in run.stderr
    assert "kcoral: missing artifacts: nothere/at/all, link" in run.stderr
    assert "link is a symlink" in run.stderr
    assert (out / "report.txt").read_text() == "report\n"
    assert (out / "deep" / "er" / "f.txt").read_text() == "x\n"
    assert (out / "empty" / "inner").is_dir()
    assert sorted(p.name for p in out.iterdir()) == ["deep", "empty", "report.txt"]


def test_failed_command_still_returns_its_artifacts(shared_server, tmp_path):
    out = tmp_path / "out"
    run = kcoral_run(
        shared_server,
        "shell",
        "--out",
        str(out),
        "--fetch",
        "log.txt",
        "--",
        "bash",
        "-c",
        "echo partial > log.txt; exit 4",
    )
    assert run.returncode == 4, run.stderr
    assert (out / "log.txt").read_text() == "partial\n"


def test_env_settings_kcoral_dir_path_and_process_group(shared_server):
    probe = (
        "import os, sys\n"
        "print(os.environ['FOO'], os.environ['COPIED'], os.environ['EMPTY'] == '')\n"
        "print(os.environ['KCORAL_DIR'] == os.getcwd(), os.path.basename(os.getcwd()))\n"
        "print(os.environ['PATH'].split(os.pathsep)[0] == os.path.dirname(sys.executable))\n"
        "print(os.getpgrp() == os.getpgid(os.getppid()))\n"
    )
    run = kcoral_run(
        shared_server,
        "python",
        "-e",
        "FOO=a=b",
        "-e",
        "COPIED",
        "-e",
        "EMPTY=",
        "--",
        "-c",
        probe,
        env={"COPIED": "from the client"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["a=b from the client True", "True inputs", "True", "True"]


def test_a_command_that_is_not_installed_is_named(shared_server):
    run = kcoral_run(shared_server, "shell", "--", "no-such-tool-kcoral", "--flag")
    assert run.returncode == 1
    assert "kcoral run shell: no-such-tool-kcoral is not installed in the remote server environment" in run.stderr
    # ncu and compute-sanitizer are not on the CPU server: the same message, same path
    run = kcoral_run(shared_server, "compute-sanitizer", "--", "--error-exitcode", "1", "./app")
    assert run.returncode == 1
    assert "compute-sanitizer is not installed in the remote server environment" in run.stderr


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_timeout_kills_the_whole_tree(shared_server):
    marker = f"{30 + os.getpid() % 1000 / 1000:.3f}"  # a sleep length no one else uses
    start = time.monotonic()
    run = kcoral_run(
        shared_server,
        "shell",
        "--timeout",
        "1",
        "--",
        "bash",
        "-c",
        f"sleep {marker} & (sleep {marker} &) ; sleep {marker}",
    )
    assert run.returncode == 1
    assert time.monotonic() - start < 15
    assert "kcoral run shell:" in run.stderr and "timed out" in run.stderr
    deadline = time.monotonic() + 5
    while _sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sleepers(marker)


def test_truncated_output_is_replayed_with_a_notice(shared_server):
    run = kcoral_run(shared_server, "python", "--output-limit-bytes", "100", "--", "-c", "print('x' * 1000)")
    assert run.returncode == 0
    assert run.stdout == "x" * 100
    assert "kcoral: the remote stdout was truncated (--output-limit-bytes 100)" in run.stderr


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("ncu", ["--", "--set", "full", "--", "python", "x.py"], "the following arguments are required: --out"),
        ("ncu", ["--out", "OUT", "--", "python", "x.py"], "second '--'"),
        ("ncu", ["--out", "OUT", "--", "--exp", "x", "--", "python", "x.py"], "ncu --exp: kcoral manages"),
        ("ncu", ["--out", "OUT", "--", "-ofile", "--", "python", "x.py"], "ncu -ofile: kcoral manages"),
        ("ncu", ["--out", "OUT", "--fetch", "x", "--", "--", "python"], "--fetch is not available for ncu"),
        ("run-iket", ["--out", "OUT", "--", "--", "python", "x.py"], "`profile` subcommand is required"),
        ("run-iket", ["--out", "OUT", "--", "profile", "--output-dir=x", "--", "python"], "run-iket --output-dir=x"),
        ("compute-sanitizer", ["--fetch", "log.txt", "--", "./app"], "--fetch and --out must be used together"),
        ("python", ["--", "-i", "x.py"], "python -i: interactive Python is not supported"),
        ("python", ["-c", "print(1)"], "with '--'"),
    ],
)
def test_client_side_refusals_name_the_option(shared_server, tmp_path, tool, args, message):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    run = kcoral_run(shared_server, tool, *args)
    assert run.returncode == 2
    assert message in run.stderr
    assert not (tmp_path / "out").exists()


def test_help_lists_tools_and_examples():
    run = subprocess.run([sys.executable, "-m", "kcoral", "run", "--help"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0
    for tool in ("python", "shell", "compute-sanitizer", "ncu", "run-iket"):
        assert f"\n    {tool}" in run.stdout
    run = subprocess.run([sys.executable, "-m", "kcoral", "run", "ncu", "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    assert "--out DIR" in run.stdout and "examples:" in run.stdout and "--fetch" not in run.stdout.split("examples")[0]


def test_sent_files_stay_private_to_the_sandbox_user(shared_server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    secret.chmod(0o644)
    run = kcoral_run(shared_server, "shell", "--send", str(secret), "--", "stat", "-c", "%a %U", "secret.txt")
    assert run.returncode == 0, run.stderr
    mode, _owner = run.stdout.split()
    assert int(mode, 8) & stat.S_IRWXO == 0
