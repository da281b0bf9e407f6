import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution with padding 1, stride 1, with bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
in_channels = 3
out_channels = 16
height = 64
width = 64

SHAPES = [{"height": 32, "width": 48}, {"batch_size": 2, "in_channels": 8, "out_channels": 4}]


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
