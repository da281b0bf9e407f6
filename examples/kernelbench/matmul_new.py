# WRONG on purpose (README.md): the product is taken in bfloat16 (8 bits of mantissa) and cast
# back, under the problem's float32 claim; over K = 2048 terms the error is far past float32's.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.to(torch.bfloat16), B.to(torch.bfloat16)).to(torch.float32)
