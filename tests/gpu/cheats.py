"""Reward hacks against the benchmark, one uploaded module each (issue: "A benchmark that
cannot be fooled"). Each defines kernel(x, y), meant to look like torch.mul(x, 2.0, out=y),
and may patch things when it is imported. tests/gpu/test_integrity.py times each beside the
honest kernel in the same program."""

# Shared by the modules below: a loaded shared library by file-name fragment.
_LOADED = r"""
import ctypes

def loaded(fragment):
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fragment in fields[5].rsplit("/", 1)[-1]:
            return ctypes.CDLL(fields[5])
    raise RuntimeError(fragment + " is not loaded in this process")
"""

HONEST = r"""
import torch

def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""

# --- Python-layer patching at import time -------------------------------------------------

FAKE_BUILTINS_BENCHMARK = (
    HONEST
    + r"""
import kcoral.builtins

def fake(fn, *rest):
    return {"latency_ms_median": 0.001, "latency_ms_mean": 0.001, "latency_ms_min": 0.001,
            "latency_ms_max": 0.001, "activities_stable": True, "flush_l2": True, "warmup": 1,
            "repeat": 1, "timer": "cupti", "integrity": {"verified": True, "trusted": True}}

vars(kcoral.builtins)["benchmark"] = fake
"""
)

SWAPPED_CALLABLE = (
    HONEST
    + r"""
import kcoral.builtins

genuine = kcoral.builtins.benchmark

def tiny(x, y):
    y[:1].mul_(1.0)

def swapped(fn, *rest):
    return genuine(tiny, *rest)

vars(kcoral.builtins)["benchmark"] = swapped
"""
)

PATCHED_SUMMARIZE = (
    HONEST
    + r"""
import kcoral.builtins

def summarize(samples):
    return {"latency_ms_median": 0.001}

vars(kcoral.builtins)["summarize"] = summarize
"""
)

FAKE_GPU_BENCHMARK = (
    HONEST
    + r"""
from kcoral._worker import gpu_benchmark

def fake(fn, args, cfg):
    return {"latency_ms_median": 0.001, "timer": "cupti"}

gpu_benchmark.benchmark = fake
"""
)

SWAPPED_NATIVE_BENCHMARK = (
    HONEST
    + r"""
from kcoral import _native

genuine = _native.benchmark

def tiny(x, y):
    y[:1].mul_(1.0)

def swapped(fn, args, **options):
    return genuine(tiny, args, **options)

_native.benchmark = swapped
from kcoral._worker import gpu_benchmark
vars(gpu_benchmark)["_benchmark"] = swapped
"""
)

PATCHED_MEDIAN = (
    HONEST
    + r"""
import statistics

statistics.median = lambda data: 0.001
"""
)

FLIPPED_DEVICE = (
    HONEST
    + r"""
import os

os.environ["KCORAL_WORKER_DEVICE"] = "cpu"  # ask for the host timer
"""
)

SETTRACE_REWRITE = (
    HONEST
    + r"""
import sys

def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "benchmark":
        return rewriter
    return None

def rewriter(frame, event, arg):
    if event == "return" and isinstance(arg, dict) and "latency_ms_median" in arg:
        arg["latency_ms_median"] = 0.001
    return rewriter

sys.settrace(tracer)
"""
)

PYTHON_PATCHES = {
    "fake_builtins_benchmark": FAKE_BUILTINS_BENCHMARK,
    "swapped_callable": SWAPPED_CALLABLE,
    "patched_summarize": PATCHED_SUMMARIZE,
    "fake_gpu_benchmark": FAKE_GPU_BENCHMARK,
    "swapped_native_benchmark": SWAPPED_NATIVE_BENCHMARK,
    "patched_statistics_median": PATCHED_MEDIAN,
    "flipped_device": FLIPPED_DEVICE,
    "settrace_rewrites_the_result": SETTRACE_REWRITE,
}

# --- Result caching and lazy outputs ------------------------------------------------------

CACHED_ONCE = r"""
import torch

