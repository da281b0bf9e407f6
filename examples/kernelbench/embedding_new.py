import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The table's rows gathered with index_select on the flattened indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        rows = self.embedding.weight.index_select(0, indices.reshape(-1))
        return rows.reshape(*indices.shape, self.embedding.embedding_dim)
