"""Honest kernels as users write them (issues 23 and 40), one uploaded module source each, kept as data.

Each source defines `setup()`, which returns the argument list (CUDA tensors from a fixed seed,
plus any scalars, dicts or nn.Modules), and `kernel(*args)`. tests/gpu/test_honest_corpus.py times
every pattern with the benchmark's defences on and off in one program, and
tests/gpu/test_honest_cases.py names the cases of the issues. `pattern_program` builds that program.

Since issue 40 a result is trusted only when everything the call outputs is checked
(outputs_unchecked empty), so no pattern may leave an output unchecked any more: CUDA graph
replays, non-contiguous outputs, zero-size tensors and torch.compile's cudagraph trees are all
checked now. The one way out is a declaration: a pattern whose output is random by design says
so in cfg `unverifiable` (`Pattern.unverifiable`); the benchmark still runs it (never a refusal),
names each declared output in outputs_unchecked ("declared unverifiable: ...") and leaves it
untrusted for that alone. Issue 40 also added model code as users write it (convolutions,
normalisations, attention, pooling, losses, reductions, embeddings, nn.Module forwards in training
mode and after .eval(), a ModelOutput and a dataclass returned, a 5 GiB input) and three honest
routes refused before it: bfloat16 index_add_ atomics, dropout declared unverifiable, and a CUDA
graph replayed on the very tensors it was captured with, passed as the call's arguments.

Without a server, `python tests/gpu/honest_patterns.py [name ...]` runs each pattern's setup and
kernel with plain torch on this machine's GPU: setup time, a median per call (events, L2 flushed
as the benchmark flushes it unless the pattern says otherwise) and the type of what it returns.
"""

import ast
from dataclasses import dataclass, field

from kcoral import Program

LAUNCH = "launch-bound"  # < 10 us per call
MEMORY = "memory-bound"
COMPUTE = "compute-bound"
L2 = "L2-resident"

# The benchmark's budgets in the corpus: defences on, and off (one argument set, no outputs).
ON = {"warmup_ms": 10, "repeat_ms": 60}
OFF = {"warmup_ms": 10, "repeat_ms": 60, "rotate_inputs": False, "outputs": []}
# Alternating, so that drift falls on both; on_2 also runs with the caller's outputs already
# holding the answer (on_1 leaves the reference outputs in them, as the seed's kernel call does).
ORDER = ("on_1", "off_1", "on_2", "off_2")


@dataclass
class Pattern:
    name: str
    kind: str
    source: str
    cfg: dict = field(default_factory=dict)  # merged into both the on and the off cfg
    # What the benchmark should find; None: not asserted.
    checked_outputs: list | None = None  # defences.arguments.checked_outputs
    returned: list | None = None  # defences.returned.checked, as a set
    constants: list | None = None  # defences.returned.constants: returned, never written
    # defences.launch_gate.timeouts of every timing, defences on and off (the gate is on in both):
    # 1 for a call that waits for the GPU inside (the gate then stops), 0 for one that never does.
    gate_timeouts: int | None = None

    @property
    def unverifiable(self) -> list:
        """The outputs the pattern declares random by design (cfg `unverifiable`: "return",
        "return[1]", "return['key']", "arg:2"). Each comes back in outputs_unchecked as
        "declared unverifiable: ..." and the result is untrusted for that alone; a pattern that
        declares nothing must have every output checked (outputs_unchecked empty) and be trusted."""
        return list(self.cfg.get("unverifiable", []))


PRELUDE = r"""
import torch


def randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, device="cuda", generator=generator)


def empty(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="cuda")
"""

# Caches of torch.compile and Triton under the worker's cache directory, which the server keeps
# for a byte-identical program (docs/sandbox.md "Compile caches"): the second round compiles less.
COMPILE_CACHES = r"""
import os

if os.environ.get("XDG_CACHE_HOME"):
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.environ["XDG_CACHE_HOME"], "torchinductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["XDG_CACHE_HOME"], "triton"))
"""

M16 = "1 << 24"  # 16 Mi float32: 64 MiB a tensor


def _source(body: str, *extra: str) -> str:
    return PRELUDE + "".join(extra) + body


# --- What the function returns ------------------------------------------------------------

KERNELBENCH_FORWARD = _source(r"""

class Model(torch.nn.Module):
    def forward(self, a, b):
        return a + b


_model = Model()


def setup():
    return [randn(4096, 4096, seed=1), randn(4096, 4096, seed=2)]


def kernel(a, b):
    return _model(a, b)
""")

MATMUL_RETURNS_BF16 = _source(r"""

def setup():
    return [randn(2048, 2048, dtype=torch.bfloat16, seed=1), randn(2048, 2048, dtype=torch.bfloat16, seed=2)]


def kernel(a, b):
    return a @ b
""")

TUPLE_RETURN = _source(r"""

def setup():
    return [randn(1 << 22, seed=1), randn(1 << 22, seed=2)]


def kernel(a, b):
    return a + b, a - b
""")

DICT_RETURN = _source(r"""

def setup():
    return [randn(1 << 22, seed=1), randn(1 << 22, seed=2)]


def kernel(a, b):
    return {"sum": a + b, "scaled": a * 2.0}
""")

ALLOCATES_ITS_OUTPUT = _source(r"""

def setup():
    return [randn(1 << 24, seed=1)]


def kernel(x):
    out = torch.empty_like(x)
    torch.sigmoid(x, out=out)
    return out
""")

# --- Where the destination is --------------------------------------------------------------

DESTINATION_FIRST = _source(r"""

def setup():
    return [empty(1 << 24), randn(1 << 24, seed=1)]


def kernel(y, x):
    torch.mul(x, 2.0, out=y)
""")

DESTINATION_MIDDLE = _source(r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24), randn(1 << 24, seed=2)]


def kernel(x, y, z):
    torch.add(x, z, out=y)
""")

DESTINATION_LAST = _source(r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24)]


def kernel(x, y):
    torch.mul(x, 2, out=y)
""")

IN_PLACE_UPDATE = _source(r"""

def setup():
    return [randn(1 << 24, seed=1)]


def kernel(x):
    x.mul_(2)  # x is read and written
""")

# --- Vendor libraries -----------------------------------------------------------------------

CUBLAS_MM_OUT_BF16 = _source(r"""

def setup():
    a = randn(2048, 2048, dtype=torch.bfloat16, seed=1)
    b = randn(2048, 2048, dtype=torch.bfloat16, seed=2)
    return [a, b, empty(2048, 2048, dtype=torch.bfloat16)]


def kernel(a, b, c):
    torch.mm(a, b, out=c)
""")

CUBLAS_MM_OUT_FP32 = _source(r"""

def setup():
    return [randn(2048, 2048, seed=1), randn(2048, 2048, seed=2), empty(2048, 2048)]


def kernel(a, b, c):
    torch.mm(a, b, out=c)
""")

CUDNN_CONV2D = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(32, 64, 56, 56, dtype=torch.float16, seed=1)
    w = randn(128, 64, 3, 3, dtype=torch.float16, seed=2) * 0.05
    return [x, w]


