import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """x times its sigmoid, written out."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)
