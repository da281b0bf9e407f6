"""Do the work-arounds KCoral wrote for NATS 2.9.10 still hold on the nats-server in use?
(issue 44: "re-check on the new version, and drop those no longer needed"). Three brokers, a
throw-away R3 stream (as the cluster's), three questions, a table:

1. A consumer deleted and made again at once (src/cluster/work_queue.h kRemakeAfter): NATS 2.9
   went on cleaning up the deleted one for about a second and took the namesake with it. How
   many of those remade 0, 0.2, 0.5, 1 and 2 s after the deletion still exist 3 s later?
2. A pull request with no_wait and an expiry on an empty queue (WorkQueue::TryFetch): does the
   server hold it open until the expiry (what the fair-share hold relies on), or answer at once?
3. RePublish added to an existing stream (NatsLink::Republishes): refused on 2.9.

    python3 bench/nats_workarounds.py                      # the nats-server the tests use
    KCORAL_NATS_SERVER=/usr/sbin/nats-server python3 bench/nats_workarounds.py   # another
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kcoral.tools.nats_brokers import OLDEST_VERSION, NatsBrokers, nats_server_binary, nats_server_version
from kcoral.tools.nats_wire import NatsWire


def consumer_config(name: str) -> dict:
    # A work-queue stream's consumers may not share a filter: each its own subject.
    return {
        "stream_name": "W",
        "config": {"durable_name": name, "ack_policy": "explicit", "filter_subject": f"w.{name}"},
    }


def remade_survivors(wire: NatsWire, delay: float, tries: int, idle: bool) -> int:
    """Of `tries` consumers deleted (by hand, or by JetStream once idle 1 s), those made again
    `delay` s after that still alive 3 s later."""
    survived = 0
    for k in range(tries):
        name = f"c{int(delay * 1000)}{'i' if idle else 'x'}{k}"
        config = consumer_config(name)
        if idle:
            config["config"]["inactive_threshold"] = 1_000_000_000
            wire.api(f"CONSUMER.CREATE.W.{name}", config)
            while "error" not in wire.api(f"CONSUMER.INFO.W.{name}"):
                time.sleep(0.05)
            config = consumer_config(name)  # made again without the threshold
        else:
            wire.api(f"CONSUMER.CREATE.W.{name}", config)
            wire.api(f"CONSUMER.DELETE.W.{name}")
        time.sleep(delay)
        try:
            wire.api(f"CONSUMER.CREATE.W.{name}", config)
            time.sleep(3)
            survived += "error" not in wire.api(f"CONSUMER.INFO.W.{name}")
            wire.api(f"CONSUMER.DELETE.W.{name}")
        except TimeoutError:  # 2.9 may not answer about a consumer it is still cleaning up
            pass
    return survived


def empty_fetch_ms(wire: NatsWire, expires_ms: int, tries: int) -> tuple[float, str]:
    wire.api("CONSUMER.CREATE.W.fetch", consumer_config("fetch"))
    took, statuses = [], set()
    for _ in range(tries):
        started = time.monotonic()
        wire.api("CONSUMER.MSG.NEXT.W.fetch", {"batch": 1, "no_wait": True, "expires": expires_ms * 1_000_000})
        status = wire.last_status
        took.append((time.monotonic() - started) * 1e3)
        statuses.add(status)
    return statistics.median(took), ", ".join(sorted(statuses))


def make_stream(wire: NatsWire, config: dict) -> None:
    """Created, and led: a Raft group answers nothing before it has elected a leader."""
    wire.api(f"STREAM.CREATE.{config['name']}", config)
    deadline = time.monotonic() + 20
    while not (wire.api(f"STREAM.INFO.{config['name']}").get("cluster") or {}).get("leader"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"stream {config['name']} elected no leader")
        time.sleep(0.1)


def republish_added(wire: NatsWire) -> str:
    config = {"name": "R", "subjects": ["r.>"], "storage": "file", "num_replicas": 3}
    make_stream(wire, config)
    answer = wire.api("STREAM.UPDATE.R", {**config, "republish": {"src": "r.>", "dest": "again.>"}})
    return "yes" if "error" not in answer else "refused: " + answer["error"].get("description", "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=5, help="consumers remade per delay (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        # 2.9 has no sync_interval: its default, for comparing.
        old = nats_server_version(nats_server_binary(), refuse_older=False) < OLDEST_VERSION
        brokers = NatsBrokers(Path(folder), size=3, lazy_fsync=old, refuse_older=False)
        try:
            wire = NatsWire(brokers.client_ports[0])
            make_stream(
                wire, {"name": "W", "subjects": ["w.>"], "retention": "workqueue", "storage": "file", "num_replicas": 3}
            )
            version = ".".join(map(str, brokers.version))
            sync = "JetStream's default sync" if old else "sync_interval: always"
            print(f"nats-server {version} ({brokers.binary}), three brokers, {sync}\n")
            print(f"{'question':<58} {'answer':>22}")
            for idle in (False, True):
                for delay in (0, 0.2, 0.5, 1, 2):
                    survived = remade_survivors(wire, delay, args.tries, idle)
                    question = f"consumer {'idle' if idle else 'deleted'}, remade {delay} s after, alive 3 s on"
                    print(f"{question:<58} {f'{survived} of {args.tries}':>22}")
            for expires in (20, 200):
                median, statuses = empty_fetch_ms(wire, expires, 10)
                print(
                    f"{f'empty no-wait fetch, expires {expires} ms: answered after':<58} {f'{median:.1f} ms ({statuses})':>22}"
                )
            print(f"{'RePublish added to an existing stream':<58} {republish_added(wire):>22}")
        finally:
            brokers.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
