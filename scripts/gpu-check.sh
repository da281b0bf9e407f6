#!/usr/bin/env bash
# On a GPU machine: build, start a CPU server and a GPU server, run the seed's
# example (two servers, then one GPU server in both roles), the GPU tests and
# an ncu comparison, and print a summary. Stops the servers it started.
#
#   bash scripts/gpu-check.sh            (OUT=dir keeps logs and figures)
#
# What was carried (.whl, .debs, .refwhl) is installed first (gpu-env.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcoral-gpu-check}
mkdir -p "$OUT"
SUMMARY=()
note() { echo ">> $*"; }
result() { SUMMARY+=("$1: $2"); }
source scripts/gpu-env.sh
nvidia-smi -L

note "building ($(nproc) cores)"
if build_kcoral "$OUT/cmake.log" ON; then
  result build ok
else
  tail -40 "$OUT/cmake.log"; result build FAILED; printf '%s\n' "${SUMMARY[@]}"; exit 1
fi
(cd build/gpu && ctest -j 8 >"$OUT/ctest.log" 2>&1) && result "unit tests" ok || result "unit tests" "FAILED ($(tail -1 "$OUT/ctest.log"))"

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
start() {  # name port args...
  local name=$1 port=$2; shift 2
  note "starting the $name server on 127.0.0.1:$port"
  "$PY" -m kcoral server --host 127.0.0.1 --port "$port" --log-dir "/tmp/kcoral-gpu-logs-$name" "$@" \
    >"$OUT/$name.stderr" 2>&1 &
  local pid=$!
  PIDS+=($pid)
  for _ in $(seq 1 300); do
    "$PY" -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$port/health').status_code!=200)" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "the $name server did not start:"; tail -30 "$OUT/$name.stderr"
  ps -ef --forest | grep -v grep | grep -A3 -E "kcoral|_worker" | head -40
  kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  return 1
}
start cpu 8000 --device cpu --num-workers 4 || exit 1
if ! start gpu 8001 --device gpu --gpus 0 --workers-per-gpu 8; then
  result "GPU server with zygote" "did not start (see above); retrying with --no-zygote"
  start gpu-nozygote 8001 --device gpu --gpus 0 --workers-per-gpu 8 --no-zygote || exit 1
fi
curl -s http://127.0.0.1:8001/health; echo
sandbox=$("$PY" -c "import httpx; print(httpx.get('http://127.0.0.1:8001/health').json().get('sandbox'))")
result "GPU server sandbox" "$sandbox"

note "seed example: compile on the CPU server, execute on the GPU server"
if KCORAL_CPU_URL=http://127.0.0.1:8000 KCORAL_GPU_URL=http://127.0.0.1:8001 "$PY" examples/cpu_compile_gpu_execute.py | tee "$OUT/example.txt"; then
  result "example (two servers)" "$(tail -1 "$OUT/example.txt")"
else
  result "example (two servers)" FAILED
fi
note "seed example: one GPU server in both roles"
if KCORAL_CPU_URL=http://127.0.0.1:8001 KCORAL_GPU_URL=http://127.0.0.1:8001 "$PY" examples/cpu_compile_gpu_execute.py | tee "$OUT/example-one-server.txt"; then
  result "example (one server)" "$(tail -1 "$OUT/example-one-server.txt")"
else
  result "example (one server)" FAILED
fi

note "GPU server /metrics after the example"
curl -s http://127.0.0.1:8001/metrics >"$OUT/gpu-metrics.txt"
grep -E '^kcoral_(requests_total|lease_(wait|held)_seconds_total|worker_events_total)' "$OUT/gpu-metrics.txt"
held=$(awk '/^kcoral_lease_held_seconds_total/ {print $2}' "$OUT/gpu-metrics.txt")
result "metrics" "lease held ${held:-missing} s in total on the GPU server"

# The GPU tests start servers of their own; this one's idle stand-bys would sit on the GPU
# beside theirs (a condition on every benchmark: another server's processes hold contexts).
cleanup; PIDS=()
note "GPU tests"
KCORAL_GPU_REPORT="$OUT/gpu-figures.json" timeout 900 "$PY" -m pytest -v -s -rfE --tb=line ${GPU_TESTS:-tests/gpu} 2>&1 \
  | tee "$OUT/pytest-gpu.log" | grep -E "PASSED|FAILED|ERROR|passed|failed" | cut -c1-400 | tail -n 120  # tail, not head: a closed pipe would kill pytest mid-run
result "GPU tests" "$(tail -1 "$OUT/pytest-gpu.log")"
grep -E "^FAILED|^ERROR" "$OUT/pytest-gpu.log" | cut -c1-300 | while read -r line; do result "  " "$line"; done

note "ncu: gpu__time_duration of the same add_one kernel"
if command -v ncu >/dev/null; then
  ncu --metrics gpu__time_duration.sum --clock-control none --csv -k regex:add_one \
    "$PY" bench/gpu_add_one_ncu.py 50 >"$OUT/ncu.csv" 2>"$OUT/ncu.stderr"
  "$PY" - "$OUT/ncu.csv" <<'PYEOF' | tee "$OUT/ncu-summary.txt"
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 3]
header = rows[0]
unit_i, value_i, name_i = header.index("Metric Unit"), header.index("Metric Value"), header.index("Metric Name")
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
values = [float(r[value_i].replace(",", "")) * scale[r[unit_i]] for r in rows[1:] if r[name_i] == "gpu__time_duration.sum"]
print(f"ncu gpu__time_duration: median {statistics.median(values):.3f} us over {len(values)} launches (min {min(values):.3f}, max {max(values):.3f})")
PYEOF
  result ncu "$(tail -1 "$OUT/ncu-summary.txt" 2>/dev/null || echo 'no result')"
  head -5 "$OUT/ncu.csv"; tail -3 "$OUT/ncu.stderr"
else
  result ncu "not installed"
fi
note "ncu: the two-stream multiply of the honest corpus (issue 23): benchmark median against ncu"
if command -v ncu >/dev/null && [ -f "$OUT/gpu-figures.json" ]; then
  "$PY" bench/multistream_span.py --ncu --sizes 16 --reps 1 --calls 20 >"$OUT/multistream.txt" 2>&1
  "$PY" - "$OUT/multistream.txt" "$OUT/gpu-figures.json" <<'PYEOF' | tee "$OUT/ncu-two-streams.txt"
import json, re, statistics, sys
ncu = [float(m.group(1)) for m in re.finditer(r"^two_streams 64 MiB\s+([0-9.]+)", open(sys.argv[1]).read(), re.M)]
ours = json.load(open(sys.argv[2])).get("honest_case_two_streams_us", {}).get("on", [])
if not ncu or not ours:
    print("two streams vs ncu: no figure (see multistream.txt)")
else:
    median = statistics.median(ours)
    verdict = "within 5%" if abs(median / ncu[-1] - 1) <= 0.05 else "NOT within 5%"
    print(f"two streams vs ncu: benchmark {median:.2f} us, ncu {ncu[-1]:.2f} us per call, ratio {median / ncu[-1]:.3f}, {verdict}")
PYEOF
  result "ncu two streams" "$(tail -1 "$OUT/ncu-two-streams.txt")"
fi
[ -f "$OUT/gpu-figures.json" ] && cat "$OUT/gpu-figures.json"

echo
echo "==================== summary ===================="
printf '%s\n' "${SUMMARY[@]}"
