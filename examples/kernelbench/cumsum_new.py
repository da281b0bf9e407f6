import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The running sum as a product with an upper-triangular matrix of ones."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        ones_above = torch.triu(torch.ones(length, length, device=x.device, dtype=x.dtype))
        return x @ ones_above
