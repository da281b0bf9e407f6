"""A warmed worker kept as an image and brought back as a new process (issue 43's checkpoint and
restore design, docs/gpu-scheduling.md): the driver's checkpoint API moves the process's GPU state
to host memory, criu dumps the process, and each restore from that image is a process of its own.

    python3 bench/gpu_checkpoint_criu.py [--criu PATH] [--restores 5] [--torch]

Measures: the warmed process's start (context and first tensor), the lock and checkpoint, criu's
dump and the image's size, then per restore: criu restore, the driver's restore and unlock, and the
first work after (which checks the device memory came back intact). Prints one table, medians of
the restores. Needs root, criu, and a driver with cuCheckpointProcess*. Stops what it started."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The warmed process: its only channel is files in its directory (criu restores files, not a
# controller's pipes). It writes `ready` once its context holds a known pattern; each `go.N`
# makes it check the pattern, add one on the GPU and write `done.N` with the time it took.
WARMED = r"""
import json, os, sys, time
directory, use_torch = sys.argv[1], sys.argv[2] == "torch"
started = time.perf_counter()
if use_torch:
    import torch
    x = torch.full((16 << 20,), 7.0, device="cuda")
    torch.cuda.synchronize()
else:
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    for call in (lambda: cuda.cuInit(0),):
        assert call() == 0
    device, context, pointer = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
    assert cuda.cuCtxSetCurrent(context) == 0
    assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), 64 << 20) == 0
    assert cuda.cuMemsetD32_v2(pointer, 7, 16 << 20) == 0
    assert cuda.cuCtxSynchronize() == 0
    host = (ctypes.c_uint32 * (16 << 20))()
with open(os.path.join(directory, "ready"), "w") as f:
    f.write(json.dumps({"ready_ms": (time.perf_counter() - started) * 1e3}))
expected, n = 7, 0
while True:
    go = os.path.join(directory, f"go.{n}")
    while not os.path.exists(go):
        time.sleep(0.001)
    started = time.perf_counter()
    if use_torch:
        intact = bool((x == expected).all().item())
        x.add_(1)
        torch.cuda.synchronize()
    else:
        assert cuda.cuMemcpyDtoH_v2(host, pointer, 64 << 20) == 0
        intact = host[0] == expected and host[(16 << 20) - 1] == expected
        assert cuda.cuMemsetD32_v2(pointer, expected + 1, 16 << 20) == 0
        assert cuda.cuCtxSynchronize() == 0
    expected += 1
    with open(os.path.join(directory, f"done.{n}"), "w") as f:
        f.write(json.dumps({"work_ms": (time.perf_counter() - started) * 1e3, "intact": intact}))
    n += 1
"""


def wait_for(path: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear in {timeout} s")
        time.sleep(0.001)
    time.sleep(0.01)
    return json.loads(path.read_text())


def timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    value = run()
    return (time.perf_counter() - started) * 1e3, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--criu", default=shutil.which("criu") or "criu", help="the criu binary")
    parser.add_argument("--restores", type=int, default=5, help="restores from the one image (default 5)")
    parser.add_argument("--torch", action="store_true", help="a torch worker (default: libcuda alone)")
    options = parser.parse_args()
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0, "cuInit"
    # criu restore -d leaves the restored process to the nearest subreaper: this process, so it
    # can reap what it restored.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

    def driver(step: str, pid: int) -> None:
        code = getattr(cuda, f"cuCheckpointProcess{step}")(pid, None)
        if code != 0:
            raise RuntimeError(f"cuCheckpointProcess{step}({pid}): CUresult {code}")

    def criu(*args: str) -> None:
        done = subprocess.run([options.criu, *args], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"criu {args[0]} rc {done.returncode}: {(done.stderr or done.stdout)[-900:]}")

    root = Path(tempfile.mkdtemp(prefix="kcoral-criu-"))
    work, image = root / "work", root / "image"
    work.mkdir()
    image.mkdir()
    log = open(root / "warmed.log", "w")
    target = subprocess.Popen(
        [sys.executable, "-c", WARMED, str(work), "torch" if options.torch else "bare"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd=work,
    )  # fmt: skip
    pid, figures = target.pid, {"kind": "torch" if options.torch else "bare"}
    restored_pids: list[int] = []
    try:
        figures["ready_ms"] = round(wait_for(work / "ready", 120)["ready_ms"], 1)
        figures["lock_ms"], _ = timed(lambda: driver("Lock", pid))
        figures["checkpoint_ms"], _ = timed(lambda: driver("Checkpoint", pid))
        figures["dump_ms"], _ = timed(lambda: criu("dump", "-t", str(pid), "-D", str(image), "--shell-job", "-o", "dump.log"))  # fmt: skip
        target.wait(timeout=30)  # criu dump ends the process
        figures["image_mib"] = round(sum(f.stat().st_size for f in image.iterdir()) / 2**20, 1)
        rows = []
        for n in range(options.restores):
            restore_ms, _ = timed(lambda: criu("restore", "-D", str(image), "--shell-job", "-d", "-o", f"restore{n}.log"))  # fmt: skip
            restored_pids.append(pid)
            driver_ms, _ = timed(lambda: (driver("Restore", pid), driver("Unlock", pid)))
            (work / f"go.{n}").touch()
            done = wait_for(work / f"done.{n}", 60)
            rows.append({"criu_restore_ms": restore_ms, "driver_restore_unlock_ms": driver_ms, **done})
            os.kill(pid, signal.SIGKILL)  # the next restore needs the pid free
            os.waitpid(pid, 0)
            # The image holds `go.N` unseen: each restore starts where the dump left it.
            (work / f"go.{n}").unlink()
            (work / f"done.{n}").unlink()
        for key in ("criu_restore_ms", "driver_restore_unlock_ms", "work_ms"):
            figures[key] = round(statistics.median(r[key] for r in rows), 1)
        figures["intact"] = all(r["intact"] for r in rows)
        figures["restores"] = len(rows)
    except Exception as error:  # report what got this far
        figures["error"] = str(error)[-1200:]
    finally:
        if target.poll() is None:
            target.kill()
            target.wait(timeout=10)
        if restored_pids:  # a restored process still running is this process's child
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        log.close()
        figures["logs"] = {p.name: p.read_text(errors="replace")[-600:] for p in sorted(image.glob("*.log"))[:3]}
        figures["warmed_log"] = (root / "warmed.log").read_text(errors="replace")[-600:]
        shutil.rmtree(root, ignore_errors=True)
    for key in ("lock_ms", "checkpoint_ms", "dump_ms"):
        if key in figures:
            figures[key] = round(figures[key], 1)
    print(json.dumps(figures, indent=1))
    return 0 if "error" not in figures else 1


if __name__ == "__main__":
    sys.exit(main())
