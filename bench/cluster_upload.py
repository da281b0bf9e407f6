"""What a large upload costs through a cluster (issue 26 item 4: "a large upload costs at most
the direct time, plus one node-to-node transfer, plus one hash pass"; docs/cluster.md).

    python bench/cluster_upload.py [--sizes 64,256] [--rounds 3] [--nats 3] [--out DIR]

Starts NATS JetStream on loopback (--nats servers, replicas as many), a node without --cluster
("direct") and a 2-node cluster (CPU nodes of one reused worker each, room for a 1 GiB
request). For each size and round, with fresh bytes every time (nothing cached anywhere):

- direct: our client sends a program with a float32 tensor of that size to the direct node
  and gets its answer (its length): wall time, as the user sees it, from a program built
  beforehand (its copy of the tensor's bytes is the client's own cost, the same on both sides,
  and on a busy host the second 256 MiB copy in a row was measured up to 0.7 s slower than the
  first: it fell on whichever side went second);
- cluster: the same program sent to the entry node, and kept only when it ran on the other
  node (its `cluster_blob_fetched` event says so; a run on the entry node is sent again with
  new bytes): the entry node receives the upload, the executing node fetches it from the
  entry node (streamed through SHA-256) and runs it;
- transfer: the same blob fetched from the entry node once more, by `curl` into /dev/null
  (GET /cluster/blobs/<sha256>, signed like a node's request): one node-to-node transfer;
- sha256: one SHA-256 pass over the bytes in this process (hashlib: OpenSSL, as the nodes).

Each cell is the median of --rounds rounds; the rounds go direct, cluster, transfer, hash in
turn (odd rounds direct first, even rounds cluster first), so load from elsewhere reaches them
alike. Prints a table (and the rounds on stderr),
writes DIR/cluster_upload.json, and stops everything it started by pid.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from cluster_harness import (
    SECRET,
    NatsServers,
    Node,
    out_folder,
    wait_for_view,
)  # first: puts this checkout's kcoral and the tests' NATS helpers on sys.path
from nats_cluster import peer_signature

from kcoral import Client, Program

MIB = 1 << 20
NODE_FLAGS = [
    "--num-workers", "1", "--max-requests-per-worker", "0",
    "--max-request-bytes", str(1 << 30), "--cache-capacity-bytes", str(2 << 30),
]  # fmt: skip
MAX_TRIES = 20  # per round, to get one run off the entry node


def length_program(tensor: np.ndarray) -> Program:
    program = Program()
    x = program.upload(id="x", kind="tensor", value=tensor)
    module = program.upload(id="m", kind="module", source="def main(x):\n    return int(x.shape[0])\n")
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[x]))
    return program


class Bytes:
    """A float32 tensor of `size` bytes whose first element changes at every next(): new bytes,
    a new hash, without writing the whole buffer again."""

    def __init__(self, size: int):
        self.tensor = np.random.default_rng(0).random(size // 4, dtype=np.float32)
        self.count = 0

    def next(self) -> np.ndarray:
        self.count += 1
        self.tensor[0] = float(self.count)
        return self.tensor


def timed_run(url: str, tensor: np.ndarray) -> tuple[float, str]:
    """Wall ms of one request through a fresh client, from its program built, and the request
    id."""
    program = length_program(tensor)
    start = time.perf_counter()
    with Client(url) as client:
        result = client.execute(program, timeout_seconds=300)
    elapsed = (time.perf_counter() - start) * 1e3
    assert result.completed and result.results["out"] == tensor.shape[0], result.error
    return elapsed, result.request_id


def fetched_event(node: Node, request_id: str) -> dict | None:
    for event in node.events():
        if event["event"] == "cluster_blob_fetched" and event.get("request_id") == request_id:
            return event
    return None


def curl_fetch_ms(url: str, sha: str) -> float:
    """One GET /cluster/blobs/<sha> from a node, signed as a node signs (cluster/peer_auth.cc),
    into /dev/null: the transfer alone."""
    target = f"/cluster/blobs/{sha}"
    run = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}",
         "-H", f"X-KCoral-Peer: {peer_signature('GET', target, SECRET)}", url + target],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    code, seconds = run.stdout.split()
    assert code == "200", run.stdout
    return float(seconds) * 1e3


def sha256_ms(tensor: np.ndarray) -> float:
    view = memoryview(tensor).cast("B")
    start = time.perf_counter()
    hashlib.sha256(view).hexdigest()
    return (time.perf_counter() - start) * 1e3


def one_round(size: int, data: Bytes, direct: Node, entry: Node, other: Node, direct_first: bool) -> dict:
    def through_cluster() -> tuple[float, int, str, dict]:
        for tries in range(1, MAX_TRIES + 1):
            tensor = data.next()
            cluster_ms, request_id = timed_run(entry.url, tensor)
            event = fetched_event(other, request_id)
            if event is not None:  # hashed now: the next data.next() changes the bytes
                return cluster_ms, tries, hashlib.sha256(memoryview(tensor).cast("B")).hexdigest(), event
        raise RuntimeError(f"no run of {MAX_TRIES} went to the other node")

    if direct_first:
        direct_ms, _ = timed_run(direct.url, data.next())
        cluster_ms, tries, sha, event = through_cluster()
    else:
        cluster_ms, tries, sha, event = through_cluster()
        direct_ms, _ = timed_run(direct.url, data.next())
    assert event["sha256"] == sha and event["bytes"] == size, event
    return {
        "direct_ms": direct_ms,
        "cluster_ms": cluster_ms,
        "tries": tries,
        "fetch_in_cluster_ms": event.get("ms"),
        "transfer_ms": curl_fetch_ms(entry.url, sha),
        "sha256_ms": sha256_ms(data.tensor),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,256", help="tensor sizes, MiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nats", type=int, default=3, help="NATS servers, routed (the buckets' replicas as many)")
    parser.add_argument("--out", type=Path, help="folder for logs and cluster_upload.json (default: a temp folder)")
    args = parser.parse_args()
    out = out_folder(args.out, "kcoral-cluster-upload-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below
    sizes = [int(s) * MIB for s in args.sizes.split(",")]

    report: dict = {"cores": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}, "sizes": []}
    nats, nodes = None, []
    try:
        nats = NatsServers(out, size=args.nats)
        cluster_flags = [
            "--cluster",
            nats.flag,
            "--cluster-nats-monitor",
            nats.monitor_flag,
            "--cluster-replicas",
            str(args.nats),
        ]
        direct = Node(out / "direct", NODE_FLAGS)
        entry = Node(out / "entry", [*cluster_flags, *NODE_FLAGS], env={"KCORAL_CLUSTER_SECRET": SECRET})
        other = Node(out / "other", [*cluster_flags, *NODE_FLAGS], env={"KCORAL_CLUSTER_SECRET": SECRET})
        for node in (direct, entry, other):
            nodes.append(node)
            node.start()
        wait_for_view([entry, other])
        warm = Bytes(MIB)
        timed_run(direct.url, warm.next())  # the workers' first requests: not timed
        timed_run(entry.url, warm.next())
        for size in sizes:
            data = Bytes(size)
            rounds = []
            for r in range(args.rounds):
                rounds.append(one_round(size, data, direct, entry, other, direct_first=r % 2 == 0))
                print(f"{size // MIB} MiB round {r + 1}: {json.dumps(rounds[-1])}", file=sys.stderr, flush=True)
            medians = {k: statistics.median(x[k] for x in rounds) for k in rounds[0] if k != "tries"}
            report["sizes"].append({"mib": size // MIB, "median": medians, "rounds": rounds})
    finally:
        for node in nodes:
            node.stop()
        if nats is not None:
            nats.stop()
    (out / "cluster_upload.json").write_text(json.dumps(report, indent=1))
    print_table(report, args)


def print_table(report: dict, args: argparse.Namespace) -> None:
    print(
        f"\nKCoral cluster upload cost: a float32 tensor uploaded, its length returned; CPU nodes of one "
        f"reused worker, {args.nats} NATS server(s) on loopback, {report['cores']} cores; "
        f"medians of {args.rounds} rounds, fresh bytes each time"
    )
    header = (
        "| MiB | direct ms | cluster ms (ran on the other node) | node-to-node transfer ms | sha256 ms "
        "| direct + transfer + sha256 ms | cluster ≤ that? | fetch in the cluster ms (transfer + hash + store) |"
    )
    print()
    print(header)
    print("|---" * 8 + "|")
    for row in report["sizes"]:
        m = row["median"]
        bound = m["direct_ms"] + m["transfer_ms"] + m["sha256_ms"]
        verdict = "yes" if m["cluster_ms"] <= bound else f"no (+{m['cluster_ms'] - bound:.0f} ms)"
        fetch = f"{m['fetch_in_cluster_ms']:.0f}" if m["fetch_in_cluster_ms"] is not None else "-"
        print(
            f"| {row['mib']} | {m['direct_ms']:.0f} | {m['cluster_ms']:.0f} | {m['transfer_ms']:.0f} "
            f"| {m['sha256_ms']:.0f} | {bound:.0f} | {verdict} | {fetch} |"
        )


if __name__ == "__main__":
    main()
