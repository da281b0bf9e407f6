"""One part of a stand-by's house-keeping, repeated on a GPU until SIGTERM: what
bench/housekeeping_perturbation.py runs beside timed kernels to find which part,
if any, moves them. Through libcuda alone (ctypes), so each part is only itself.

    python bench/gpu_churn.py PART [--device 0] [--parallel 3]

PART:
  contexts  processes that create a context, allocate and touch 64 MiB, and exit
            (a context created and destroyed), --parallel at a time
  create    processes that create a context and keep it (up to 48), nothing torn down
            until SIGTERM
  teardown  48 processes hold contexts before it says "ready"; then one exits every
            --interval-s (a context destroyed, nothing created)
  modules   one context loading and unloading a module of 64 kernels (JIT from PTX)
  alloc     one context allocating 512 MiB, touching it and freeing it (page tables)
  kernels   one context launching a short kernel and waiting for it (context switches)
  restore   --parallel processes hold warmed contexts (64 MiB touched); each in turn is locked,
            checkpointed to host memory, restored and unlocked through the driver's checkpoint
            API (a warmed worker's context brought back, issue 43), nothing created

Prints "ready" on stdout once it is churning (teardown: once its contexts exist), and
on SIGTERM stops, reaps every child and prints "done <count>" (operations completed).
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

PTX_HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n"
PTX_KERNEL = """
.visible .entry k{index}(.param .u64 out)
{{
  .reg .u64 %rd<3>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r1;
  ret;
}}
"""


class Cuda:
    """The few driver calls the parts use; every call is checked."""

    def __init__(self, device: int):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check(self.lib.cuInit(0), "cuInit")
        handle = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), handle), "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    @staticmethod
    def check(code: int, what: str) -> None:
        if code != 0:
            raise SystemExit(f"gpu_churn: {what} failed with CUresult {code}")

    def alloc(self, size: int) -> ctypes.c_uint64:
        pointer = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)), "cuMemAlloc")
        return pointer

    def touch(self, pointer: ctypes.c_uint64, size: int) -> None:
        self.check(self.lib.cuMemsetD8_v2(pointer, 0, ctypes.c_size_t(size)), "cuMemsetD8")
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def free(self, pointer: ctypes.c_uint64) -> None:
        self.check(self.lib.cuMemFree_v2(pointer), "cuMemFree")

    def load(self, ptx: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ptx), "cuModuleLoadData")
        return module

    def function(self, module: ctypes.c_void_p, name: bytes) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, name), "cuModuleGetFunction")
        return function

    def launch(self, function: ctypes.c_void_p, pointer: ctypes.c_uint64) -> None:
        argument = ctypes.c_void_p(ctypes.addressof(pointer))
        params = (ctypes.c_void_p * 1)(argument)
        self.check(self.lib.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, None, params, None), "cuLaunchKernel")
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


def ptx(kernels: int) -> bytes:
    return (PTX_HEADER + "".join(PTX_KERNEL.format(index=i) for i in range(kernels))).encode() + b"\0"


def child_command(device: int, hold: bool) -> list[str]:
    return [sys.executable, __file__, "_child", "--device", str(device)] + (["--hold"] if hold else [])


def run_child(device: int, hold: bool) -> None:
    """A context, 64 MiB touched; then exit, or report and wait for stdin to close."""
    cuda = Cuda(device)
    pointer = cuda.alloc(64 << 20)
    cuda.touch(pointer, 64 << 20)
    if hold:
        print("up", flush=True)
        sys.stdin.read()
    os._exit(0)  # no clean-up of our own: the driver destroys the context at exit


class Stop:
    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGTERM, self.request)
        signal.signal(signal.SIGINT, self.request)

    def request(self, *_):
        self.requested = True


def hold_context(device: int) -> subprocess.Popen:
    # A session of its own: a SIGTERM to the churner's group must not kill it mid-start. It
    # exits when its stdin closes, so it cannot outlive the churner either.
    child = subprocess.Popen(
        child_command(device, True), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    if child.stdout.readline().strip() != "up":
        raise SystemExit("gpu_churn: a context-holding child did not start")
    return child


def release(children: list) -> None:
    for child in children:
        child.stdin.close()
    for child in children:
        child.wait()


def churn(part: str, device: int, parallel: int, interval_s: float, stop: Stop) -> int:
    count = 0
    if part == "contexts":
        running: list[subprocess.Popen] = []
        print("ready", flush=True)
        while not stop.requested:
            running = [c for c in running if c.poll() is None]
            while len(running) < parallel:
                running.append(subprocess.Popen(child_command(device, False)))
                count += 1
            time.sleep(0.005)
        for child in running:
            child.wait()
    elif part == "create":
        held = []
        print("ready", flush=True)
        while not stop.requested and len(held) < 48:
            held.append(hold_context(device))
            count += 1
        while not stop.requested:
            time.sleep(0.05)
        release(held)
    elif part == "teardown":
        held = [hold_context(device) for _ in range(48)]
        print("ready", flush=True)
        while not stop.requested and held:
            release([held.pop()])
            count += 1
            time.sleep(interval_s)
        release(held)
    elif part == "restore":
        held = [hold_context(device) for _ in range(parallel)]
        lib = ctypes.CDLL("libcuda.so.1")
        Cuda.check(lib.cuInit(0), "cuInit")  # the checkpoint API needs it; no context here
        print("ready", flush=True)
        while not stop.requested:
            pid = held[count % len(held)].pid
            for step in ("Lock", "Checkpoint", "Restore", "Unlock"):
                Cuda.check(getattr(lib, f"cuCheckpointProcess{step}")(pid, None), f"cuCheckpointProcess{step}")
            count += 1
        release(held)
    else:
        cuda = Cuda(device)
        print("ready", flush=True)
        if part == "modules":
            image = ptx(64)
            while not stop.requested:
                module = cuda.load(image)
                cuda.function(module, b"k0")
                Cuda.check(cuda.lib.cuModuleUnload(module), "cuModuleUnload")
                count += 1
        elif part == "alloc":
            while not stop.requested:
                pointer = cuda.alloc(512 << 20)
                cuda.touch(pointer, 512 << 20)
                cuda.free(pointer)
                count += 1
        elif part == "kernels":
            module = cuda.load(ptx(1))
            function = cuda.function(module, b"k0")
            pointer = cuda.alloc(4096)
            while not stop.requested:
                cuda.launch(function, pointer)
                count += 1
    return count


PARTS = ("contexts", "create", "teardown", "modules", "alloc", "kernels", "restore")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        parser = argparse.ArgumentParser()
        parser.add_argument("_child")
        parser.add_argument("--device", type=int, default=0)
        parser.add_argument("--hold", action="store_true")
        args = parser.parse_args()
        run_child(args.device, args.hold)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    parser.add_argument(
        "--parallel", type=int, default=3, help="contexts: processes at a time; restore: processes held (default 3)"
    )
    parser.add_argument("--interval-s", type=float, default=0.25, help="teardown: seconds between exits")
    args = parser.parse_args()
    stop = Stop()
    count = churn(args.part, args.device, max(1, args.parallel), args.interval_s, stop)
    print(f"done {count}", flush=True)


if __name__ == "__main__":
    main()
