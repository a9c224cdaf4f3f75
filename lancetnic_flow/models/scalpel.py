"""ScalpelMC: an MLP over sparse rows that never densifies one.

The first layer (:class:`SparseInput`) is ``Linear(dense TF-IDF row)``
computed in O(non-zeros); the rest is an ordinary MLP head.
"""
from __future__ import annotations

import torch
from torch import nn

from .sparse_input import SparseInput


class ScalpelMC(nn.Module):
    """Sparse input → ``layers`` hidden ReLU layers → class logits."""

    def __init__(self, dim: int, classes: int, hidden: int = 128, layers: int = 1, dropout: float = 0.2):
        super().__init__()
        self.config = {"dim": dim, "classes": classes, "hidden": hidden, "layers": layers, "dropout": dropout}
        self.input = SparseInput(dim, hidden if layers > 0 else classes)
        body: list[nn.Module] = []
        for _ in range(max(layers - 1, 0)):
            body += [nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden)]
        if layers > 0:
            body += [nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, classes)]
        self.body = nn.Sequential(*body)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,
                weights: torch.Tensor | None = None) -> torch.Tensor:
        if weights is None:  # token-id rows: a mean of their embeddings
            counts = torch.diff(offsets, append=torch.tensor([indices.numel()], device=offsets.device))
            weights = (1.0 / counts.clamp(min=1).float()).repeat_interleave(counts)
        return self.body(self.input(indices, offsets, weights))


MODELS = {"ScalpelMC": ScalpelMC}


def build_model(name: str, **kwargs) -> nn.Module:
    return MODELS[name](**kwargs)