def kernel(x, w):
    return F.conv2d(x, w, padding=1)
""")

SDPA_CAUSAL = _source(r"""
import torch.nn.functional as F


def setup():
    return [randn(8, 16, 1024, 128, dtype=torch.bfloat16, seed=s) for s in (1, 2, 3)]


def kernel(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
""")

# --- Triton, torch.compile, TVM-FFI -------------------------------------------------------------

TRITON_OUTPUT_ARGUMENT = _source(
    r"""
import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def setup():
    x, y = randn(1 << 24, seed=1), randn(1 << 24, seed=2)
    kernel(x, y, torch.empty_like(x))  # compiles once, on a scratch output
    return [x, y, torch.empty_like(x)]


def kernel(x, y, out):
    n = x.numel()
    _axpy[(triton.cdiv(n, 1024),)](x, y, out, n, 2.0, BLOCK=1024)
""",
    COMPILE_CACHES,
)

TRITON_AUTOTUNE = _source(
    r"""
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def _scale_shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * 2.0 + 1.0, mask=mask)


def setup():
    x = randn(1 << 24, seed=1)
    kernel(x, torch.empty_like(x))  # compiles and tunes once
    return [x, torch.empty_like(x)]


def kernel(x, out):
    n = x.numel()
    _scale_shift[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
""",
    COMPILE_CACHES,
)

TORCH_COMPILE = _source(
    r"""

def _fused(a, b):
    return torch.nn.functional.gelu(a) * b + a.sin()


_compiled = torch.compile(_fused)


def setup():
    a, b = randn(4096, 4096, seed=1), randn(4096, 4096, seed=2)
    _compiled(a, b)  # compiles: tens of seconds in a fresh worker
    torch.cuda.synchronize()
    return [a, b]


def kernel(a, b):
    return _compiled(a, b)
""",
    COMPILE_CACHES,
)

TVM_FFI_INLINE_CUDA = _source(r'''
import os

import tvm_ffi.cpp

_SOURCE = r"""
__global__ void scale_add_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}

void scale_add(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  int n = static_cast<int>(x.numel());
  scale_add_kernel<<<(n + 255) / 256, 256>>>(static_cast<const float*>(x.data_ptr()),
                                             static_cast<float*>(y.data_ptr()), n);
}
"""

_library = []


def setup():
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TVM_FFI_CUDA_ARCH_LIST", f"{major}.{minor}")
    _library.append(tvm_ffi.cpp.load_inline(
        "corpus_scale_add", cuda_sources=_SOURCE, functions="scale_add", extra_cuda_cflags=["-O3"],
        backend="cuda"))
    x = randn(1 << 24, seed=1)
    return [x, torch.empty_like(x)]


def kernel(x, y):
    _library[0].scale_add(x, y)
''')

# --- CUDA graphs --------------------------------------------------------------------------------

GRAPH_PRELUDE = r"""
_graph = {}


def _capture(n):
    static_in = torch.empty(n, device="cuda")
    static_out = torch.empty_like(static_in)

    def body():
        torch.mul(static_in, 2.0, out=static_out)
        static_out.add_(1.0)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()  # warm-up outside the capture, as torch's documentation does
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    _graph.update(graph=graph, static_in=static_in, static_out=static_out)


def setup():
    _capture(1 << 24)
    return [randn(1 << 24, seed=1)]
"""

GRAPH_RETURNS_STATIC_OUT = _source(
    r"""

def kernel(x):
    _graph["static_in"].copy_(x)
    _graph["graph"].replay()
    return _graph["static_out"]
""",
    GRAPH_PRELUDE,
)

GRAPH_WRITES_NOTHING_VISIBLE = _source(
    r"""

def kernel(x):
    _graph["static_in"].copy_(x)
    _graph["graph"].replay()  # the result stays in the graph's own static buffer
""",
    GRAPH_PRELUDE,
)

GRAPH_RETURNS_CLONE = _source(
    r"""

def kernel(x):
    _graph["static_in"].copy_(x)
    _graph["graph"].replay()
    return _graph["static_out"].clone()
""",
    GRAPH_PRELUDE,
)

# --- Atomics: sums that round differently from call to call ------------------------------------

INDEX_ADD_ATOMICS = _source(r"""

def setup():
    generator = torch.Generator(device="cuda").manual_seed(3)
    index = torch.randint(0, 256, (65536,), device="cuda", generator=generator)
    return [empty(256, 128), index, randn(65536, 128, seed=1)]


def kernel(out, index, src):
    out.zero_()
    out.index_add_(0, index, src)  # float32 atomics: the order of the sums varies
""")

TRITON_SPLIT_K_ATOMIC_ADD = _source(
    r"""
import triton
import triton.language as tl

SPLITS = 16


