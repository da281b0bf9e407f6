# WRONG on purpose (README.md): the answer is right, but it is written over the caller's input,
# whose negative entries become zeros.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu_(x)
