"""GET /metrics: Prometheus text that a real Prometheus parser accepts, with
counters that follow what the server did; and the run_timeline event, which
times every instruction of a run."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kcoral import Client, Program


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    response = httpx.get(url + "/metrics", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def program(body: str) -> Program:
    p = Program()
    module = p.upload(id="m", kind="module", source=f"def main():\n    {body}\n")
    p.return_(key="out", value=p.run(fn=p.get_function(module=module, name="main")))
    return p


def test_metrics_follow_requests_workers_and_load(make_server):
    server = make_server("--num-workers", "2", "--max-request-bytes", "100000")
    before = scrape(server.url)
    assert before[("kcoral_request_capacity", ())] == 2
    assert before[("kcoral_requests_in_progress", ())] == 0
    assert before[("kcoral_shutting_down", ())] == 0

    with Client(server.url) as c:
        for _ in range(3):
            assert c.execute(program("return 1")).status == "COMPLETED"
        assert c.execute(program("raise ValueError('no')")).status == "FAILED"
    assert httpx.post(server.url + "/execute", content=b"x", timeout=5).status_code == 400
    too_big = httpx.post(server.url + "/execute", content=b"x" * 200_000, timeout=5)
    assert too_big.status_code == 413

    after = scrape(server.url)
    requests = lambda code, reason: after.get(  # noqa: E731
        ("kcoral_requests_total", (("code", code), ("finish_reason", reason))), 0
    )
    assert requests("200", "completed") == 3
    assert requests("200", "program_failed") == 1
    assert requests("400", "rejected") == 1
    assert requests("413", "rejected") == 1
    assert after[("kcoral_request_duration_seconds_count", ())] == 6
    assert after[("kcoral_request_duration_seconds_bucket", (("le", "+Inf"),))] == 6
    assert after[("kcoral_queue_wait_seconds_count", ())] == 4  # the four that reached a worker
    assert after[("kcoral_lease_held_seconds_total", ())] == 0  # a CPU server has no lease
    retired = after[("kcoral_worker_events_total", (("event", "worker_retired"), ("reason", "request_limit")))]
    assert retired == 4  # one fresh process per request


def test_metrics_method_is_get_only(make_server):
    server = make_server("--num-workers", "1")
    response = httpx.post(server.url + "/metrics", timeout=5)
    assert response.status_code == 405


def test_run_timeline_event_times_every_instruction(make_server):
    server = make_server("--num-workers", "1")
    program = Program()
    module = program.upload(kind="module", source="import time\n\ndef main():\n    time.sleep(0.2)\n    return 1\n")
    out = program.run(fn=program.get_function(module=module, name="main"), args=[])
    program.return_(key="out", value=out)
    with Client(server.url) as client:
        result = client.execute(program, timeout_seconds=30)
    assert result.completed
    [timeline] = [e for e in server.events() if e["event"] == "run_timeline"]
    assert timeline["request_id"] == result.request_id
    assert [index for index, _, _, _ in timeline["instructions"]] == [0, 1, 2, 3]
    # No GPU here: no lease, so nothing waited for it.
    assert all(ms >= 0 and wait == 0 and leased is False for _, ms, wait, leased in timeline["instructions"])
    # The run that slept 200 ms; the server sees its frames a little late, the first one maybe later.
    times = [ms for _, ms, _, _ in timeline["instructions"]]
    assert times[2] >= 150 and times[2] == max(times)
