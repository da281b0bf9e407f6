#!/usr/bin/env bash
# On a GPU machine (issue 28): record the dashboard's status with real GPU fields, and check them.
# Builds, starts one GPU server, runs a benchmark request that holds the GPU lease for several
# seconds, and polls GET /api/status while it runs. Saves, under $OUT:
#   gpu_status_snapshot.json   the status taken during the benchmark (the lease held, a timing
#                              span open): the fixture tests/e2e/data/gpu_status_snapshot.json
#                              that test_dashboard.py renders in a browser on the CPU machine;
#   gpu_status_after.json      the status after it (the request in the ring, the hour's history);
#   gpu-metrics.txt            the server's /metrics, against which the Grafana dashboard's
#                              metric names are checked (deploy/grafana/kcoral.json).
# Then checks: clocks, temperature and power > 0, throttle reasons read, the lease holder set
# (to the benchmark's request id) and a span in progress during the benchmark; after it, the
# request with its lease time, instruction timeline and integrity verdict, and the history's
# lease-held and timing-span seconds. Exits 1 if any check fails. Stops the server it started.
#
#   OUT=/tmp/kcoral-gpu-dashboard bash scripts/gpu-dashboard.sh   (SKIP_BUILD=1: use the last build)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcoral-gpu-dashboard}
PORT=${PORT:-8011}
mkdir -p "$OUT"
source scripts/gpu-env.sh
nvidia-smi -L

echo ">> building ($(nproc) cores)"
build_kcoral "$OUT/cmake.log" OFF || { tail -40 "$OUT/cmake.log"; exit 1; }

SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
}
trap cleanup EXIT
echo ">> starting a GPU server on 127.0.0.1:$PORT"
"$PY" -m kcoral server --device gpu --gpus 0 --workers-per-gpu 2 --host 127.0.0.1 --port "$PORT" \
  --log-dir "$OUT/logs" >"$OUT/server.stderr" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
  "$PY" -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$PORT/health').status_code!=200)" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -30 "$OUT/server.stderr"; exit 1; }
  sleep 0.2
done

URL="http://127.0.0.1:$PORT" OUT="$OUT" "$PY" - <<'PYEOF'
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import httpx

from kcoral import Client, Program

URL, OUT = os.environ["URL"], Path(os.environ["OUT"])
failures = []


def check(ok: bool, what: str) -> None:
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)


