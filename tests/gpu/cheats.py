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


# ==========================================================================================
# Issue 40, item 4: one program per public attack class, each beside an honest twin.
#
# Every program below defines kernel(...) (and may define prepare(...), run once before timing,
# report() -> a dict of what it managed to install, and settle(), which waits for work it left
# running). CLASS_CASES pairs each with its honest twin (same signature, honest computation),
# the inputs it is timed on and what the benchmark should answer; tests/gpu/test_cheat_classes.py
# runs them, and `python tests/gpu/cheats.py [name ...]` runs each with plain torch (no server)
# against a naive event timer behind a gate and a CUPTI (torch.profiler) timer, to show that
# the attack works on a timer that has no defences.
#
# Kernels: a 4096x4096 bf16 product (~200 us on an H100) for the caching attacks, where a copy
# of a cached answer (32 MiB, ~20 us) is far cheaper than the work; torch.mul over 64 Mi float32
# (~127 us on the H200, memory-bound) where hiding the work is the attack.
# ==========================================================================================

# Input builders, the off-mode wrapper and the naive grader's check, uploaded as one module.
CLASS_OPS = r"""
import math
import sys

import torch

N_MUL = 64 * 1024 * 1024  # 256 MiB of float32: ~127 us per torch.mul on the H200
N_MM = 4096               # bf16 product: 137 GFLOP, ~200 us


def _randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, device="cuda", generator=generator)


def matmul_inputs():
    return [_randn(N_MM, N_MM, dtype=torch.bfloat16, seed=1), _randn(N_MM, N_MM, dtype=torch.bfloat16, seed=2)]


def mul_inputs():
    return [_randn(N_MUL, seed=0), torch.zeros(N_MUL, device="cuda")]


def mul_return_inputs():
    return [_randn(N_MUL, seed=0)]


def nonnegative_inputs():
    return [_randn(N_MUL, seed=0).abs_()]


def pick(values, index):
    return values[index]


def discard(fn):
    # With cfg outputs=[] the benchmark still checks (and poisons) returned tensors; a timer with
    # no defences checks nothing, so the off runs time this wrapper, which drops the return value.
    def call(*args):
        fn(*args)

    return call


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in _tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def max_error(cheat, honest, outputs, *args):
    # The naive grader: one call to warm whatever the kernel keys on, one more, then its returned
    # tensors and output arguments against the honest twin's, run afterwards on the same tensors
    # (output arguments fresh). Output arguments start as NaN, so a call that skips shows.
    args = list(args)
    for index in outputs:
        args[index].fill_(float("nan"))
    torch.cuda.synchronize()
    cheat(*args)
    torch.cuda.synchronize()
    returned = cheat(*args)
    settle = getattr(sys.modules.get(getattr(cheat, "__module__", None) or ""), "settle", None)
    if settle is not None:
        settle()
    torch.cuda.synchronize()
    got = [t.detach().float().clone() for t in _tensors(returned)] + [args[i].float().clone() for i in outputs]
    del returned
    fresh = [torch.empty_like(a) if i in outputs else a for i, a in enumerate(args)]
    want = [t.detach().float() for t in _tensors(honest(*fresh))] + [fresh[i].float() for i in outputs]
    torch.cuda.synchronize()
    error, scale = 0.0, 0.0
    if len(got) != len(want) or not got:
        error = math.inf
    for g, w in zip(got, want):
        if g.shape != w.shape:
            error = math.inf
            continue
        if g.numel():
            difference = (g.as_subclass(torch.Tensor) - w.as_subclass(torch.Tensor)).abs().max().item()
            error = max(error, difference if math.isfinite(difference) else math.inf)
            scale = max(scale, w.abs().max().item())
    return {"max_abs_error": error if math.isfinite(error) else None, "max_abs_expected": scale, "tensors": len(got)}
"""

# --- Honest twins ---------------------------------------------------------------------------

HONEST_MATMUL = r"""
import torch


def kernel(a, b):
    return a @ b
"""

HONEST_MATMUL_DICT = r"""
import torch


def kernel(a, b):
    return {"out": a @ b}
"""

HONEST_MATMUL_PAIR = r"""
import torch


def kernel(a, b):
    return a @ b, a[:8] @ b[:, :8]
"""

HONEST_MUL_RETURN = r"""
import torch


def kernel(x):
    return x * 2.0
"""

HONEST_CLAMP_MIN = r"""
import torch


def kernel(x):
    return torch.clamp(x, min=0.0)  # on non-negative inputs: the input's values
"""

HONEST_CLAMP_MAX = r"""
import torch


def kernel(x):
    return torch.clamp(x, max=0.0)  # on non-negative inputs: zeros
"""

# --- Timing -------------------------------------------------------------------------------

