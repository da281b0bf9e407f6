import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The transpose made contiguous first, then the sum."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.add(x.transpose(0, 1).contiguous(), y)
