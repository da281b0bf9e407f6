import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU (swish) elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


batch_size = 16
dim = 16384

SHAPES = [{"batch_size": 4, "dim": 65536}, {"batch_size": 33, "dim": 777}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
