import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies ReLU elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 16384

SHAPES = [{"batch_size": 8, "dim": 4096}, {"batch_size": 64, "dim": 1000}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
