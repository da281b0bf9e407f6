#!/usr/bin/env bash
# make demo: start a local CPU server (port 8000, or a free port if 8000 is
# taken), run the two-request flow, stop the server we started.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  if port_free "$1"; then echo "$1"; else
    "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  fi
}

CPU_PORT=$(pick_port 8000)
LOG_DIR=$(mktemp -d /tmp/kcoral-demo-XXXXXX)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

echo ">> starting a CPU server on 127.0.0.1:$CPU_PORT (events: $LOG_DIR)"
"$PYTHON" -m kcoral server --device cpu --num-workers 2 --host 127.0.0.1 --port "$CPU_PORT" \
  --log-dir "$LOG_DIR" --no-log-console &
SERVER_PID=$!
for _ in $(seq 1 200); do
  if "$PYTHON" -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:$CPU_PORT/health').status_code != 200)" 2>/dev/null; then
    break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "server failed to start"; exit 1; }
  sleep 0.1
done

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo ">> a GPU is present, but this build has no GPU server yet: running the CPU flow"
fi
echo ">> running examples/cpu_compile_cpu_execute.py"
KCORAL_CPU_URL="http://127.0.0.1:$CPU_PORT" "$PYTHON" examples/cpu_compile_cpu_execute.py
echo ">> stopping the server"