@triton.jit
def _matvec_split_k(a_ptr, v_ptr, out_ptr, M, K, K_PER_SPLIT, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    k_start = tl.program_id(1) * K_PER_SPLIT
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for k0 in range(k_start, k_start + K_PER_SPLIT, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        mask = (rows[:, None] < M) & (cols[None, :] < K)
        tile = tl.load(a_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0)
        vec = tl.load(v_ptr + cols, mask=cols < K, other=0.0)
        acc += tl.sum(tile * vec[None, :], axis=1)
    tl.atomic_add(out_ptr + rows, acc, mask=rows < M)


def setup():
    a, v = randn(4096, 8192, seed=1), randn(8192, seed=2)
    kernel(a, v, empty(4096))  # compiles once, on a scratch output
    return [a, v, empty(4096)]


def kernel(a, v, out):
    m, k = a.shape
    out.zero_()
    _matvec_split_k[(triton.cdiv(m, 32), SPLITS)](a, v, out, m, k, k // SPLITS, BLOCK_M=32, BLOCK_K=128)
""",
    COMPILE_CACHES,
)

# --- Workspaces and scratch buffers -----------------------------------------------------------

CUTLASS_STYLE_WORKSPACE = _source(r"""

def setup():
    return [randn(1024, 2048, seed=1), randn(2048, 1024, seed=2), empty(1024, 1024), empty(4, 1024, 1024)]


def kernel(a, b, out, workspace):
    splits = workspace.shape[0]
    k = a.shape[1] // splits
    for s in range(splits):  # partial products into the workspace, then one reduction
        torch.mm(a[:, s * k:(s + 1) * k], b[s * k:(s + 1) * k], out=workspace[s])
    torch.sum(workspace, dim=0, out=out)
""")

SCRATCH_BUFFER_INSIDE = _source(r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24)]


def kernel(x, y):
    scratch = torch.empty_like(x)
    torch.mul(x, x, out=scratch)
    torch.add(scratch, x, out=y)
""")

# --- Views, dtypes, sizes ---------------------------------------------------------------------------

TRANSPOSED_INPUT_VIEW = _source(r"""

def setup():
    return [randn(2048, 4096, seed=1).t(), empty(4096, 2048)]


def kernel(x_t, y):
    torch.mul(x_t, 2.0, out=y)
""")

SLICED_OUTPUT_VIEW = _source(r"""

def setup():
    whole = torch.zeros(4096, 4096, device="cuda")
    return [randn(4096, 2048, seed=1), whole[:, :2048]]


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
""")

MIXED_DTYPES = _source(r"""

def setup():
    return [randn(1 << 24, dtype=torch.float16, seed=1), empty(1 << 24)]


def kernel(x_half, y_float):
    torch.mul(x_half, 2.0, out=y_float)
""")

ARGMAX_INT_OUTPUT = _source(r"""

def setup():
    return [randn(8192, 1024, seed=1)]


def kernel(x):
    return torch.argmax(x, dim=1)
""")

BOOL_OUTPUT = _source(r"""

def setup():
    return [randn(4096, 4096, seed=1)]


def kernel(x):
    return x > 0
""")

ZERO_SIZE_TENSORS = _source(r"""

def setup():
    return [randn(4096, seed=1), empty(4096), randn(0, 128, seed=2), empty(0, 128)]


def kernel(x, y, nothing_in, nothing_out):
    torch.mul(x, 2.0, out=y)
    torch.mul(nothing_in, 2.0, out=nothing_out)  # an empty batch: no work, no launch
""")

# --- Streams ------------------------------------------------------------------------------------------

STREAMS = r"""
_streams, _done = [], []


def setup():
    _streams.extend(torch.cuda.Stream() for _ in range(STREAM_COUNT))
    _done.extend(torch.cuda.Event() for _ in range(STREAM_COUNT))
    _done.append(torch.cuda.Event())  # "inputs ready" on the caller's stream
    x = randn(1 << 24, seed=1)
    return [x, torch.empty_like(x)]


def kernel(x, y):
    caller = torch.cuda.current_stream()
    ready = _done[-1]
    ready.record(caller)
    for stream, done, part, out in zip(_streams, _done, x.chunk(STREAM_COUNT), y.chunk(STREAM_COUNT)):
        stream.wait_event(ready)
        with torch.cuda.stream(stream):
            torch.mul(part, 2.0, out=out)
        done.record(stream)
    for done in _done[:-1]:
        caller.wait_event(done)
"""

TWO_STREAMS = _source(STREAMS, "\nSTREAM_COUNT = 2\n")
FOUR_STREAMS = _source(STREAMS, "\nSTREAM_COUNT = 4\n")

PRIORITY_STREAM = _source(r"""
_stream = []


def setup():
    _stream.append(torch.cuda.Stream(priority=-1))
    return [randn(1 << 24, seed=1), empty(1 << 24)]


def kernel(x, y):
    stream = _stream[0]
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.mul(x, 2.0, out=y)
    torch.cuda.current_stream().wait_stream(stream)
""")

# --- Sizes: launch-bound, memory-bound, compute-bound, L2-resident -------------------------------

LAUNCH_BOUND_TINY = _source(r"""

def setup():
    return [randn(4096, seed=1), empty(4096)]


def kernel(x, y):
    torch.mul(x, 2.0, out=y)
""")

MEMORY_BOUND_LARGE = _source(r"""

def setup():
    n = 1 << 25  # 128 MiB a tensor
    return [randn(n, seed=1), randn(n, seed=2), empty(n)]


def kernel(x, y, out):
    torch.add(x, y, alpha=2.0, out=out)
""")

COMPUTE_BOUND_MATMUL = _source(r"""

def setup():
    return [randn(4096, 4096, dtype=torch.bfloat16, seed=1), randn(4096, 4096, dtype=torch.bfloat16, seed=2)]


def kernel(a, b):
    return a @ b
""")

L2_RESIDENT = _source(r"""

def setup():
    return [randn(1 << 20, seed=1), empty(1 << 20)]  # 4 MiB each


def kernel(x, y):
    torch.addcmul(x, x, x, value=0.5, out=y)
""")

# --- Arguments that are not tensors ------------------------------------------------------------

SCALAR_AND_DICT_ARGUMENTS = _source(r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24), 0.5, {"beta": 1.5, "clamp": 3.0}]


def kernel(x, y, alpha, params):
    torch.mul(x, alpha, out=y)
    y.add_(params["beta"]).clamp_(max=params["clamp"])
""")


# --- What new users write: modules, reduce-overhead, syncs, odd dtypes, many arguments --------

NN_MODULE_LINEAR_GELU = _source(r"""

class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = torch.nn.Linear(width, width, device="cuda", dtype=torch.bfloat16)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.proj(x))


_model = []


def setup():
    torch.manual_seed(0)
    _model.append(Block(4096))  # parameters require grad, as nn.Linear makes them
    return [randn(4096, 4096, dtype=torch.bfloat16, seed=1)]


def kernel(x):
    return _model[0](x)  # no torch.no_grad(): the result requires grad (it has a grad_fn)
""")

TORCH_COMPILE_REDUCE_OVERHEAD = _source(
    r"""

def _fused(a, b):
    return torch.nn.functional.gelu(a) * b + a.sin()


_compiled = torch.compile(_fused, mode="reduce-overhead")


def setup():
    a, b = randn(4096, 4096, seed=1), randn(4096, 4096, seed=2)
    for _ in range(3):  # cudagraph trees: a warm-up run, a recording, then replays
        _compiled(a, b)
    torch.cuda.synchronize()
    return [a, b]


def kernel(a, b):
    return _compiled(a, b)  # a static output of the graph's pool, overwritten by the next replay
""",
    COMPILE_CACHES,
)

ITEM_INSIDE_CALL = _source(r"""

def setup():
    return [randn(1 << 24, seed=1)]


def kernel(x):
    peak = x.abs().amax().item()  # a copy to the host: the call waits for the GPU mid-way
    return x * (1.0 / max(peak, 1e-30))
""")

SYNCHRONIZE_BEFORE_RETURN = _source(r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24)]


def kernel(x, y):
    torch.mul(x, torch.sigmoid(x), out=y)  # SiLU by hand, into the destination
    torch.cuda.synchronize()  # "make sure it is done", as many users write
""")

RETURNS_ITS_SCALE = _source(r"""
_state = {}


def setup():
    _state["scale"] = torch.full((), 0.125, device="cuda")  # persistent, like an FP8 scale buffer
    return [randn(1 << 24, seed=1)]


def kernel(x):
    scale = _state["scale"]
    return x * scale, scale  # the scale is returned as it is, never written
""")

MANY_TENSOR_ARGUMENTS = _source(r"""
WIDTH = 256


def setup():
    arguments = [randn(64, WIDTH, seed=1)]
    for layer in range(6):  # a tiny MLP: 6 weights and 6 biases, 12 small tensors
        arguments.append(randn(WIDTH, WIDTH, seed=10 + layer) * WIDTH ** -0.5)
        arguments.append(randn(WIDTH, seed=20 + layer) * 0.1)
    return arguments


def kernel(x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5, w6, b6):
    h = x
    for w, b in ((w1, b1), (w2, b2), (w3, b3), (w4, b4), (w5, b5)):
        h = torch.relu(torch.addmm(b, h, w))
    return torch.addmm(b6, h, w6)
""")

