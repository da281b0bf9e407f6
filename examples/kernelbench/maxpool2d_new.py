import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each 2x2 window as two axes of a view, and the maximum over them."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        windows = x.reshape(batch, channels, height // 2, 2, width // 2, 2)
        return windows.amax(dim=(3, 5))
