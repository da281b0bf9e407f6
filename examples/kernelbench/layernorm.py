import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last dimension, with its learned scale and shift."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 8
seq_len = 128
hidden = 2048

SHAPES = [{"hidden": 1024}, {"batch_size": 2, "seq_len": 300, "hidden": 768}]


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
