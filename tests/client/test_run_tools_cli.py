"""`kcoral run TOOL` without a server (spec/benchmark.md §3): option parsing
and refusals, packing, the program's wire shape, the runner on this machine,
and how outcomes become exit statuses."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kcoral import ProgramResult, ReturnedFile, ReturnedFolder
from kcoral.errors import TransportError
from kcoral.tools import COMMANDS, dispatch, options, packing, request, runner
from kcoral.tools import ncu as ncu_definition
from kcoral.tools import python as python_definition
from kcoral.tools import run_iket as run_iket_definition
from kcoral.tools import shell as shell_definition

URL = "http://127.0.0.1:9"


def parse(tool: str, *argv: str, environ: dict | None = None) -> options.Invocation:
    return options.parse(tool, request.definition(tool), list(argv), environ if environ is not None else {})


def refused(tool: str, *argv: str, environ: dict | None = None) -> str:
    with pytest.raises(options.UsageError) as info:
        parse(tool, *argv, environ=environ)
    return str(info.value)


# ---------------------------------------------------------------- options


def test_defaults_and_argument_boundaries():
    inv = parse("python", "--url", URL, "--", "-c", "print(1)", "a b", "--", "--url")
    assert (inv.urls, inv.timeout, inv.output_limit_bytes) == ([URL], 300, 268435456)
    assert inv.native == ["-c", "print(1)", "a b", "--", "--url"]
    assert (inv.send, inv.env, inv.fetch, inv.out) == ([], {}, [], None)


def test_the_first_double_dash_is_mandatory_and_something_must_follow():
    assert "separate the kcoral options" in refused("python", "--url", URL, "-c", "1")
    assert "separate the kcoral options" in refused("python", "--url", URL)
    assert "arguments are required after '--'" in refused("python", "--url", URL, "--")


def test_server_address_rules(capsys):
    assert parse("shell", "--", "ls", environ={"KCORAL_URL": URL}).urls == [URL]
    assert parse("shell", "--url", "http://a:1", "--", "ls", environ={"KCORAL_URL": URL}).urls == ["http://a:1"]
    assert parse("shell", "--host", "h", "--", "ls").urls == ["http://h:8000"]
    assert parse("shell", "--port", "9000", "--", "ls").urls == ["http://127.0.0.1:9000"]
    assert parse("shell", "--host", "::1", "--port", "1", "--", "ls").urls == ["http://[::1]:1"]
    assert capsys.readouterr().err == ""
    assert parse("shell", "--port", "5", "--", "ls", environ={"KCORAL_URL": URL}).urls == ["http://127.0.0.1:5"]
    assert "override KCORAL_URL; using http://127.0.0.1:5" in capsys.readouterr().err
    assert "--url cannot be combined with --host or --port" in refused("shell", "--url", URL, "--port", "1", "--", "ls")
    assert "--port 0" in refused("shell", "--port", "0", "--", "ls")
    assert "--port 65536" in refused("shell", "--port", "65536", "--", "ls")
    assert "KCORAL_URL" in refused("shell", "--", "ls")


def test_ca_names_a_file_the_client_gets(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("a CA bundle")
    assert parse("shell", "--url", URL, "--", "ls").ca is None  # the client then asks $KCORAL_CA_BUNDLE
    assert parse("shell", "--url", URL, "--ca", str(bundle), "--", "ls").ca == str(bundle)
    assert f"--ca {tmp_path / 'absent.pem'}: no such file" in refused(
        "shell", "--url", URL, "--ca", str(tmp_path / "absent.pem"), "--", "ls"
    )


def test_a_clusters_entry_nodes_are_a_comma_separated_list():
    both = ["http://a:1", "http://b:2"]
    assert parse("shell", "--url", "http://a:1, http://b:2", "--", "ls").urls == both
    assert parse("shell", "--", "ls", environ={"KCORAL_URL": "http://a:1,http://b:2"}).urls == both
    assert "an empty URL" in refused("shell", "--url", "http://a:1,,http://b:2", "--", "ls")
    assert "KCORAL_URL" in refused("shell", "--", "ls", environ={"KCORAL_URL": "http://a:1,"})
    assert "--url: must not be empty" in refused("shell", "--url", " ", "--", "ls")


def test_numbers_must_be_positive_ints():
    assert "--timeout 0" in refused("shell", "--url", URL, "--timeout", "0", "--", "ls")
    assert "--output-limit-bytes -1" in refused("shell", "--url", URL, "--output-limit-bytes", "-1", "--", "ls")
    with pytest.raises(SystemExit) as info:
        parse("shell", "--url", URL, "--timeout", "1.5", "--", "ls")
    assert info.value.code == 2
    inv = parse("shell", "--url", URL, "--timeout", "7", "--output-limit-bytes", "10", "--", "ls")
    assert (inv.timeout, inv.output_limit_bytes) == (7, 10)


def test_env_settings_and_refusals():
    inv = parse(
        "shell", "--url", URL, "-e", "A=1", "--env", "B", "-e", "C=", "-e", "A=x=y", "--", "ls", environ={"B": "local"}
    )
    assert inv.env == {"A": "x=y", "B": "local", "C": ""}
    assert "-e/--env 'UNSET'" in refused("shell", "--url", URL, "-e", "UNSET", "--", "ls")
    assert "'1BAD' is not a valid" in refused("shell", "--url", URL, "-e", "1BAD=1", "--", "ls")
    assert "'' is not a valid" in refused("shell", "--url", URL, "-e", "=1", "--", "ls")
    assert "'A-B' is not a valid" in refused("shell", "--url", URL, "-e", "A-B=1", "--", "ls")
    for managed in ("CUDA_VISIBLE_DEVICES", "KCORAL_DIR"):
        assert f"{managed} is managed by the remote worker" in refused(
            "shell", "--url", URL, "-e", f"{managed}=0", "--", "ls"
        )
    assert "NUL" in refused("shell", "--url", URL, "-e", "A=\x00", "--", "ls")


def test_fetch_and_out_go_together_and_out_must_be_new(tmp_path):
    out = str(tmp_path / "new" / "dir")
    inv = parse("shell", "--url", URL, "--out", out, "--fetch", "a/./b", "--fetch", "a/b", "--fetch", "c", "--", "ls")
    assert inv.fetch == ["a/b", "c"] and inv.out == Path(out)
    assert "--fetch and --out" in refused("shell", "--url", URL, "--fetch", "x", "--", "ls")
    assert "--fetch and --out" in refused("shell", "--url", URL, "--out", out, "--", "ls")
    assert "already exists" in refused("shell", "--url", URL, "--out", str(tmp_path), "--fetch", "x", "--", "ls")
    for bad in ("../x", "/abs", "a\\b", "a/../b", ""):
        assert f"--fetch {bad!r}" in refused("shell", "--url", URL, "--out", out, "--fetch", bad, "--", "ls")


def test_abbreviations_and_unknown_options_are_usage_errors():
    for argv in (["--url", URL, "--tim", "3", "--", "ls"], ["--url", URL, "--bogus", "--", "ls"]):
        with pytest.raises(SystemExit) as info:
            parse("shell", *argv)
        assert info.value.code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["-c", "print(1)"],
        ["-cprint(1)"],
        ["-m", "mod"],
        ["-u", "-B", "script.py", "-i"],
        ["-W", "ignore", "s.py"],
        ["-Wignore", "-X", "dev", "-c", "1"],
        ["--", "script.py"],
        ["-uc", "1"],
        ["--check-hash-based-pycs", "never", "s.py"],
    ],
)
def test_python_accepts_a_script_c_or_m(args):
    python_definition.check(args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "s.py"], "python -i: interactive"),
        (["-ui", "s.py"], "python -ui: interactive"),
        (["-V"], "a script, -c COMMAND or -m MODULE is required"),
        (["-"], "is required"),
        (["-W", "-c"], "is required"),
        (["--"], "is required"),
    ],
)
def test_python_refuses_interactive_and_stdin(args, message):
    with pytest.raises(ValueError, match=message):
        python_definition.check(args)


def test_ncu_rules(tmp_path):
    out = str(tmp_path / "prof")
    inv = parse("ncu", "--url", URL, "--out", out, "--", "--set", "full", "--import-source", "yes", "--", "python", "x")
    assert inv.native == ["--set", "full", "--import-source", "yes", "--", "python", "x"]
    assert parse("ncu", "--url", URL, "--out", out, "--", "--", "./app").native == ["--", "./app"]
    with pytest.raises(SystemExit):  # --out is required
        parse("ncu", "--url", URL, "--", "--", "./app")
    assert "second '--'" in refused("ncu", "--url", URL, "--out", out, "--", "python", "x.py")
    assert "application is missing" in refused("ncu", "--url", URL, "--out", out, "--", "--set", "full", "--")
    for option in (
        "--export",
        "--export=x",
        "--exp",
        "--import",
        "--mode",
        "--mo",
        "--config-file",
        "--config",
        "--config-file-path",
        "-o",
        "-ofile",
        "-i",
        "-ix",
    ):
        assert f"ncu {option}: kcoral manages" in refused(
            "ncu", "--url", URL, "--out", out, "--", option, "v", "--", "./app"
        )
    assert "--fetch is not available for ncu" in refused(
        "ncu", "--url", URL, "--out", out, "--fetch", "x", "--", "--", "./app"
    )


def test_run_iket_rules(tmp_path):
    out = str(tmp_path / "traces")
    assert parse("run-iket", "--url", URL, "--out", out, "--", "x", "profile", "--", "python").native[1] == "profile"
    assert "second '--'" in refused("run-iket", "--url", URL, "--out", out, "--", "profile")
    assert "`profile` subcommand" in refused("run-iket", "--url", URL, "--out", out, "--", "--foo", "--", "python")
    for option in ("--output-dir", "--output-dir=x", "--out", "--working-dir", "--wor", "-o", "-ox"):
        assert f"run-iket {option}: kcoral manages" in refused(
            "run-iket", "--url", URL, "--out", out, "--", "profile", option, "--", "python"
        )
    with pytest.raises(SystemExit):
        parse("run-iket", "--url", URL, "--", "profile", "--", "python")


def test_shell_refuses_an_empty_command():
    assert "must not be empty" in refused("shell", "--url", URL, "--", "")


# ---------------------------------------------------------------- packing


def members(tar_bytes: bytes) -> list[tuple[str, int, int, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return [(m.name, m.mode, m.mtime, tar.extractfile(m).read()) for m in tar.getmembers()]


def test_packing_keeps_names_modes_and_skips_pycache(tmp_path, monkeypatch):
    tree = tmp_path / "exp"
    (tree / "sub").mkdir(parents=True)
    (tree / "empty").mkdir()
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "m.pyc").write_bytes(b"x")
    (tree / ".hidden").write_text("h")
    (tree / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "sub" / "run.sh").chmod(0o755)
    single = tmp_path / "one.py"
    single.write_text("print(1)")
    single.chmod(0o640)
    data = packing.pack_inputs([str(tree), str(single)])
    assert members(data) == [
        ("exp/.hidden", 0o600, 0, b"h"),
        ("exp/sub/run.sh", 0o700, 0, b"#!/bin/sh\n"),
        ("one.py", 0o600, 0, b"print(1)"),
    ]
    assert packing.pack_inputs([str(single), str(tree)]) == data  # deterministic, sorted
    monkeypatch.chdir(tree)
    assert [m[0] for m in members(packing.pack_inputs(["."]))] == [".hidden", "sub/run.sh"]
    assert [m[0] for m in members(packing.pack_inputs(["sub/"]))] == ["sub/run.sh"]
    assert members(packing.pack_inputs([])) == []


def test_packing_refusals(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("1")
    (tmp_path / "e" / "d").mkdir(parents=True)
    (tmp_path / "e" / "d" / "f").write_text("2")
    (tmp_path / "f").write_text("3")
    (tmp_path / "g" / "f").mkdir(parents=True)
    (tmp_path / "g" / "f" / "x").write_text("4")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "l").symlink_to(tmp_path / "f")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "back").mkdir()
    (tmp_path / "back" / "a\\b").write_text("5")

    def refusal(*paths) -> str:
        with pytest.raises(packing.PackingError) as info:
            packing.pack_inputs([str(tmp_path / p) for p in paths])
        return str(info.value)

    assert "sent more than once" in refusal("d", "d")
    assert "is sent twice" in refusal("d", "e/d")
    assert "below the sent file" in refusal("f", "g/f")
    assert "symlink" in refusal("link")
    assert "symlink" in refusal("links")
    assert "not a regular file" in refusal("fifo")
    assert "backslash" in refusal("back")
    assert "No such file" in refusal("missing")
    with pytest.raises(packing.PackingError, match="'..'"):
        packing.pack_inputs([str(tmp_path / "d" / "..")])
    assert [m[0] for m in members(packing.pack_inputs([str(tmp_path / "d"), str(tmp_path / "g")]))] == ["d/f", "g/f/x"]


# ---------------------------------------------------------------- program


def test_program_wire_shape_matches_the_reference():
    tar = packing.pack_inputs([])
    program = request.build_program("python", tar, ["-c", "1"], {"A": "b"}, ["r.txt"], out=True)
    ins = program.instructions
    runner_source = Path(runner.__file__).read_text()
    definition_source = Path(python_definition.__file__).read_text()
    blob = ins[4]["blob"]
    assert ins == [
        {"op": "upload", "id": "tool_runner", "kind": "module", "source": runner_source},
        {"op": "get_function", "id": "runner", "module": {"$ref": "tool_runner"}, "name": "run"},
        {"op": "upload", "id": "definition", "kind": "module", "source": definition_source},
        {"op": "get_function", "id": "tool_run", "module": {"$ref": "definition"}, "name": "run"},
        {"op": "upload", "id": "inputs", "kind": "bytes", "blob": blob},
        {
            "op": "run",
            "id": "run",
            "fn": {"$ref": "runner"},
            "args": [{"$ref": "inputs"}, {"$ref": "tool_run"}, ["-c", "1"], {"A": "b"}, ["r.txt"]],
        },
        {"op": "return", "key": "outcome", "value": {"$ref": "run"}},
        {"op": "return", "key": "artifacts", "kind": "folder", "path": "outputs"},
    ]
    assert program._blobs[blob] == tar
    without_out = request.build_program("ncu", tar, ["--", "x"], {}, [], out=False).instructions
    assert [i.get("key") for i in without_out if i["op"] == "return"] == ["outcome"]
    assert without_out[2]["source"] == Path(ncu_definition.__file__).read_text()


def test_uploaded_modules_use_the_standard_library_only():
    """The runner and the definitions run in any server's worker."""
    allowed = {"io", "os", "shutil", "stat", "subprocess", "sys", "tarfile"}
    for name in ("runner", *COMMANDS.values()):
        source = request.module_source(name)
        for line in source.splitlines():
            if line.startswith(("import ", "from ")):
                assert line.split()[1].split(".")[0] in allowed, (name, line)


