#!/usr/bin/env bash
# make demo: start a local CPU server (port 8000, or a free port if 8000 is
# taken) and, where nvidia-smi finds a GPU, a GPU server (8001); run the
# two-request flow; stop the servers we started.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  if port_free "$1"; then echo "$1"; else
    "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  fi
}

LOG_DIR=$(mktemp -d /tmp/kcoral-demo-XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  return 0
}
trap cleanup EXIT

start_server() {  # name port flags...
  local name=$1 port=$2; shift 2
  echo ">> starting a $name server on 127.0.0.1:$port (events: $LOG_DIR/$name)"
  "$PYTHON" -m kcoral server --host 127.0.0.1 --port "$port" --log-dir "$LOG_DIR/$name" --no-log-console "$@" &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 600); do
    "$PYTHON" -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$port/health').status_code != 200)" \
      2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { echo "the $name server failed to start"; exit 1; }
    sleep 0.1
  done
  echo "the $name server did not become healthy"; exit 1
}

CPU_PORT=$(pick_port 8000)
start_server CPU "$CPU_PORT" --device cpu --num-workers 2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  GPU_PORT=$(pick_port 8001)
  start_server GPU "$GPU_PORT" --device gpu --gpus 0 --workers-per-gpu 2
  echo ">> running examples/cpu_compile_gpu_execute.py (compile on the CPU server, execute on the GPU)"
  KCORAL_CPU_URL="http://127.0.0.1:$CPU_PORT" KCORAL_GPU_URL="http://127.0.0.1:$GPU_PORT" \
    "$PYTHON" examples/cpu_compile_gpu_execute.py
else
  echo ">> no GPU here: running examples/cpu_compile_cpu_execute.py (the same two requests, host execution)"
  KCORAL_CPU_URL="http://127.0.0.1:$CPU_PORT" "$PYTHON" examples/cpu_compile_cpu_execute.py
fi
echo ">> stopping the servers"
