"""Programs for the GPU tests, named after what they provoke."""

from kcoral import Program

# A CUDA kernel that writes through a null pointer: cudaErrorIllegalAddress (sticky).
ILLEGAL_ADDRESS = r"""
import cupy

_kernel = cupy.RawKernel(r'''
extern "C" __global__ void poke() { *(volatile int*)0 = 1; }
''', "poke")


def writes_through_null():
    _kernel((1,), (1,), ())
    cupy.cuda.runtime.deviceSynchronize()
"""

# A kernel that never ends.
SPINS_FOREVER = r"""
import cupy

_kernel = cupy.RawKernel(r'''
extern "C" __global__ void spin(volatile int* flag) { while (*flag == 0) { } }
''', "spin")


def spins():
    flag = cupy.zeros(1, dtype=cupy.int32)
    _kernel((1,), (1,), (flag,))
    cupy.cuda.runtime.deviceSynchronize()
"""

HOLDS_THE_GPU = r"""
import time
import torch


def holds(seconds):
    x = torch.ones(1024, device="cuda")
    started = time.monotonic()
    time.sleep(seconds)
    return {"sum": float(x.sum()), "started": started, "finished": time.monotonic()}
"""

CPU_ONLY = r"""
import time


def compiles_for(seconds):
    time.sleep(seconds)
    return "done"


def touches_cuda():
    import torch

    return float(torch.zeros(4, device="cuda").sum())
"""

TENSORS = r"""
def identity(x):
    assert x.is_cuda, "tensor uploads are CUDA tensors"
    return x


def plus_one(x):
    return x + 1
"""


def single_call(source: str, name: str, args: list, cpu_only: bool = False) -> Program:
    program = Program()
    module = program.upload(id="module", kind="module", source=source)
    fn = program.get_function(id="fn", module=module, name=name, cpu_only=cpu_only)
    out = program.run(id="out", fn=fn, args=args)
    program.return_(key="out", value=out)
    return program
