import torch
import torch.nn as nn


class Model(nn.Module):
    """A batch of matrix products."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch = 8
m = 256
k = 512
n = 256

SHAPES = [{"batch": 3, "m": 129, "k": 300, "n": 65}, {"batch": 16, "m": 64, "k": 64, "n": 64}]


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