FP8_OUTPUT = _source(r"""

def setup():
    return [randn(4096, 4096, seed=1)]


def kernel(x):
    scale = 448.0 / x.abs().amax()  # per-tensor scaling, on the device
    return (x * scale).to(torch.float8_e4m3fn)
""")

FFT_COMPLEX64_OUTPUT = _source(r"""

def setup():
    return [randn(2048, 4096, seed=1)]


def kernel(x):
    return torch.fft.fft(x, dim=-1)  # real float32 in, complex64 out (cuFFT)
""")

EMBEDDING_INT64_INDEX = _source(r"""
import torch.nn.functional as F


def setup():
    generator = torch.Generator(device="cuda").manual_seed(4)
    index = torch.randint(0, 65536, (65536,), device="cuda", generator=generator)  # int64
    return [randn(65536, 256, seed=1), index]


def kernel(table, index):
    return F.embedding(index, table)  # a probe zeroes the index: row 0, a valid lookup
""")

SOFTMAX_STREAM_PER_CALL = _source(r"""

def setup():
    return [randn(256, 32768, seed=1)]  # rows of 32 Ki float32


def kernel(x):
    caller = torch.cuda.current_stream()
    side = torch.cuda.Stream()  # a new stream object on every call
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        out = torch.softmax(x, dim=-1)  # allocated on the side stream
    caller.wait_stream(side)
    return out
""")


# --- Model code as users write it (issue 40): every output checked, the result trusted ----------

CONV1D_BIAS_FP32 = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(8, 256, 4096, seed=1)  # (batch, channels, time): an audio encoder's feature map
    w = randn(256, 256, 3, seed=2) * (256 * 3) ** -0.5
    return [x, w, 0.1 * randn(256, seed=3)]


def kernel(x, w, b):
    return F.conv1d(x, w, b, padding=1)  # float32 through cuDNN (TF32 by torch's default)
""")

DEPTHWISE_CONV2D_FP16 = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(32, 256, 56, 56, dtype=torch.float16, seed=1)
    w = randn(256, 1, 3, 3, dtype=torch.float16, seed=2) * 0.3
    return [x, w]


def kernel(x, w):
    return F.conv2d(x, w, padding=1, groups=x.shape[1])  # MobileNet's depthwise 3x3: one filter a channel
""")

CONV_TRANSPOSE2D_BF16 = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(16, 256, 32, 32, dtype=torch.bfloat16, seed=1)
    w = randn(256, 128, 4, 4, dtype=torch.bfloat16, seed=2) * 0.02
    return [x, w, 0.1 * randn(128, dtype=torch.bfloat16, seed=3)]


def kernel(x, w, b):
    return F.conv_transpose2d(x, w, b, stride=2, padding=1)  # a U-Net decoder's 2x upsampling
""")

RESNET_BLOCK_EVAL_CHANNELS_LAST = _source(r"""
from torch import nn


class BasicBlock(nn.Module):  # torchvision's ResNet basic block (no downsampling)
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


_block = []


def setup():
    torch.manual_seed(0)
    block = BasicBlock(128)
    for bn in (block.bn1, block.bn2):  # running statistics as a trained network has them
        bn.running_mean.normal_(0.0, 0.1)
        bn.running_var.uniform_(0.5, 1.5)
    block = block.to(device="cuda", dtype=torch.float16, memory_format=torch.channels_last).eval()
    _block.append(block)
    x = randn(32, 128, 56, 56, dtype=torch.float16, seed=1)
    return [x.to(memory_format=torch.channels_last)]


def kernel(x):
    with torch.no_grad():
        return _block[0](x)  # channels_last in, channels_last out: a returned tensor that is not contiguous
""")

# --- Normalisations ---------------------------------------------------------------------------------

LAYER_NORM_BF16 = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(8192, 4096, dtype=torch.bfloat16, seed=1)
    weight = 1.0 + 0.1 * randn(4096, dtype=torch.bfloat16, seed=2)
    bias = 0.1 * randn(4096, dtype=torch.bfloat16, seed=3)
    return [x, weight, bias]


def kernel(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)
""")

RMS_NORM_HAND_WRITTEN = _source(r"""
from torch import nn


class LlamaRMSNorm(nn.Module):  # as transformers' Llama writes it
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


_norm = []


def setup():
    norm = LlamaRMSNorm(4096).to(device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        norm.weight.add_(0.1 * randn(4096, dtype=torch.bfloat16, seed=2))
    _norm.append(norm)
    return [randn(4096, 4096, dtype=torch.bfloat16, seed=1)]


def kernel(x):
    return _norm[0](x)  # grad enabled, the weight a parameter: the result requires grad
""")

BATCH_NORM_TRAIN_RUNNING_STATS = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(32, 128, 56, 56, seed=1)
    running_mean = 0.1 * randn(128, seed=2)  # mid-training statistics
    running_var = 1.0 + 0.1 * randn(128, seed=3).abs()
    weight, bias = 1.0 + 0.1 * randn(128, seed=4), 0.1 * randn(128, seed=5)
    return [x, running_mean, running_var, weight, bias]


def kernel(x, running_mean, running_var, weight, bias):
    # Training: normalised by the batch's own statistics, and the running ones updated in place,
    # so arguments 1 and 2 are outputs beside the returned tensor.
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=True, momentum=0.1)
""")

BATCH_NORM_TRAIN_MODULE_ARGUMENT = _source(r"""
from torch import nn


def setup():
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(256).cuda()  # left in training mode, as a module is made
    return [bn, randn(64, 256, 28, 28, seed=1)]


def kernel(bn, x):
    # The module is an argument (not a tensor: passed as it is); each call also updates its
    # running statistics, buffers of the module: a legitimate extra output no probe looks at.
    return bn(x)
""")

GROUP_NORM_SILU_FP16 = _source(r"""
import torch.nn.functional as F


def setup():
    x = randn(16, 256, 64, 64, dtype=torch.float16, seed=1)  # a diffusion U-Net's feature map
    weight = 1.0 + 0.1 * randn(256, dtype=torch.float16, seed=2)
    return [x, weight, 0.1 * randn(256, dtype=torch.float16, seed=3)]


def kernel(x, weight, bias):
    return F.silu(F.group_norm(x, 32, weight, bias, eps=1e-6))
""")

# --- Attention ----------------------------------------------------------------------------------------

SDPA_KEY_PADDING_MASK = _source(r"""
import torch.nn.functional as F


