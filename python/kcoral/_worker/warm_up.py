"""First-use costs paid before a request arrives (docs/gpu-scheduling.md).

On the H200 the seed's check (randn, the kernel, `x + 1`, assert_close) took
~140 ms of its lease in a fresh worker and ~8 ms in one that had run it
before: torch.testing's lazy imports and first-call set-up on the host, and
CUDA loading each torch kernel the first time it launches. The zygote pays
the host part once for every worker it forks (it never touches CUDA); each
stand-by pays the device part while it is prepared, outside any lease.

Explicit generators only: the default ones keep the seeds a fresh process
starts with, so unseeded programs draw what they would draw anywhere.
"""


def host(torch) -> None:
    a = torch.randn(64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a + 1, a.clone() + 1, rtol=1e-2, atol=1e-3)
    (a - 1).abs().max().item()


def device(torch) -> None:
    a = torch.randn(256, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    b = torch.empty_like(a)
    b.copy_(a)
    torch.testing.assert_close((b + 1).cpu(), (a + 1).cpu(), rtol=1e-2, atol=1e-3)
    (b - a).abs().max().item()
    # cuBLAS makes its handle and workspace at a process's first matrix product (tens of ms).
    m = a[:64].reshape(8, 8)
    (m @ m).sum().item()
    torch.cuda.synchronize()
