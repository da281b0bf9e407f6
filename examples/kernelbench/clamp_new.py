import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The bounds applied with where, one after the other."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        upper = torch.where(x > 1.0, torch.ones_like(x), x)
        return torch.where(upper < -1.0, -torch.ones_like(x), upper)
