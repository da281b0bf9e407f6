import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The sum taken in chunks of 64 along the dimension, then the chunks' sums added."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial_sums = [chunk.sum(dim=self.dim, keepdim=True) for chunk in x.split(64, dim=self.dim)]
        return torch.stack(partial_sums).sum(dim=0)
