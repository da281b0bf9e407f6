"""A realistic evaluation stream: what a GPU server gets from a kernel generator.

    python bench/eval_mix.py [--candidates 100] [--concurrency 16] [--modes fresh,reused]
                             [--mix eval|seed] [--reference PYTHON] [--sandbox none|namespaces]
                             [--housekeeping outside-spans|contexts-beside-spans|beside-spans] [--seed 0]

Starts its own servers on free loopback ports, a CPU server and a GPU server per
side and mode (ours; the reference kcoral==0.1.1 when --reference names a Python
that imports it), one side and mode at a time, and sends each the same stream,
shuffled with a fixed seed. Per 100 candidates (`--mix eval`):

  20 fail to compile (a syntax error, each source distinct; on the CPU server)
  20 compute wrong results (their check fails)
   5 crash: 3 hit an illegal address on the GPU, 2 segfault on the host
   5 spin forever in a GPU kernel into a 2 s timeout
  50 correct: the seed's request (check, then `benchmark` with warmup_ms 25, repeat_ms 100)

`--mix seed` sends only the seed's request: a saturating stream of benchmarks.
The kernels' libraries are compiled once, on our CPU server, and uploaded by
every GPU candidate (the server's blob cache keeps them). Our client drives
both sides (it speaks the reference's protocol to the reference server).

Prints, per side and mode: evaluations per GPU-hour, the share of wall time
the GPU was leased (from the answers' lease_held_ms; a timed-out request's is
not reported, so this undercounts), the GPU duty cycle (the share of wall
time inside `benchmark` timing spans; ours reports spans in /metrics, the
reference does not), and p50/p99 latency by outcome. The reference has no
bubblewrap on these machines, so with it both sides run --sandbox none unless
--sandbox namespaces is given, which then leaves the reference out.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kcoral import Client, KCoralError, Program

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
import cpu_compile_gpu_execute as seed  # noqa: E402
from roundtrip import percentile  # noqa: E402 - bench/ is this script's directory

DEFAULT_REFERENCE = REPO / "build" / "reference-server-venv" / "bin" / "python"

_WRAPPER = r"""
void {name}(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {{
  int n = static_cast<int>(x.numel());
  {name}_kernel<<<(n + 255) / 256, 256>>>(static_cast<const float*>(x.data_ptr()),
                                          static_cast<float*>(y.data_ptr()), n);
}}
"""
# Every library exports `add_one`, so that one program (the seed's) evaluates them all.
KERNELS = {
    "correct": seed.CUDA_SOURCE,
    "wrong": r"""
__global__ void add_one_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 2.0f;
}
"""
    + _WRAPPER.format(name="add_one"),
    "illegal_address": r"""
__global__ void add_one_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i + (1 << 30)] = x[i] + 1.0f;  // 4 GiB past the output
}
"""
    + _WRAPPER.format(name="add_one"),
    "spin": r"""
__global__ void add_one_kernel(const float* x, float* y, int n) {
  while (clock64() >= 0) {}  // never ends; clock64 keeps the loop from being removed
}
"""
    + _WRAPPER.format(name="add_one"),
}
SEGFAULT = "import ctypes\n\n\ndef main():\n    return ctypes.string_at(0)\n"
TIMEOUT_S = 2.0  # the spinning candidates' budget
BUDGET_S = 60.0  # everyone else's

# (kind, how many per 100, the outcome it must have)
EVAL_MIX = [
    ("compile_error", 20, "FAILED"),
    ("wrong", 20, "FAILED"),
    ("illegal_address", 3, "FAILED"),
    ("segfault", 2, "FAILED"),
    ("timeout", 5, "timeout"),
    ("correct", 50, "COMPLETED"),
]
SEED_MIX = [("correct", 100, "COMPLETED")]


# The seed's compiler (examples/cpu_compile_gpu_execute.py), given the source as
# text: the reference (E3) has no `language: "cuda"` modules.
COMPILER = (
    seed.OPERATIONS
    + r"""

class _Source:
    def __init__(self, name, source):
        self.name, self.source = name, source


def compile_text(name, source, cfg):
    return compile_cuda_binary(_Source(name, source), cfg)
