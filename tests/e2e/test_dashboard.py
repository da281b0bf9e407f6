"""Issue 28, the live dashboard: GET /dashboard (a static page in the binary) drawn from GET
/api/status, checked in a real browser (Debian's headless chromium, driven by Selenium through
Debian's chromedriver, never a downloaded one). The page shows the requests that ran, a failed
one with its error kind; its charts' points are the counts of /api/status and /metrics; a new
request appears within 2 s; a recorded GPU status (tests/e2e/data/gpu_status_snapshot.json,
saved on the H200 by scripts/gpu-dashboard.sh) renders with its clocks, lease holder and
throttle reasons. With --auth-keys the page is open, the status needs a key, and a tenant's key
sees only its own requests. 64 pollers share one snapshot a second and cost the server little CPU.

Screenshots go to the test's tmp_path (dashboard.png, dashboard_gpu.png)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver  # never skipped: make deps installs selenium, chromium, chromedriver

from conftest import Server, call, wait_for, write_tenant_keys

from kcoral import Client

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DATA = Path(__file__).parent / "data"
ADD = "def main(a, b):\n    return a + b\n"
RAISES = (
    "from kcoral.errors import ExecutionError\n"
    "def main():\n    raise ExecutionError('correctness', 'dashboard test: this one fails')\n"
)


@pytest.fixture
def browser(tmp_path, monkeypatch):
    """Headless chromium with its own profile in tmp_path, loopback only; always quit."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("chromium and chromium-driver are missing: `make deps` installs them")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must never download a driver
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in CI; the page is our own
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--window-size=1600,1500",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


