import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Softmax written out: exp of the row minus its maximum, over the row's sum."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        exponentials = torch.exp(x - x.amax(dim=1, keepdim=True))
        return exponentials / exponentials.sum(dim=1, keepdim=True)