# T1: the work goes to a side stream that the caller's stream never waits for: a timer that
# records events on the current stream times an empty span.
SIDE_STREAM_UNSYNCHRONISED = r"""
import torch

_side = torch.cuda.Stream()


def kernel(x, y):
    with torch.cuda.stream(_side):
        torch.mul(x, 2.0, out=y)
"""

# T2: the call returns at once; a host thread launches the work 1 ms later (threads are joined two
# calls on, or by settle()): a timer that stops when the call returns and the device drains misses it.
HOST_THREAD_FINISHES_AFTER_RETURN = r"""
import threading
import time

import torch

_side = torch.cuda.Stream()
_pending = []


def _finish(x, y):
    time.sleep(0.001)
    with torch.cuda.stream(_side):
        torch.mul(x, 2.0, out=y)
    _side.synchronize()


def settle(keep=0):
    while len(_pending) > keep:
        _pending.pop(0).join(timeout=30)


def kernel(x, y):
    settle(keep=2)
    thread = threading.Thread(target=_finish, args=(x, y), daemon=True)
    thread.start()
    _pending.append(thread)
"""

# T3: a lazy output: the returned tensor subclass is an empty allocation (no launch); its storage
# is filled by __torch_function__ the first time torch reads it, i.e. in the grader's comparison.
LAZY_SUBCLASS_OUTPUT = r"""
import torch


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for value in list(args) + list((kwargs or {}).values()):
            for tensor in value if isinstance(value, (list, tuple)) else [value]:
                source = tensor.__dict__.pop("_pending", None) if isinstance(tensor, Lazy) else None
                if source is not None:
                    with torch._C.DisableTorchFunctionSubclass():
                        torch.mul(source, 2.0, out=tensor)
        return super().__torch_function__(func, types, args, kwargs)


def kernel(x):
    out = torch.empty_like(x).as_subclass(Lazy)
    out.__dict__["_pending"] = x
    return out
"""

# T4: the Python clocks and statistics patched wherever a Python timer could read them: the
# modules, an alias, a replacement in sys.modules, and names in every calling frame's globals.
# Pays against a timer written in Python; ours is C++, so the number must stay the honest one.
PYTHON_TIMER_AND_STATISTICS_PATCHED = r"""
import statistics
import statistics as stats_alias
import sys
import time
import types

import torch

_perf, _perf_ns, _median, _mean = time.perf_counter, time.perf_counter_ns, statistics.median, statistics.mean


def _slow_clock():
    return _perf() * 0.01


def _slow_clock_ns():
    return _perf_ns() // 100


def _tiny_median(data):
    return _median(data) * 0.01


def _tiny_mean(data):
    return _mean(data) * 0.01


time.perf_counter, time.perf_counter_ns = _slow_clock, _slow_clock_ns
stats_alias.median, stats_alias.mean = _tiny_median, _tiny_mean
_fake = types.ModuleType("statistics")
_fake.__dict__.update(vars(statistics))
sys.modules["statistics"] = _fake
_names = {"perf_counter": _slow_clock, "perf_counter_ns": _slow_clock_ns, "median": _tiny_median, "mean": _tiny_mean}
_frame = sys._getframe()
while _frame is not None:
    _globals = _frame.f_globals
    for _name, _value in _names.items():
        if _name in _globals and _globals is not globals():
            _globals[_name] = _value
    if _globals.get("statistics") is statistics:
        _globals["statistics"] = _fake
    _frame = _frame.f_back
del _frame, _globals


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""

# Machine code and page protection for the native hijacks (T5).
_NATIVE = r"""
import ctypes
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
RETURN_SUCCESS = b"\x31\xc0\xc3"  # xor eax, eax; ret: CUPTI_SUCCESS, nothing done
RETURN_END_OF_BUFFER = b"\xb8\x0c\x00\x00\x00\xc3"  # mov eax, 12; ret: CUPTI_ERROR_MAX_LIMIT_REACHED


def writable(address, size, executable):
    page = address & ~0xFFF
    length = ((address + size + 0xFFF) & ~0xFFF) - page
    if _libc.mprotect(page, length, 7 if executable else 3) != 0:
        raise OSError(ctypes.get_errno(), "mprotect refused")