def metric_samples(url: str, headers: dict | None = None) -> dict[tuple[str, tuple], float]:
    response = httpx.get(url + "/metrics", headers=headers or {}, timeout=10)
    assert response.status_code == 200
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def status(url: str, headers: dict | None = None) -> dict:
    response = httpx.get(url + "/api/status", headers=headers or {}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def page_rows(driver) -> dict[str, str]:
    """Request id -> error kind, as the requests table shows them."""
    return driver.execute_script(
        "const rows = document.querySelectorAll('#requests-table tr.request');"
        "return Object.fromEntries([...rows].map(r => [r.dataset.requestId, r.dataset.errorKind]));"
    )


def chart_points(driver, chart: str) -> list[dict]:
    return driver.execute_script(
        "return [...document.querySelectorAll(`svg[data-chart='${arguments[0]}'] [data-series]`)]"
        ".map(e => ({t: Number(e.dataset.t), series: e.dataset.series,"
        " value: Number(e.dataset.value), count: Number(e.dataset.count)}));",
        chart,
    )


def run_mix(url: str, headers: dict | None = None, api_key: str | None = None) -> list[str]:
    """Three programs that complete, one that raises, one malformed body: their request ids."""
    ids = []
    with Client(url, api_key=api_key) as client:
        for a in range(3):
            result = client.execute(call(ADD, [a, 1]))
            assert result.completed
            ids.append(result.request_id)
        failed = client.execute(call(RAISES))
        assert failed.status == "FAILED" and failed.error["kind"] == "correctness"
        ids.append(failed.request_id)
    bad = httpx.post(url + "/execute", content=b"not a program", headers=headers or {}, timeout=10)
    assert bad.status_code == 400
    ids.append(bad.headers["X-Request-ID"])
    return ids


@pytest.mark.serial  # a new request on the page within 2 s
def test_dashboard_shows_requests_charts_and_new_requests_live(make_server, browser, tmp_path):
    server = make_server("--num-workers", "2")
    ids = run_mix(server.url)

    browser.get(server.url + "/dashboard")
    rows = wait_for(lambda: (r := page_rows(browser)) and all(i in r for i in ids) and r, 10, "the requests")
    assert rows[ids[3]] == "correctness"  # the failed program, with its error kind
    assert rows[ids[4]] == "parse"  # the malformed body
    assert all(rows[i] == "" for i in ids[:3])
    failed_row = browser.find_element("css selector", f"tr[data-request-id='{ids[3]}']")
    assert "program_failed" in failed_row.text and "dashboard test: this one fails" in failed_row.text

    # The page's chart points against /api/status and /metrics, with the page held still.
    browser.execute_script("window.kcoralDashboard.stop()")
    shown = status(server.url)
    browser.execute_script("window.kcoralDashboard.render(arguments[0])", shown)
    points = {p["t"]: p for p in shown["history"]["points"] if p["requests"]}
    bars = chart_points(browser, "requests")
    assert {b["t"]: b["count"] for b in bars} == {t: p["requests"] for t, p in points.items()}
    for bar in bars:
        assert bar["value"] == pytest.approx(points[bar["t"]]["requests"] / shown["history"]["step_seconds"])
    samples = metric_samples(server.url)
    finished = sum(v for (name, _), v in samples.items() if name == "kcoral_requests_total")
    assert sum(b["count"] for b in bars) == finished == 5
    errors = {}
    for bar in chart_points(browser, "errors"):
        errors[bar["series"]] = errors.get(bar["series"], 0) + bar["value"]
    assert errors == {"correctness": 1, "parse": 1}
    latency = chart_points(browser, "latency")
    for dot in latency:
        assert dot["value"] == pytest.approx(points[dot["t"]][dot["series"] + "_ms"])
    assert {d["t"] for d in latency} == set(points)

    # The failed request opens its instruction timeline: one bar per instruction it ran.
    browser.find_element("css selector", f"tr[data-request-id='{ids[3]}']").click()
    bars = browser.find_elements("css selector", f"svg.timeline[data-request='{ids[3]}'] rect[data-step]")
    failed = next(r for r in shown["requests"] if r["request_id"] == ids[3])
    assert len(bars) == len(failed["timeline"]) >= 3
    assert shown["timeline_fields"] == ["index", "op", "id", "ms", "lease_wait_ms", "leased"]
    assert [step[1] for step in failed["timeline"]] == ["upload", "get_function", "run"]

    # Live again: a new request is on the page within 2 s of its answer.
    browser.execute_script("window.kcoralDashboard.start()")
    time.sleep(1.5)
    with Client(server.url) as client:
        new_id = client.execute(call(ADD, [20, 22])).request_id
    answered = time.monotonic()
    wait_for(lambda: new_id in page_rows(browser), 2.0, "the new request on the page", every=0.05)
    print(f"new request shown {time.monotonic() - answered:.2f} s after its answer")

    browser.find_element("css selector", f"tr[data-request-id='{new_id}']").click()
    time.sleep(0.3)
    browser.save_screenshot(str(tmp_path / "dashboard.png"))
    print("screenshot:", tmp_path / "dashboard.png")


def test_dashboard_renders_a_recorded_gpu_snapshot(make_server, browser, tmp_path):
    recorded = json.loads((DATA / "gpu_status_snapshot.json").read_text())
    held = [g for g in recorded["gpus"] if g["lease_holder"]]
    assert held, "the recording was taken during a benchmark: some GPU's lease is held"
    server = make_server("--num-workers", "1")
    browser.get(server.url + "/dashboard")
    wait_for(lambda: browser.execute_script("return document.body.dataset.generated"), 10, "a first status")
    browser.execute_script("window.kcoralDashboard.stop()")
    browser.execute_script("window.kcoralDashboard.render(arguments[0])", recorded)

    for gpu in recorded["gpus"]:
        row = browser.find_element("css selector", f"#gpus tr[data-gpu='{gpu['gpu']}']").text
        assert f"{gpu['sm_mhz']} / {gpu['max_sm_mhz']}" in row
        assert f"{round(gpu['temp_c'])} °C" in row and f"{round(gpu['power_w'])} W" in row
        if gpu["lease_holder"]:
            assert gpu["lease_holder"][:8] in row
        if gpu["span_in_progress"]:
            assert "timing" in row
    if any(g["clock_event_reasons"] for g in recorded["gpus"]):
        assert browser.find_elements("css selector", "#gpus .pill.warn, #gpus .pill.idle")
    devices = browser.find_elements("css selector", "#workers tr[data-device]")
    assert len(devices) == len(recorded["devices"])
    gpu_time = chart_points(browser, "gpu-time")
    assert {p["series"] for p in gpu_time} == {"lease-held fraction", "duty (timing spans)"}
    time.sleep(0.2)
    browser.save_screenshot(str(tmp_path / "dashboard_gpu.png"))
    print("screenshot:", tmp_path / "dashboard_gpu.png")


@pytest.fixture
def keyed(tmp_path):
    keys = write_tenant_keys(tmp_path / "keys.txt")
    server = Server(tmp_path, "--auth-keys", str(tmp_path / "keys.txt"), "--num-workers", "2")
    yield server, keys
    server.stop()


def test_keys_open_page_keyed_status_and_tenants_see_their_own(keyed, browser):
    server, keys = keyed
    bearer = {name: {"Authorization": f"Bearer {key}"} for name, key in keys.items()}
    page = httpx.get(server.url + "/dashboard", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(server.url + "/dashboard/dashboard.js", timeout=10).status_code == 200
    assert httpx.get(server.url + "/api/status", timeout=10).status_code == 401
    assert httpx.get(server.url + "/api/status", headers={"Authorization": "Bearer nope"}).status_code == 401

    alice = run_mix(server.url, bearer["alice"], keys["alice"])
    with Client(server.url, api_key=keys["bob"]) as client:
        bob = client.execute(call(ADD, [1, 1])).request_id
    mine = status(server.url, bearer["alice"])
    assert {r["request_id"] for r in mine["requests"]} == set(alice)
    assert {r["tenant"] for r in mine["requests"]} == {"alice"}
    assert mine["viewer"] == {"role": "tenant", "tenant": "alice"}
    everything = status(server.url, bearer["ops"])
    assert {r["request_id"] for r in everything["requests"]} == {*alice, bob}
    assert everything["viewer"]["role"] == "operator"

    # In the browser: the page asks for the key, keeps it out of the URL, and shows alice's own.
    browser.get(server.url + "/dashboard")
    field = wait_for(lambda: browser.find_element("id", "key-input").is_displayed() and
                     browser.find_element("id", "key-input"), 10, "the key form")  # fmt: skip
    field.send_keys(keys["alice"])
    browser.find_element("css selector", "#key-form button[type=submit]").click()
    rows = wait_for(lambda: page_rows(browser), 10, "alice's requests")
    assert set(rows) == set(alice)
    assert keys["alice"] not in browser.current_url
    assert browser.execute_script("return sessionStorage.getItem('kcoral.dashboard.key')") == keys["alice"]


def test_over_https_the_page_polls_and_shows_the_requests(tmp_path, browser):
    """The status stream is plain HTTP only (501 over HTTPS): the page falls back to polling."""
    from pki import make_pki

    pki = make_pki(tmp_path / "pki")
    server = Server(tmp_path, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--num-workers", "1", ca=pki.ca)
    try:
        with Client(server.url, ca=pki.ca) as client:
            ran = client.execute(call(ADD, [1, 2])).request_id
        browser.execute_cdp_cmd("Security.setIgnoreCertificateErrors", {"ignore": True})  # the test's own CA
        browser.get(server.url + "/dashboard")
        rows = wait_for(lambda: page_rows(browser), 10, "the request, polled over HTTPS")
        assert ran in rows
        assert "cannot reach" not in browser.find_element("id", "freshness").text
    finally:
        server.stop()


def test_any_nodes_page_shows_the_whole_cluster(tmp_path, browser):
    from nats_cluster import CLUSTER_SECRET, NatsCluster

    (tmp_path / "nats").mkdir()
    nats = NatsCluster(tmp_path / "nats")
    nodes = []
    try:
        for k in range(2):
            (tmp_path / f"node{k}").mkdir()
            nodes.append(Server(tmp_path / f"node{k}", "--cluster", nats.flag, "--cluster-heartbeat-seconds", "1",
                                "--num-workers", "1", env={"KCORAL_CLUSTER_SECRET": CLUSTER_SECRET}))  # fmt: skip
        urls = {n.url for n in nodes}
        seen = wait_for(lambda: {r["url"] for r in (status(nodes[0].url)["cluster"] or {}).get("nodes", [])} >= urls,
                        30, "both nodes in the first node's cluster view")  # fmt: skip
        assert seen
        browser.get(nodes[0].url + "/dashboard")
        card = wait_for(lambda: browser.find_element("id", "cluster-card").is_displayed() and
                        browser.find_element("id", "cluster").text, 10, "the cluster card")  # fmt: skip
        for node in nodes:
            assert node.url in card
        assert "cpu" in card  # the pool, with both nodes' seats
        # Started without --cluster-nats-monitor: the node cannot tell whether the brokers sync.
        warning = browser.find_element("id", "broker-sync").text
        assert "brokers: unchecked" in warning and "--cluster-nats-monitor" in warning, warning
        browser.save_screenshot(str(tmp_path / "dashboard_cluster.png"))
    finally:
        for node in nodes:
            node.stop()
        nats.stop()


async def _poll(url: str, clients: int, seconds: float) -> list[int]:
    """`clients` httpx clients, each GET /api/status once a second; their status codes."""
    codes: list[int] = []

    async def one(offset: float) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.sleep(offset)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                started = time.monotonic()
                response = await client.get(url + "/api/status")
                codes.append(response.status_code)
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))

    await asyncio.gather(*(one(k / clients) for k in range(clients)))
    return codes


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.serial  # the server's CPU under 5% of a core, 9 polls a second of each poller
def test_64_pollers_share_one_snapshot_a_second(make_server):
    server = make_server("--num-workers", "1")
    run_mix(server.url)  # a ring with something in it
    builds_before = status(server.url)["snapshot_builds"]
    cpu_before, started = cpu_seconds(server.process.pid), time.monotonic()
    codes = asyncio.run(_poll(server.url, 64, 10))
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(server.process.pid) - cpu_before
    builds = status(server.url)["snapshot_builds"] - builds_before
    samples = metric_samples(server.url)
    assert set(codes) == {200} and len(codes) >= 64 * 9
    assert builds <= elapsed + 2, f"{builds} snapshots in {elapsed:.1f} s"
    assert samples[("kcoral_dashboard_snapshot_builds_total", ())] >= builds
    print(f"64 pollers, {elapsed:.1f} s: {len(codes)} polls, {builds} builds, server CPU {cpu / elapsed:.2%}")
    assert cpu / elapsed < 0.05, f"server CPU {cpu / elapsed:.2%} of one core"
