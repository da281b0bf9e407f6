"""Issue 27, quotas (src/server/tenancy/tenant_quotas.h, tenant_limits.h): `limits` lines in the
--auth-keys file bound each tenant's requests in flight and queued (429 quota, Retry-After),
its CPU and GPU seconds per window (429 with the seconds until the window ends), its largest
request (413) and its gpu_count (403), neither with Retry-After. GET /usage gives a tenant its
own usage, an operator everyone's; /metrics counts per tenant by name, never by key; every event
line of a request names its tenant; SIGHUP answers a revoked key's waiting requests 401 while its
running one finishes."""

import asyncio
import os
import signal
import threading
import time

import httpx
import pytest

from conftest import Server, wait_for
from wire import assert_error, execute, module_program

from kcoral.keys import key_line, new_key


def sleeping(seconds: float) -> dict:
    return module_program("import time\ndef main(s):\n    time.sleep(s)\n    return s\n", args=[seconds])


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def write_keys(path, keys: dict, limits: list[str]):
    lines = [key_line(tenant, key, "operator" if tenant == "ops" else "tenant") for tenant, key in keys.items()]
    path.write_text("\n".join(lines + limits) + "\n")


@pytest.fixture(scope="module")
def quota_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quotas")
    keys = {t: new_key() for t in ("inflight", "cpu", "small", "gpus", "ops", "free")}
    path = tmp / "keys.txt"
    write_keys(path, keys, [
        "limits inflight in_flight=1",
        "limits cpu cpu_seconds=0.3",
        "limits small max_request_bytes=2K",
        "limits gpus gpu_count=0",
    ])  # fmt: skip
    server = Server(tmp, "--auth-keys", str(path), "--num-workers", "2", "--quota-window-seconds", "6")
    yield server, keys
    server.stop()


def test_in_flight_is_429_quota_with_retry_after_and_frees(quota_server):
    server, keys = quota_server
    box = {}
    running = threading.Thread(
        target=lambda: box.update(r=execute(server.url, sleeping(1.5), headers=bearer(keys["inflight"])))
    )
    running.start()
    wait_for(lambda: any(e["event"] == "request_accepted" and e.get("tenant") == "inflight" for e in server.events()),
             10, "the first request to be admitted")  # fmt: skip
    refused = execute(server.url, sleeping(0), headers=bearer(keys["inflight"]))
    message = assert_error(refused, 429, "quota")
    assert "in_flight=1" in message and "tenant 'inflight'" in message
    assert refused.headers["retry-after"] == "1"
    assert keys["inflight"] not in message
    other = execute(server.url, sleeping(0), headers=bearer(keys["free"]))  # someone else's limit
    assert other.status_code == 200 and other.json()["status"] == "COMPLETED"
    running.join()
    assert box["r"].json()["status"] == "COMPLETED"
    again = execute(server.url, sleeping(0), headers=bearer(keys["inflight"]))
    assert again.status_code == 200, again.text


def test_spent_cpu_seconds_are_429_until_the_window_ends(quota_server):
    server, keys = quota_server
    # Windows are fixed (epoch-aligned): start at the beginning of one, so that a loaded machine's
    # slow first request does not spend its seconds in a window that ends before the second asks.
    time.sleep(6 - time.time() % 6 + 0.1)
    first = execute(server.url, sleeping(0.5), headers=bearer(keys["cpu"]))  # overdraws: never killed
    assert first.json()["status"] == "COMPLETED"
    refused = execute(server.url, sleeping(0), headers=bearer(keys["cpu"]))
    message = assert_error(refused, 429, "quota")
    assert "cpu_seconds=0.3 per 6 s window is spent" in message
    wait = int(refused.headers["retry-after"])
    assert 1 <= wait <= 6 and f"frees in {wait} s" in message
    usage = httpx.get(server.url + "/usage", headers=bearer(keys["cpu"]), timeout=10).json()["usage"]
    assert usage["tenant"] == "cpu" and usage["cpu_seconds"]["limit"] == 0.3
    assert usage["cpu_seconds"]["used"] >= 0.5 and usage["cpu_seconds"]["remaining"] == 0
    assert usage["refused"] == {"cpu_seconds": 1}
    time.sleep(wait + 0.2)
    assert execute(server.url, sleeping(0), headers=bearer(keys["cpu"])).status_code == 200