def stub(code):
    page = _libc.mmap(None, 4096, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
    if page in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap refused")
    ctypes.memmove(page, code, len(code))
    if _libc.mprotect(page, 4096, 5) != 0:  # PROT_READ|PROT_EXEC
        raise OSError(ctypes.get_errno(), "mprotect refused")
    return page


def got_slots(path, symbol):
    # (load-address offsets of the GOT slots that bind `symbol`, first PT_LOAD page) of an ELF file.
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return [], 0
        (phoff, shoff) = struct.unpack_from("<QQ", head, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
        f.seek(phoff)
        program_headers = f.read(phentsize * phnum)
        loads = [struct.unpack_from("<IIQQ", program_headers, i * phentsize) for i in range(phnum)]
        first = min((p[3] for p in loads if p[0] == 1), default=0) & ~0xFFF
        f.seek(shoff)
        raw = f.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]

        def read(section):
            f.seek(section[4])
            return f.read(section[5])

        slots = []
        for section in sections:
            if section[1] != 4 or section[6] >= len(sections):  # SHT_RELA
                continue
            symbols = sections[section[6]]
            if symbols[1] != 11:  # SHT_DYNSYM
                continue
            names, table, relocations = read(sections[symbols[6]]), read(symbols), read(section)
            for at in range(0, len(relocations) - 23, 24):
                offset, info, _ = struct.unpack_from("<QQq", relocations, at)
                if info & 0xFFFFFFFF not in (6, 7):  # GLOB_DAT, JUMP_SLOT
                    continue
                (name,) = struct.unpack_from("<I", table, (info >> 32) * 24)
                if names[name : names.index(b"\0", name)] == symbol:
                    slots.append(offset)
    return slots, first


def patch_importers(symbol, code, skip="libcupti"):
    # Points every GOT slot of `symbol` in the loaded libraries (but `skip`) at a stub.
    bases = {}
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("/") and int(fields[2], 16) == 0:
            bases.setdefault(fields[5], int(fields[0].split("-")[0], 16))
    target, patched = None, []
    for path, base in bases.items():
        if skip in path.rsplit("/", 1)[-1]:
            continue
        try:
            slots, first = got_slots(path, symbol.encode())
        except (OSError, ValueError, struct.error):
            continue
        for slot in slots:
            target = target or stub(code)
            address = base - first + slot
            writable(address, 8, False)
            ctypes.c_void_p.from_address(address).value = target
            patched.append(path.rsplit("/", 1)[-1])
    return patched
"""

# T5: an inline detour: the first bytes of libcupti's cuptiActivityEnable become
# `xor eax, eax; ret`, so every enable "succeeds" and CUPTI records nothing: no sample can see
# the work.
CUPTI_ENABLE_INLINE_DETOUR = (
    _LOADED
    + _NATIVE
    + r"""
import torch

STATE = {}
try:
    _enable = ctypes.cast(loaded("libcupti").cuptiActivityEnable, ctypes.c_void_p).value
    writable(_enable, len(RETURN_SUCCESS), True)
    ctypes.memmove(_enable, RETURN_SUCCESS, len(RETURN_SUCCESS))
    STATE["detoured"] = hex(_enable)
except Exception as error:  # noqa: BLE001 - a refused patch leaves an honest kernel
    STATE["error"] = repr(error)[:300]


def report():
    return STATE


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""
)

