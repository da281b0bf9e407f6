"""A Jepsen-style fault campaign for the KCoral cluster (issue 44; docs/cluster.md): three
nats-servers, each in a network namespace of its own (bench/netns_lab.py), and three KCoral
CPU nodes in the root namespace; keyed programs under load (bench/fault_load.py) while each
schedule of faults runs and heals, several times; then every key is checked.

    python3 bench/cluster_faults.py --quick          # as root: every schedule once, short load
    python3 bench/cluster_faults.py --runs 10 --only broker-kill-leader,node-kill

Schedules (each heals before the next; --list names them):
  broker-kill-one         SIGKILL one broker (not the stream's leader), restart it
  broker-kill-leader      SIGKILL the KCORAL_WORK stream's leader, restart it
  broker-kill-all         SIGKILL all three brokers at once, restart them
  broker-pause            SIGSTOP the stream's leader (10 s at least: past an election), then SIGCONT
  node-pause              SIGSTOP a KCoral node (and its workers), then SIGCONT
  partition-leader        the stream's leader cut from the two other brokers (nftables; 10 s at
                          least: past an election)
  partition-nodes         every KCoral node cut from every broker
  node-kill               SIGKILL the KCoral node running the most programs, restart it
  power-loss-all          every broker's store on a lazy FUSE store (bench/lazy_store.py):
                          SIGKILL all brokers, drop what they wrote but never fsynced, remount,
                          restart
  power-loss-partitioned  the stream's leader cut from the others, then its power lost, then
                          healed
  disk-full               one broker's store on a small tmpfs, filled up, then freed
  corrupt-block           on one broker (not the leader) stopped: the stream's newest message
                          block cut to half and one byte in it flipped, then a restart

The table: requests sent, answered, unanswered (no answer by the deadline: availability,
not judged), lost, changed, duplicated (with the allowance: runs on a KCoral node killed before
their answer) and the time from each heal until a fresh request is answered (median and max
over the runs). Exit status 0 only when nothing was lost or changed and duplicates stay within
their allowance. Needs root (namespaces, nftables, mounts), `nft` (Debian nftables) and, for
the power-loss schedules, FUSE (Debian fuse3, PyPI mfusepy); without them it fails, never skips.
Everything it starts is stopped by pid, unmounted or deleted by name at the end.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cluster_harness import (
    SECRET,
    NatsServers,
    Node,
    cluster_key,
    wait_for_view,
)  # first: this checkout's kcoral on sys.path
from fault_load import Load, Verdict, check, executions, recheck, recovery_seconds
from lazy_store import LazyStore
from netns_lab import NetnsLab

STREAM = "KCORAL_WORK"
SEATS_PER_NODE = 2
# NATS's Raft elects a new leader after 4-9 s without word from the old one: a leader paused or
# cut off for less goes unnoticed (quick runs' 4 s partitions changed no leader), so these
# faults last at least this long.
ELECTION_S = 10


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class TmpfsStore:
    """A small tmpfs mounted at `path`, for the disk-full schedule; filled by one file."""

    def __init__(self, path: Path, megabytes: int):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "kcoral-faults", str(path)], check=True)
        self.mounted = True

    def fill(self) -> None:
        # Unbuffered: a buffered file raised ENOSPC again as it closed, outside the suppress.
        with open(self.path / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * (1 << 16))

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / "filler").unlink()

    def remove(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)
            self.mounted = False


class Cluster:
    """The lab, three brokers in it and three KCoral nodes; `store` is where each broker keeps
    JetStream: "disk" (a folder), "lazy" (a lazy FUSE store each) or "tmpfs" (broker 2 on a
    small tmpfs, the others on folders)."""

    def __init__(self, root: Path, store: str, log: Path, ack_wait: float, run_lease: int):
        self.root, self.store, self.log, self.ack_wait, self.run_lease = root, store, log, ack_wait, run_lease
        self.paused: set[int] = set()  # pids under SIGSTOP, resumed whatever happens
        self.stopped = False
        self.lazy: list[LazyStore] = []
        self.tmpfs: TmpfsStore | None = None
        self.nats: NatsServers | None = None
        self.nodes: list[Node] = []
        self.lab = NetnsLab(3)
        atexit.register(self.stop)  # stop() runs once; this is for an exit that skipped it
        try:
            self._start(root, store)
        except BaseException:
            self.stop()  # the caller never gets the object to stop: a failed start leaves nothing
            raise

    def _start(self, root: Path, store: str) -> None:
        stores = [root / f"store-{i}" for i in range(3)]
        if store == "lazy":
            self.lazy = [LazyStore(root / f"backing-{i}", stores[i], root / f"lazy-{i}.log") for i in range(3)]
        elif store == "tmpfs":
            self.tmpfs = TmpfsStore(stores[2], 64)
        self.nats = NatsServers(root / "nats", hosts=self.lab.addresses, wrap=self.lab.wrap, stores=stores)
        flags = [
            "--cluster", self.nats.flag, "--cluster-nats-monitor", self.nats.monitor_flag,
            "--cluster-heartbeat-seconds", "1", "--cluster-ack-wait-seconds", f"{self.ack_wait:g}", "--num-workers", str(SEATS_PER_NODE),
            "--cluster-run-lease-seconds", str(self.run_lease),
            "--sandbox", "none", "--max-requests-per-worker", "0",
        ]  # fmt: skip
        self.nodes = [Node(root / f"node-{i}", flags, env={"KCORAL_CLUSTER_SECRET": SECRET}) for i in range(3)]
        for node in self.nodes:
            node.start()
        wait_for_view(self.nodes)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def leader(self) -> int:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = self.nats.stream_leader(STREAM)
            if found is not None:
                return found
            time.sleep(0.2)
        raise RuntimeError(f"no leader for {STREAM}")

    def pause(self, pid: int, group: bool = False) -> None:
        self.paused.add(pid)
        (os.killpg if group else os.kill)(pid, signal.SIGSTOP)

    def resume(self, pid: int, group: bool = False) -> None:
        with contextlib.suppress(ProcessLookupError):
            (os.killpg if group else os.kill)(pid, signal.SIGCONT)
        self.paused.discard(pid)

    def ensure_whole(self) -> None:
        """Before a run: every broker and node alive, JetStream answering, every node seen."""
        for i in range(3):
            if i not in self.nats.live():
                self.nats.start(i)
        self.nats.wait_ready(60)
        for node in self.nodes:
            if not node.alive():
                node.start()
        wait_for_view(self.nodes, 60)
        self.leader()

    def stop(self) -> None:
        """Everything, by pid and by name, whatever state a schedule left it in. A second Ctrl-C
        (or SIGTERM) while it runs would leave brokers and nodes behind, so it is not heard until the end."""
        if self.stopped:
            return
        self.stopped = True
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self) -> None:
        for pid in list(self.paused):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGCONT)
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop(10)
        if self.nats is not None:
            self.nats.stop()
        for lazy in self.lazy:
            lazy.unmount()
        if self.tmpfs is not None:
            self.tmpfs.remove()
        self.lab.remove()


@dataclass
class Fault:
    """What a schedule did: when it healed (monotonic), and the node lives it killed."""

    healed_at: float = 0.0
    killed: dict[str, float] = field(default_factory=dict)  # node tag -> unix time of the kill


def open_runs_by_node(cluster: Cluster) -> dict[int, int]:
    """Programs running now on each node's current life, from the shared file."""
    tags = {node.tag: i for i, node in enumerate(cluster.nodes)}
    counts = dict.fromkeys(range(len(cluster.nodes)), 0)
    for runs in executions(cluster.log).values():
        for run in runs:
            if not run.ended and run.tag in tags:
                counts[tags[run.tag]] += 1
    return counts


