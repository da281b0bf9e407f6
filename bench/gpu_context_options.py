"""What a fresh process pays for its CUDA context, and what the designs of issue 43 that would take
that cost off a request's path can do on this GPU machine (docs/gpu-scheduling.md, "Contexts that
outlive processes").

  python3 bench/gpu_context_options.py [--processes 8] [--json FILE]

Measures, each in fresh processes started one after another:
  - a bare driver context: cuInit, the primary context, one allocation (ctypes on libcuda, no
    toolkit needed), and torch's first CUDA tensor, which is what a worker pays;
  - the same as clients of CUDA MPS, when a driver-matched nvidia-cuda-mps-control is on PATH: the
    bench starts its own control daemon (pipe and log directories of its own, compute mode, clocks
    and MIG left as they are), and stops it at the end;
  - under MPS, fault containment: a client whose kernel writes address 0 (PTX JIT-compiled by the
    driver), beside a client that keeps launching kernels; whether the bystander and a client
    started afterwards still run;
  - whether libcuda exports the checkpoint API (cuCheckpointProcess*) and criu is installed; where
    it is exported, a warmed process (a bare context, and torch with its first tensor) locked,
    checkpointed to host memory, restored and unlocked --processes times by this process: each
    step's time, whether the process's device memory came back intact, and its first work after.
Prints tables; every number is a median over --processes runs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A child: the time from its first line to a context ready for work, as JSON on stdout.
BARE_CONTEXT = r"""
import ctypes, json, time
started = time.perf_counter()
cuda = ctypes.CDLL("libcuda.so.1")
def check(code, what):
    if code != 0:
        raise SystemExit(f"{what} failed: CUresult {code}")
check(cuda.cuInit(0), "cuInit")
device = ctypes.c_int()
check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
context = ctypes.c_void_p()
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
pointer = ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), 1 << 20), "cuMemAlloc")
check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
print(json.dumps({"ready_ms": (time.perf_counter() - started) * 1e3}))
"""

TORCH_CONTEXT = r"""
import json, time
started = time.perf_counter()
import torch
imported = time.perf_counter()
torch.ones(1, device="cuda").add_(1)
torch.cuda.synchronize()
print(json.dumps({"ready_ms": (time.perf_counter() - started) * 1e3, "import_ms": (imported - started) * 1e3}))
"""

# A kernel per mode: `fault` writes address 0; `spin` is a short loop the bystander repeats.
PTX = r"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry fault() {
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  mov.u64 %rd1, 0;
  mov.u32 %r1, 1;
  st.global.u32 [%rd1], %r1;
  ret;
}
.visible .entry spin() {
  .reg .b32 %r<3>;
  .reg .pred %p<2>;
  mov.u32 %r1, 0;
LOOP:
  add.u32 %r1, %r1, 1;
  setp.lt.u32 %p1, %r1, 100000;
  @%p1 bra LOOP;
  ret;
}
"""

KERNEL_CLIENT = r"""
import ctypes, json, sys, time
mode, seconds, ptx = sys.argv[1], float(sys.argv[2]), open(sys.argv[3]).read()
cuda = ctypes.CDLL("libcuda.so.1")
def call(code, what):
    if code != 0:
        print(json.dumps({"ok": False, "error": f"{what}: CUresult {code}"}), flush=True)
        raise SystemExit(1)
call(cuda.cuInit(0), "cuInit")
device = ctypes.c_int()
call(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
context = ctypes.c_void_p()
call(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
call(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
module = ctypes.c_void_p()
call(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(ptx.encode())), "cuModuleLoadData")
function = ctypes.c_void_p()
call(cuda.cuModuleGetFunction(ctypes.byref(function), module, mode.encode()), "cuModuleGetFunction")
launches, end = 0, time.monotonic() + seconds
while True:
    call(cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, None, None), "cuLaunchKernel")
    call(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    launches += 1
    if mode == "fault" or time.monotonic() > end:
        break
print(json.dumps({"ok": True, "launches": launches}), flush=True)
"""


# A warmed process for the checkpoint API: it prints {"ready_ms"} once its context holds a known
# pattern; then each "work" line on stdin checks the pattern is still there, adds one on the GPU,
# and prints {"work_ms", "intact"}. It exits when stdin closes.
WARMED_BARE = r"""
import ctypes, json, sys, time
started = time.perf_counter()
cuda = ctypes.CDLL("libcuda.so.1")
def check(code, what):
    if code != 0:
        raise SystemExit(f"{what} failed: CUresult {code}")
check(cuda.cuInit(0), "cuInit")
device = ctypes.c_int()
check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
context = ctypes.c_void_p()
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
words = 16 << 20
pointer = ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), words * 4), "cuMemAlloc")
value = 7
check(cuda.cuMemsetD32_v2(pointer, value, words), "cuMemsetD32")
check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
print(json.dumps({"ready_ms": (time.perf_counter() - started) * 1e3}), flush=True)
host = (ctypes.c_uint32 * words)()
for line in sys.stdin:
    started = time.perf_counter()
    check(cuda.cuMemcpyDtoH_v2(host, pointer, words * 4), "cuMemcpyDtoH")
    intact = host[0] == value and host[words - 1] == value and host[words // 2] == value
    value += 1
    check(cuda.cuMemsetD32_v2(pointer, value, words), "cuMemsetD32")
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    print(json.dumps({"work_ms": (time.perf_counter() - started) * 1e3, "intact": bool(intact)}), flush=True)
"""