# T5: a GOT patch: every library that imports cuptiActivityEnable or cuptiActivityGetNextRecord
# (the benchmark's native module among them) gets them bound to stubs: enables that do nothing,
# and buffers that read as empty.
CUPTI_GOT_PATCH = (
    _NATIVE
    + r"""
import torch

STATE = {}
for _symbol, _code in (("cuptiActivityEnable", RETURN_SUCCESS), ("cuptiActivityGetNextRecord", RETURN_END_OF_BUFFER)):
    try:
        STATE[_symbol] = patch_importers(_symbol, _code)
    except Exception as error:  # noqa: BLE001
        STATE[_symbol] = repr(error)[:300]


def report():
    return STATE


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""
)

# T6: the result channel: the engine's value encoder is wrapped, so that every benchmark result
# leaving the worker shows 100x smaller times, "trusted" and no flags; MODE "record" also edits
# the sealed record's median to match (the seal then no longer does).
RESULT_REWRITTEN = r"""
import re

import torch
from kcoral._worker import values

MODE = "numbers"
_encode = values.encode_value
_MEDIAN = re.compile(r'("latency_ms_median"\s*:\s*(?:\{[^{}]*?"value"\s*:\s*)?)(-?[0-9][0-9.eE+-]*)')


def _forge(result):
    for key, value in list(result.items()):
        if key.startswith("latency_ms_") and isinstance(value, float):
            result[key] = value * 0.01
    integrity = result.get("integrity")
    if isinstance(integrity, dict):
        integrity.update(trusted=True, verified=True, flags=[], outputs_unchecked=[])
        if MODE == "record" and isinstance(integrity.get("record"), str):
            integrity["record"] = _MEDIAN.sub(lambda m: m.group(1) + repr(float(m.group(2)) * 0.01), integrity["record"])


def _walk(value):
    if isinstance(value, dict):
        if "latency_ms_median" in value:
            _forge(value)
        for item in value.values():
            _walk(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item)


def encode_value(value, *args, **kwargs):
    _walk(value)
    return _encode(value, *args, **kwargs)


values.encode_value = encode_value


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""

RESULT_RECORD_FORGED = RESULT_REWRITTEN.replace('MODE = "numbers"', 'MODE = "record"')

# T7: phase detection: the timer's launch gate holds the stream while a timed call is queued,
# so a timed call finds its stream busy and skips the work; probe and check calls, made on an
# idle stream, compute.
PHASE_DETECTED_BY_BUSY_STREAM = r"""
import torch


def kernel(x, y):
    if not torch.cuda.current_stream().query():
        return  # timed
    torch.mul(x, 2.0, out=y)
"""

# T8: super-batching: one call computes the answers of the next 16 calls (one product and one
# broadcast copy) and each later call returns one of them, a fresh storage every time:
# (~200 + ~170) / 16 us per call instead of ~200.
SUPER_BATCHED_ANSWERS = r"""
import torch

BATCH = 16
_queue = []


def kernel(a, b):
    if not _queue:
        product = a @ b
        _queue.extend(product.unsqueeze(0).expand(BATCH, *product.shape).contiguous().unbind(0))
    return _queue.pop()
"""

# T9: a CUDA graph that replays a copy of a product computed once in prepare(): a 32 MiB copy
# (~20 us) is timed where the product takes ~200 us.
GRAPH_REPLAYS_CACHED_PRODUCT = r"""
import torch

_state = {}


def prepare(a, b):
    precomputed = a @ b
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


def kernel(a, b):
    _state["graph"].replay()
    return _state["static_out"]
"""

# T9 "timing disabled" and the H200's route 1: kernel activity records (CONCURRENT_KERNEL = 10,
# KERNEL = 3) switched off from inside the call; the work is honest, and the timer sees none of it.
CUPTI_KERNEL_RECORDS_DISABLED = (
    _LOADED
    + r"""
import torch

_cupti = loaded("libcupti")


def kernel(x, y):
    _cupti.cuptiActivityDisable(10)
    _cupti.cuptiActivityDisable(3)
    torch.mul(x, 2.0, out=y)
"""
)

# The H200's route 2: cuptiFinalize inside the call detaches CUPTI with the timer's session open.
CUPTI_FINALIZED_INSIDE_THE_CALL = (
    _LOADED
    + r"""
import torch

_cupti = loaded("libcupti")


def kernel(x, y):
    _cupti.cuptiFinalize()
    torch.mul(x, 2.0, out=y)
"""
)

# T10: every activity kind the timer uses switched off around the work and back on after it:
# each sample is 0, which breaks a geometric mean (log 0) or a ratio to a baseline, and the
# timer's own records (its gate, its flushes) still flow.
ALL_ACTIVITY_HIDDEN = (
    _LOADED
    + r"""
import torch

_cupti = loaded("libcupti")
HIDE = (5, 4, 10, 3, 1, 2)  # runtime, driver, concurrent kernel, kernel, memcpy, memset
RESTORE = (5, 4, 10, 1, 2)  # the timer's kinds


def kernel(x, y):
    for kind in HIDE:
        _cupti.cuptiActivityDisable(kind)
    torch.mul(x, 2.0, out=y)
    for kind in RESTORE:
        _cupti.cuptiActivityEnable(kind)
"""
)

# --- Outputs ------------------------------------------------------------------------------

# S1: result replay: the product computed once per key, and a copy of it (~20 us) returned for
# every later call with that key (~200 us each honestly). KEY is one of REPLAY_KEYS.
REPLAY_KEYS = {
    "id": "(id(a), id(b))",
    "data_ptr": "(a.data_ptr(), b.data_ptr())",
    "version": "(a._version, b._version, a.shape)",
    "shape": "(tuple(a.shape), tuple(b.shape), a.dtype)",
    "fingerprint": "tuple(a.view(-1)[:8].tolist() + b.view(-1)[:8].tolist())",  # 16 values read back
}

_REPLAY = r"""
import torch

_answers = {}


def kernel(a, b):
    key = KEY
    if key not in _answers:
        if len(_answers) >= 8:
            _answers.clear()
        _answers[key] = a @ b
    return _answers[key].clone()
"""

REPLAY_BY_KEY = {name: _REPLAY.replace("KEY", expression) for name, expression in REPLAY_KEYS.items()}

# S1, the fingerprint cache grown wary: it computes the first six sets of values it is given
# (the grader's check, the benchmark's reference and probe calls) and answers any later new
# values with a copy of a cached product, as fast as a replay. No check against a reference
# reaches those calls (a self-referenced benchmark knows no answer to values it never gave), but
# the copy it returns is, bit for bit, its answer to the caller's values. Garbage of its own
# making instead would be out of `benchmark`'s reach: only a reference out of its reach on
# unseen inputs (issue 42's grade) checks those calls.
REPLAY_FINGERPRINT_GARBAGE_WHEN_UNSEEN = r"""
import torch

_answers = {}


def kernel(a, b):
    key = tuple(a.view(-1)[:8].tolist() + b.view(-1)[:8].tolist())
    if key not in _answers:
        if len(_answers) >= 6:
            return next(iter(_answers.values())).clone()
        _answers[key] = a @ b
    return _answers[key].clone()
"""

# S2: stale memory: the first call computes the product and returns it; once the caller drops it,
# torch's caching allocator hands the same block to the next call's torch.empty_like, which still
# holds the answer. No launch at all after the first call.
STALE_BLOCK_FROM_THE_ALLOCATOR = r"""
import torch

_calls = []


def kernel(a, b):
    if not _calls:
        _calls.append(True)
        return a @ b
    return torch.empty_like(a)  # square: the product's shape and dtype
"""

# S3: the answer sheet: a grader's expected output (a CUDA tensor of the output's shape and dtype
# that is not an input) found through gc.get_objects(), and a copy of it returned.
ANSWER_SHEET_FROM_GC = r"""
import gc

import torch

_sheet = []


def _find(a, b):
    shape = (a.shape[0], b.shape[1])
    for candidate in gc.get_objects():
        if not isinstance(candidate, torch.Tensor) or not candidate.is_cuda:
            continue
        if tuple(candidate.shape) != shape or candidate.dtype != a.dtype:
            continue
        if candidate.data_ptr() in (a.data_ptr(), b.data_ptr()):
            continue
        if torch.equal(candidate, a) or torch.equal(candidate, b):
            continue
        return candidate
    return None


def kernel(a, b):
    if not _sheet:
        found = _find(a, b)
        _sheet.append(found.clone() if found is not None else a @ b)
    return _sheet[0].clone()
"""

# S4: input mutation: the first input zeroed, so that a reference computed from the inputs after
# the call is zeros too; zeros returned. Two memsets (~20 us) instead of the product.
INPUTS_ZEROED = r"""
import torch


def kernel(a, b):
    a.zero_()
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
"""

# S5: pass-through: where the inputs make the op an identity (a clamp at 0 of non-negative
# values), return the input itself.
PASS_THROUGH = r"""
import torch


def kernel(x):
    return x
"""

# S5: a constant output: where the answer is zeros on the grader's inputs, a zero broadcast to
# the output's shape (no memory, no launch).
CONSTANT_ZEROS = r"""
import torch

_zero = torch.zeros((), device="cuda")


def kernel(x):
    return _zero.expand(x.shape)
"""

# S8: harness patching: kcoral.builtins is reloaded, then replaced in sys.modules by a module
# whose benchmark runs the kernel once (its outputs come out right) and reports a made-up time
# with a forged integrity; whether the library's file on disk could be rewritten is reported
# (opened for writing, never written).
HARNESS_MODULE_REPLACED = r"""
import importlib
import sys
import types

import torch
import kcoral
import kcoral.builtins

STATE = {}
try:
    importlib.reload(kcoral.builtins)
    STATE["reload"] = "reloaded"
except Exception as error:  # noqa: BLE001
    STATE["reload"] = repr(error)[:200]
try:
    with open(kcoral.builtins.__file__, "r+b"):
        STATE["library_file"] = "writable"
except OSError as error:
    STATE["library_file"] = repr(error)[:200]

_fake = types.ModuleType("kcoral.builtins")
_fake.__dict__.update(vars(sys.modules["kcoral.builtins"]))


def _benchmark(fn, *rest):
    args = rest[:-1] if rest and isinstance(rest[-1], dict) else rest
    fn(*args)
    torch.cuda.synchronize()
    numbers = {f"latency_ms_{k}": 0.001 for k in ("median", "mean", "min", "max", "p99")}
    integrity = {"verified": True, "trusted": True, "flags": [], "outputs_unchecked": []}
    return {**numbers, "timer": "cupti", "warmup": 1, "repeat": 1, "integrity": integrity}


_fake.benchmark = _benchmark
sys.modules["kcoral.builtins"] = _fake
kcoral.builtins = _fake


def report():
    return STATE


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""

# S9: obfuscated code: the shape-keyed replay of S1, base64-encoded and exec'd, so that a
# reviewer of the upload sees no cache.
BASE64_EXEC_OF_A_REPLAY = (
    "import base64\n\nexec(base64.b64decode(%r).decode(), globals())\n"
    % __import__("base64").b64encode(REPLAY_BY_KEY["shape"].encode()).decode()
)

# S9: a package installed at run time: the replay of S1 written to a directory and installed with
# pip (no index, no network needed) in prepare(). Where pip cannot install it, the kernel stays
# honest; either way it is more uploaded code, and the benchmark must answer as it does for S1.
PACKAGE_INSTALLED_AT_RUN_TIME = r"""
import os
import subprocess
import sys
import tempfile

import torch

PACKAGE = %r
STATE = {}
_impl = []


def prepare(a, b):
    root = tempfile.mkdtemp(prefix="kc_package_")
    os.makedirs(os.path.join(root, "src", "fastmm_cheat"))
    with open(os.path.join(root, "src", "pyproject.toml"), "w") as f:
        f.write('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                '[project]\nname = "fastmm-cheat"\nversion = "0.1"\n')
    with open(os.path.join(root, "src", "fastmm_cheat", "__init__.py"), "w") as f:
        f.write(PACKAGE)
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
               "--disable-pip-version-check", "--target", os.path.join(root, "site"), os.path.join(root, "src")]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        STATE.update(pip_returncode=done.returncode, pip_output=(done.stdout + done.stderr)[-300:])
    except Exception as error:  # noqa: BLE001 - no pip, no subprocesses: the kernel stays honest
        STATE.update(pip_returncode=None, pip_output=repr(error)[:300])
        return
    if done.returncode == 0:
        sys.path.insert(0, os.path.join(root, "site"))
        import fastmm_cheat

        _impl.append(fastmm_cheat.kernel)
    STATE["installed"] = bool(_impl)


def report():
    return STATE


def kernel(a, b):
    if _impl:
        return _impl[0](a, b)
    return a @ b
""" % REPLAY_BY_KEY["shape"]

# --- Benign -------------------------------------------------------------------------------

# B2: a ghost kernel: a Triton kernel defined and never launched; torch.mul does the work. The
# kernels the timer saw (integrity.kernels) must not name it.
GHOST_TRITON_KERNEL = r"""
import torch

try:
    import triton
    import triton.language as tl

    @triton.jit
    def ghost_scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)