def setup():
    batch, heads, length, dim = 8, 16, 1024, 64
    q, k, v = (randn(batch, heads, length, dim, dtype=torch.bfloat16, seed=s) for s in (1, 2, 3))
    generator = torch.Generator(device="cuda").manual_seed(4)
    lengths = torch.randint(length // 4, length + 1, (batch,), device="cuda", generator=generator)
    keep = torch.arange(length, device="cuda")[None, :] < lengths[:, None]  # padded keys masked out
    return [q, k, v, keep.view(batch, 1, 1, length)]


def kernel(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # not causal: a boolean padding mask
""")

HAND_WRITTEN_ATTENTION = _source(r"""
import math

_mask = []


def setup():
    batch, heads, length, dim = 4, 12, 512, 64
    _mask.append(torch.tril(torch.ones(length, length, device="cuda")).view(1, 1, length, length))
    return [randn(batch, heads, length, dim, seed=s) for s in (1, 2, 3)]


def kernel(q, k, v):
    # nanoGPT's attention without flash: scores, the causal mask, softmax, the weighted sum (float32)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    length = q.size(-2)
    att = att.masked_fill(_mask[0][:, :, :length, :length] == 0, float("-inf"))
    att = torch.softmax(att, dim=-1)
    return att @ v
""")

# --- Pooling ------------------------------------------------------------------------------------------------

MAX_POOL2D_WITH_INDICES = _source(r"""
import torch.nn.functional as F


def setup():
    return [randn(32, 64, 112, 112, dtype=torch.float16, seed=1)]  # a ResNet stem's output


def kernel(x):
    return F.max_pool2d(x, kernel_size=3, stride=2, padding=1, return_indices=True)  # values, int64 indices
""")

AVG_POOL2D_FP32 = _source(r"""
import torch.nn.functional as F


def setup():
    return [randn(32, 128, 112, 112, seed=1)]


def kernel(x):
    return F.avg_pool2d(x, kernel_size=2, stride=2)
""")

ADAPTIVE_POOL_CLASSIFIER_HEAD = _source(r"""
from torch import nn

_head = []


def setup():
    torch.manual_seed(0)
    head = nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(2048, 1000))  # ResNet-50's head
    _head.append(head.to(device="cuda", dtype=torch.bfloat16).eval())
    return [randn(256, 2048, 7, 7, dtype=torch.bfloat16, seed=1)]


def kernel(features):
    with torch.inference_mode():  # returns an inference tensor
        return _head[0](features)
""")

# --- Losses -----------------------------------------------------------------------------------------------------

CROSS_ENTROPY_SCALAR = _source(r"""
import torch.nn.functional as F


def setup():
    generator = torch.Generator(device="cuda").manual_seed(4)
    targets = torch.randint(0, 32000, (2048,), device="cuda", generator=generator)
    return [randn(2048, 32000, seed=1), targets]  # a language model's logits and its next tokens


def kernel(logits, targets):
    return F.cross_entropy(logits, targets)  # a 0-dim float32 tensor: the mean loss
""")

MSE_LOSS_SCALAR = _source(r"""
import torch.nn.functional as F


def setup():
    return [randn(1 << 24, seed=1), randn(1 << 24, seed=2)]


def kernel(prediction, target):
    return F.mse_loss(prediction, target)
""")

# --- Reductions and scans --------------------------------------------------------------------------------

SUM_AND_MEAN_OVER_DIMS = _source(r"""

def setup():
    return [randn(64, 512, 1024, seed=1)]  # (batch, tokens, features)


def kernel(x):
    return x.sum(dim=-1), x.mean(dim=(0, 1))  # per token; per feature over batch and tokens
""")

LOGSUMEXP_LAST_DIM = _source(r"""

def setup():
    return [randn(2048, 16384, seed=1)]


def kernel(x):
    return torch.logsumexp(x, dim=-1)
""")

CUMSUM_AND_CU_SEQLENS = _source(r"""
import torch.nn.functional as F


def setup():
    generator = torch.Generator(device="cuda").manual_seed(4)
    lengths = torch.randint(1, 2048, (4096,), device="cuda", generator=generator, dtype=torch.int32)
    return [randn(4096, 8192, seed=1), lengths]


def kernel(x, lengths):
    running = torch.cumsum(x, dim=-1)
    cu_seqlens = F.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))  # varlen attention's offsets
    return running, cu_seqlens
""")

TOPK_NAMEDTUPLE = _source(r"""

def setup():
    return [randn(64, 128256, seed=1)]  # next-token logits over Llama 3's vocabulary


def kernel(logits):
    return torch.topk(logits, k=50, dim=-1)  # torch.return_types.topk, a named tuple: (values, indices)
""")

# --- Embeddings ---------------------------------------------------------------------------------------------

NN_EMBEDDING_MODULE = _source(r"""
from torch import nn

_wte = []


def setup():
    torch.manual_seed(0)
    _wte.append(nn.Embedding(50257, 768, device="cuda"))  # GPT-2's token embedding
    generator = torch.Generator(device="cuda").manual_seed(4)
    return [torch.randint(0, 50257, (32, 1024), device="cuda", generator=generator)]


def kernel(idx):
    return _wte[0](idx)  # requires grad: the weight is a parameter
""")

EMBEDDING_BAG_SUM = _source(r"""
import torch.nn.functional as F


def setup():
    generator = torch.Generator(device="cuda").manual_seed(4)
    indices = torch.randint(0, 1000000, (262144,), device="cuda", generator=generator)
    offsets = torch.arange(0, 262144, 32, device="cuda")  # 8192 bags of 32 ids: a recommender's sparse feature
    return [randn(1000000, 128, seed=1), indices, offsets]


def kernel(table, indices, offsets):
    return F.embedding_bag(indices, table, offsets, mode="sum")
""")

# --- nn.Module forwards, in training mode and after .eval() -----------------------------------------------

LLAMA_MLP_TRAIN_MODE = _source(r"""
from torch import nn
import torch.nn.functional as F


class LlamaMLP(nn.Module):  # as transformers' Llama writes it
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


_mlp = []


def setup():
    torch.manual_seed(0)
    with torch.device("cuda"):
        _mlp.append(LlamaMLP(2048, 5632).to(torch.bfloat16))  # training mode, grad enabled
    return [randn(4, 512, 2048, dtype=torch.bfloat16, seed=1)]


def kernel(x):
    return _mlp[0](x)
""")

GPT2_MLP_EVAL_MODULE_ARGUMENT = _source(r"""
from torch import nn


class MLP(nn.Module):  # nanoGPT's MLP; eval() turns its dropout off
    def __init__(self, n_embd, dropout=0.1):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


def setup():
    torch.manual_seed(0)
    with torch.device("cuda"):
        mlp = MLP(1024).to(torch.bfloat16).eval()
    return [mlp, randn(8, 512, 1024, dtype=torch.bfloat16, seed=1)]


def kernel(mlp, x):
    with torch.no_grad():
        return mlp(x)  # the module is an argument, passed as it is
""")

NANOGPT_BLOCK = r"""
from torch import nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):  # nanoGPT's model.py
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


_block = []
"""

TRANSFORMER_BLOCK_TRAIN_MODE = _source(
    r"""

def setup():
    torch.manual_seed(0)
    with torch.device("cuda"):
        _block.append(Block(768, 12, dropout=0.0).to(torch.bfloat16))  # nanoGPT's default: no dropout
    return [randn(8, 512, 768, dtype=torch.bfloat16, seed=1)]


def kernel(x):
    return _block[0](x)  # training mode, grad enabled: the result requires grad
""",
    NANOGPT_BLOCK,
)

TRANSFORMER_BLOCK_EVAL_NO_GRAD = _source(
    r"""

