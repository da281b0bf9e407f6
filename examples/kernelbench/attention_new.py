import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """softmax(q k^T / sqrt(d)) v, written out."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        return torch.softmax(scores, dim=-1) @ v
