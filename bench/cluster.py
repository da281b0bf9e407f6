"""What the cluster path costs (issue 26; docs/cluster.md "Routing work"), on a trivial program.

    python bench/cluster.py [--requests 300] [--warmup 30] [--workers 4] [--concurrency 16]
                            [--seconds 12] [--nodes 1,2,4] [--out DIR] [--nats-lazy-fsync]

Starts 3 NATS JetStream servers on loopback (R3, as in production; each with a monitoring
port; each syncs before it acknowledges, unless --nats-lazy-fsync), a plain node without --cluster ("direct") and cluster nodes with the same flags (CPU,
--num-workers --workers, workers reused: --max-requests-per-worker 0 on both, so the gap is
the cluster's; default heartbeat and ack wait).

1. Latency: --requests sequential requests to the direct node and to the entry node of a
   1-node cluster, each paired with the same request direct (load from elsewhere reaches both
   alike): p50, p99 and what the cluster adds (the difference, and the median of the paired
   differences); in three arms, interleaved one pair at a time so that drift and warm-up reach
   each alike: our client (a fresh Idempotency-Key on every request, which the cluster claims
   beside the work message), and the request posted raw as the reference client does, with a
   fresh key and without one (no claim). Then the node's own medians of its steps (its events:
   the queue step, keyed and keyless; the queue's transit; the claim check; the run; the
   outcome store; claims confirmed by a wake or read).
2. The broker's cost per cluster request, over a phase of --requests of our client's requests
   before the latency phase: CPU of the 3 nats-server processes (/proc utime+stime) and bytes
   (/varz in+out: clients and the routes that replicate; /connz: the nodes' own connections),
   less the background (heartbeats, idle pulls) measured idle just before.
3. Requests/s at --concurrency through the direct node and through 1, 2 and 4 cluster nodes
   (nodes added one phase to the next; each client thread starts at another node's URL),
   --seconds each, with the broker's CPU and bytes per request. On a machine of few cores this
   measures contention, not scale: the model in docs/cluster.md carries the scale.

Prints a table and writes DIR/cluster.json. Stops everything it started by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
from cluster_harness import (
    SECRET,
    Broker,
    NatsServers,
    Node,
    background_rates,
    out_folder,
    percentile,
    timed,
    trivial_program,
    wait_for_view,
)  # first: puts this checkout's kcoral on sys.path

from kcoral import Client


# The same program as the reference client sends it: multipart, no Idempotency-Key (spec/
# protocol.md). A request without a key needs no claim in the cluster (docs/cluster.md), so the
# two latency arms show what the claim costs.
BOUNDARY = "kcoral-bench-boundary"
KEYLESS_BODY = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="program"\r\n'
    "Content-Type: application/json\r\n\r\n"
    + json.dumps({"instructions": [
        {"op": "upload", "id": "m", "kind": "module", "source": "def main():\n    return 1\n"},
        {"op": "get_function", "id": "f", "module": {"$ref": "m"}, "name": "main"},
        {"op": "run", "id": "r", "fn": {"$ref": "f"}, "args": []},
        {"op": "return", "key": "out", "value": {"$ref": "r"}},
    ]})
    + f"\r\n--{BOUNDARY}--\r\n"
).encode()  # fmt: skip


def timed_raw(http: httpx.Client, url: str, keyed: bool) -> float:
    """The reference client's multipart request; `keyed` adds a fresh Idempotency-Key."""
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    if keyed:
        headers["Idempotency-Key"] = uuid.uuid4().hex
    start = time.perf_counter()
    response = http.post(url + "/execute", content=KEYLESS_BODY, headers=headers)
    elapsed = (time.perf_counter() - start) * 1e3
    assert response.status_code == 200 and response.json()["results"]["out"]["value"] == 1, response.text
    return elapsed


