import torch
import torch.nn as nn


class Model(nn.Module):
    """2x2 max pooling, stride 2 (the sizes are even)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 16
channels = 32
height = 64
width = 64

SHAPES = [{"height": 32, "width": 128}, {"batch_size": 2, "channels": 3, "height": 256, "width": 256}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