# ---------------------------------------------------------------- runner, here


def run_here(tmp_path, definition, args, *, send=(), env=None, fetch=(), monkeypatch=None):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    tar = packing.pack_inputs([str(p) for p in send])
    outcome = runner.run(tar, definition.run, list(args), dict(env or {}), list(fetch))
    return outcome, workspace


def test_runner_unpacks_runs_and_fetches(tmp_path, monkeypatch, capfd):
    tool_dir = tmp_path / "tool"
    tool_dir.mkdir()
    script = tool_dir / "make.sh"
    script.write_text(
        "#!/bin/sh\nmkdir -p out/nested empty\necho $FOO > out/nested/f\nln -s out link\n"
        'echo "$KCORAL_DIR"\nexit 3\n'
    )
    script.chmod(0o700)
    outcome, workspace = run_here(
        tmp_path,
        shell_definition,
        ["./tool/make.sh"],
        send=[tool_dir],
        env={"FOO": "bar"},
        fetch=["out", "empty", "link", "none/x", "tool/make.sh"],
        monkeypatch=monkeypatch,
    )
    assert outcome == {"returncode": 3, "missing": ["link", "none/x"]}
    assert capfd.readouterr().out == f"{workspace / 'inputs'}\n"
    outputs = workspace / "outputs"
    assert (outputs / "out" / "nested" / "f").read_text() == "bar\n"
    assert (outputs / "empty").is_dir()
    assert os.stat(outputs / "tool" / "make.sh").st_mode & 0o777 == 0o700
    assert not (outputs / "link").exists()