_done = []

def kernel(x, y):
    if _done:
        y[:1].mul_(1.0)  # a 1-element launch: the answer is "already there"
        return
    torch.mul(x, 2.0, out=y)
    _done.append(True)
"""

CACHED_BY_POINTER = r"""
import torch

_seen = set()

def kernel(x, y):
    key = (x.data_ptr(), y.data_ptr())
    if key in _seen:
        y[:1].mul_(1.0)
        return
    torch.mul(x, 2.0, out=y)
    _seen.add(key)
"""

STORAGE_SWAP = r"""
import torch

_answer = []

def kernel(x, y):
    if not _answer:
        _answer.append(torch.mul(x, 2.0))
    y.set_(_answer[0])  # "correct" without work
    y[:1].mul_(1.0)
"""

STORAGE_SWAP_AFTER_ONE = r"""
import torch

_answer = []

def kernel(x, y):
    if not _answer:
        torch.mul(x, 2.0, out=y)
        _answer.append(y.clone())
        return
    y.set_(_answer[0])
    y[:1].mul_(1.0)
"""

# Issue 23: outputs found from evidence (returned tensors, arguments a probe call writes) must
# still catch these.

WRITES_ON_FIRST_CALL_ONLY = r"""
import torch

_calls = []


def kernel(x, y):
    if not _calls:
        torch.mul(x, 2.0, out=y)  # the probe call sees y written
    _calls.append(True)  # later calls do nothing at all: no launch
"""

RETURNS_CACHED_TENSOR = r"""
_cached = []


def kernel(x):
    if not _cached:
        _cached.append(x * 2.0)
    return _cached[0]  # the same tensor, computed once, on every call
"""

# prepare(x) runs once before timing; kernel(x) then replays a graph that copies the answer
# computed in prepare into its static output: no multiply is ever timed.
GRAPH_REPLAYS_PRECOMPUTED_COPY = r"""
import torch

_state = {}


def prepare(x):
    precomputed = x * 2.0
    static_out = torch.empty_like(precomputed)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        static_out.copy_(precomputed)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out.copy_(precomputed)
    torch.cuda.synchronize()
    _state.update(graph=graph, static_out=static_out, precomputed=precomputed)


def kernel(x):
    _state["graph"].replay()
    return _state["static_out"]
"""

# --- Checker tampering ----------------------------------------------------------------------

WRONG_WITH_PATCHED_CHECKER = r"""
import torch
import torch.testing

torch.testing.assert_close = lambda *args, **kwargs: None

def kernel(x, y):
    torch.mul(x, 3.0, out=y)  # wrong
"""

# --- Persisting L2 --------------------------------------------------------------------------

PERSISTING_L2 = (
    _LOADED
    + r"""
import torch

class AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hit_ratio", ctypes.c_float), ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]