def setup():
    torch.manual_seed(0)
    with torch.device("cuda"):
        _block.append(Block(1024, 16, dropout=0.1).to(torch.bfloat16).eval())  # eval(): dropout off
    return [randn(4, 1024, 1024, dtype=torch.bfloat16, seed=1)]


def kernel(x):
    with torch.no_grad():
        return _block[0](x)
""",
    NANOGPT_BLOCK,
)

# --- What a model returns: a ModelOutput (an OrderedDict), a dataclass -----------------------------------

MODEL_OUTPUT_ORDERED_DICT = _source(r"""
from collections import OrderedDict

from torch import nn


class ModelOutput(OrderedDict):  # transformers' ModelOutput in miniature: keys read as attributes
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class TinyLM(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.norm = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, input_ids):
        hidden = self.norm(self.embed_tokens(input_ids))
        return ModelOutput(logits=self.lm_head(hidden), last_hidden_state=hidden)


_model = []


def setup():
    torch.manual_seed(0)
    with torch.device("cuda"):
        _model.append(TinyLM(32000, 1024).to(torch.bfloat16).eval())
    generator = torch.Generator(device="cuda").manual_seed(4)
    return [torch.randint(0, 32000, (2, 512), device="cuda", generator=generator)]


def kernel(input_ids):
    with torch.no_grad():
        return _model[0](input_ids)
""")

RETURNS_DATACLASS_OBJECT = _source(r"""
from dataclasses import dataclass

import torch.nn.functional as F


@dataclass
class RouterOutput:  # a mixture-of-experts router's result, a plain object (not a dict)
    weights: torch.Tensor
    experts: torch.Tensor


def setup():
    return [randn(16384, 2048, dtype=torch.bfloat16, seed=1), randn(2048, 64, dtype=torch.bfloat16, seed=2) * 0.02]


def kernel(hidden, router):
    probabilities = F.softmax((hidden @ router).float(), dim=-1)
    weights, experts = torch.topk(probabilities, k=2, dim=-1)
    return RouterOutput(weights=weights / weights.sum(dim=-1, keepdim=True), experts=experts)
""")

# --- Inputs of several GiB ------------------------------------------------------------------------------

SUM_OVER_DIM_5_GIB = _source(r"""

def setup():
    return [randn(327680, 4096, seed=1)]  # 5 GiB of float32: one copy is over the old 4 GiB budget


def kernel(x):
    return x.sum(dim=1)
""")

# --- Honest routes refused before issue 40 ---------------------------------------------------------------

INDEX_ADD_BF16_ATOMICS = _source(r"""
SRC_ROWS, COLUMNS = 1 << 19, 64  # 128 rows of src into each row of out: heavy collisions


def setup():
    generator = torch.Generator(device="cuda").manual_seed(3)
    index = torch.randint(0, 4096, (SRC_ROWS,), device="cuda", generator=generator)
    return [empty(4096, COLUMNS, dtype=torch.bfloat16), index, randn(SRC_ROWS, COLUMNS, dtype=torch.bfloat16, seed=1)]


def kernel(out, index, src):
    out.zero_()
    out.index_add_(0, index, src)  # bfloat16 atomics: every call rounds its sums differently
""")

DROPOUT_TRAIN_DECLARED = _source(r"""
import torch.nn.functional as F


def setup():
    return [randn(4096, 4096, seed=1)]


def kernel(x):
    return F.dropout(x, p=0.1, training=True)  # random by design: the pattern declares it unverifiable
""")

GRAPH_ON_CAPTURED_ARGUMENTS = _source(r"""
_graph = []


def setup():
    x = randn(1 << 24, seed=1)  # the graph's static input and output, handed to the caller
    y = torch.empty_like(x)

    def body():
        torch.mul(x, 2.0, out=y)
        y.add_(1.0)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()  # warm-up outside the capture, as torch's documentation does
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    _graph.append(graph)
    return [x, y]


def kernel(x, y):
    _graph[0].replay()  # reads x and writes y: exactly the tensors passed
