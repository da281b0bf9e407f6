"""What idle tenants cost a cluster (docs/cluster.md "Fair share" and "A capacity model").

    python bench/cluster_tenants.py [--tenants 0,8,32] [--requests 200] [--seconds 5]
                                    [--idle-tenant-seconds N] [--out DIR]

A node asks a tenant's queue for work (one JetStream pull request) when woken for that tenant,
and every queue at a sweep (every 500 ms, and when idle). This measures what that costs as
tenants accumulate: starts 3 NATS servers (R3, monitoring on) and one CPU node (one reused
worker) with a keys file of the largest count of idle tenants plus one busy tenant. For each
count, in turn, that many tenants have each run one request (the node has bound their
queues) and gone idle; then:

- idle: nothing for --seconds: the node's asks per second (its pull requests, overheard on
  $JS.API.CONSUMER.MSG.NEXT.KCORAL_WORK.>) and the broker's CPU ms per second;
- busy: the busy tenant sends --requests trivial requests one at a time: latency p50 and p99,
  asks per request (of every queue, and of the idle tenants' queues alone) and the broker's CPU
  ms per request, less the idle rate.

With --idle-tenant-seconds N (the node's --cluster-idle-tenant-seconds, its ack wait N/2), a
last row: the idle phase again once the idle tenants' consumers were given back (JetStream
deletes a consumer no node used for N seconds). Each row counts the work queue's consumers.

Prints a table and writes DIR/cluster_tenants.json. Stops everything it started by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

from cluster_harness import (
    SECRET,
    Broker,
    NatsServers,
    NatsWire,
    Node,
    background_rates,
    nats_request,
    out_folder,
    percentile,
    timed,
    trivial_program,
    wait_for_view,
)  # first: puts this checkout's kcoral on sys.path

from kcoral import Client
from kcoral.keys import key_line, new_key

ASKS = "$JS.API.CONSUMER.MSG.NEXT.KCORAL_WORK.>"  # a pull request names its consumer last


def tenant_of_ask(subject: str) -> str:
    return subject.rsplit("--", 1)[-1]  # the consumer pool-<pool>--<tenant>


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="0,8,32", help="counts of idle tenants, measured in turn")
    parser.add_argument("--requests", type=int, default=200, help="the busy tenant's sequential requests")
    parser.add_argument("--seconds", type=float, default=5, help="length of the idle phase")
    parser.add_argument("--idle-tenant-seconds", type=int, help="the node's idle threshold; adds a row once it passed")
    parser.add_argument("--out", type=Path, help="folder for logs and cluster_tenants.json (default: a temp folder)")
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.tenants.split(","))
    out = out_folder(args.out, "kcoral-cluster-tenants-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below

    keys = {f"idle{i}": new_key() for i in range(counts[-1])} | {"busy": new_key()}
    keys_file = out / "keys.txt"
    keys_file.write_text("".join(key_line(tenant, key) + "\n" for tenant, key in keys.items()))
    report: dict = {"cores": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}, "rows": []}
    idle_flags = []
    if args.idle_tenant_seconds:
        idle_flags = ["--cluster-idle-tenant-seconds", str(args.idle_tenant_seconds),
                      "--cluster-ack-wait-seconds", str(min(30, args.idle_tenant_seconds // 2))]  # fmt: skip
    nats = node = wire = busy = None
    try:
        nats = NatsServers(out)
        broker = Broker(nats)
        node = Node(
            out / "node",
            ["--cluster", nats.flag, "--cluster-nats-monitor", nats.monitor_flag, "--num-workers", "1", "--max-requests-per-worker", "0",
             "--auth-keys", str(keys_file), *idle_flags],
            env={"KCORAL_CLUSTER_SECRET": SECRET},
        )  # fmt: skip
        node.start()
        wait_for_view([node])
        wire = NatsWire(nats.client_ports[0])
        wire.listen(ASKS)
        program = trivial_program()
        busy = Client(node.url, api_key=keys["busy"])
        for _ in range(10):  # warm-up: the worker, the busy tenant's queue
            timed(busy, program)

        def consumers() -> int:
            reply = nats_request(nats.client_ports[0], "$JS.API.CONSUMER.NAMES.KCORAL_WORK") or {}
            return len(reply.get("consumers") or [])

        idle_now = 0
        phases = [(count, False) for count in counts]
        if args.idle_tenant_seconds:
            phases.append((counts[-1], True))
        for count, given_back in phases:
            while idle_now < count:
                with Client(node.url, api_key=keys[f"idle{idle_now}"]) as client:
                    timed(client, program)
                idle_now += 1
            time.sleep(1)  # past the last request's held ask
            if given_back:  # only the busy tenant's queue, asked by its requests, stays
                deadline = time.monotonic() + 3 * args.idle_tenant_seconds + 10
                while consumers() > 1 and time.monotonic() < deadline:
                    time.sleep(1)
            heard = len(wire.messages)
            idle_rate = background_rates(broker, args.seconds)
            idle_asks = (len(wire.messages) - heard) / args.seconds
            heard = len(wire.messages)
            before = broker.sample()
            took = [timed(busy, program) for _ in range(args.requests)]
            after = broker.sample()
            asks = [subject for subject, _ in wire.messages[heard:]]
            row = {
                "idle_tenants": count,
                "consumers_given_back": given_back,
                "consumers": consumers(),
                "idle_asks_per_s": idle_asks,
                "idle_broker_cpu_ms_per_s": idle_rate["cpu_s"] * 1e3,
                "p50_ms": statistics.median(took),
                "p99_ms": percentile(took, 99),
                "asks_per_request": len(asks) / args.requests,
                "idle_queue_asks_per_request": sum(tenant_of_ask(s) != "busy" for s in asks) / args.requests,
                "broker_cpu_ms_per_request": Broker.per_request(before, after, args.requests, idle_rate)["cpu_ms"],
            }
            report["rows"].append(row)
            print(f"{count} idle tenants: {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        if busy is not None:
            busy.close()
        if wire is not None:
            wire.close()
        if node is not None:
            node.stop()
        if nats is not None:
            nats.stop()
    (out / "cluster_tenants.json").write_text(json.dumps(report, indent=1))
    print(
        f"\nKCoral cluster: what idle tenants cost; one CPU node, 3 NATS servers (R3) on loopback, "
        f"{report['cores']} cores; {args.requests} sequential requests of the busy tenant\n"
    )
    print("| idle tenants | consumers | idle: asks/s | idle: broker CPU ms/s | p50 ms | p99 ms | asks/request "
          "| of them, idle queues | broker CPU ms/request |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in report["rows"]:
        idle = f"{r['idle_tenants']}{', consumers given back' if r['consumers_given_back'] else ''}"
        print(
            f"| {idle} | {r['consumers']} | {r['idle_asks_per_s']:.1f} | {r['idle_broker_cpu_ms_per_s']:.1f} "
            f"| {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['asks_per_request']:.2f} "
            f"| {r['idle_queue_asks_per_request']:.2f} | {r['broker_cpu_ms_per_request']:.2f} |"
        )


if __name__ == "__main__":
    main()