def steps(events: list[dict]) -> dict:
    """Medians of the node's own timings: the entry node's queue step (keyed: the claim and the
    publish side by side; keyless: the publish) and the executing node's outcome store."""

    def median_of(event: str, field: str, prefix: str = "") -> float | None:
        values = [e[field] for e in events if e["event"] == event and field in e and e["key"].startswith(prefix)]
        return statistics.median(values) if values else None

    return {
        "queue_keyed": median_of("cluster_request_queued", "ms", "k-"),
        "queue_keyless": median_of("cluster_request_queued", "ms", "r-"),
        "store": median_of("cluster_request_executed", "store_ms"),
        "run": median_of("cluster_request_executed", "run_ms"),
        "transit_keyed": median_of("cluster_request_started", "transit_ms", "k-"),
        "transit_keyless": median_of("cluster_request_started", "transit_ms", "r-"),
        "claim_check": median_of("cluster_request_started", "claim_ms", "k-"),
        "claim_reads": sum(1 for e in events if e.get("claim_read") is True),
        "claims_confirmed_by_wake": sum(1 for e in events if e.get("claim_read") is False),
    }


def latency(pairs: list[tuple[float, float]]) -> dict:
    direct_ms, cluster_ms = [d for d, _ in pairs], [c for _, c in pairs]
    return {
        "direct": {"p50": statistics.median(direct_ms), "p99": percentile(direct_ms, 99)},
        "cluster": {"p50": statistics.median(cluster_ms), "p99": percentile(cluster_ms, 99)},
        "paired_median_added": statistics.median(c - d for d, c in pairs),
    }


def throughput(urls: list[str], concurrency: int, seconds: float) -> int:
    """Requests completed in `seconds` by `concurrency` threads, thread k starting at URL k."""
    done = [0] * concurrency
    stop = threading.Event()

    def worker(k: int) -> None:
        rotated = urls[k % len(urls) :] + urls[: k % len(urls)]
        with Client(urls=rotated) as client:
            program = trivial_program()
            while not stop.is_set():
                result = client.execute(program, timeout_seconds=60)
                assert result.completed, result.error
                done[k] += 1

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="sequential requests to each side")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--workers", type=int, default=4, help="--num-workers of every node")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=12, help="length of each throughput phase")
    parser.add_argument("--nodes", default="1,2,4", help="cluster sizes for the throughput phases")
    parser.add_argument("--out", type=Path, help="folder for logs and cluster.json (default: a temp folder)")
    parser.add_argument(
        "--nats-lazy-fsync",
        action="store_true",
        help="brokers acknowledge before they sync (JetStream's default), to measure what sync_interval: always costs",
    )
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.nodes.split(","))
    out = out_folder(args.out, "kcoral-cluster-bench-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below

    common = ["--num-workers", str(args.workers), "--max-requests-per-worker", "0"]
    report: dict = {"cores": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}}
    nats, direct, nodes = None, None, []
    try:
        nats = NatsServers(out, lazy_fsync=args.nats_lazy_fsync)
        broker = Broker(nats)
        direct = Node(out / "direct", common)
        direct.start()

        def add_node() -> None:
            flags = ["--cluster", nats.flag, "--cluster-nats-monitor", nats.monitor_flag, *common]
            nodes.append(Node(out / f"node{len(nodes)}", flags, env={"KCORAL_CLUSTER_SECRET": SECRET}))
            nodes[-1].start()
            wait_for_view(nodes)

        add_node()
        program = trivial_program()
        with Client(direct.url) as to_direct, Client(nodes[0].url) as to_cluster, httpx.Client(timeout=60) as http:
            for _ in range(args.warmup):
                timed(to_direct, program)
                timed(to_cluster, program)
            background = background_rates(broker, 5)
            before = broker.sample()
            for _ in range(args.requests):  # our client's requests alone: what the broker does for them
                timed(to_cluster, program)
            after = broker.sample()
            arms = {"ours": [], "raw_keyed": [], "keyless": []}
            for _ in range(args.requests):  # all arms interleaved, so drift and warm-up reach each alike
                arms["ours"].append((timed(to_direct, program), timed(to_cluster, program)))
                for keyed, arm in ((True, "raw_keyed"), (False, "keyless")):
                    arms[arm].append((timed_raw(http, direct.url, keyed), timed_raw(http, nodes[0].url, keyed)))
        report["latency_ms"] = latency(arms["ours"])
        report["latency_ms_raw_keyed"] = latency(arms["raw_keyed"])
        report["latency_ms_keyless"] = latency(arms["keyless"])
        report["steps_ms"] = steps(nodes[0].events())
        report["background_per_s"] = background
        report["broker_per_request"] = Broker.per_request(before, after, args.requests, background)

        report["throughput"] = []
        rows = [("direct", [direct.url])] + [(f"{n} node" + "s" * (n > 1), n) for n in sizes]
        for name, target in rows:
            if isinstance(target, int):
                while len(nodes) < target:
                    add_node()
                urls = [n.url for n in nodes]
            else:
                urls = target
            throughput(urls, args.concurrency, 2)  # warm-up: every seat's worker started
            idle = background_rates(broker, 3)  # more nodes, more heartbeats and idle pulls
            before = broker.sample()
            count = throughput(urls, args.concurrency, args.seconds)
            after = broker.sample()
            cost = Broker.per_request(before, after, count, idle) if urls != [direct.url] else None
            rate = count / (after["t"] - before["t"])
            report["throughput"].append({"through": name, "requests_per_s": rate, "broker_per_request": cost})
            print(f"{name}: {rate:.1f} requests/s", flush=True)
    finally:
        for node in [*nodes, *([direct] if direct else [])]:
            node.stop()
        if nats is not None:
            nats.stop()
    (out / "cluster.json").write_text(json.dumps(report, indent=1))
    print_table(report, args)