""")


PATTERNS = [
    Pattern("kernelbench_forward_a_plus_b", MEMORY, KERNELBENCH_FORWARD, checked_outputs=[], returned=["return"]),
    Pattern("matmul_returns_new_bf16", COMPUTE, MATMUL_RETURNS_BF16, checked_outputs=[], returned=["return"]),
    Pattern("tuple_return", MEMORY, TUPLE_RETURN, checked_outputs=[], returned=["return[0]", "return[1]"]),
    Pattern("dict_return", MEMORY, DICT_RETURN, checked_outputs=[], returned=["return['sum']", "return['scaled']"]),
    Pattern("allocates_its_output", MEMORY, ALLOCATES_ITS_OUTPUT, checked_outputs=[], returned=["return"]),
    Pattern("destination_first", MEMORY, DESTINATION_FIRST, checked_outputs=[0], returned=[]),
    Pattern("destination_middle", MEMORY, DESTINATION_MIDDLE, checked_outputs=[1], returned=[]),
    Pattern("destination_last", MEMORY, DESTINATION_LAST, checked_outputs=[1], returned=[]),
    Pattern("in_place_update", MEMORY, IN_PLACE_UPDATE, checked_outputs=[0], returned=[]),
    Pattern("cublas_mm_out_bf16", COMPUTE, CUBLAS_MM_OUT_BF16, checked_outputs=[2], returned=[]),
    Pattern("cublas_mm_out_fp32", COMPUTE, CUBLAS_MM_OUT_FP32, checked_outputs=[2], returned=[]),
    Pattern("cudnn_conv2d", COMPUTE, CUDNN_CONV2D, checked_outputs=[], returned=["return"]),
    Pattern("sdpa_causal", COMPUTE, SDPA_CAUSAL, checked_outputs=[], returned=["return"]),
    Pattern("triton_output_argument", MEMORY, TRITON_OUTPUT_ARGUMENT, checked_outputs=[2], returned=[]),
    Pattern("triton_autotune", MEMORY, TRITON_AUTOTUNE, checked_outputs=[1], returned=[]),
    Pattern("torch_compile_default", MEMORY, TORCH_COMPILE, checked_outputs=[], returned=["return"]),
    Pattern("tvm_ffi_inline_cuda", MEMORY, TVM_FFI_INLINE_CUDA, checked_outputs=[1], returned=[]),
    # A graph replay is checked when its outputs change with the rotated values (issue 40).
    Pattern("cuda_graph_returns_static_out", MEMORY, GRAPH_RETURNS_STATIC_OUT, checked_outputs=[], returned=["return"]),
    # Its result stays in the graph's own buffer, which no call can see: the pattern declares so.
    Pattern(
        "cuda_graph_writes_nothing_visible",
        MEMORY,
        GRAPH_WRITES_NOTHING_VISIBLE,
        cfg={"unverifiable": ["return"]},
    ),
    Pattern("cuda_graph_returns_clone", MEMORY, GRAPH_RETURNS_CLONE, checked_outputs=[], returned=["return"]),
    Pattern("index_add_atomics", MEMORY, INDEX_ADD_ATOMICS, checked_outputs=[0], returned=[]),
    Pattern("triton_split_k_atomic_add", MEMORY, TRITON_SPLIT_K_ATOMIC_ADD, checked_outputs=[2], returned=[]),
    Pattern("cutlass_style_workspace", COMPUTE, CUTLASS_STYLE_WORKSPACE, checked_outputs=[2, 3], returned=[]),
    Pattern("scratch_buffer_inside", MEMORY, SCRATCH_BUFFER_INSIDE, checked_outputs=[1], returned=[]),
    Pattern("transposed_input_view", MEMORY, TRANSPOSED_INPUT_VIEW, checked_outputs=[1], returned=[]),
    # A non-contiguous output argument: rotated and checked (issue 40).
    Pattern("sliced_output_view", MEMORY, SLICED_OUTPUT_VIEW, checked_outputs=[1], returned=[]),
    Pattern("mixed_dtypes_fp16_in_fp32_out", MEMORY, MIXED_DTYPES, checked_outputs=[1], returned=[]),
    Pattern("argmax_int64_output", MEMORY, ARGMAX_INT_OUTPUT, checked_outputs=[], returned=["return"]),
    Pattern("bool_output", MEMORY, BOOL_OUTPUT, checked_outputs=[], returned=["return"]),
    # Empty tensors have nothing to compare: checked, never unchecked (issue 40); y is found.
    Pattern("zero_size_tensors", LAUNCH, ZERO_SIZE_TENSORS),
    Pattern("two_streams", MEMORY, TWO_STREAMS, checked_outputs=[1], returned=[]),
    Pattern("four_streams", MEMORY, FOUR_STREAMS, checked_outputs=[1], returned=[]),
    Pattern("priority_stream", MEMORY, PRIORITY_STREAM, checked_outputs=[1], returned=[]),
    Pattern("launch_bound_tiny", LAUNCH, LAUNCH_BOUND_TINY, checked_outputs=[1], returned=[]),
    Pattern("memory_bound_large", MEMORY, MEMORY_BOUND_LARGE, checked_outputs=[2], returned=[]),
    Pattern("compute_bound_matmul_4096", COMPUTE, COMPUTE_BOUND_MATMUL, checked_outputs=[], returned=["return"]),
    Pattern("l2_resident", L2, L2_RESIDENT, cfg={"flush_l2": False}, checked_outputs=[1], returned=[]),
    Pattern("scalar_and_dict_arguments", MEMORY, SCALAR_AND_DICT_ARGUMENTS, checked_outputs=[1], returned=[]),
    # What new users write (below): each stresses a defence the patterns above leave alone.
    Pattern(
        "nn_module_linear_gelu_requires_grad",
        COMPUTE,
        NN_MODULE_LINEAR_GELU,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "torch_compile_reduce_overhead",
        MEMORY,
        TORCH_COMPILE_REDUCE_OVERHEAD,
        checked_outputs=[],
        returned=["return"],
    ),
    Pattern("item_inside_call", MEMORY, ITEM_INSIDE_CALL, checked_outputs=[], returned=["return"], gate_timeouts=1),
    Pattern(
        "synchronize_before_return",
        MEMORY,
        SYNCHRONIZE_BEFORE_RETURN,
        checked_outputs=[1],
        returned=[],
        gate_timeouts=1,
    ),
    Pattern(
        "returns_its_scale",
        MEMORY,
        RETURNS_ITS_SCALE,
        checked_outputs=[],
        returned=["return[0]"],
        constants=["return[1]"],
        gate_timeouts=0,
    ),
    # A dozen tiny dependent kernels: latency per launch on the GPU, not bandwidth or FLOPs.
    Pattern(
        "many_tensor_arguments_mlp",
        LAUNCH,
        MANY_TENSOR_ARGUMENTS,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern("fp8_e4m3_output", MEMORY, FP8_OUTPUT, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "fft_complex64_output", MEMORY, FFT_COMPLEX64_OUTPUT, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern(
        "embedding_int64_index", MEMORY, EMBEDDING_INT64_INDEX, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern(
        "softmax_stream_per_call",
        MEMORY,
        SOFTMAX_STREAM_PER_CALL,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    # Model code as users write it (issue 40): each must be trusted with every output checked.
    Pattern("conv1d_bias_fp32", COMPUTE, CONV1D_BIAS_FP32, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "depthwise_conv2d_fp16", MEMORY, DEPTHWISE_CONV2D_FP16, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern(
        "conv_transpose2d_bf16",
        COMPUTE,
        CONV_TRANSPOSE2D_BF16,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    # A channels_last return is not contiguous: checked by value (issue 40).
    Pattern(
        "resnet_block_eval_channels_last",
        COMPUTE,
        RESNET_BLOCK_EVAL_CHANNELS_LAST,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern("layer_norm_bf16", MEMORY, LAYER_NORM_BF16, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "rms_norm_hand_written_module",
        MEMORY,
        RMS_NORM_HAND_WRITTEN,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    # The running statistics, read and written in place, are outputs beside the return.
    Pattern(
        "batch_norm_train_updates_running_stats",
        MEMORY,
        BATCH_NORM_TRAIN_RUNNING_STATS,
        checked_outputs=[1, 2],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "batch_norm_train_module_argument",
        MEMORY,
        BATCH_NORM_TRAIN_MODULE_ARGUMENT,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "group_norm_silu_fp16", MEMORY, GROUP_NORM_SILU_FP16, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern(
        "sdpa_key_padding_mask",
        COMPUTE,
        SDPA_KEY_PADDING_MASK,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "hand_written_attention_softmax",
        COMPUTE,
        HAND_WRITTEN_ATTENTION,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "max_pool2d_with_indices",
        MEMORY,
        MAX_POOL2D_WITH_INDICES,
        checked_outputs=[],
        returned=["return[0]", "return[1]"],
        gate_timeouts=0,
    ),
    Pattern("avg_pool2d_fp32", MEMORY, AVG_POOL2D_FP32, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "adaptive_pool_classifier_head_inference_mode",
        MEMORY,
        ADAPTIVE_POOL_CLASSIFIER_HEAD,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "cross_entropy_scalar_loss",
        MEMORY,
        CROSS_ENTROPY_SCALAR,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern("mse_loss_scalar", MEMORY, MSE_LOSS_SCALAR, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "sum_and_mean_over_dims",
        MEMORY,
        SUM_AND_MEAN_OVER_DIMS,
        checked_outputs=[],
        returned=["return[0]", "return[1]"],
        gate_timeouts=0,
    ),
    Pattern("logsumexp_last_dim", MEMORY, LOGSUMEXP_LAST_DIM, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "cumsum_and_cu_seqlens",
        MEMORY,
        CUMSUM_AND_CU_SEQLENS,
        checked_outputs=[],
        returned=["return[0]", "return[1]"],
        gate_timeouts=0,
    ),
    # torch.return_types.topk is a named tuple (a tuple subclass): walked by position.
    Pattern(
        "topk_named_tuple",
        MEMORY,
        TOPK_NAMEDTUPLE,
        checked_outputs=[],
        returned=["return[0]", "return[1]"],
        gate_timeouts=0,
    ),
    Pattern(
        "nn_embedding_module", MEMORY, NN_EMBEDDING_MODULE, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern("embedding_bag_sum", MEMORY, EMBEDDING_BAG_SUM, checked_outputs=[], returned=["return"], gate_timeouts=0),
    Pattern(
        "llama_mlp_train_mode", COMPUTE, LLAMA_MLP_TRAIN_MODE, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    Pattern(
        "gpt2_mlp_eval_module_argument",
        COMPUTE,
        GPT2_MLP_EVAL_MODULE_ARGUMENT,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "transformer_block_train_mode",
        COMPUTE,
        TRANSFORMER_BLOCK_TRAIN_MODE,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    Pattern(
        "transformer_block_eval_no_grad",
        COMPUTE,
        TRANSFORMER_BLOCK_EVAL_NO_GRAD,
        checked_outputs=[],
        returned=["return"],
        gate_timeouts=0,
    ),
    # An OrderedDict subclass is walked as a dict (issue 40).
    Pattern(
        "model_output_ordered_dict",
        COMPUTE,
        MODEL_OUTPUT_ORDERED_DICT,
        checked_outputs=[],
        returned=["return['logits']", "return['last_hidden_state']"],
        gate_timeouts=0,
    ),
    # An object is walked through its instance __dict__ (issue 40): "return.<attribute>".
    Pattern(
        "returns_dataclass_object",
        MEMORY,
        RETURNS_DATACLASS_OBJECT,
        checked_outputs=[],
        returned=["return.weights", "return.experts"],
        gate_timeouts=0,
    ),
    # 5 GiB in: one copy is over the old 4 GiB budget (the benchmark's copies, the caller's
    # values kept aside and the fresh variant take about 25 GiB); about 1.8 ms a call on the H100.
    Pattern(
        "sum_over_dim_5_gib_input", MEMORY, SUM_OVER_DIM_5_GIB, checked_outputs=[], returned=["return"], gate_timeouts=0
    ),
    # Honest routes refused before issue 40.
    Pattern(
        "index_add_bf16_atomics", MEMORY, INDEX_ADD_BF16_ATOMICS, checked_outputs=[0], returned=[], gate_timeouts=0
    ),
    Pattern(
        "dropout_train_declared_unverifiable",
        MEMORY,
        DROPOUT_TRAIN_DECLARED,
        cfg={"unverifiable": ["return"]},
        checked_outputs=[],
        returned=[],  # declared: listed under defences.returned.unverifiable, never checked
        gate_timeouts=0,
    ),
    Pattern(
        "cuda_graph_on_captured_arguments",
        MEMORY,
        GRAPH_ON_CAPTURED_ARGUMENTS,
        checked_outputs=[1],
        returned=[],
        gate_timeouts=0,
    ),
]

BY_NAME = {pattern.name: pattern for pattern in PATTERNS}
NAMES = [pattern.name for pattern in PATTERNS]
assert len(BY_NAME) == len(PATTERNS)


def kernel_arity(source: str) -> int:
    """The number of positional parameters of the source's `def kernel(...)`."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "kernel":
            arguments = node.args
            assert not (arguments.vararg or arguments.kwonlyargs or arguments.defaults), "kernel(a, b, ...) only"
            return len(arguments.args)
    raise ValueError("the source defines no kernel()")


