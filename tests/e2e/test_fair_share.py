"""Issue 27, fair share of seats (src/pool/fair_share.h, admission_queue.h): on a server with one
seat, and through a cluster of two one-seat nodes (JetStream consumers per tenant, pulled in fair
order: src/cluster/work_queue.h), a tenant that keeps 200 requests queued does not make another tenant wait behind them: B's
p50 wait is at most its wait alone plus one hold of the seat by A (the seat's time per request
under the flood, its worker's fork and hand-over included). With weights 3:1 and both
tenants saturating, A gets 75% +- 5% of the seat time. GPU leases use the same FairShare
(tests/unit/pool/gpu_arbiter_test.cc; on the H200, tests/gpu)."""

import asyncio
import json
import random
import statistics
import time

import httpx
import pytest

from conftest import Server, wait_for
from wire import BOUNDARY, body_of, module_program, program_part

from kcoral.keys import key_line, new_key

# Waits beside a flood against waits alone, shares of a seat, 0.6 s per request, 5 s remakes of a
# consumer: alone on the machine (`make e2e` runs these after the rest).
pytestmark = pytest.mark.serial


def sleeping(seconds: float) -> bytes:
    program = module_program("import time\ndef main(s):\n    time.sleep(s)\n    return s\n", args=[seconds])
    return body_of([program_part(program)])


