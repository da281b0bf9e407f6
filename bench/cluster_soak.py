"""The cluster kill test (issue 26; docs/cluster.md "Failure table"): many requests through
a 3-node KCoral cluster on a 3-server NATS JetStream cluster while nodes are SIGKILLed.

    python bench/cluster_soak.py [--requests 2000] [--concurrency 32] [--kill-every 20] [--nodes 3]
                                 [--big-every 10] [--workers-per-node 8] [--ack-wait 3] [--seed 1]
                                 [--leader-kill-at SECONDS] [--max-attempts 10] [--timeout 120] [--out DIR]

Each request is its own program: it sleeps 0.5-2 s and returns [i, a random token], every
--big-every-th 1 MiB and more of seeded random bytes instead of the token; each answer is
checked exactly. The requests go from --concurrency threads through `Client(urls=...)`, the
first URL rotating so every node is an entry node, each with an Idempotency-Key the bench
chooses (so the events of every run of it can be found).

Every --kill-every seconds one node's process group is SIGKILLed and, a second later,
restarted on the same port (same node id and URL; a fresh log folder, so both lives' events
stay). Kills alternate between the node running the most requests and the one running the
fewest, ideally only an entry node; with every seat busy (the defaults: 32 requests at once,
3 x 8 seats) none is, and each kill takes both running work and entered requests. Once, at
--leader-kill-at seconds, the NATS server leading the stream KCORAL_WORK is SIGKILLed and
restarted on its storage after 5 s.

--max-attempts is 10, not the client's default (6 for 3 URLs, about 3 s of backoff): on
nats-server 2.9.10 a stream's new leader took 5-8 s, and every node answers 503 meanwhile; with
the default, 55 of 2,000 answers were lost that way.

It prints and writes to DIR/cluster_soak.json: answered, lost (no answer), wrong (another
value, or FAILED), duplicated answers (keys with two outcomes stored first, from all nodes'
event logs), redeliveries (runs started with JetStream's delivery count >= 2), the client's
retries, re-runs (keys started more than once: allowed, a death or an outcome that could not
be stored cost a run), outcomes not stored, latency, wall.
Exit status 1 if anything was lost, wrong or duplicated, if nothing was redelivered, or if a
planned kill did not happen. Everything it started is stopped by pid or process group.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from cluster_harness import (
    SECRET,
    NatsServers,
    Node,
    cluster_key,
    out_folder,
    percentile,
)  # first: puts this checkout's kcoral on sys.path

from kcoral import Client, Program

SOURCE = (
    "import random, time\n"
    "def main(i, seconds, token, big_bytes):\n"
    "    time.sleep(seconds)\n"
    "    if big_bytes:\n"
    "        return [i, random.Random(token).randbytes(big_bytes)]\n"
    "    return [i, token]\n"
)
STREAM = "KCORAL_WORK"
LEADER_DOWN_SECONDS = 5
# A kill waits this long for its kind of node (running something; only an entry), else takes the
# closest.
CHOOSE_WAIT_SECONDS = 3


def program_of(i: int, seconds: float, token: int, big_bytes: int) -> Program:
    program = Program()
    module = program.upload(id="m", kind="module", source=SOURCE)
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[i, seconds, token, big_bytes]))
    return program


class Requests:
    """The plan (fixed by --seed) and what came back, guarded by one lock."""

    def __init__(self, args: argparse.Namespace):
        rng = random.Random(args.seed)
        run = uuid.uuid4().hex[:8]
        self.plan = []
        for i in range(args.requests):
            big = (1 << 20) + 4096 + i if args.big_every and i % args.big_every == args.big_every - 1 else 0
            self.plan.append((i, round(rng.uniform(0.5, 2.0), 3), rng.getrandbits(62), big, f"soak-{run}-{i}"))
        self.lock = threading.Lock()
        self.next = 0
        self.latencies: list[float] = []
        self.lost: dict[int, str] = {}
        self.wrong: dict[int, str] = {}
        self.right = 0

    def take(self) -> tuple | None:
        with self.lock:
            if self.next >= len(self.plan):
                return None
            self.next += 1
            return self.plan[self.next - 1]


def send_all(requests: Requests, urls: list[str], args: argparse.Namespace) -> int:
    """Sends every planned request; returns the clients' retries."""
    clients: list[Client] = []
    clients_lock = threading.Lock()

    def worker() -> None:
        own = {}  # rotation -> Client: request i's first URL is node i % n
        while (item := requests.take()) is not None:
            i, seconds, token, big, key = item
            rotation = i % len(urls)
            if rotation not in own:
                own[rotation] = Client(urls=urls[rotation:] + urls[:rotation], max_attempts=args.max_attempts)
                with clients_lock:
                    clients.append(own[rotation])
            start = time.perf_counter()
            try:
                result = own[rotation].execute(
                    program_of(i, seconds, token, big), timeout_seconds=args.timeout, idempotency_key=key
                )
            except Exception as exc:  # noqa: BLE001 - a lost answer is what this bench counts
                with requests.lock:
                    requests.lost[i] = f"{cluster_key(key)}: {type(exc).__name__}: {exc}"[:600]
                continue
            elapsed = time.perf_counter() - start
            expected = [i, random.Random(token).randbytes(big) if big else token]
            with requests.lock:
                requests.latencies.append(elapsed)
                if not result.completed:
                    requests.wrong[i] = f"{cluster_key(key)}: FAILED: {result.error}"[:600]
                elif list(result.results.get("out") or []) != expected:
                    requests.wrong[i] = f"{cluster_key(key)}: another value: {str(result.results.get('out'))[:200]}"
                else:
                    requests.right += 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for client in clients:
        client.close()
    return sum(c.retries for c in clients)