def print_table(r: dict, args: argparse.Namespace) -> None:
    broker, bg = r["broker_per_request"], r["background_per_s"]
    print(
        f"\nKCoral cluster overhead: trivial program, CPU nodes of {args.workers} reused workers, "
        f"3 NATS servers (R3) on loopback, {r['cores']} cores"
    )
    for title, lat in (
        ("our client (an Idempotency-Key on every request: the cluster claims it)", r["latency_ms"]),
        ("the reference client's request with a fresh Idempotency-Key", r["latency_ms_raw_keyed"]),
        ("no Idempotency-Key, as the reference client sends (no claim)", r["latency_ms_keyless"]),
    ):
        print(f"\n{args.requests} sequential requests each, interleaved; {title}")
        print(f"{'':>22} | {'p50 ms':>8} | {'p99 ms':>8}")
        print("-" * 44)
        print(f"{'direct (no --cluster)':>22} | {lat['direct']['p50']:>8.2f} | {lat['direct']['p99']:>8.2f}")
        print(f"{'1-node cluster':>22} | {lat['cluster']['p50']:>8.2f} | {lat['cluster']['p99']:>8.2f}")
        added = lat["cluster"]["p50"] - lat["direct"]["p50"], lat["cluster"]["p99"] - lat["direct"]["p99"]
        print(f"{'added by the cluster':>22} | {added[0]:>8.2f} | {added[1]:>8.2f}")
        print(f"median of the paired differences: {lat['paired_median_added']:.2f} ms")
    st = r["steps_ms"]
    print(
        f"\nthe node's own steps, p50 ms: queue keyed (claim beside publish) {st['queue_keyed']:.3f}, "
        f"keyless (publish) {st['queue_keyless']:.3f}; outcome store {st['store']:.3f}; claims confirmed "
        f"by the wake {st['claims_confirmed_by_wake']}, read {st['claim_reads']}"
    )
    print(
        f"queue to the executing node's fetch, keyed {st['transit_keyed']:.3f}, keyless "
        f"{st['transit_keyless']:.3f}; its claim check {st['claim_check']:.3f}; the run {st['run']:.3f}"
    )
    print(
        f"\nbroker per request (3 servers, background removed): {broker['cpu_ms']:.2f} ms CPU, "
        f"{broker['bytes'] / 1e3:.1f} kB in+out (clients and routes), {broker['client_bytes'] / 1e3:.1f} kB "
        f"on the nodes' connections"
    )
    print(
        f"broker background (heartbeats, idle pulls) with 1 node: {bg['cpu_s'] * 1e3:.1f} ms CPU/s, "
        f"{bg['bytes'] / 1e3:.1f} kB/s"
    )
    print(f"\nthroughput at concurrency {args.concurrency}, {args.seconds:g} s each")
    print(f"{'through':>10} | {'requests/s':>10} | {'broker CPU ms/req':>17} | {'broker kB/req':>13}")
    print("-" * 60)
    for row in r["throughput"]:
        cost = row["broker_per_request"]
        cpu, kb = (f"{cost['cpu_ms']:.2f}", f"{cost['bytes'] / 1e3:.1f}") if cost else ("-", "-")
        print(f"{row['through']:>10} | {row['requests_per_s']:>10.1f} | {cpu:>17} | {kb:>13}")


if __name__ == "__main__":
    main()