# The schedules: each injects its fault, holds it for `hold` seconds and heals.


def broker_kill_one(c: Cluster, hold: float, rng: random.Random) -> Fault:
    leader = c.leader()
    victim = rng.choice([i for i in range(3) if i != leader])
    progress(f"  SIGKILL broker {victim} (the leader is {leader})")
    c.nats.kill(victim)
    time.sleep(hold)
    c.nats.start(victim)
    return Fault(time.monotonic())


def broker_kill_leader(c: Cluster, hold: float, rng: random.Random) -> Fault:
    leader = c.leader()
    progress(f"  SIGKILL broker {leader}, the leader")
    c.nats.kill(leader)
    time.sleep(hold)
    c.nats.start(leader)
    return Fault(time.monotonic())


def broker_kill_all(c: Cluster, hold: float, rng: random.Random) -> Fault:
    for process in c.nats.processes:  # all at once: signals first, waits after
        process.kill()
    for i in range(3):
        c.nats.kill(i)
    time.sleep(hold)
    for i in range(3):
        c.nats.start(i)
    return Fault(time.monotonic())


def broker_pause(c: Cluster, hold: float, rng: random.Random) -> Fault:
    leader = c.leader()
    progress(f"  SIGSTOP broker {leader}, the leader")
    pid = c.nats.processes[leader].pid
    c.pause(pid)
    time.sleep(max(hold, ELECTION_S))
    c.resume(pid)
    return Fault(time.monotonic())


