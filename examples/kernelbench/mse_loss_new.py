import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The squared differences summed, then divided by their count."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        difference = a - b
        return (difference * difference).sum() / difference.numel()
