import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same parameters (an nn.Linear built the same way gets the same weights), the product,
    bias and ReLU written out."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x @ self.linear.weight.t() + self.linear.bias, 0.0)
