import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same products, one matrix of the batch at a time."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.stack([a[i] @ b[i] for i in range(a.shape[0])])