def node_pause(c: Cluster, hold: float, rng: random.Random) -> Fault:
    busiest = max(open_runs_by_node(c).items(), key=lambda item: item[1])[0]
    pid = c.nodes[busiest].process.pid
    progress(f"  SIGSTOP node {busiest} ({c.nodes[busiest].node_id}) and its workers")
    c.pause(pid, group=True)
    time.sleep(hold)
    c.resume(pid, group=True)
    return Fault(time.monotonic())


def partition_leader(c: Cluster, hold: float, rng: random.Random) -> Fault:
    leader = c.leader()
    progress(f"  broker {leader}, the leader, cut from the other two")
    c.lab.isolate([leader], [i for i in range(3) if i != leader])
    time.sleep(max(hold, ELECTION_S))
    c.lab.heal()
    return Fault(time.monotonic())


def partition_nodes(c: Cluster, hold: float, rng: random.Random) -> Fault:
    c.lab.isolate_root([0, 1, 2])
    time.sleep(hold)
    c.lab.heal()
    return Fault(time.monotonic())


def node_kill(c: Cluster, hold: float, rng: random.Random) -> Fault:
    busiest = max(open_runs_by_node(c).items(), key=lambda item: item[1])[0]
    node = c.nodes[busiest]
    progress(f"  SIGKILL node {busiest} ({node.node_id}), running {open_runs_by_node(c)[busiest]} programs")
    tag = node.tag
    at = time.time()
    node.kill()
    time.sleep(min(hold, 2))
    node.start()
    return Fault(time.monotonic(), {tag: at})


def power_loss_all(c: Cluster, hold: float, rng: random.Random) -> Fault:
    for process in c.nats.processes:
        process.kill()
    for lazy in c.lazy:
        lazy.cut_power()
    for i in range(3):
        c.nats.kill(i)  # reaps
    time.sleep(hold)
    for i in range(3):
        c.lazy[i].mount()
        c.nats.start(i)
    return Fault(time.monotonic())


def power_loss_partitioned(c: Cluster, hold: float, rng: random.Random) -> Fault:
    victim = c.leader()  # Jepsen's NATS loss: a leader cut off, then its power lost
    progress(f"  broker {victim}, the leader, cut from the other two, then its power cut")
    c.lab.isolate([victim], [i for i in range(3) if i != victim])
    time.sleep(hold / 2)
    c.nats.processes[victim].kill()
    c.lazy[victim].cut_power()
    c.nats.kill(victim)
    time.sleep(hold / 2)
    c.lab.heal()
    c.lazy[victim].mount()
    c.nats.start(victim)
    return Fault(time.monotonic())


def disk_full(c: Cluster, hold: float, rng: random.Random) -> Fault:
    c.tmpfs.fill()
    time.sleep(hold)
    c.tmpfs.free()
    c.nats.kill(2)  # JetStream may have turned itself off on the full store: a restart heals
    c.nats.start(2)
    return Fault(time.monotonic())


