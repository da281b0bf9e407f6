"""`kcoral cluster up|status|down`: a KCoral cluster on this machine, to try one (docs/cluster.md
"A one-machine trial"). `up` starts three NATS brokers (kcoral.tools.nats_brokers: each syncs
before it acknowledges) and two CPU nodes on 127.0.0.1, sends a request through them, prints
where they listen, and returns, leaving them running; `down` stops each by the pid `up` wrote
in the cluster's folder, and removes the folder. Nothing else on the machine is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kcoral.tools.nats_brokers import NatsBrokers, free_port

DEFAULT_DIR = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "kcoral" / "local-cluster"
STATE = "cluster.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoral cluster",
        description="A KCoral cluster on this machine, for a trial: NATS brokers and CPU nodes on 127.0.0.1.",
        epilog="example: kcoral cluster up && kcoral cluster status && kcoral cluster down",
    )
    parser.add_argument("action", choices=["up", "status", "down"], help="start it, show it, or stop it")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help=f"the cluster's folder: brokers' stores, logs, its secret and pids (default {DEFAULT_DIR})")  # fmt: skip
    parser.add_argument("--brokers", type=int, default=3, choices=[1, 3, 5],
                        help="NATS brokers (default 3: the cluster survives losing one)")  # fmt: skip
    parser.add_argument("--nodes", type=int, default=2, help="KCoral CPU nodes (default 2)")
    parser.add_argument("--port", type=int, default=0,
                        help="the first node's HTTP port, the next ones follow (default: free ports)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2, help="workers per node (default 2)")
    parser.add_argument("--keep", action="store_true", help="down: keep the folder (logs, stores)")
    return parser


def _say(message: str) -> None:
    print(f"kcoral cluster: {message}", flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead too (a child of ours not reaped yet).
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _state(directory: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((directory / STATE).read_text())
    return None


def _start_node(directory: Path, index: int, port: int, brokers: NatsBrokers, secret: str, args) -> subprocess.Popen:
    home = directory / f"node-{index}"
    home.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--host", "127.0.0.1", "--port", str(port),
        "--num-workers", str(args.workers), "--log-dir", str(home / "logs"),
        "--disk-cache-dir", str(home / "disk-cache"), "--build-cache-dir", str(home / "build-cache"),
        "--cluster", brokers.flag, "--cluster-nats-monitor", brokers.monitor_flag,
        "--cluster-replicas", str(min(3, args.brokers)),
    ]  # fmt: skip
    with open(home / "server.log", "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True,
                                env={**os.environ, "KCORAL_CLUSTER_SECRET": secret})  # fmt: skip


def _last_error(log: Path) -> str:
    """The last line of a node's log that is not INFO: why it stopped."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip() and " INFO " not in line]
    return lines[-1][:600] if lines else "(nothing logged)"


