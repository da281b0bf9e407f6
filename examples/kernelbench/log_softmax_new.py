import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each row less its log-sum-exp, taken about the row's maximum."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.amax(dim=1, keepdim=True)
        return shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))
