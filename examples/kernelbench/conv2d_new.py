import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """The convolution as im2col and one matrix product, with the nn.Conv2d's own weights."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = x.shape
        columns = F.unfold(x, kernel_size=3, padding=1)  # (batch, in_channels * 9, height * width)
        weight = self.conv.weight.reshape(self.conv.out_channels, -1)
        out = weight @ columns + self.conv.bias[:, None]
        return out.reshape(batch, self.conv.out_channels, height, width)
