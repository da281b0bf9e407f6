#!/usr/bin/env bash
# On a GPU machine: build (no unit tests) and run the named GPU benchmarks,
# each printing its table. The device tool's calls are short: name only what
# fits (seconds on the H200 in parentheses).
#
#   bash scripts/gpu-bench.sh roundtrip seed mix
#
#   roundtrip  trivial requests on fresh workers, concurrency 1 and 16 (35)
#   seed       a saturating stream of the seed's benchmark request, under each
#              house-keeping policy: evaluations per GPU-hour, duty cycle (180)
#   mix        the evaluation mix, ours fresh and reused, and the reference
#              fresh when .refwhl was carried (see gpu-env.sh) (about 300)
#   blob       float32 tensors of 256 MiB and 1 GiB uploaded to the GPU, checked
#              there, fresh and reused workers (about 60)
#   cluster    what the cluster path adds to a trivial request, and requests/s
#              through 1, 2 and 4 nodes (bench/cluster.py; needs the carried
#              NATS .debs) (about 90)
#   upload     a large upload through a 2-node cluster against the bound of
#              issue 26 item 4 (bench/cluster_upload.py) (about 60)
#   tenants    what idle tenants cost a cluster node's requests and the broker
#              (bench/cluster_tenants.py) (about 60)
#   background what a resting cluster of 1, 4 and 16 nodes costs the broker
#              (bench/cluster_background.py) (about 90)
#   dashboard  64 live dashboard viewers' cost to a server (bench/dashboard_load.py)
#              (about 100)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
OUT=${OUT:-/tmp/kcoral-gpu-bench}
mkdir -p "$OUT"
started=$(date +%s)
build_kcoral "$OUT/cmake.log" OFF || { tail -30 "$OUT/cmake.log"; exit 1; }
echo ">> built in $(( $(date +%s) - started )) s"
reference=()
if [ -d /tmp/refsite/kcoral ]; then
  reference=(--reference "$(command -v "$PY")" --reference-path "/tmp/refsite:/tmp/site")
fi
runs=0  # a bench named twice writes to a folder of its own each time
for bench in "$@"; do
  echo ">> $bench"; started=$(date +%s); runs=$((runs + 1))
  case $bench in
    roundtrip) "$PY" bench/roundtrip.py --device gpu --sandbox namespaces --workers 8 --requests 100 --rounds 1 \
                 --concurrency 1,16 ;;
    seed) for policy in outside-spans contexts-beside-spans beside-spans; do
            "$PY" bench/eval_mix.py --mix seed --candidates 64 --modes fresh --reference '' --sandbox namespaces \
              --housekeeping "$policy"
          done ;;
    mix) "$PY" bench/eval_mix.py --mix eval --candidates 100 --modes fresh,reused "${reference[@]}" ;;
    blob) for reuse in "" --reuse-workers; do
            "$PY" bench/blob_ingest.py --device gpu --sizes 256,1024 --reference '' $reuse
          done ;;
    cluster) "$PY" bench/cluster.py --requests 300 --nodes 1,2,4 --out "$OUT/cluster-$runs" ;;
    upload) "$PY" bench/cluster_upload.py --sizes 64,256 --rounds 5 --out "$OUT/upload-$runs" ;;
    tenants) "$PY" bench/cluster_tenants.py --requests 200 --out "$OUT/tenants-$runs" ;;
    background) "$PY" bench/cluster_background.py --nodes 1,4,16 --heartbeat 1 --out "$OUT/background-$runs" ;;
    dashboard) "$PY" bench/dashboard_load.py --seconds 30 --json "$OUT/dashboard_load.json" ;;
    *) echo "unknown benchmark: $bench (roundtrip, seed, mix, blob, cluster, upload, tenants, background, dashboard)"; exit 2 ;;
  esac
  echo ">> $bench: $(( $(date +%s) - started )) s"
done