def test_limits_that_never_free_have_no_retry_after(quota_server):
    server, keys = quota_server
    big = execute(server.url, module_program("def main(s):\n    return len(s)\n", args=["x" * 4096]),
                  headers=bearer(keys["small"]))  # fmt: skip
    message = assert_error(big, 413, "request_too_large")
    assert "tenant 'small' limit max_request_bytes 2048" in message and "retry-after" not in big.headers
    program = {**sleeping(0), "options": {"gpu_count": 1}}
    gpus = execute(server.url, program, headers=bearer(keys["gpus"]))
    message = assert_error(gpus, 403, "forbidden")
    assert "options.gpu_count: tenant 'gpus' may reserve at most 0 GPUs" in message
    assert "retry-after" not in gpus.headers


def test_usage_is_a_tenants_own_and_an_operators_everyones(quota_server):
    server, keys = quota_server
    assert execute(server.url, sleeping(0), headers=bearer(keys["free"])).status_code == 200
    own = httpx.get(server.url + "/usage", headers=bearer(keys["free"]), timeout=10).json()
    assert set(own) == {"usage"} and own["usage"]["tenant"] == "free" and own["usage"]["requests"] >= 1
    assert httpx.get(server.url + "/usage", timeout=10).status_code == 401
    everyone = httpx.get(server.url + "/usage", headers=bearer(keys["ops"]), timeout=10).json()
    assert "free" in {u["tenant"] for u in everyone["tenants"]}
    from kcoral import AsyncClient, Client

    with Client(server.url, api_key=keys["free"]) as client:
        assert client.usage()["usage"]["tenant"] == "free"

    async def operator_view():
        async with AsyncClient(server.url, api_key=keys["ops"]) as client:
            return await client.usage()

    assert "tenants" in asyncio.run(operator_view())


def test_metrics_count_per_tenant_by_name_and_events_name_the_tenant(quota_server):
    server, keys = quota_server
    response = execute(server.url, sleeping(0), headers=bearer(keys["free"]))
    request_id = response.json()["request_id"]
    text = httpx.get(server.url + "/metrics", headers=bearer(keys["ops"]), timeout=10).text
    assert 'kcoral_tenant_requests_total{tenant="free"}' in text
    assert 'kcoral_tenant_cpu_seconds_total{tenant="free"}' in text
    assert 'kcoral_tenant_refused_total{tenant="inflight",limit="in_flight"}' in text
    for key in keys.values():
        assert key not in text
    wait_for(lambda: any(e["event"] == "request_finished" for e in server.events() if e.get("request_id") == request_id),
             5, "the request's last line")  # fmt: skip
    lines = [e for e in server.events() if e.get("request_id") == request_id]
    assert {"request_received", "request_accepted", "request_routed", "request_finished"} <= {e["event"] for e in lines}
    assert all(e.get("tenant") == "free" for e in lines), [e for e in lines if e.get("tenant") != "free"]