def running_on(node: Node) -> tuple[int, int]:
    """(requests this life of the node is running, requests it entered and has not answered)."""
    events = node.events(current_life_only=True)
    count = Counter(e["event"] for e in events)
    running = count["cluster_request_started"] - count["cluster_request_executed"] - count["cluster_outcome_unstored"]
    queued = {e["request_id"] for e in events if e["event"] == "cluster_request_queued"}
    answered = {e["request_id"] for e in events if e["event"] == "request_finished"}
    return running, len(queued - answered)


class Killer(threading.Thread):
    """Kills and restarts nodes on schedule, and the stream's leader once."""

    def __init__(self, nodes: list[Node], nats: NatsServers, args: argparse.Namespace):
        super().__init__(daemon=True)
        self.nodes, self.nats, self.args = nodes, nats, args
        self.done = threading.Event()
        self.kills: list[dict] = []
        self.leader_kills: list[dict] = []
        self.error: str | None = None

    def run(self) -> None:
        start = time.monotonic()
        plan = [(self.args.kill_every * k, "node") for k in range(1, 10_000)]
        plan = sorted(plan + [(self.args.leader_kill_at, "leader")])
        try:
            for at, what in plan:
                if self.done.wait(max(0.0, start + at - time.monotonic())):
                    return
                (self.kill_leader if what == "leader" else self.kill_node)(time.monotonic() - start)
        except Exception as exc:  # noqa: BLE001 - reported, and fails the run
            self.error = f"{type(exc).__name__}: {exc}"

    def kill_node(self, at: float) -> None:
        want = "executing" if len(self.kills) % 2 == 0 else "entry"
        called = time.monotonic()
        turn = len(self.kills) % len(self.nodes)  # ties go round the nodes
        order = self.nodes[turn:] + self.nodes[:turn]
        deadline = time.monotonic() + CHOOSE_WAIT_SECONDS
        while True:
            load = {n.node_id: running_on(n) for n in order}
            if want == "executing":
                victim = max(order, key=lambda n: load[n.node_id][0])
                found = load[victim.node_id][0] > 0
            else:
                victim = min(order, key=lambda n: (load[n.node_id][0], -load[n.node_id][1]))
                found = load[victim.node_id][0] == 0 and load[victim.node_id][1] > 0
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # e.g. every seat busy, or all waiting out an election: ask again
        running, entered = load[victim.node_id]
        role = {(1, 1): "entry+executing", (1, 0): "executing only", (0, 1): "entry only", (0, 0): "idle"}[
            (running > 0, entered > 0)
        ]
        at += time.monotonic() - called
        victim.kill()
        time.sleep(1)
        restart = time.monotonic()
        victim.start()
        self.kills.append({
            "at_s": round(at, 1), "node": victim.node_id, "wanted": want, "role": role, "running": running,
            "entered": entered, "restart_s": round(time.monotonic() - restart, 2),
        })  # fmt: skip
        print(f"[{at:6.1f} s] killed node {victim.node_id} ({role}: running {running}, entered {entered})", flush=True)

    def kill_leader(self, at: float) -> None:
        leader = self.nats.stream_leader(STREAM)
        if leader is None:
            raise RuntimeError(f"no leader found for the stream {STREAM}")
        self.nats.kill(leader)
        time.sleep(LEADER_DOWN_SECONDS)
        new_leader = self.nats.stream_leader(STREAM)
        self.nats.start(leader)
        self.nats.wait_ready()
        then = f"kc-{new_leader}" if new_leader is not None else "none yet"
        self.leader_kills.append({"at_s": round(at, 1), "killed": f"kc-{leader}", "leader_after_5_s": then})
        print(f"[{at:6.1f} s] killed NATS kc-{leader}, leader of {STREAM}; 5 s later the leader: {then}", flush=True)