# Uploaded beside each pattern: the benchmark handles and one argument out of setup()'s list.
HELPERS = r"""
from kcoral.builtins import benchmark, benchmark_paired, check_close


def pick(values, index):
    return values[index]
"""


def add_pattern(program: Program, pattern: Pattern, prefix: str = "") -> tuple:
    """Uploads the pattern, runs its setup once; (kernel handle, [argument handles], helpers)."""
    module = program.upload(id=f"{prefix}pattern", kind="module", source=pattern.source)
    helpers = program.upload(id=f"{prefix}helpers", kind="module", source=HELPERS)
    setup = program.get_function(id=f"{prefix}setup", module=module, name="setup")
    kernel = program.get_function(id=f"{prefix}kernel", module=module, name="kernel")
    pick = program.get_function(id=f"{prefix}pick", module=helpers, name="pick")
    values = program.run(id=f"{prefix}setup_values", fn=setup, args=[])
    arguments = [
        program.run(id=f"{prefix}arg{i}", fn=pick, args=[values, i]) for i in range(kernel_arity(pattern.source))
    ]
    return kernel, arguments, helpers


def cfg_for(pattern: Pattern, key: str) -> dict:
    return {**(ON if key.startswith("on") else OFF), **pattern.cfg}


def pattern_program(pattern: Pattern, order: tuple = ORDER) -> Program:
    """One program (one request, one worker): setup once, then the benchmark with the defences on
    and off in `order`; each timing is returned under its key."""
    program = Program()
    kernel, arguments, helpers = add_pattern(program, pattern)
    benchmark = program.get_function(id="benchmark", module=helpers, name="benchmark")
    for key in order:
        timing = program.run(id=key, fn=benchmark, args=[kernel, *arguments, cfg_for(pattern, key)])
        program.return_(key=key, value=timing)
    return program


def _shown(value, depth: int = 0):
    """What a kernel returned, by path as the benchmark walks it: tensors as (shape, dtype)."""
    import torch

    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), str(value.dtype)) + (() if value.is_contiguous() else ("strided",))
    if depth >= 4:
        return type(value).__name__
    if isinstance(value, dict):  # OrderedDict and ModelOutput too
        return {k: _shown(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (tuple, list)):  # named tuples (torch.return_types) too
        return [_shown(v, depth + 1) for v in value]
    if value is not None and hasattr(value, "__dict__"):
        return {f".{k}": _shown(v, depth + 1) for k, v in vars(value).items()}
    return value


def _smoke(names: list[str]) -> None:
    """Each pattern's setup and kernel with plain torch, no server."""
    import linecache
    import statistics
    import time
    import types

    import torch

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"{'pattern':44} {'kind':14} {'setup s':>8} {'us/call':>10}  returns")
    for pattern in PATTERNS:
        if names and pattern.name not in names:
            continue
        started = time.perf_counter()
        module = types.ModuleType(pattern.name)
        filename = f"<pattern:{pattern.name}>"  # in linecache, as the worker keeps uploads (Triton reads it)
        linecache.cache[filename] = (len(pattern.source), None, pattern.source.splitlines(True), filename)
        exec(compile(pattern.source, filename, "exec"), module.__dict__)
        args = module.setup()
        torch.cuda.synchronize()
        setup_s = time.perf_counter() - started
        assert len(args) == kernel_arity(pattern.source), pattern.name
        returned = module.kernel(*args)
        samples = []
        for _ in range(30):
            if pattern.cfg.get("flush_l2", True):
                flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module.kernel(*args)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        print(
            f"{pattern.name:44} {pattern.kind:14} {setup_s:8.2f} {statistics.median(samples):10.2f}  "
            f"{_shown(returned)}",
            flush=True,
        )


if __name__ == "__main__":
    import sys

    _smoke(sys.argv[1:])