SOURCE = r"""
import torch
from kcoral.builtins import benchmark

def randn(n):
    return torch.randn(n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))

def empty(n):
    return torch.empty(n, device="cuda")

def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""
N = 64 * 1024 * 1024  # 256 MiB per tensor: ~130 us per call on an H200


def benchmark_program() -> Program:
    p = Program()
    ops = p.upload(id="ops", kind="module", source=SOURCE)
    x = p.run(id="x", fn=p.get_function(id="randn", module=ops, name="randn"), args=[N])
    y = p.run(id="y", fn=p.get_function(id="empty", module=ops, name="empty"), args=[N])
    bench = p.get_function(id="benchmark", module=ops, name="benchmark")
    kernel = p.get_function(id="kernel", module=ops, name="kernel")
    # Long budgets: the lease is held, and the span open, for several seconds of polling.
    timing = p.run(id="timing", fn=bench, args=[kernel, x, y, {"warmup_ms": 500, "repeat_ms": 6000}])
    p.return_(key="timing", value=timing)
    return p


with Client(URL) as client:  # a warm-up request: stand-bys ready, imports done
    warm = client.execute(benchmark_program())
    check(warm.completed, f"warm-up benchmark completed ({warm.status}, {warm.error})")

result = {}


def run_benchmark() -> None:
    with Client(URL) as client:
        result["r"] = client.execute(benchmark_program())


thread = threading.Thread(target=run_benchmark)
thread.start()
during, held_by = [], set()
while thread.is_alive():
    status = httpx.get(URL + "/api/status", timeout=10).json()
    for gpu in status["gpus"]:
        if gpu["lease_holder"]:
            held_by.add(gpu["lease_holder"])
            during.append(status)
    time.sleep(0.25)
thread.join()
run = result["r"]
check(run.completed, f"benchmark completed ({run.status}, {run.error})")
check(bool(during), f"{len(during)} statuses with the lease held during the benchmark")
best = next((s for s in during if any(g["span_in_progress"] for g in s["gpus"])), during[-1] if during else None)
if best is not None:
    (OUT / "gpu_status_snapshot.json").write_text(json.dumps(best, indent=1) + "\n")
    print("saved", OUT / "gpu_status_snapshot.json")
    check(run.request_id in held_by, f"the lease holder was the benchmark's request {run.request_id} ({held_by})")
    check(any(g["span_in_progress"] for g in best["gpus"]), "a timing span in progress in the saved status")
    for g in best["gpus"]:
        for field in ("sm_mhz", "mem_mhz", "max_sm_mhz", "max_mem_mhz", "temp_c", "power_w"):
            value = g.get(field)
            check(isinstance(value, (int, float)) and value > 0, f"gpu{g['gpu']} {field} = {value} > 0")
        check(isinstance(g.get("clock_event_reasons"), int), f"gpu{g['gpu']} throttle reasons read ({g.get('clock_event_reasons')})")
        check(bool(g.get("uuid", "").startswith("GPU-")) and bool(g.get("name")), f"gpu{g['gpu']} {g.get('name')} {g.get('uuid')}")
        check("error" not in g, f"gpu{g['gpu']} no NVML error ({g.get('error')})")
    check(any(d["name"].startswith("gpu") and d["seats"] > 0 for d in best["devices"]), f"devices {best['devices']}")

time.sleep(1.2)  # the next snapshot holds the finished request
after = httpx.get(URL + "/api/status", timeout=10).json()
(OUT / "gpu_status_after.json").write_text(json.dumps(after, indent=1) + "\n")
mine = next((r for r in after["requests"] if r["request_id"] == run.request_id), None)
check(mine is not None, "the benchmark request is in the status's requests")
if mine is not None:
    # Empty members are left out; timeline steps are arrays in the order of timeline_fields.
    leased = after["timeline_fields"].index("leased")
    timeline = mine.get("timeline", [])
    check(mine.get("lease_held_ms", 0) > 1000, f"its lease held {mine.get('lease_held_ms')} ms")
    check(mine.get("span_held_ms", 0) > 1000, f"its timing spans {mine.get('span_held_ms')} ms")
    check(any(step[leased] for step in timeline), f"its timeline has leased steps ({len(timeline)} steps)")
    check(mine.get("integrity") in ("trusted", "flagged"), f"its integrity verdict: {mine.get('integrity')!r}")
points = after["history"]["points"]
check(sum(p["lease_held_seconds"] for p in points) > 2, "the history's lease-held seconds")
check(sum(p["span_seconds"] for p in points) > 2, "the history's timing-span seconds")
check(after["history"]["gpu_count"] >= 1, "the history knows the GPU count")

# The Grafana dashboard's metric names, against a GPU server's /metrics (its kcoral_gpu_* too).
metrics = httpx.get(URL + "/metrics", timeout=10).text
(OUT / "gpu-metrics.txt").write_text(metrics)
exposed = set()
for line in metrics.splitlines():
    if line.startswith("# TYPE "):
        exposed.add(line.split()[2])
    elif line and not line.startswith("#"):
        exposed.add(re.split(r"[{ ]", line, maxsplit=1)[0])
used = set(re.findall(r"\bkcoral_[a-z0-9_]+\b", Path("deploy/grafana/kcoral.json").read_text()))
check(not used - exposed, f"Grafana's metrics all in the GPU server's /metrics (missing: {sorted(used - exposed)})")

print()
print("gpu-dashboard:", "FAILED: " + "; ".join(failures) if failures else "all checks passed")
print("copy", OUT / "gpu_status_snapshot.json", "to tests/e2e/data/gpu_status_snapshot.json")
sys.exit(1 if failures else 0)
PYEOF