def test_sighup_answers_a_revoked_keys_waiting_requests_401_and_lets_its_running_one_finish(tmp_path):
    keys = {"gone": new_key(), "stays": new_key()}
    path = tmp_path / "keys.txt"
    write_keys(path, keys, [])
    server = Server(tmp_path, "--auth-keys", str(path), "--num-workers", "1")
    try:
        results = {}

        def send(name, program):
            results[name] = execute(server.url, program, headers=bearer(keys["gone"]), timeout=60)

        running = threading.Thread(target=send, args=("running", sleeping(2)))
        running.start()
        wait_for(lambda: any(e["event"] == "request_routed" for e in server.events()), 15, "the first request to run")
        waiting = threading.Thread(target=send, args=("waiting", sleeping(0)))
        waiting.start()
        wait_for(lambda: sum(e["event"] == "request_accepted" for e in server.events()) >= 2, 15,
                 "the second request to wait")  # fmt: skip
        write_keys(path, {"stays": keys["stays"]}, [])
        os.kill(server.process.pid, signal.SIGHUP)
        waiting.join(timeout=30)
        message = assert_error(results["waiting"], 401, "unauthorized")
        assert "revoked while it waited" in message
        running.join(timeout=30)
        assert results["running"].json()["status"] == "COMPLETED"
        reloaded = [e for e in server.events() if e["event"] == "auth_keys_reloaded"]
        assert reloaded and reloaded[-1]["revoked_waiting_requests"] == 1
        assert execute(server.url, sleeping(0), headers=bearer(keys["gone"])).status_code == 401
        assert execute(server.url, sleeping(0), headers=bearer(keys["stays"])).status_code == 200
    finally:
        server.stop()


def test_through_a_cluster_seconds_budgets_are_summed_over_the_nodes(tmp_path_factory):
    """Two nodes on a real 3-server JetStream cluster, one keys file: what a tenant's requests
    used through one node counts against its budget on the other (the kcoral_usage bucket:
    src/cluster/usage_ledger.h)."""
    from nats_cluster import NatsCluster
    from test_cluster_routing import SECRET, wait_for_view

    window = 60
    if time.time() % window > window - 20:  # the check must fall in the run's window
        time.sleep(window - time.time() % window + 0.5)
    nats = NatsCluster(tmp_path_factory.mktemp("nats-quota"))
    nodes = []
    try:
        keys = {"cpu": new_key(), "other": new_key(), "third": new_key()}
        path = tmp_path_factory.mktemp("cluster-keys") / "keys.txt"
        write_keys(path, keys, ["limits cpu cpu_seconds=0.3", "limits other cpu_seconds=0.3"])
        nodes = [
            Server(tmp_path_factory.mktemp("node"), "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
                   "--num-workers", "1", "--auth-keys", str(path), "--quota-window-seconds", str(window), env=SECRET)
            for _ in range(2)
        ]  # fmt: skip
        wait_for_view(nodes)
        first = execute(nodes[0].url, sleeping(0.5), headers=bearer(keys["cpu"]))
        assert first.status_code == 200 and first.json()["status"] == "COMPLETED", first.text

        def refused_on_the_other_node():
            answer = execute(nodes[1].url, sleeping(0), headers=bearer(keys["cpu"]))
            return [answer] if answer.status_code == 429 else None

        # The executing node charges after it stored the outcome: the ledger may lag the answer.
        (refused,) = wait_for(refused_on_the_other_node, 10, "node 2 to see what node 1's request used", every=0.2)
        message = assert_error(refused, 429, "quota")
        assert "cpu_seconds=0.3 per 60 s window is spent" in message
        usage = httpx.get(nodes[1].url + "/usage", headers=bearer(keys["cpu"]), timeout=10).json()["usage"]
        assert usage["cpu_seconds"]["used"] >= 0.5
        other = execute(nodes[1].url, sleeping(0), headers=bearer(keys["other"]))  # its own sums
        assert other.status_code == 200, other.text
        # An Idempotency-Key is its tenant's own (cluster_entry.cc ClusterKey): another tenant
        # sending the same key with another program is neither refused 409 nor given the answer.
        shared = {"Idempotency-Key": f"shared-{time.time_ns()}"}
        answers = [
            execute(node.url, sleeping(s), headers={**bearer(keys[tenant]), **shared})
            for node, tenant, s in ((nodes[0], "other", 0.01), (nodes[1], "third", 0.02))
        ]
        assert [(a.status_code, a.json()["status"]) for a in answers] == [(200, "COMPLETED")] * 2, [
            a.text for a in answers
        ]
    finally:
        for node in nodes:
            node.stop()
        nats.stop()