WARMED_TORCH = r"""
import json, sys, time
started = time.perf_counter()
import torch
x = torch.full((16 << 20,), 7.0, device="cuda")
torch.cuda.synchronize()
print(json.dumps({"ready_ms": (time.perf_counter() - started) * 1e3}), flush=True)
expected = 7.0
for line in sys.stdin:
    started = time.perf_counter()
    intact = bool((x == expected).all().item())
    x.add_(1)
    expected += 1
    torch.cuda.synchronize()
    print(json.dumps({"work_ms": (time.perf_counter() - started) * 1e3, "intact": intact}), flush=True)
"""


def child(source: str, env: dict, timeout: float = 120, args: tuple = ()) -> dict:
    """Runs `source` in a fresh interpreter: its JSON answer, with the wall time from spawn to exit."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", source, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    wall_ms = (time.perf_counter() - started) * 1e3
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    answer = json.loads(lines[-1]) if lines else {"ok": False, "error": (done.stderr or done.stdout)[-300:]}
    return {**answer, "wall_ms": wall_ms, "returncode": done.returncode}


def medians(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return round(statistics.median(values), 1) if values else None


def context_costs(env: dict, processes: int) -> dict:
    bare = [child(BARE_CONTEXT, env) for _ in range(processes)]
    torch_runs = [child(TORCH_CONTEXT, env) for _ in range(processes)]
    failed = [r for r in bare + torch_runs if "ready_ms" not in r]
    return {
        "bare_ready_ms": medians(bare, "ready_ms"),
        "bare_wall_ms": medians(bare, "wall_ms"),
        "torch_ready_ms": medians(torch_runs, "ready_ms"),
        "torch_import_ms": medians(torch_runs, "import_ms"),
        "torch_wall_ms": medians(torch_runs, "wall_ms"),
        "failed": [r.get("error") for r in failed][:3],
    }


class MpsDaemon:
    """An MPS control daemon of this bench's own, in directories of its own."""

    def __init__(self, control: str):
        self.control = control
        self.root = Path(tempfile.mkdtemp(prefix="kcoral-mps-"))
        self.env = {
            **os.environ,
            "CUDA_MPS_PIPE_DIRECTORY": str(self.root / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(self.root / "log"),
        }
        (self.root / "pipe").mkdir()
        (self.root / "log").mkdir()

    def start(self) -> str:
        started = subprocess.run([self.control, "-d"], env=self.env, capture_output=True, text=True, timeout=30)
        return f"rc {started.returncode} {started.stderr.strip()[:200]}"

    def ask(self, command: str) -> str:
        answer = subprocess.run([self.control], env=self.env, input=command + "\n", capture_output=True, text=True, timeout=30)  # fmt: skip
        return (answer.stdout + answer.stderr).strip()[:300]

    def stop(self) -> None:
        try:
            self.ask("quit")
        finally:
            deadline = time.monotonic() + 10  # the daemon removes its control pipe as it exits
            while (self.root / "pipe" / "control").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        path = self.root / "log" / "control.log"
        return path.read_text(errors="replace")[-600:] if path.exists() else ""


def containment(env: dict, ptx: str) -> dict:
    """A faulting client beside a bystander that keeps launching for 4 s; then a new client."""
    bystander = subprocess.Popen(
        [sys.executable, "-c", KERNEL_CLIENT, "spin", "4", ptx],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    faulting = child(KERNEL_CLIENT, env, timeout=60, args=("fault", "0", ptx))
    try:
        out, err = bystander.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        bystander.kill()
        out, err = bystander.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    survived = json.loads(lines[-1]) if lines else {"ok": False, "error": err[-300:]}
    started = time.perf_counter()
    after = child(KERNEL_CLIENT, env, timeout=60, args=("spin", "0.2", ptx))
    return {
        "faulting_client": faulting.get("error") or faulting,
        "bystander": survived,
        "client_after": after,
        "client_after_ms": round((time.perf_counter() - started) * 1e3, 1),
    }


def checkpoint_api() -> dict:
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    names = ["cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint", "cuCheckpointProcessRestore",
             "cuCheckpointProcessUnlock", "cuCheckpointProcessGetState"]  # fmt: skip
    exported = {name: hasattr(cuda, name) for name in names}
    return {"driver_api_version": version.value, "exported": exported, "criu": shutil.which("criu")}


def checkpoint_cycles(source: str, rounds: int) -> dict:
    """One warmed process, locked, checkpointed, restored and unlocked `rounds` times by this
    process (which calls cuInit and creates no context), its work checked after each."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuInit(0) != 0:
        return {"error": "cuInit failed"}
    target = subprocess.Popen([sys.executable, "-c", source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    steps: dict[str, list[float]] = {"Lock": [], "Checkpoint": [], "Restore": [], "Unlock": [], "work": []}
    try:
        ready = json.loads(target.stdout.readline() or "{}")
        if "ready_ms" not in ready:
            return {"error": target.stderr.read()[-300:]}
        intact = []
        for _ in range(rounds):
            for step in ("Lock", "Checkpoint", "Restore", "Unlock"):
                started = time.perf_counter()
                code = getattr(cuda, f"cuCheckpointProcess{step}")(target.pid, None)
                steps[step].append((time.perf_counter() - started) * 1e3)
                if code != 0:
                    return {"error": f"cuCheckpointProcess{step}: CUresult {code}", "ready_ms": ready["ready_ms"]}
            target.stdin.write("work\n")
            target.stdin.flush()
            answer = json.loads(target.stdout.readline() or "{}")
            if "work_ms" not in answer:
                return {"error": "no work after restore: " + target.stderr.read()[-300:]}
            steps["work"].append(answer["work_ms"])
            intact.append(answer["intact"])
        row = {f"{step}_ms": round(statistics.median(times), 1) for step, times in steps.items()}
        return {**row, "ready_ms": round(ready["ready_ms"], 1), "intact": all(intact), "rounds": rounds}
    finally:
        target.stdin.close()
        target.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8, help="fresh processes per measurement (default 8)")
    parser.add_argument("--json", help="also write the figures to this file")
    options = parser.parse_args()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_mode", "--format=csv,noheader"], capture_output=True, text=True)  # fmt: skip
    figures: dict = {"gpu": smi.stdout.strip(), "checkpoint": checkpoint_api()}
    print(f"GPU: {figures['gpu']}", flush=True)
    figures["plain"] = context_costs(dict(os.environ), options.processes)
    ptx = str(Path(tempfile.mkdtemp(prefix="kcoral-ptx-")) / "kernels.ptx")
    Path(ptx).write_text(PTX)
    control = shutil.which("nvidia-cuda-mps-control")
    figures["mps_control"] = control
    if control is not None:
        daemon = MpsDaemon(control)
        try:
            figures["mps_start"] = daemon.start()
            figures["mps"] = context_costs(daemon.env, options.processes)
            figures["mps_servers"] = daemon.ask("get_server_list")
            figures["mps_containment"] = containment(daemon.env, ptx)
            figures["mps_servers_after_fault"] = daemon.ask("get_server_list")
            figures["mps_log"] = daemon.log_tail()
        finally:
            daemon.stop()
    figures["plain_containment"] = containment(dict(os.environ), ptx)
    if all(figures["checkpoint"]["exported"].values()):
        figures["checkpoint_bare"] = checkpoint_cycles(WARMED_BARE, options.processes)
        figures["checkpoint_torch"] = checkpoint_cycles(WARMED_TORCH, options.processes)

    print(f"\nFresh processes, {options.processes} each, medians (ms)")
    print(f"{'clients':>8} | {'driver ctx':>10} | {'spawn-exit':>10} | {'torch ready':>11} | {'of it import':>12} | {'spawn-exit':>10}")  # fmt: skip
    for name in ("plain", "mps"):
        row = figures.get(name)
        if row:
            print(f"{name:>8} | {row['bare_ready_ms']!s:>10} | {row['bare_wall_ms']!s:>10} | {row['torch_ready_ms']!s:>11} | {row['torch_import_ms']!s:>12} | {row['torch_wall_ms']!s:>10}")  # fmt: skip
    if control is None:
        print("MPS: not testable here: no nvidia-cuda-mps-control on PATH")
    if "checkpoint_bare" in figures:
        print(f"\nA warmed process checkpointed and restored in place, {options.processes} rounds, medians (ms)")
        print(f"{'process':>8} | {'ready':>7} | {'lock':>6} | {'checkpoint':>10} | {'restore':>7} | {'unlock':>6} | {'work after':>10} | intact")  # fmt: skip
        for name in ("bare", "torch"):
            row = figures[f"checkpoint_{name}"]
            if "error" in row:
                print(f"{name:>8} | {row['error']}")
                continue
            print(f"{name:>8} | {row['ready_ms']:>7} | {row['Lock_ms']:>6} | {row['Checkpoint_ms']:>10} | {row['Restore_ms']:>7} | {row['Unlock_ms']:>6} | {row['work_ms']:>10} | {row['intact']}")  # fmt: skip
    print(json.dumps({k: v for k, v in figures.items() if k not in ("plain", "mps")}, indent=1)[:6000])
    if options.json:
        Path(options.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