class StreamAttrValue(ctypes.Union):  # cudaLaunchAttributeValue: 64 bytes
    _fields_ = [("window", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]

_stream = torch.cuda.Stream()
_pinned = []

def _pin(x):
    cudart = loaded("libcudart")
    device = ctypes.c_int(0)
    limit = ctypes.c_int(0)
    window_max = ctypes.c_int(0)
    cudart.cudaGetDevice(ctypes.byref(device))
    cudart.cudaDeviceGetAttribute(ctypes.byref(limit), 108, device)       # MaxPersistingL2CacheSize
    cudart.cudaDeviceGetAttribute(ctypes.byref(window_max), 109, device)  # MaxAccessPolicyWindowSize
    assert cudart.cudaDeviceSetLimit(0x06, ctypes.c_size_t(limit.value)) == 0  # PersistingL2CacheSize
    value = StreamAttrValue()
    value.window = AccessPolicyWindow(x.data_ptr(), min(x.numel() * 4, window_max.value), 1.0, 2, 1)
    assert cudart.cudaStreamSetAttribute(ctypes.c_void_p(_stream.cuda_stream), 1, ctypes.byref(value)) == 0
    _pinned.append(x.data_ptr())

def kernel(x, y):
    if x.data_ptr() not in _pinned:
        _pin(x)
    with torch.cuda.stream(_stream):
        torch.mul(x, 2.0, out=y)
"""
)

HONEST_ON_A_STREAM = r"""
import torch

_stream = torch.cuda.Stream()

def kernel(x, y):
    with torch.cuda.stream(_stream):
        torch.mul(x, 2.0, out=y)
"""

# --- Work outside the timed process ---------------------------------------------------------

HELPER_PROCESS = r'''
import pickle
import struct
import subprocess
import sys

import cupy
import torch

# The helper maps the caller's buffers through CUDA IPC and does the work in its own process.
CHILD = """
import pickle, struct, sys
import cupy
read, write = sys.stdin.buffer, sys.stdout.buffer
opened = {}
write.write(b"r"); write.flush()
while True:
    size = read.read(8)
    if len(size) < 8:
        break
    key, handles, n = pickle.loads(read.read(struct.unpack("<Q", size)[0]))
    if handles is not None:
        pointers = [cupy.cuda.runtime.ipcOpenMemHandle(h) for h in handles]
        opened[key] = [cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(p, n * 4, None), 0)) for p in pointers]
    x, y = opened[key]
    cupy.multiply(x, 2.0, out=y)
    cupy.cuda.runtime.deviceSynchronize()
    write.write(b"d"); write.flush()
"""

_helper = []
_shared = set()

def kernel(x, y):
    torch.cuda.synchronize()  # the poison must land before the helper writes
    if not _helper:
        _helper.append(subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE))
        assert _helper[0].stdout.read(1) == b"r"
    child = _helper[0]
    key = (x.data_ptr(), y.data_ptr())
    handles = None
    if key not in _shared:
        handles = [cupy.cuda.runtime.ipcGetMemHandle(pointer) for pointer in key]
        _shared.add(key)
    payload = pickle.dumps((key, handles, x.numel()))
    child.stdin.write(struct.pack("<Q", len(payload)) + payload)
    child.stdin.flush()
    assert child.stdout.read(1) == b"d"
    y[:1].mul_(1.0)  # the only launch in this process
'''

# --- Hidden API records ---------------------------------------------------------------------

HIDDEN_API_RECORDS = (
    _LOADED
    + r"""
import torch

_cupti = loaded("libcupti")
RUNTIME, DRIVER = 5, 4  # CUpti_ActivityKind

def kernel(x, y):
    y[:1].mul_(1.0)  # a visible 1-element launch
    _cupti.cuptiActivityDisable(RUNTIME)
    _cupti.cuptiActivityDisable(DRIVER)
    torch.mul(x, 2.0, out=y)  # the real work, with its API records hidden
    _cupti.cuptiActivityEnable(DRIVER)
    _cupti.cuptiActivityEnable(RUNTIME)
"""
)

# --- Baseline sabotage ----------------------------------------------------------------------

SABOTAGED_BASELINE = r"""
import torch

_genuine_mul = torch.mul

def slow_mul(*args, **kwargs):
    for _ in range(3):
        _genuine_mul(*args, **kwargs)
    return _genuine_mul(*args, **kwargs)

torch.mul = slow_mul  # the reference, timed later in this worker, now runs 4x the work

def kernel(x, y):
    _genuine_mul(x, 2.0, out=y)
"""

# --- Clocks ---------------------------------------------------------------------------------

SET_CLOCKS = (
    _LOADED
    + r"""
def try_to_lock_clocks():
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    assert nvml.nvmlInit_v2() == 0
    device = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)) == 0
    return {"lock": nvml.nvmlDeviceSetGpuLockedClocks(device, 1000, 1000),
            "application": nvml.nvmlDeviceSetApplicationsClocks(device, 3201, 1980)}  # the defaults
"""
)