"""
)


def compile_program(source: str, arch: str) -> Program:
    """The seed's compile request for another source."""
    program = Program()
    operations = program.upload(kind="module", source=COMPILER)
    compile_text = program.get_function(module=operations, name="compile_text", cpu_only=True)
    library = program.run(fn=compile_text, args=["add_one", source, {"arch": arch, "extra_cuda_cflags": ["-O3"]}])
    program.return_(key="library", value=library)
    return program


def broken_source(index: int) -> str:
    """A generated kernel with a syntax error (a missing semicolon), distinct per candidate."""
    return f"// candidate {index}\n" + seed.CUDA_SOURCE.replace("y[i] = x[i] + 1.0f;", "y[i] = x[i] + 1.0f")


def segfault_program() -> Program:
    program = Program()
    module = program.upload(kind="module", source=SEGFAULT)
    out = program.run(fn=program.get_function(module=module, name="main"), args=[])
    program.return_(key="out", value=out)
    return program


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, python: str, flags: list[str], env_path: str = "", label: str = ""):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_dir = tempfile.mkdtemp(prefix="kcoral-evalmix-")
        env = dict(os.environ)
        if label == "reference":
            env["PYTHONPATH"] = env_path  # the reference's own packages, never ours
        self.process = subprocess.Popen(
            [
                python,
                "-m",
                "kcoral",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-dir",
                self.log_dir,
                "--no-log-console",
                *flags,
            ],
            start_new_session=True,
            env=env,
            cwd=tempfile.gettempdir(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{label} server ({' '.join(flags)}) did not start; logs were in {self.log_dir}")
            time.sleep(0.2)

    def events(self, name: str) -> list[dict]:
        found = []
        for path in Path(self.log_dir).glob("runs/*/events.jsonl"):
            for line in path.read_text().splitlines():
                if line and f'"{name}"' in line:
                    event = json.loads(line)
                    if event.get("event") == name:
                        found.append(event)
        return found

    def metric(self, name: str) -> float | None:
        try:
            text = httpx.get(self.url + "/metrics", timeout=5).text
        except httpx.HTTPError:
            return None
        match = re.search(rf"^{name} ([0-9.eE+-]+)$", text, re.M)
        return float(match.group(1)) if match else None

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.log_dir, ignore_errors=True)


@dataclass
class Candidate:
    index: int
    kind: str
    expected: str


@dataclass
class Outcome:
    kind: str
    seen: str
    expected: str
    seconds: float
    lease_held_ms: float = 0.0
    detail: str = ""  # the error, when there was one


@dataclass
class Run:
    side: str
    mode: str
    wall_s: float
    outcomes: list[Outcome] = field(default_factory=list)
    span_s: float | None = None
    timelines: list[dict] = field(default_factory=list)  # ours: run_timeline events

    def per_gpu_hour(self) -> float:
        return len(self.outcomes) / self.wall_s * 3600

    def leased(self) -> float:
        return sum(o.lease_held_ms for o in self.outcomes) / 1e3 / self.wall_s

    def as_expected(self) -> int:
        return sum(o.seen == o.expected for o in self.outcomes)


def stream(mix: list, count: int, rng: random.Random) -> list[Candidate]:
    block = [(kind, expected) for kind, n, expected in mix for _ in range(n)]
    candidates = []
    while len(candidates) < count:
        shuffled = block[:]
        rng.shuffle(shuffled)
        candidates += shuffled
    return [Candidate(i, kind, expected) for i, (kind, expected) in enumerate(candidates[:count])]


def evaluate(candidate: Candidate, cpu: Client, gpu: Client, libraries: dict, arch: str) -> Outcome:
    if candidate.kind == "compile_error":
        client, program, budget = cpu, compile_program(broken_source(candidate.index), arch), BUDGET_S
    elif candidate.kind == "segfault":
        client, program, budget = gpu, segfault_program(), BUDGET_S
    else:
        library = libraries["spin" if candidate.kind == "timeout" else candidate.kind]
        client, program = gpu, seed.benchmark_program(library)
        budget = TIMEOUT_S if candidate.kind == "timeout" else BUDGET_S
    start = time.perf_counter()
    detail = ""
    try:
        result = client.execute(program, timeout_seconds=budget)
        seen, held = result.status, result.lease_held_ms
        if result.error:
            detail = f"{result.error.get('kind')}: {result.error.get('message', '')}"
    except KCoralError as exc:
        seen, held, detail = exc.kind or f"http_{exc.status_code}", 0.0, exc.message
    except Exception as exc:  # noqa: BLE001 - counted as unexpected, never hidden
        seen, held, detail = type(exc).__name__, 0.0, str(exc)
    return Outcome(candidate.kind, seen, candidate.expected, time.perf_counter() - start, held, detail[:200])


def measure(
    side: str,
    mode: str,
    cpu_url: str,
    gpu_server: Server,
    candidates: list[Candidate],
    libraries: dict,
    arch: str,
    concurrency: int,
) -> Run:
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    queue = iter(candidates)

    def client_loop():
        with Client(cpu_url) as cpu, Client(gpu_server.url) as gpu:
            while True:
                with lock:
                    candidate = next(queue, None)
                if candidate is None:
                    return
                outcome = evaluate(candidate, cpu, gpu, libraries, arch)
                with lock:
                    outcomes.append(outcome)
                    done = len(outcomes)
                if done % 20 == 0:
                    print(f"  {side} {mode}: {done}/{len(candidates)}", file=sys.stderr, flush=True)

    spans_before = gpu_server.metric("kcoral_span_seconds_total") if side == "ours" else None
    # Ours only; the warm-up's timelines are not this run's.
    timelines_before = len(gpu_server.events("run_timeline")) if side == "ours" else 0
    threads = [threading.Thread(target=client_loop) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    run = Run(side, mode, wall, outcomes)
    if spans_before is not None:
        spans_after = gpu_server.metric("kcoral_span_seconds_total")
        run.span_s = None if spans_after is None else spans_after - spans_before
        run.timelines = gpu_server.events("run_timeline")[timelines_before:]
    return run


def compile_libraries(cpu_url: str, arch: str, kinds: set[str]) -> dict[str, bytes]:
    libraries: dict[str, bytes] = {}

    def build(kind: str):
        with Client(cpu_url) as client:
            result = client.execute(compile_program(KERNELS[kind], arch), timeout_seconds=600)
        if not result.completed:
            raise SystemExit(f"compiling the {kind} kernel failed: {result.error}")
        libraries[kind] = result.results["library"]

    threads = [threading.Thread(target=build, args=(kind,)) for kind in sorted(kinds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if set(libraries) != kinds:
        raise SystemExit("a kernel did not compile")
    return libraries


def gpu_arch() -> str:
    """GPU 0's architecture as the seed names it (sm_90a on an H200), from nvidia-smi."""
    query = subprocess.run(
        ["nvidia-smi", "-i", "0", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True
    )
    if query.returncode != 0:
        raise SystemExit(f"nvidia-smi failed ({query.stderr.strip()}); pass --arch")
    major, minor = query.stdout.strip().split(".")
    return f"sm_{major}{minor}" + ("a" if int(major) >= 9 else "")


def reference_imports(python: str, path: str) -> bool:
    """Whether `python` imports the reference kcoral 0.1.1 and what its `benchmark`
    needs (cupti-python, torch); says what is missing."""
    env = dict(os.environ, PYTHONPATH=path)
    probe = subprocess.run(
        [python, "-c", "import importlib.metadata as m, kcoral; print(m.version('kcoral'), kcoral.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    if probe.returncode != 0:
        return False
    version, location = probe.stdout.split(maxsplit=1)
    if version != "0.1.1" or str(REPO) in location:
        return False
    needs = subprocess.run(
        [python, "-c", "import torch; from cupti import cupti"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    if needs.returncode != 0:
        last = (needs.stderr.strip().splitlines() or ["?"])[-1]
        print(
            f"note: the reference's benchmark will fail: {python} cannot import torch and cupti ({last})",
            file=sys.stderr,
        )
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=100, help="candidates per side and mode")
    parser.add_argument("--concurrency", type=int, default=16, help="candidates in flight")
    parser.add_argument(
        "--modes",
        default="fresh,reused",
        help="fresh: a new worker process per request (the default); reused: workers kept",
    )
    parser.add_argument("--mix", choices=["eval", "seed"], default="eval")
    parser.add_argument("--seed", type=int, default=0, help="shuffles the stream")
    parser.add_argument("--workers-per-gpu", type=int, default=8)
    parser.add_argument("--arch", default="", help="the kernels' target (default: GPU 0's, from nvidia-smi)")
    parser.add_argument(
        "--reference",
        default=str(DEFAULT_REFERENCE) if DEFAULT_REFERENCE.exists() else "",
        help="a Python that imports kcoral 0.1.1 ('' leaves the reference out)",
    )
    parser.add_argument(
        "--reference-path",
        default="",
        help="PYTHONPATH for the reference's servers (where it was installed with --target)",
    )
    parser.add_argument("--reference-modes", default="fresh", help="the reference's modes (fresh, reused)")
    parser.add_argument(
        "--sandbox",
        choices=["none", "namespaces"],
        default=None,
        help="ours; default none with the reference (it has no bubblewrap here), else namespaces",
    )
    parser.add_argument(
        "--housekeeping",
        choices=["outside-spans", "contexts-beside-spans", "beside-spans"],
        default="outside-spans",
        help="ours: when stand-by house-keeping may overlap timing spans (the server's default: outside-spans)",
    )
    args = parser.parse_args()

    reference = args.reference
    if reference and not reference_imports(reference, args.reference_path):
        print(f"note: {reference} does not import the reference kcoral 0.1.1; leaving it out", file=sys.stderr)
        reference = ""
    sandbox = args.sandbox or ("none" if reference else "namespaces")
    if reference and sandbox != "none":
        print("note: the reference cannot sandbox here (no bubblewrap); leaving it out", file=sys.stderr)
        reference = ""
    mix = EVAL_MIX if args.mix == "eval" else SEED_MIX
    candidates = stream(mix, args.candidates, random.Random(args.seed))
    sides = [("ours", sys.executable, m) for m in args.modes.split(",")]
    if reference:
        sides += [("reference", reference, m) for m in args.reference_modes.split(",")]

    runs: list[Run] = []
    # Our CPU server compiles the libraries once; each side then has its own CPU server.
    builder = Server(
        sys.executable,
        ["--device", "cpu", "--num-workers", "4", "--sandbox", sandbox, "--max-requests-per-worker", "0"],
        label="ours",
    )
    try:
        arch = args.arch or gpu_arch()
        wanted = {"correct"} | {
            "spin" if c.kind == "timeout" else c.kind
            for c in candidates
            if c.kind in ("wrong", "illegal_address", "timeout")
        }
        print(f"compiling {len(wanted)} kernels for {arch} once", file=sys.stderr, flush=True)
        libraries = compile_libraries(builder.url, arch, wanted)
    finally:
        builder.stop()

    for side, python, mode in sides:
        reuse = ["--max-requests-per-worker", "0"] if mode == "reused" else ["--max-requests-per-worker", "1"]
        common = ["--sandbox", sandbox] + reuse
        extra = ["--housekeeping", args.housekeeping] if side == "ours" else []
        env_path = args.reference_path if side == "reference" else ""
        cpu = Server(python, ["--device", "cpu", "--num-workers", "4", *common], env_path, side)
        gpu = None
        try:
            gpu = Server(
                python,
                ["--device", "gpu", "--gpus", "0", "--workers-per-gpu", str(args.workers_per_gpu), *common, *extra],
                env_path,
                side,
            )
            warm = [Candidate(-1, "correct", "COMPLETED")] * 4  # libraries into the cache, workers ready
            measure(side, mode, cpu.url, gpu, warm, libraries, arch, 4)
            print(
                f"measuring {side}, {mode} workers ({len(candidates)} candidates, {args.concurrency} in flight)",
                file=sys.stderr,
                flush=True,
            )
            runs.append(measure(side, mode, cpu.url, gpu, candidates, libraries, arch, args.concurrency))
        finally:
            if gpu is not None:
                gpu.stop()
            cpu.stop()

    print_tables(runs, args, sandbox)


def print_tables(runs: list[Run], args, sandbox: str) -> None:
    print(
        f"\nEvaluation mix '{args.mix}', {args.candidates} candidates, {args.concurrency} in flight, "
        f"seed {args.seed}, 1 GPU, {args.workers_per_gpu} workers per GPU, --sandbox {sandbox} on every side, "
        f"ours with --housekeeping {args.housekeeping}; {os.cpu_count()} cores"
    )
    print(
        f"{'side':>9} | {'workers':>7} | {'wall s':>7} | {'evals/GPU-hour':>14} | {'leased':>6} | "
        f"{'duty cycle':>10} | {'as expected':>11}"
    )
    print("-" * 86)
    for run in runs:
        duty = "n/a" if run.span_s is None else f"{100 * run.span_s / run.wall_s:.1f}%"
        print(
            f"{run.side:>9} | {run.mode:>7} | {run.wall_s:>7.1f} | {run.per_gpu_hour():>14.0f} | "
            f"{100 * run.leased():>5.1f}% | {duty:>10} | {run.as_expected():>5}/{len(run.outcomes):<5}"
        )
    ours = {r.mode: r for r in runs if r.side == "ours"}
    for run in runs:
        if run.side == "reference" and run.mode in ours:
            print(
                f"ours / reference, {run.mode} workers: {ours[run.mode].per_gpu_hour() / run.per_gpu_hour():.2f}x "
                "evaluations per GPU-hour"
            )
    print("\nLatency by outcome, seconds (p50 / p99, n)")
    kinds = [kind for kind, _, _ in (EVAL_MIX if args.mix == "eval" else SEED_MIX)]
    print(f"{'side':>9} | {'workers':>7} | " + " | ".join(f"{k:>20}" for k in kinds))
    print("-" * (22 + 23 * len(kinds)))
    for run in runs:
        cells = []
        for kind in kinds:
            times = [o.seconds for o in run.outcomes if o.kind == kind]
            cells.append(
                f"{statistics.median(times):>6.2f} / {percentile(times, 99):>5.2f} ({len(times):>3})"
                if times
                else f"{'-':>20}"
            )
        print(f"{run.side:>9} | {run.mode:>7} | " + " | ".join(f"{c:>20}" for c in cells))
    print_lease_by_instruction(runs)
    for run in runs:
        unexpected: dict[tuple[str, str], list[Outcome]] = {}
        for o in run.outcomes:
            if o.seen != o.expected:
                unexpected.setdefault((o.kind, o.seen), []).append(o)
        for (kind, seen), outcomes in sorted(unexpected.items()):
            print(
                f"note: {run.side} {run.mode}: {len(outcomes)} {kind} candidate(s) ended {seen}"
                + (f" (first: {outcomes[0].detail})" if outcomes[0].detail else "")
            )


def print_lease_by_instruction(runs: list[Run]) -> None:
    """Where the seed request's time and lease go, per instruction (our run_timeline
    events; the seed's program only, the one every correct candidate sends)."""
    instructions = seed.benchmark_program(b"").instructions
    for run in runs:
        rows: dict[int, list[tuple[float, float, bool]]] = {}
        timelines = [t for t in run.timelines if len(t["instructions"]) == len(instructions)]
        for timeline in timelines:  # other candidates' programs are left out
            for index, ms, wait, leased in timeline["instructions"]:
                rows.setdefault(index, []).append((ms, wait, leased))
        if not rows:
            continue
        print(
            f"\n{run.side}, {run.mode} workers: the seed request's instructions, median ms over {len(timelines)} "
            "runs (wall as the server saw it, the part of it waiting for the GPU lease, and the share of runs "
            "holding the lease when it ended)"
        )
        for index in sorted(rows):
            ins = instructions[index]
            name = f"{ins['op']} {ins.get('id') or ins.get('key', '')}"
            print(
                f"  {index:>2} {name:<28} {statistics.median(ms for ms, _, _ in rows[index]):>9.2f} ms   "
                f"lease wait {statistics.median(w for _, w, _ in rows[index]):>9.2f} ms   "
                f"leased {100 * sum(held for _, _, held in rows[index]) / len(rows[index]):>3.0f}%"
            )
        # The lease's own share of an instruction that ended leased is its wall less its wait.
        outside = [
            t["lease_held_ms"] - sum(ms - wait for _, ms, wait, leased in t["instructions"] if leased)
            for t in timelines
        ]
        print(
            f"  lease held outside instructions (the end of the request, hand-over): median "
            f"{statistics.median(outside):.2f} ms; timing span: median "
            f"{statistics.median(t['span_held_ms'] for t in timelines):.2f} ms"
        )


if __name__ == "__main__":
    main()
