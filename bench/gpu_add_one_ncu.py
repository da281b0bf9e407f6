"""The seed's add-one kernel timed by Nsight Compute, to set beside KCoral's
CUPTI median. Run under ncu (scripts/gpu-check.sh does):

    ncu --metrics gpu__time_duration.sum --clock-control none --csv \\
        python bench/gpu_add_one_ncu.py

Builds add_one with tvm_ffi.cpp.build_inline for this GPU and launches it on
1,048,576 float32 values; ncu flushes caches between launches by default.
"""

import sys
from pathlib import Path

import torch
import tvm_ffi
import tvm_ffi.cpp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
from cpu_compile_gpu_execute import CUDA_SOURCE, N  # noqa: E402

major, minor = torch.cuda.get_device_capability()
import os  # noqa: E402

os.environ.setdefault("TVM_FFI_CUDA_ARCH_LIST", f"{major}.{minor}{'a' if major >= 9 else ''}")
path = tvm_ffi.cpp.build_inline(
    name="ncu_add_one", cuda_sources=CUDA_SOURCE, functions="add_one", extra_cuda_cflags=["-O3"]
)
add_one = tvm_ffi.load_module(path).get_function("add_one")
x = torch.randn(N, device="cuda")
y = torch.empty_like(x)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 50):
    add_one(x, y)
torch.cuda.synchronize()
assert torch.equal(y, x + 1)
