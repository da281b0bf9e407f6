"""Real KCoral servers on loopback ports for end-to-end tests.

Every server is started as its own process group and stopped by pid (SIGTERM,
then SIGKILL of that group only); nothing is left running. Each server's
environment carries a unique tag that its workers and everything user code
starts inherit, so stopping a server also checks that none of them outlived
it (a leak probe on every test).
"""

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """kcoral.tools.nats_brokers' (the brokers' and the benches' too): from this xdist worker's
    own KCORAL_PORT_RANGE (tests/conftest.py) when the tests run in parallel."""
    from kcoral.tools.nats_brokers import free_port as pick

    return pick()


class Server:
    """`ca`: the CA bundle that an HTTPS server's (--tls-cert) certificate verifies against.
    `env`: variables added to the server's environment."""

    verify: ssl.SSLContext | bool = True  # httpx's, for /health; subclasses that start their own keep it

    def __init__(
        self,
        tmp: Path,
        *args: str,
        device: str = "cpu",
        ready_timeout: float = 60,
        ca: Path | None = None,
        env: dict | None = None,
    ):
        self.port = free_port()
        self.url = f"{'https' if '--tls-cert' in args else 'http'}://127.0.0.1:{self.port}"
        self.verify = ssl.create_default_context(cafile=str(ca)) if ca else True
        self.log_dir = tmp / "logs"
        self.stderr_path = tmp / "server.stderr"
        cmd = [
            sys.executable,
            "-m",
            "kcoral",
            "server",
            "--device",
            device,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-dir",
            str(self.log_dir),
            "--disk-cache-dir",
            str(tmp / "disk-cache"),
            "--build-cache-dir",
            str(tmp / "build-cache"),
            *args,
        ]
        self.stderr = open(self.stderr_path, "wb")
        self.tag = uuid.uuid4().hex  # inherited as LEAK_TAG by everything the server starts
        self.process = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            start_new_session=True,
            env={**os.environ, **(env or {}), LEAK_TAG: self.tag},
        )
        self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.stderr_path.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/health", timeout=1, verify=self.verify).status_code == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not become healthy")

    def events(self) -> list[dict]:
        import json

        lines = []
        for path in self.log_dir.glob("runs/*/events.jsonl"):
            lines += [json.loads(line) for line in path.read_text().splitlines() if line]
        return lines

    def stop(self, timeout: float = 30) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.stderr.close()
        self._assert_nothing_left()
        return self.process.returncode

    def _assert_nothing_left(self, grace: float = 5.0) -> None:
        """Fails if any process started by this server outlived it; kills them."""
        deadline = time.monotonic() + grace
        while (left := processes_tagged(self.tag)) and time.monotonic() < deadline:
            time.sleep(0.05)
        leaked = describe(left)  # before the kill empties their command lines
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"processes outlived the server: {leaked}"


LEAK_TAG = "KCORAL_TEST_SERVER"


def processes_tagged(tag: str) -> set[int]:
    """Live (non-zombie) processes whose initial environment holds LEAK_TAG=`tag`."""
    needle = f"{LEAK_TAG}={tag}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0") and alive(int(entry.name)):
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def describe(pids: set[int]) -> str:
    names = []
    for pid in sorted(pids):
        with contextlib.suppress(OSError):
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            names.append(f"{pid} ({b' '.join(argv).decode(errors='replace').strip()})")
    return ", ".join(names)


@pytest.fixture
def make_server(tmp_path):
    """Starts servers with extra flags; stops them after the test."""
    servers = []

    def start(*args: str, **options) -> Server:
        directory = tmp_path / f"server{len(servers)}"
        directory.mkdir()
        servers.append(Server(directory, *args, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One CPU server with four seats, shared by the tests of a module."""
    server = Server(tmp_path_factory.mktemp("shared"), "--num-workers", "4", "--max-timeout-seconds", "30")
    yield server
    server.stop()


@pytest.fixture
def client(shared_server):
    from kcoral import Client

    with Client(shared_server.url) as c:
        yield c


def write_tenant_keys(path: Path, names: tuple[str, ...] = ("alice", "bob"), operator: str = "ops") -> dict[str, str]:
    """A keys file (--auth-keys) with a tenant key for each of `names` and an operator key; the keys by name."""
    from kcoral.keys import key_line, new_key

    keys = {name: new_key() for name in (*names, operator)}
    lines = [key_line(name, keys[name]) for name in names] + [key_line(operator, keys[operator], "operator")]
    path.write_text("\n".join(lines) + "\n")
    return keys


def call(source: str, args: list | None = None, name: str = "main"):
    """A kcoral Program: upload module `m`, get_function `f` = name, run `r` with args, return it as `out`."""
    from kcoral import Program

    program = Program()
    module = program.upload(id="m", kind="module", source=source)
    fn = program.get_function(id="f", module=module, name=name)
    program.return_(key="out", value=program.run(id="r", fn=fn, args=args or []))
    return program


def wait_for(predicate, timeout: float, what: str, error: type = AssertionError, every: float = 0.02):
    """The predicate's first truthy value within `timeout` seconds, asked every `every` seconds;
    else raises `error`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise error(f"timed out waiting for {what}")


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == pid:
                    found.add(int(entry.name))
    return found


def tree_of(pid: int) -> set[int]:
    found, frontier = set(), [pid]
    while frontier:
        for child in children_of(frontier.pop()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found