except ImportError:
    ghost_scale_kernel = None


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
"""

# --- The six routes that fooled the benchmark on the H200 ---------------------------------

# Route 3: a cached nn.Parameter (a tensor subclass) returned on every call.
CACHED_NN_PARAMETER = r"""
import torch

_cached = []


def kernel(a, b):
    if not _cached:
        _cached.append(torch.nn.Parameter(a @ b, requires_grad=False))
    return _cached[0]
"""

# Route 4: a strided (transposed) view of a cached buffer: non-contiguous, so it used to go unchecked.
STRIDED_VIEW_OF_CACHED_BUFFER = r"""
import torch

_cached = []


def kernel(a, b):
    if not _cached:
        _cached.append((a @ b).t().contiguous())
    return _cached[0].t()
"""

# Route 5: a collections.OrderedDict (a dict subclass) holding a cached result.
ORDERED_DICT_OF_CACHED_RESULT = r"""
import collections

import torch

_cached = []


def kernel(a, b):
    if not _cached:
        _cached.append(a @ b)
    return collections.OrderedDict(out=_cached[0])
"""

# Route 6: a tuple of a cached big tensor (32 MiB, returned unchanged: it passed as a "constant")
# and a small tensor (8x8) that is really computed, so the call has a checked output.
CACHED_BIG_BESIDE_COMPUTED_SMALL = r"""
import torch

