"""What a resting cluster costs its NATS servers, by node count (docs/cluster.md "A capacity model").

    python bench/cluster_background.py [--nodes 1,2,4,8] [--heartbeat 5] [--seconds 10] [--out DIR]

Each node beats into the kcoral_nodes bucket and keeps a view of every node's record; an idle
node also holds its last queue's ask open and sweeps the work stream. What grows with the
node count is what matters for 1,000 GPUs. Starts 3 NATS servers (R3, monitoring on), then
CPU nodes (one worker each, --cluster-heartbeat-seconds as given) up to each count in turn;
once every node sees every other and two heartbeats passed, measures for --seconds: the
broker's CPU ms per second, its bytes per second, its JetStream API requests per second, and
the JetStream consumers it holds (the bucket's and the work stream's).

Prints a table and writes DIR/cluster_background.json. Stops everything it started by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from cluster_harness import (
    SECRET,
    Broker,
    NatsServers,
    Node,
    nats_request,
    out_folder,
    wait_for_view,
)  # first: puts this checkout's kcoral on sys.path


def api_requests(nats: NatsServers) -> int:
    return sum(nats.varz(i)["jetstream"]["stats"]["api"]["total"] for i in range(len(nats.client_ports)))


def consumers(nats: NatsServers) -> int:
    total = 0
    for stream in ("KV_kcoral_nodes", "KCORAL_WORK"):
        reply = nats_request(nats.client_ports[0], f"$JS.API.CONSUMER.NAMES.{stream}") or {}
        total += len(reply.get("consumers") or [])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,2,4,8", help="node counts, measured in turn")
    parser.add_argument("--heartbeat", type=int, default=5, help="the nodes' --cluster-heartbeat-seconds")
    parser.add_argument("--seconds", type=float, default=10, help="length of each measurement")
    parser.add_argument("--out", type=Path, help="folder for logs and cluster_background.json (default: a temp folder)")
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.nodes.split(","))
    out = out_folder(args.out, "kcoral-cluster-background-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below
    report: dict = {"cores": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}, "rows": []}
    nats = None
    nodes: list[Node] = []
    try:
        nats = NatsServers(out)
        broker = Broker(nats)
        for count in counts:
            while len(nodes) < count:
                node = Node(
                    out / f"node{len(nodes)}",
                    [
                        "--cluster",
                        nats.flag,
                        "--cluster-nats-monitor",
                        nats.monitor_flag,
                        "--num-workers",
                        "1",
                        "--cluster-heartbeat-seconds",
                        str(args.heartbeat),
                    ],
                    env={"KCORAL_CLUSTER_SECRET": SECRET},
                )
                nodes.append(node)
                node.start()
            wait_for_view(nodes, timeout=60)
            time.sleep(2 * args.heartbeat)
            before, api_before = broker.sample(), api_requests(nats)
            time.sleep(args.seconds)
            after, api_after = broker.sample(), api_requests(nats)
            span = after["t"] - before["t"]
            row = {
                "nodes": count,
                "broker_cpu_ms_per_s": (after["cpu_s"] - before["cpu_s"]) * 1e3 / span,
                "broker_kb_per_s": (after["bytes"] - before["bytes"]) / 1e3 / span,
                "api_requests_per_s": (api_after - api_before) / span,
                "consumers": consumers(nats),
            }
            report["rows"].append(row)
            print(f"{count} nodes: {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        for node in nodes:
            node.stop()
        if nats is not None:
            nats.stop()
    (out / "cluster_background.json").write_text(json.dumps(report, indent=1))
    print(
        f"\nKCoral cluster at rest: 3 NATS servers (R3) on loopback, {report['cores']} cores; "
        f"heartbeat {args.heartbeat} s, {args.seconds:.0f} s per row\n"
    )
    print("| nodes | broker CPU ms/s | per node | broker kB/s | JetStream API requests/s | consumers |")
    print("|---|---|---|---|---|---|")
    for r in report["rows"]:
        print(
            f"| {r['nodes']} | {r['broker_cpu_ms_per_s']:.1f} | {r['broker_cpu_ms_per_s'] / r['nodes']:.1f} "
            f"| {r['broker_kb_per_s']:.1f} | {r['api_requests_per_s']:.1f} | {r['consumers']} |"
        )


if __name__ == "__main__":
    main()
