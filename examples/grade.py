"""Grade a candidate against a reference on a GPU server, out of the candidate's reach
(docs/grading.md): an honest one (correct, trusted, with its speedup and 95% interval) and one
hard-coded for the declared size (not correct, naming the shapes it got wrong).

    KCORAL_GPU_URL=http://gpu.example.com:8001 python examples/grade.py

Default: http://localhost:8001.
"""

import os

from kcoral import Client
from kcoral.grading import Code

MAKE_INPUTS = Code(
    """
import torch

def make_inputs(seed, shape):
    n = (shape or {"n": 1024})["n"]
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(n, n, device="cuda", generator=generator),
            torch.randn(n, n, device="cuda", generator=generator))
""",
    "make_inputs",
)
REFERENCE = Code("def reference(a, b):\n    return a @ b\n", "reference")
HONEST = Code("import torch\n\ndef kernel(a, b):\n    return torch.mm(a, b)\n", "kernel")
HARD_CODED = Code(
    "import torch\n\ndef kernel(a, b):\n    out = torch.mm(a, b)\n"
    "    if a.shape[0] != 1024:  # tested only at the declared size\n        out[0] = 0\n    return out\n",
    "kernel",
)
CFG = {"shapes": [{"n": 512}, {"n": 768}, {"n": 1536}], "seeds": 2}


def show(name: str, verdict: dict) -> None:
    print(f"{name}: correct={verdict['correct']} trusted={verdict['trusted']} lease={verdict['lease_ms']:.0f} ms")
    if verdict["speedup"] is not None:
        print(
            f"  speedup {verdict['speedup']:.3f}x, 95% CI {verdict['speedup_ci95_low']:.3f}"
            f"-{verdict['speedup_ci95_high']:.3f}, significant={verdict['significant']}"
        )
    for reason in verdict["reasons"]:
        print(f"  reason: {reason[:160]}")
    for condition in verdict["conditions"]:
        print(f"  condition: {condition[:160]}")


def main() -> None:
    with Client(os.environ.get("KCORAL_GPU_URL", "http://localhost:8001")) as client:
        show("honest", client.grade(HONEST, REFERENCE, MAKE_INPUTS, CFG, timeout_seconds=300))
        show("hard-coded", client.grade(HARD_CODED, REFERENCE, MAKE_INPUTS, CFG, timeout_seconds=300))


if __name__ == "__main__":
    main()