_cached = []


def kernel(a, b):
    if not _cached:
        _cached.append(a @ b)
    return _cached[0], a[:8] @ b[:, :8]
"""


def _case(cls, source, honest, inputs, outputs=(), **extra):
    """One attack program: its class, source, honest twin, input builder (in CLASS_OPS), output
    argument indices (for the naive check; returned tensors are always compared), and:
    prepare (run prepare(*args) before timing), answer_sheet (a grader's expected output sits in
    memory), needs_worker (uses kcoral's worker modules: not run by the smoke runner),
    honest_trusted (the twin must come back trusted; False where the honest output itself is a
    constant), expect (the defended verdict under issue 40's contract)."""
    arity = {"matmul_inputs": 2, "mul_inputs": 2, "mul_return_inputs": 1, "nonnegative_inputs": 1}[inputs]
    case = {"cls": cls, "source": source, "honest": honest, "inputs": inputs, "arity": arity, "outputs": list(outputs)}
    case.update(prepare=False, answer_sheet=False, needs_worker=False, honest_trusted=True, expect="")
    case.update(extra)
    return case


_MUL = dict(honest=HONEST, inputs="mul_inputs", outputs=(1,))
_MM = dict(honest=HONEST_MATMUL, inputs="matmul_inputs")

CLASS_CASES = {
    "side_stream_unsynchronised": _case(
        "T1", SIDE_STREAM_UNSYNCHRONISED, **_MUL, expect="timed anyway (drained at both ends): trusted, honest number"
    ),
    "host_thread_finishes_after_return": _case(
        "T2",
        HOST_THREAD_FINISHES_AFTER_RETURN,
        **_MUL,
        expect="refused (poisoned output still poison at the check) or flagged (unattributed activity)",
    ),
    "lazy_subclass_output": _case(
        "T3",
        LAZY_SUBCLASS_OUTPUT,
        honest=HONEST_MUL_RETURN,
        inputs="mul_return_inputs",
        expect="subclass returns checked from storage: refused, or flagged/unchecked",
    ),
    "python_timer_and_statistics_patched": _case(
        "T4", PYTHON_TIMER_AND_STATISTICS_PATCHED, **_MUL, expect="flagged (python.patched); the number stays honest"
    ),
    "cupti_enable_inline_detour": _case(
        "T5", CUPTI_ENABLE_INLINE_DETOUR, **_MUL, expect="timer self-check: refused (unavailable) or flagged"
    ),
    "cupti_got_patch": _case(
        "T5", CUPTI_GOT_PATCH, **_MUL, expect="timer self-check: refused (unavailable) or flagged"
    ),
    "result_numbers_rewritten": _case(
        "T6",
        RESULT_REWRITTEN,
        **_MUL,
        needs_worker=True,
        expect="the server restores the sealed record (altered_after_timing): honest number, or flagged",
    ),
    "result_record_forged": _case(
        "T6", RESULT_RECORD_FORGED, **_MUL, needs_worker=True, expect="bad seal: verified false, not trusted"
    ),
    "phase_detected_by_busy_stream": _case(
        "T7", PHASE_DETECTED_BY_BUSY_STREAM, **_MUL, expect="refused (correctness: timed calls leave poison)"
    ),
    "super_batched_answers": _case(
        "T8",
        SUPER_BATCHED_ANSWERS,
        **_MM,
        expect="refused (correctness: answers of the caller's values, not the variant's)",
    ),
    "graph_replays_cached_product": _case(
        "T9",
        GRAPH_REPLAYS_CACHED_PRODUCT,
        **_MM,
        prepare=True,
        expect="not trusted (graph output unchecked / unchanged between variants) or refused",
    ),
    "cupti_kernel_records_disabled": _case(
        "T9/route 1",
        CUPTI_KERNEL_RECORDS_DISABLED,
        **_MUL,
        expect="canary or no-activity check: flagged or refused; never a trusted 0",
    ),
    "cupti_finalized_inside_the_call": _case(
        "route 2",
        CUPTI_FINALIZED_INSIDE_THE_CALL,
        **_MUL,
        expect="timer self-check (cuptiFinalize): flagged or refused; never a trusted 0",
    ),
    "all_activity_hidden": _case(
        "T10", ALL_ACTIVITY_HIDDEN, **_MUL, expect="changed outputs with no GPU activity: flagged; a 0 is never trusted"
    ),
    **{
        f"replay_keyed_on_{key}": _case(
            "S1",
            source,
            **_MM,
            expect="refused (the replayed copy is the caller's values' answer on a variant)"
            if key != "fingerprint"
            else "not trusted: faster on values seen before than on new ones (unseen_values)",
        )
        for key, source in REPLAY_BY_KEY.items()
    },
    "replay_keyed_on_fingerprint_garbage_when_unseen": _case(
        "S1",
        REPLAY_FINGERPRINT_GARBAGE_WHEN_UNSEEN,
        **_MM,
        expect="not trusted: new values answered with the caller's values' answer (unseen_values)",
    ),
    "stale_block_from_the_allocator": _case(
        "S2", STALE_BLOCK_FROM_THE_ALLOCATOR, **_MM, expect="refused (the stale block holds the last call's poison)"
    ),
    "answer_sheet_from_gc": _case(
        "S3", ANSWER_SHEET_FROM_GC, **_MM, answer_sheet=True, expect="refused (the stolen answer is wrong on a variant)"
    ),
    "inputs_zeroed": _case(
        "S4",
        INPUTS_ZEROED,
        **_MM,
        expect="not trusted: an input changed (flag), outputs unchanged between variants (unchecked)",
    ),
    "pass_through": _case(
        "S5",
        PASS_THROUGH,
        honest=HONEST_CLAMP_MIN,
        inputs="nonnegative_inputs",
        expect="not trusted: the return is an argument, no output found (unchecked)",
    ),
    "constant_zeros": _case(
        "S5",
        CONSTANT_ZEROS,
        honest=HONEST_CLAMP_MAX,
        inputs="nonnegative_inputs",
        honest_trusted=False,
        expect="not trusted: the output does not change between variants (unchecked); the twin too",
    ),
    "harness_module_replaced": _case(
        "S8",
        HARNESS_MODULE_REPLACED,
        **_MUL,
        needs_worker=True,
        expect="the fake's dict is not sealed: verified false, not trusted",
    ),
    "base64_exec_of_a_replay": _case("S9", BASE64_EXEC_OF_A_REPLAY, **_MM, expect="as S1 keyed on shape: refused"),
    "package_installed_at_run_time": _case(
        "S9",
        PACKAGE_INSTALLED_AT_RUN_TIME,
        **_MM,
        prepare=True,
        expect="installed: as S1 (refused); not installed: honest kernel, trusted honest number",
    ),
    "ghost_triton_kernel": _case(
        "B2", GHOST_TRITON_KERNEL, **_MUL, expect="trusted, honest number; integrity.kernels does not name the ghost"
    ),
    "cached_nn_parameter": _case(
        "route 3", CACHED_NN_PARAMETER, **_MM, expect="subclass returns checked: refused (poisoned) or flagged"
    ),
    "strided_view_of_cached_buffer": _case(
        "route 4", STRIDED_VIEW_OF_CACHED_BUFFER, **_MM, expect="non-contiguous returns checked: refused or flagged"
    ),
    "ordered_dict_of_cached_result": _case(
        "route 5",
        ORDERED_DICT_OF_CACHED_RESULT,
        honest=HONEST_MATMUL_DICT,
        inputs="matmul_inputs",
        expect="dict subclasses walked: refused or flagged",
    ),
    "cached_big_beside_computed_small": _case(
        "route 6",
        CACHED_BIG_BESIDE_COMPUTED_SMALL,
        honest=HONEST_MATMUL_PAIR,
        inputs="matmul_inputs",
        expect="a >4 KiB constant returned unchanged is unchecked: not trusted",
    ),
}


# --- Without a server: each attack against timers that have no defences --------------------

_SMOKE_CASE = r"""
import json, linecache, statistics, sys, types
import torch
from torch.profiler import ProfilerActivity, profile


def module(name, source):
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def gated_us(fn, args, calls=15):
    # CUDA events on the current stream, behind a ~1 ms spin (as the benchmark's launch gate).
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return round(statistics.median(samples), 2)


def cupti_us(fn, args, calls=10):
    # Device time per call as CUPTI (torch.profiler) records it.
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*args)
            torch.cuda.synchronize()
    return round(sum(getattr(e, "self_device_time_total", 0) for e in prof.key_averages()) / calls, 2)


def stage(out, key, call):
    try:
        out[key] = call()
    except Exception as error:  # noqa: BLE001
        out[key] = "error: " + repr(error)[:200]


sys.path.insert(0, sys.argv[1])
import cheats  # noqa: E402

case = cheats.CLASS_CASES[sys.argv[2]]
out = {}
ops = module("cheat_ops", cheats.CLASS_OPS)
args = getattr(ops, case["inputs"])()
honest = module("honest", case["honest"])
if case["answer_sheet"]:
    expected = honest.kernel(*args)
stage(out, "honest_gated_us", lambda: gated_us(honest.kernel, args))
stage(out, "honest_cupti_us", lambda: cupti_us(honest.kernel, args))
cheat = module("cheat", case["source"])
if case["prepare"]:
    cheat.prepare(*args)
stage(out, "cheat_gated_us", lambda: gated_us(cheat.kernel, args))
stage(out, "cheat_cupti_us", lambda: cupti_us(cheat.kernel, args))
stage(out, "check", lambda: ops.max_error(cheat.kernel, honest.kernel, case["outputs"], *args))
if hasattr(cheat, "report"):
    out["state"] = cheat.report()
print("SMOKE " + json.dumps(out, default=str), flush=True)
"""


def _smoke(names: list[str]) -> None:
    """Each case in its own process (a cheat may break CUPTI or the process), with plain torch."""
    import json
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    for name, case in CLASS_CASES.items():
        if (names and name not in names) or (case["needs_worker"] and not names):
            continue
        command = [sys.executable, "-c", _SMOKE_CASE, here, name]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            lines = [line for line in done.stdout.splitlines() if line.startswith("SMOKE ")]
            shown = json.loads(lines[-1][6:]) if lines else {"rc": done.returncode, "stderr": done.stderr[-400:]}
        except subprocess.TimeoutExpired:
            shown = {"timeout": 300}
        print(f"{name:36} {case['cls']:10} {json.dumps(shown)}", flush=True)


if __name__ == "__main__":
    import sys

    _smoke(sys.argv[1:])
