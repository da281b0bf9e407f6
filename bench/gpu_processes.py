"""Which processes NVML says hold a GPU, and whether this PID namespace sees them.

    python bench/gpu_processes.py [--gpu 0] [--with-context]

--with-context first creates a CUDA context in a child process (torch), so the list has
a process this script knows: NVML reports PIDs of the namespace the driver sees, which
need not be ours (containers). Prints pid, used MiB, and our /proc's comm for that pid.
"""

import argparse
import ctypes
import os
import subprocess
import sys
import time


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what the _v3 call fills
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("used_gpu_memory", ctypes.c_ulonglong),
        ("gpu_instance_id", ctypes.c_uint),
        ("compute_instance_id", ctypes.c_uint),
    ]


def compute_processes(gpu: int) -> list[ProcessInfo]:
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        raise SystemExit("nvmlInit_v2 failed")
    device = ctypes.c_void_p()
    if nvml.nvmlDeviceGetHandleByIndex_v2(gpu, ctypes.byref(device)) != 0:
        raise SystemExit(f"no GPU {gpu}")
    count = ctypes.c_uint(256)
    infos = (ProcessInfo * 256)()
    code = nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, ctypes.byref(count), infos)
    if code != 0:
        raise SystemExit(f"nvmlDeviceGetComputeRunningProcesses_v3 returned {code}")
    return list(infos[: count.value])


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "(not in this PID namespace)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--with-context", action="store_true")
    args = parser.parse_args()
    holder = None
    if args.with_context:
        code = "import torch,sys; torch.empty(1, device='cuda'); print('up', flush=True); sys.stdin.read()"
        holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        holder.stdout.readline()
        time.sleep(0.5)
        print(f"context holder: pid {holder.pid} (ours), this script {os.getpid()}")
    try:
        for info in compute_processes(args.gpu):
            print(f"pid {info.pid:8d}  {info.used_gpu_memory / 2**20:9.0f} MiB  {comm(info.pid)}")
    finally:
        if holder:
            holder.stdin.close()
            holder.wait()


if __name__ == "__main__":
    main()