def tally_events(nodes: list[Node], keys: set[str]) -> dict:
    """Runs, redeliveries and stored outcomes per key, from every life of every node."""
    events = [e for node in nodes for e in node.events()]
    ours = {e["request_id"] for e in events if e.get("key") in keys}  # unstored events name no key
    started, firsts = Counter(), Counter()
    redelivered = unacked = unstored = 0
    for e in events:
        if e["event"] == "cluster_outcome_unstored":
            unstored += e.get("request_id") in ours
        elif e.get("key") not in keys:
            continue
        elif e["event"] == "cluster_request_started":
            started[e["key"]] += 1
            redelivered += e.get("delivered", 1) >= 2
        elif e["event"] == "cluster_request_executed":
            firsts[e["key"]] += bool(e.get("first_outcome"))
            unacked += not e.get("acknowledged", True)
    return {
        "duplicated": sum(1 for n in firsts.values() if n > 1),
        "redeliveries": redelivered,
        "rerun_keys": sum(1 for n in started.values() if n > 1),
        "extra_runs": sum(n - 1 for n in started.values() if n > 1),
        "keys_without_stored_event": len(keys - {k for k, n in firsts.items() if n}),
        "unacknowledged": unacked,
        "outcomes_unstored": unstored,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--kill-every", type=float, default=20, help="seconds between node kills")
    parser.add_argument("--leader-kill-at", type=float, help="seconds in; default 2.5 x --kill-every")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--big-every", type=int, default=10, help="every Nth request returns over 1 MiB (0: none)")
    parser.add_argument("--workers-per-node", type=int, default=8)
    parser.add_argument("--ack-wait", type=int, default=3, help="--cluster-ack-wait-seconds of the nodes")
    parser.add_argument("--timeout", type=float, default=120, help="timeout_seconds of each request")
    parser.add_argument("--max-attempts", type=int, default=10, help="the client's (docstring: why 10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="folder for logs and cluster_soak.json (default: a temp folder)")
    args = parser.parse_args()
    if args.leader_kill_at is None:
        args.leader_kill_at = 2.5 * args.kill_every
    out = out_folder(args.out, "kcoral-cluster-soak-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below

    requests = Requests(args)
    nats, nodes, killer = None, [], None
    try:
        nats = NatsServers(out)
        flags = ["--cluster", nats.flag, "--cluster-nats-monitor", nats.monitor_flag, "--cluster-heartbeat-seconds", "1",
                 "--cluster-ack-wait-seconds", str(args.ack_wait), "--num-workers", str(args.workers_per_node)]  # fmt: skip
        for k in range(args.nodes):
            nodes.append(Node(out / f"node{k}", flags, env={"KCORAL_CLUSTER_SECRET": SECRET}))
            nodes[-1].start()
        print(f"NATS and {args.nodes} nodes up; logs in {out}", flush=True)
        killer = Killer(nodes, nats, args)
        started = time.monotonic()
        killer.start()
        retries = send_all(requests, [n.url for n in nodes], args)
        wall = time.monotonic() - started
        killer.done.set()
        killer.join()
    finally:
        if killer is not None:
            killer.done.set()
            killer.join(60)
        for node in nodes:
            node.stop()  # SIGTERM: their event logs are written out whole
        if nats is not None:
            nats.stop()

    events = tally_events(nodes, {cluster_key(item[4]) for item in requests.plan})
    report = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "nodes": args.nodes,
        "workers_per_node": args.workers_per_node,
        "kills": len(killer.kills),
        "kill_roles": dict(Counter(k["role"] for k in killer.kills)),
        "leader_kills": len(killer.leader_kills),
        "answered": len(requests.latencies),
        "right": requests.right,
        "lost": len(requests.lost),
        "wrong": len(requests.wrong),
        **events,
        "client_retries": retries,
        "p50_s": percentile(requests.latencies, 50),
        "p99_s": percentile(requests.latencies, 99),
        "wall_s": wall,
        "leaked_processes": sum(n.leaked for n in nodes),
        "killer_error": killer.error,
        "kill_log": killer.kills,
        "leader_kill_log": killer.leader_kills,
        "lost_examples": dict(list(requests.lost.items())[:10]),
        "wrong_examples": dict(list(requests.wrong.items())[:10]),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    (out / "cluster_soak.json").write_text(json.dumps(report, indent=1))
    print_table(report)
    planned_leader_kill = args.leader_kill_at < wall
    failed = (
        report["lost"] or report["wrong"] or report["duplicated"] or not report["redeliveries"]
        or not report["kills"] or (planned_leader_kill and not report["leader_kills"]) or killer.error
    )  # fmt: skip
    return 1 if failed else 0


def print_table(r: dict) -> None:
    roles = ", ".join(f"{n} {role}" for role, n in r["kill_roles"].items())
    rows = [
        ("requests", r["requests"]),
        ("concurrency", r["concurrency"]),
        ("nodes x workers", f"{r['nodes']} x {r['workers_per_node']}"),
        ("kills (nodes)", f"{r['kills']} ({roles})"),
        ("leader kills", r["leader_kills"]),
        ("answered", r["answered"]),
        ("lost", r["lost"]),
        ("wrong", r["wrong"]),
        ("duplicated answers", r["duplicated"]),
        ("redeliveries", r["redeliveries"]),
        ("client retries", r["client_retries"]),
        ("re-runs (keys run again)", f"{r['rerun_keys']} keys, {r['extra_runs']} extra runs"),
        ("outcomes not stored", r["outcomes_unstored"]),
        ("p50 latency", f"{r['p50_s']:.2f} s"),
        ("p99 latency", f"{r['p99_s']:.2f} s"),
        ("wall time", f"{r['wall_s']:.1f} s"),
        ("leaked processes", r["leaked_processes"]),
    ]
    print()
    for name, value in rows:
        print(f"{name:>26} | {value}")
    for kill in r["kill_log"]:
        print(
            f"  kill at {kill['at_s']:>6} s: {kill['node']} (wanted {kill['wanted']}: {kill['role']}, "
            f"running {kill['running']}, entered {kill['entered']})"
        )
    for kill in r["leader_kill_log"]:
        print(f"  leader kill at {kill['at_s']} s: {kill['killed']}; 5 s later the leader: {kill['leader_after_5_s']}")
    for kind in ("lost", "wrong"):
        for i, why in r[f"{kind}_examples"].items():
            print(f"  {kind} {i}: {why}")
    if r["killer_error"]:
        print(f"  killer failed: {r['killer_error']}")


if __name__ == "__main__":
    sys.exit(main())