def _wait_for_view(urls: list[str], processes: list[subprocess.Popen], directory: Path, timeout: float = 60) -> None:
    """Until every node answers /health and sees every other node."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for index, process in enumerate(processes):
            if process.poll() is not None:
                log = directory / f"node-{index}" / "server.log"
                raise RuntimeError(
                    f"node {index} exited with {process.returncode}: {_last_error(log)} (its log: {log})"
                )
        with contextlib.suppress(httpx.HTTPError, KeyError, TypeError):
            views = [httpx.get(url + "/health", timeout=2).json()["cluster"]["nodes"] for url in urls]
            if all({n["url"] for n in view} >= set(urls) for view in views):
                return
        time.sleep(0.3)
    raise RuntimeError(f"the nodes did not see each other within {timeout:.0f} s")


def _try_a_request(urls: list[str]) -> None:
    """Sends 6 * 7 through the cluster; a RuntimeError unless 42 comes back."""
    from kcoral import Client, Program

    program = Program()
    module = program.upload(id="m", kind="module", source="def main(a, b):\n    return a * b\n")
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[6, 7]))
    with Client(urls=urls) as client:
        result = client.execute(program, timeout_seconds=60)
    if result.status != "COMPLETED" or result["out"] != 42:
        raise RuntimeError(f"the trial request came back {result.status}: {result}")


def up(args) -> int:
    directory: Path = args.dir
    state = _state(directory)
    if state and any(_alive(pid) for pid in state["node_pids"] + state["broker_pids"]):
        _say(f"already up in {directory}: `kcoral cluster down --dir {directory}` first")
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    secret = secrets.token_hex(24)
    (directory / "secret").write_text(secret)
    (directory / "secret").chmod(0o600)
    _say(f"starting {args.brokers} NATS brokers (sync before acknowledging) in {directory / 'nats'}")
    try:
        brokers = NatsBrokers(directory / "nats", size=args.brokers)
    except RuntimeError as error:  # no nats-server, or too old: it says how to get one
        _say(f"could not start the brokers: {error}")
        return 1
    nodes: list[subprocess.Popen] = []
    try:
        ports = [args.port + i if args.port else free_port() for i in range(args.nodes)]
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        _say(f"starting {args.nodes} KCoral CPU nodes: {', '.join(urls)}")
        # One after the other: the first node makes the cluster's streams and buckets, so the
        # others never race it to create them while the brokers are still placing replicas.
        for i, port in enumerate(ports):
            nodes.append(_start_node(directory, i, port, brokers, secret, args))
            (directory / STATE).write_text(json.dumps({
                "urls": urls, "node_pids": [p.pid for p in nodes],
                "broker_pids": [p.pid for p in brokers.processes if p is not None],
                "nats": brokers.urls, "nats_monitor": brokers.monitor_flag.split(","),
            }, indent=1))  # fmt: skip
            _wait_for_view(urls[: i + 1], nodes, directory)
        _say("sending a request through the cluster (6 * 7)")
        _try_a_request(urls)
        _say("answered 42")
    except Exception as error:  # noqa: BLE001 - everything started is stopped, then the reason
        _say(f"could not start: {error}")
        _stop([p.pid for p in nodes], [p.pid for p in brokers.processes if p])
        return 1
    print(f"\nnodes:     {' '.join(urls)}\ndashboard: {urls[0]}/dashboard\n"
          f"NATS:      {brokers.flag}\nlogs:      {directory}/node-*/server.log, {directory}/nats/\n"
          f"try:       python -c \"from kcoral import Client; print(Client(urls={urls!r}).health()['cluster']['pools'])\"\n"
          f"stop:      kcoral cluster down{'' if directory == DEFAULT_DIR else f' --dir {directory}'}")  # fmt: skip
    return 0


def _stop(nodes_pids: list[int], broker_pids: list[int], grace: float = 15) -> list[int]:
    """Stops the nodes (SIGTERM: they drain), then the brokers, each by its process group (a node's
    workers with it); SIGKILL for what outlives `grace`. The pids still alive after it all."""
    for group in (nodes_pids, broker_pids):
        for pid in group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_alive(pid) for pid in group) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, os.WNOHANG)  # ours, when `up` failed
            time.sleep(0.1)
        for pid in group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    return [pid for pid in nodes_pids + broker_pids if _alive(pid)]


def down(args) -> int:
    state = _state(args.dir)
    if state is None:
        _say(f"nothing to stop: no {STATE} in {args.dir}")
        return 1
    _say(f"stopping {len(state['node_pids'])} nodes and {len(state['broker_pids'])} brokers")
    left = _stop(state["node_pids"], state["broker_pids"])
    if left:
        _say(f"still alive: {left}")
        return 1
    if args.keep:
        (args.dir / STATE).unlink()
    else:
        shutil.rmtree(args.dir, ignore_errors=True)
    _say("stopped" + (f"; logs kept in {args.dir}" if args.keep else ""))
    return 0


def status(args) -> int:
    import httpx

    state = _state(args.dir)
    if state is None:
        _say(f"not up: no {STATE} in {args.dir}")
        return 1
    for url, pid in zip(state["urls"], state["node_pids"]):
        try:
            health = httpx.get(url + "/health", timeout=3).json()
            sync = health["cluster"]["broker_sync"]["state"]
            print(f"{url}  pid {pid}  up, {len(health['cluster']['nodes'])} nodes in view, brokers {sync}")
        except (httpx.HTTPError, KeyError, ValueError):
            print(f"{url}  pid {pid}  {'not answering' if _alive(pid) else 'dead'}")
    for url, pid in zip(state["nats"], state["broker_pids"]):
        print(f"{url}  pid {pid}  {'alive' if _alive(pid) else 'dead'}")
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return {"up": up, "status": status, "down": down}[args.action](args)