def headers(key: str) -> dict:
    return {"Authorization": f"Bearer {key}", "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


async def post(client: httpx.AsyncClient, url: str, key: str, body: bytes) -> dict:
    response = await client.post(url + "/execute", content=body, headers=headers(key), timeout=120)
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert outcome["status"] == "COMPLETED", outcome
    return outcome


async def saturate(url: str, key: str, width: int, stop: asyncio.Event, outcomes: list):
    """`width` requests of this tenant always in flight until `stop`."""
    limits = httpx.Limits(max_connections=width + 4, max_keepalive_connections=width + 4)
    async with httpx.AsyncClient(limits=limits) as client:

        async def loop():
            while not stop.is_set():
                try:
                    outcomes.append(await post(client, url, key, sleeping(0.05)))
                except (httpx.HTTPError, asyncio.CancelledError):
                    return

        tasks = [asyncio.create_task(loop()) for _ in range(width)]
        await stop.wait()
        for task in tasks:
            task.cancel()  # hangs up: the server skips what still waits
        await asyncio.gather(*tasks, return_exceptions=True)


def write_keys(tmp_path, limits: list[str]):
    keys = {"a": new_key(), "b": new_key(), "ops": new_key()}
    lines = [key_line(t, k, "operator" if t == "ops" else "tenant") for t, k in keys.items()]
    (tmp_path / "keys.txt").write_text("\n".join(lines + limits) + "\n")
    return tmp_path / "keys.txt", keys


def server_with(tmp_path, limits: list[str]):
    path, keys = write_keys(tmp_path, limits)
    return Server(tmp_path, "--auth-keys", str(path), "--num-workers", "1"), keys


def flood_against_twenty(entry_a: str, entry_b: str, keys: dict, seats: int):
    """B's 20 waits alone, then beside A's flood of 200, and one hold of a seat under the flood."""

    async def b_sends_20(client) -> list[float]:
        """One at a time, a random pause apart: B's arrivals are not in step with A's holds.
        The wait is the latency less the run's own time on its seat."""
        waits = []
        for _ in range(20):
            await asyncio.sleep(random.uniform(0, 0.1))
            started = time.monotonic()
            outcome = await post(client, entry_b, keys["b"], sleeping(0.05))
            waits.append((time.monotonic() - started) * 1000 - outcome["elapsed_ms"])
        return waits

    async def scenario():
        async with httpx.AsyncClient() as client:
            alone = await b_sends_20(client)
            stop, flood = asyncio.Event(), []
            flooding = asyncio.create_task(saturate(entry_a, keys["a"], 200, stop, flood))
            deadline = time.monotonic() + 60
            while len(flood) < 5 and time.monotonic() < deadline:  # the flood's queue is full
                await asyncio.sleep(0.1)
            started, served_before = time.monotonic(), len(flood)
            crowded = await b_sends_20(client)
            # The seats are never idle meanwhile: a seat's hold per request, fork and hand-over
            # included.
            hold = seats * (time.monotonic() - started) * 1000 / (len(flood) - served_before + len(crowded))
            stop.set()
            await flooding
            return alone, crowded, flood, hold

    return asyncio.run(scenario())


def test_a_flood_of_200_queued_does_not_make_another_tenant_wait_behind_it(tmp_path):
    server, keys = server_with(tmp_path, [])
    try:
        alone, crowded, flood, hold = flood_against_twenty(server.url, server.url, keys, seats=1)
        print(f"B alone p50 wait {statistics.median(alone):.1f} ms; beside A's 200: "
              f"{statistics.median(crowded):.1f} ms; the seat's hold per request {hold:.1f} ms; A ran {len(flood)}")  # fmt: skip
        assert len(flood) >= 5
        assert statistics.median(crowded) <= statistics.median(alone) + hold
    finally:
        server.stop()


def test_weights_three_to_one_share_the_seat_three_quarters_to_one_quarter(tmp_path):
    server, keys = server_with(tmp_path, ["limits a weight=3"])

    def used():
        tenants = httpx.get(server.url + "/usage", headers={"Authorization": f"Bearer {keys['ops']}"}, timeout=10)
        return {u["tenant"]: u["cpu_seconds_total"] for u in tenants.json()["tenants"]}

    async def scenario():
        stop, outcomes = asyncio.Event(), {"a": [], "b": []}
        runs = [asyncio.create_task(saturate(server.url, keys[t], 8, stop, outcomes[t])) for t in ("a", "b")]
        await asyncio.sleep(2)  # both queues full
        before = await asyncio.to_thread(used)
        await asyncio.sleep(8)
        after = await asyncio.to_thread(used)
        stop.set()
        await asyncio.gather(*runs)
        return before, after

    try:
        before, after = asyncio.run(scenario())
        a, b = after["a"] - before["a"], after["b"] - before["b"]
        print(f"seat seconds over 8 s: a (weight 3) {a:.2f}, b (weight 1) {b:.2f}, a's share {a / (a + b):.3f}")
        assert a / (a + b) == pytest.approx(0.75, abs=0.05)
    finally:
        server.stop()


def test_through_a_cluster_a_flood_does_not_make_another_tenant_wait_behind_it(tmp_path_factory):
    """Two one-seat nodes on a real 3-server JetStream cluster, one keys file: A floods through
    one node, B sends through the other; B's requests are pulled before A's queue."""
    from nats_cluster import NatsCluster
    from test_cluster_routing import SECRET, wait_for_view

    nats = NatsCluster(tmp_path_factory.mktemp("nats-fair"))
    nodes = []
    try:
        path, keys = write_keys(tmp_path_factory.mktemp("fair-keys"), [])
        nodes = [
            Server(tmp_path_factory.mktemp("node"), "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
                   "--num-workers", "1", "--auth-keys", str(path), env=SECRET)
            for _ in range(2)
        ]  # fmt: skip
        wait_for_view(nodes)
        alone, crowded, flood, hold = flood_against_twenty(nodes[0].url, nodes[1].url, keys, seats=2)
        print(f"cluster: B alone p50 wait {statistics.median(alone):.1f} ms; beside A's 200: "
              f"{statistics.median(crowded):.1f} ms; a seat's hold per request {hold:.1f} ms; A ran {len(flood)}")  # fmt: skip
        assert len(flood) >= 5
        assert statistics.median(crowded) <= statistics.median(alone) + hold
    finally:
        for node in nodes:
            node.stop()
        nats.stop()


def test_through_a_cluster_idle_tenants_queues_neither_hold_nor_cost_another_tenants_requests(tmp_path_factory):
    """A node asks the tenants' queues in fair order, the tenant furthest behind first. Six
    tenants have run a request and gone idle, so their (empty) queues come first; B then sends
    requests one by one.
    - Each of B's requests starts as soon as it is queued: an ask that waited for a message
      would hold each for its whole expiry, once a second.
    - The idle tenants' queues are not asked before each of B's requests: each ask is a
      JetStream request (about 1 ms of the broker's CPU here) and holds a free seat up to 2 ms,
      so with many tenants asking every queue per request costs more than the request. The node
      asks a queue when woken for its tenant, or when its sweep finds the tenant's requests in
      the stream. (Only the last idle tenant's queue is held open a while for its next request.)
      The asks are counted on the wire, as the NATS servers see them: 120 before, for B's 20
      requests."""
    from nats_cluster import NatsCluster, NatsWire
    from test_cluster_routing import SECRET, wait_for_view

    nats = NatsCluster(tmp_path_factory.mktemp("nats-idle"))
    node = wire = None
    try:
        idle = [f"idle{i}" for i in range(6)]
        keys = {tenant: new_key() for tenant in idle + ["b"]}
        path = tmp_path_factory.mktemp("idle-keys") / "keys.txt"
        path.write_text("".join(key_line(tenant, key, "tenant") + "\n" for tenant, key in keys.items()))
        node = Server(tmp_path_factory.mktemp("node"), "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
                      "--num-workers", "1", "--auth-keys", str(path), env=SECRET)  # fmt: skip
        wait_for_view([node])
        wire = NatsWire(nats.client_ports[0])
        wire.listen("$JS.API.CONSUMER.MSG.NEXT.KCORAL_WORK.>")  # each ask of a queue

        async def run():
            async with httpx.AsyncClient() as client:
                for tenant in idle:
                    await post(client, node.url, keys[tenant], sleeping(0))
                asked_before = len(wire.messages)
                started = time.monotonic()
                took = []
                for _ in range(20):
                    start = time.monotonic()
                    await post(client, node.url, keys["b"], sleeping(0.01))
                    took.append(time.monotonic() - start)
                return took, time.monotonic() - started, wire.messages[asked_before:]

        took, seconds, asks = asyncio.run(run())
        idle_asks = [subject for subject, _ in asks if subject.rsplit("--", 1)[-1] in idle]
        print(f"B's requests took {statistics.median(took) * 1e3:.0f} ms (median), {max(took[1:]) * 1e3:.0f} ms "
              f"(max); in {seconds:.2f} s the node asked the idle tenants' queues {len(idle_asks)} times, "
              f"B's {sum(1 for s, _ in asks if s.endswith('--b'))} times")  # fmt: skip
        assert max(took[1:]) < 0.6, took
        assert len(idle_asks) <= len(idle), idle_asks
    finally:
        if wire is not None:
            wire.close()
        if node is not None:
            node.stop()
        nats.stop()


def test_through_a_cluster_an_idle_tenants_consumer_is_given_back_and_made_again(tmp_path_factory):
    """Each tenant's queue is a JetStream consumer, a Raft group that costs the NATS servers CPU
    while it lives (docs/cluster.md "Fair share"). One that no node used for
    --cluster-idle-tenant-seconds is deleted by JetStream, and made again for its tenant's next
    request; one whose request runs longer than that is kept by the run's "in progress". The
    nodes hear JetStream's advisory when a consumer is deleted (idle, or by hand), and make it
    again at its next use."""
    from nats_cluster import NatsCluster, NatsWire
    from test_cluster_routing import SECRET, wait_for_view

    nats = NatsCluster(tmp_path_factory.mktemp("nats-idle-consumer"))
    nodes = []
    wire = None
    try:
        path, keys = write_keys(tmp_path_factory.mktemp("idle-consumer-keys"), [])
        flags = ("--cluster", nats.flag, "--cluster-heartbeat-seconds", "1", "--num-workers", "1",
                 "--auth-keys", str(path), "--cluster-ack-wait-seconds", "3", "--cluster-idle-tenant-seconds", "16")  # fmt: skip
        nodes = [
            Server(tmp_path_factory.mktemp("node"), *flags, *more, env=SECRET)
            for more in (("--cluster-entry-only",), ())
        ]
        entry = nodes[0].url
        wait_for_view(nodes)
        wire = NatsWire(nats.client_ports[0])

        def consumers() -> dict[str, str]:
            """The work queue's consumers by tenant (each named pool-<pool>--<tenant>)."""
            names = json.loads(wire.request("$JS.API.CONSUMER.NAMES.KCORAL_WORK"))["consumers"] or []
            return {name.rsplit("--", 1)[-1]: name for name in names}

        def send(tenant: str, seconds: float = 0) -> float:
            began = time.monotonic()
            answer = httpx.post(
                entry + "/execute", content=sleeping(seconds), headers=headers(keys[tenant]), timeout=60
            )
            assert answer.status_code == 200 and answer.json()["status"] == "COMPLETED", answer.text
            return time.monotonic() - began

        send("a")
        send("b")  # the node's last queue to give a request: held open, so kept
        assert consumers().keys() == {"a", "b"}

        # Deleted by hand while both nodes had just used it (so take it for alive): they hear
        # JetStream's advisory, and the entry node makes it again before it queues.
        assert b'"success":true' in wire.request(f"$JS.API.CONSUMER.DELETE.KCORAL_WORK.{consumers()['a']}")
        wait_for(lambda: consumers().keys() == {"b"}, 5, "the deletion")
        assert send("a") < 5
        send("b")
        assert consumers().keys() == {"a", "b"}

        wait_for(lambda: consumers().keys() == {"b"}, 40, "a's idle consumer to be deleted", every=0.5)
        assert send("a") < 5
        assert consumers().keys() == {"a", "b"}

        # A run longer than the threshold: its "in progress" keeps the consumer, and it runs once.
        send("a", 18)

        def runs():  # each event follows its stored outcome: the answer may come first
            return [e for e in nodes[1].events() if e["event"] == "cluster_request_executed"]

        wait_for(lambda: len(runs()) >= 6, 5, "the last run's event")
        assert [(e["delivered"], e["acknowledged"]) for e in runs()] == [(1, True)] * 6, runs()
    finally:
        if wire is not None:
            wire.close()
        for node in nodes:
            node.stop()
        nats.stop()
