# WRONG on purpose (README.md): the mean of squares divides by 4096, the problem's declared
# hidden size, instead of the row's length. Right at the declared sizes and at the first SHAPES
# entry; off by a factor of 2 at SHAPES' hidden = 1024.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) / 4096 + self.eps)
