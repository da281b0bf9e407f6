import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each row divided by its norm, the norm held at least 1e-12 as F.normalize holds it."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.sqrt((x * x).sum(dim=1, keepdim=True))
        return x / norm.clamp_min(1e-12)