def test_runner_signals_and_missing_commands(tmp_path, monkeypatch):
    outcome, _ = run_here(tmp_path, shell_definition, ["sh", "-c", "kill -KILL $$"], monkeypatch=monkeypatch)
    assert outcome == {"returncode": 137, "missing": []}
    (tmp_path / "workspace").rename(tmp_path / "w1")
    with pytest.raises(runner.ToolError, match="no-such-cmd-kcoral is not installed in the remote server environment"):
        run_here(tmp_path, shell_definition, ["no-such-cmd-kcoral"], monkeypatch=monkeypatch)


def test_runner_python_definition_uses_this_interpreter(tmp_path, monkeypatch, capfd):
    probe = "import os, sys; print(sys.executable); print(os.environ['PATH'].split(os.pathsep)[0])"
    outcome, _ = run_here(tmp_path, python_definition, ["-c", probe], monkeypatch=monkeypatch)
    assert outcome["returncode"] == 0
    assert capfd.readouterr().out.split() == [sys.executable, os.path.dirname(sys.executable)]


def test_runner_refuses_unsafe_tar_members(tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(runner.ToolError, match="not a relative path"):
        runner.run(buffer.getvalue(), shell_definition.run, ["true"], {}, [])
    assert not (tmp_path.parent / "escape").exists()


def test_run_iket_and_ncu_report_a_missing_report(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("ncu", "run-iket"):
        (fake / name).write_text('#!/bin/sh\necho "$@" > "$KCORAL_DIR/../args-$NCU_PROFILE"\n')
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    outcome, workspace = run_here(
        tmp_path, ncu_definition, ["--set", "full", "--", "./app", "x"], monkeypatch=monkeypatch
    )
    assert outcome == {"returncode": 0, "missing": ["capture.ncu-rep"]}
    report = workspace / "outputs" / "capture.ncu-rep"
    assert (workspace / "args-1").read_text() == f"--config-file 0 --export {report} --set full ./app x\n"
    (tmp_path / "workspace").rename(tmp_path / "w1")
    outcome, _ = run_here(
        tmp_path, run_iket_definition, ["profile", "--", "app"], monkeypatch=monkeypatch, env={"NCU_PROFILE": "0"}
    )
    assert outcome == {"returncode": 0, "missing": [run_iket_definition.NO_OUTPUT]}


# ---------------------------------------------------------------- exit statuses and replay


def test_exit_status_mapping():
    assert request.exit_status(0, []) == 0
    assert request.exit_status(7, []) == 7
    assert request.exit_status(-9, []) == 137
    assert request.exit_status(0, ["x"]) == 1
    assert request.exit_status(3, ["x"]) == 3
    with pytest.raises(request.BadOutcome):
        request.parse_outcome({"returncode": True})
    with pytest.raises(request.BadOutcome):
        request.parse_outcome({"returncode": 0, "missing": [1]})


def result(status="COMPLETED", results=None, stdout="", stderr="", error=None, truncated=False) -> ProgramResult:
    return ProgramResult(
        status=status,
        request_id="r",
        queue_ms=0.0,
        elapsed_ms=0.0,
        lease_wait_ms=0.0,
        lease_held_ms=0.0,
        results=results or {},
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=truncated,
        stderr_truncated=False,
        error=error,
    )


class FakeClient:
    answer: object = None
    seen: list = []

    def __init__(self, base_url=None, *, urls=None, ca=None):
        self.urls = [base_url] if base_url is not None else list(urls)
        self.ca = ca

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, program, **options):
        FakeClient.seen.append((self.urls, program, options))
        if isinstance(FakeClient.answer, Exception):
            raise FakeClient.answer
        return FakeClient.answer


@pytest.fixture
def fake_client(monkeypatch):
    import kcoral.client

    monkeypatch.setattr(kcoral.client, "Client", FakeClient)
    FakeClient.seen = []
    return FakeClient


def test_replay_artifacts_and_missing(fake_client, tmp_path, capsys):
    out = tmp_path / "a" / "b"
    folder = ReturnedFolder({"d/f.txt": ReturnedFile(b"hi")}, ["d"])
    fake_client.answer = result(
        results={"outcome": {"returncode": 0, "missing": ["gone"]}, "artifacts": folder},
        stdout="remote out\n",
        stderr="remote err\n",
        truncated=True,
    )
    status = dispatch.main(
        ["shell", "--url", URL, "--timeout", "9", "--out", str(out), "--fetch", "d", "--fetch", "gone", "--", "true"]
    )
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == "remote out\n"
    assert captured.err.splitlines() == [
        "remote err",
        "kcoral: the remote stdout was truncated (--output-limit-bytes 268435456)",
        f"kcoral: saved artifacts to {out}",
        "kcoral: missing artifacts: gone",
    ]
    assert (out / "d" / "f.txt").read_bytes() == b"hi"
    _, program, sent = fake_client.seen[0]
    assert sent == {"timeout_seconds": 9, "output_limit_bytes": 268435456}


def test_failures_exit_1_with_the_tool_named(fake_client, capsys):
    fake_client.answer = TransportError("connection refused")
    assert dispatch.main(["python", "--url", f"{URL},http://127.0.0.1:10", "--", "-c", "1"]) == 1
    assert capsys.readouterr().err == "kcoral run python: connection refused\n"
    assert fake_client.seen[-1][0] == [URL, "http://127.0.0.1:10"]  # a cluster's entry nodes, to one Client
    fake_client.answer = result(
        status="FAILED",
        error={
            "kind": "engine",
            "message": "ToolError: nvcc is not installed in the remote server environment",
            "traceback": "Traceback ...\n",
        },
    )
    assert dispatch.main(["shell", "--url", URL, "--", "nvcc"]) == 1
    assert capsys.readouterr().err == "kcoral run shell: nvcc is not installed in the remote server environment\n"
    fake_client.answer = result(
        status="FAILED",
        stdout="partial\n",
        results={"outcome": {"returncode": 0, "missing": []}},
        error={"kind": "serialization", "message": "too large", "traceback": "tb"},
    )
    assert dispatch.main(["shell", "--url", URL, "--", "true"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "partial\n"
    assert captured.err == "tb\nkcoral run shell: FAILED (serialization): too large\n"


def test_usage_errors_exit_2_before_anything_is_sent(fake_client, capsys, tmp_path):
    assert dispatch.main(["python", "--url", URL, "--send", str(tmp_path / "nope"), "--", "x.py"]) == 2
    assert "kcoral run python: error: --send" in capsys.readouterr().err
    assert dispatch.main(["ncu", "--url", URL, "--", "--", "x"]) == 2
    assert "--out" in capsys.readouterr().err
    assert dispatch.main(["bogus"]) == 2
    assert "unknown tool 'bogus'" in capsys.readouterr().err
    assert fake_client.seen == []


def test_help_texts(capsys):
    assert dispatch.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(tool in text for tool in COMMANDS) and "examples:" in text
    for tool in COMMANDS:
        assert dispatch.main([tool, "--help"]) == 0
        text = capsys.readouterr().out
        assert f"usage: kcoral run {tool} [options] -- " in text and "examples:\n  kcoral run" in text
    assert dispatch.main([]) == 2


def test_the_kcoral_command_teaches_run():
    from kcoral import cli

    assert "kcoral run --help" in cli.USAGE and "kcoral run TOOL --help" in cli.USAGE
    run = subprocess.run([sys.executable, "-m", "kcoral", "run", "shell", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "--fetch PATH" in run.stdout
