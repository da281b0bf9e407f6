import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each row's sum divided by its length."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1) / x.shape[1]
