import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """LayerNorm from its definition: the biased variance, eps 1e-5 as nn.LayerNorm's."""

    def __init__(self, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - x.mean(dim=-1, keepdim=True)
        variance = (centered * centered).mean(dim=-1, keepdim=True)
        return centered * torch.rsqrt(variance + self.eps) * self.weight + self.bias