def corrupt_block(c: Cluster, hold: float, rng: random.Random) -> Fault:
    leader = c.leader()
    victim = rng.choice([i for i in range(3) if i != leader])
    progress(f"  SIGKILL broker {victim} (the leader is {leader}) to corrupt its store")
    c.nats.kill(victim)
    blocks = sorted(
        (c.nats.stores[victim] / "jetstream" / "$G" / "streams" / STREAM / "msgs").glob("*.blk"),
        key=lambda p: int(p.stem),
    )
    if blocks:
        newest = blocks[-1]
        data = bytearray(newest.read_bytes())
        data = data[: len(data) // 2]
        if data:
            at = rng.randrange(len(data))
            data[at] ^= 0xFF
        newest.write_bytes(bytes(data))
        progress(f"  {newest.name} on broker {victim}: {len(data)} bytes left, one flipped")
    else:
        progress(f"  broker {victim} held no block of {STREAM}")
    time.sleep(hold / 2)
    c.nats.start(victim)
    return Fault(time.monotonic())


SCHEDULES: dict[str, tuple[str, Callable[[Cluster, float, random.Random], Fault]]] = {
    "broker-kill-one": ("disk", broker_kill_one),
    "broker-kill-leader": ("disk", broker_kill_leader),
    "broker-kill-all": ("disk", broker_kill_all),
    "broker-pause": ("disk", broker_pause),
    "node-pause": ("disk", node_pause),
    "partition-leader": ("disk", partition_leader),
    "partition-nodes": ("disk", partition_nodes),
    "node-kill": ("disk", node_kill),
    "corrupt-block": ("disk", corrupt_block),
    "power-loss-all": ("lazy", power_loss_all),
    "power-loss-partitioned": ("lazy", power_loss_partitioned),
    "disk-full": ("tmpfs", disk_full),
}


@dataclass
class Row:
    schedule: str
    runs: int = 0
    verdict: Verdict = field(default_factory=Verdict)
    recoveries: list[float | None] = field(default_factory=list)


@dataclass
class Run:
    """One run of a schedule: its keys, what its fault did, its time to recover."""

    records: list
    fault: Fault
    recovery: float | None


def run_once(c: Cluster, name: str, run: int, args: argparse.Namespace, rng: random.Random) -> Run:
    c.ensure_whole()
    load = Load(c.urls, c.log, f"{name}-{run}", args.load_seconds, args.concurrency, args.deadline)
    time.sleep(args.warmup)
    fault = SCHEDULES[name][1](c, args.hold, rng)
    recovery = [None]
    probe = threading.Thread(
        target=lambda: recovery.__setitem__(
            0, recovery_seconds(c.urls, c.log, fault.healed_at, f"{name}-{run}", args.deadline)
        ),
        daemon=True,
    )
    probe.start()
    load.wait()
    probe.join(args.deadline + 10)
    with load.lock:
        return Run(list(load.records), fault, recovery[0])


def run_lease_for(hold: float) -> int:
    """The nodes' --cluster-run-lease-seconds: longer than the longest fault (at least
    ELECTION_S), with a few seconds for the healed node to reconnect and store. A node cut off
    for less than the lease gets to store its outcome while the other nodes wait for it; one cut
    off for longer is presumed dead and its run redone, which the checker counts as a duplicate
    beyond the allowance (it was never killed)."""
    return int(max(hold, ELECTION_S)) + 5


def settle(c: Cluster, ack_wait: float, limit: float = 60) -> None:
    """Until a run handed on after the last fault has shown itself and every run on a live node
    has ended: a client answered by the first run's outcome stops waiting before JetStream
    redelivers that run's message (AckWait after its node's last word), and checking then
    missed the second run."""
    time.sleep(ack_wait + 2)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        live = {node.tag for node in c.nodes if node.alive()}
        if not any(r.tag in live and not r.ended for runs in executions(c.log).values() for r in runs):
            return
        time.sleep(0.5)


def table(rows: list[Row]) -> str:
    head = ["schedule", "runs", "requests", "answered", "unanswered", "lost", "changed", "duplicated (allowed)",
            "recover s (median / max)"]  # fmt: skip
    lines = [head]
    for row in rows:
        v = row.verdict
        seen = [r for r in row.recoveries if r is not None]
        never = len(row.recoveries) - len(seen)
        recover = f"{statistics.median(seen):.1f} / {max(seen):.1f}" if seen else "-"
        if never:
            recover += f" ({never} never)"
        lines.append([row.schedule, str(row.runs), str(v.requests), str(v.answered), str(v.unanswered), str(v.lost),
                      str(v.changed), f"{v.duplicated} ({v.allowance})", recover])  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def key_trail(root: Path, key: str) -> list[str]:
    """What every node life logged about `key`, in time order: why it was lost, changed or run
    again, printed last, where CI's excerpt of the output shows it."""
    wanted = cluster_key(key)
    fields = ("delivered", "claim_read", "holder", "listed", "outcome", "waited_ms", "reason", "first_outcome")
    lines = []
    for events in root.glob("*/node-*/life*/runs/*/events.jsonl"):
        life = "/".join(events.parts[-5:-3])  # node-1/life2
        for line in events.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("key") == wanted:
                    detail = {name: event[name] for name in fields if name in event}
                    lines.append(f"{event['timestamp'][11:23]} {life} {event['event']} {json.dumps(detail)[:240]}")
    return sorted(lines)


def print_trails(failed: list[Row], root: Path, log: Path) -> None:
    """The first two suspect keys of each failed schedule: their runs and their nodes' events."""
    ran = executions(log) if failed else {}
    for row in failed:
        for key in row.verdict.suspects[:2]:
            print(f"{row.schedule}: {key}, as its runs' file and the nodes logged it:")
            runs = ran.get(key, [])
            at = [time.strftime("%H:%M:%S", time.gmtime(r.started)) + f"{r.started % 1:.3f}"[1:] for r in runs]
            print(
                "  runs (UTC): "
                + ", ".join(f"{w} by {r.tag[:6]}{'' if r.ended else ' (cut)'}" for w, r in zip(at, runs))
            )
            for line in key_trail(root, key)[:16]:
                print("  " + line)


def passed(row: Row) -> bool:
    v = row.verdict
    return v.lost == 0 and v.changed == 0 and v.duplicated <= v.allowance


def preflight(stores: set[str]) -> None:
    """Fails, with what to install, where the campaign cannot run; never skips a schedule."""
    if os.geteuid() != 0:
        sys.exit("cluster_faults: needs root (network namespaces, nftables, mounts)")
    if "lazy" in stores:
        problem = LazyStore.unavailable()
        if problem:
            sys.exit(f"cluster_faults: the power-loss schedules need FUSE: {problem}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    flag = parser.add_argument
    flag("--quick", action="store_true", help="every schedule once with a short load: under 4 minutes on 2 cores")
    flag("--runs", type=int, default=None, help="runs of each schedule (default 10; --quick 1)")
    flag("--only", default="", help="comma-separated schedules to run (default: all; --list names them)")
    flag("--list", action="store_true", help="print the schedules' names and exit")
    flag("--load-seconds", type=float, default=None, help="seconds each run sends new keys (default 20; --quick 7)")
    flag("--warmup", type=float, default=None, help="seconds of load before the fault (default 3; --quick 1.5)")
    flag("--hold", type=float, default=None, help="seconds a fault lasts before it heals (default 8; --quick 4)")
    flag("--concurrency", type=int, default=6, help="clients sending at once (default 6: one per seat)")
    flag("--deadline", type=float, default=45, help="seconds a client retries one key before it gives up (default 45)")
    flag("--ack-wait", type=float, default=5,
         help="the nodes' --cluster-ack-wait-seconds: how long JetStream waits for word from a run's node before "
              "it hands the run to another (default 5, so a killed node's work moves on within a run; KCoral's "
              "default is 30)")  # fmt: skip
    flag("--seed", type=int, default=1, help="seed of the choices the schedules make (default 1)")
    flag("--timeout", type=float, default=None,
         help="seconds the whole campaign may take before it stops, cleans up and fails (default: 300 plus 60 a "
              "run of a schedule)")  # fmt: skip
    flag("--out", type=Path, default=None,
         help="a folder for the brokers', nodes' and programs' files, kept (default: a new temporary one, removed "
              "when the campaign passes)")  # fmt: skip
    args = parser.parse_args()
    args.runs = args.runs or (1 if args.quick else 10)
    args.load_seconds = args.load_seconds or (7 if args.quick else 20)
    args.warmup = args.warmup or (1.5 if args.quick else 3)
    args.hold = args.hold or (4 if args.quick else 8)
    args.timeout = args.timeout or 300 + 60 * args.runs * len(SCHEDULES)
    return args


def main() -> int:
    args = parse_args()
    if args.list:
        print("\n".join(SCHEDULES))
        return 0
    chosen = [s for s in args.only.split(",") if s] or list(SCHEDULES)
    unknown = [s for s in chosen if s not in SCHEDULES]
    if unknown:
        sys.exit(f"unknown schedules {unknown}; --list names them")
    preflight({SCHEDULES[s][0] for s in chosen})

    def on_alarm(signum, frame):
        raise TimeoutError(f"the campaign ran past --timeout {args.timeout:.0f} s")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    signal.alarm(int(args.timeout))
    root = args.out or Path(tempfile.mkdtemp(prefix="kcoral-faults-"))
    root.mkdir(parents=True, exist_ok=True)
    log = root / "executions.log"
    rng = random.Random(args.seed)
    rows: list[Row] = []
    started = time.monotonic()
    for store in ("disk", "lazy", "tmpfs"):
        names = [s for s in chosen if SCHEDULES[s][0] == store]
        if not names:
            continue
        progress(f"starting 3 brokers ({store} stores) in namespaces and 3 KCoral nodes")
        cluster = None
        try:
            cluster = Cluster(root / store, store, log, args.ack_wait, run_lease_for(args.hold))
            runs: dict[str, list[Run]] = {}
            for name in names:
                for run in range(args.runs):
                    progress(f"{name}: run {run + 1}/{args.runs}")
                    runs.setdefault(name, []).append(run_once(cluster, name, run, args, rng))
            # Checked once every fault of this cluster has healed, as Jepsen's final reads.
            progress("every fault healed: waiting for runs handed on late, then each answered key once more")
            cluster.ensure_whole()
            settle(cluster, args.ack_wait)
            recheck(
                cluster.urls, [r for done in runs.values() for run in done for r in run.records], log, args.deadline
            )
            for name, done in runs.items():
                row = Row(name)
                rows.append(row)
                for run in done:
                    verdict = check(run.records, log, run.fault.killed)
                    row.runs += 1
                    row.verdict.add(verdict)
                    row.recoveries.append(run.recovery)
                for example in row.verdict.examples[:6]:
                    progress(f"  {name}: {example}")
        finally:
            progress(f"stopping the {store} cluster")
            if cluster is not None:
                cluster.stop()
    print(table(rows))
    wall = time.monotonic() - started
    failed = [row.schedule for row in rows if not passed(row)]
    (root / "cluster_faults.json").write_text(json.dumps(
        {"wall_s": round(wall, 1), "args": {k: str(v) for k, v in vars(args).items()},
         "rows": [{"schedule": r.schedule, "runs": r.runs, **asdict(r.verdict), "recover_s": r.recoveries} for r in rows]},
        indent=1))  # fmt: skip
    if not failed and args.out is None:
        shutil.rmtree(root, ignore_errors=True)
        root = None
    print_trails([row for row in rows if not passed(row)], root, log)
    print(f"wall {wall:.0f} s" + (f"; the brokers', nodes' and programs' files are under {root}" if root else ""))
    if failed:
        print(f"FAILED: {', '.join(failed)} (lost, changed or duplicated beyond the allowance)")
        return 1
    print("passed: nothing lost or changed, duplicates within their allowance")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        # A lab, mount or process that could not be made: a failure with its reason, never a skip.
        traceback.print_exc()
        sys.exit(f"cluster_faults: FAILED: {exc}")
