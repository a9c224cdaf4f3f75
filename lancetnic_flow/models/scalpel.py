"""Scalpel models: MLPs over sparse rows that never densify one.

The first layer (:class:`SparseInput`) is ``Linear(dense TF-IDF row)``
computed in O(non-zeros). Numeric columns (``--numeric``) join it through
their own small weight, the same as appending them to the sparse row. The
names are lancetnic's: ``ScalpelMC`` classifies, ``ScalpelReg`` regresses,
``ScalpelMTSK`` does both; ``FastTextBag`` is the fastText-style baseline
(mean of word + bigram embeddings, a linear output).
"""
from __future__ import annotations

import torch
from torch import nn

from .heads import Heads
from .sparse_input import SparseInput


def mean_weights(offsets: torch.Tensor, nnz: int) -> torch.Tensor:
    """Per-element weights 1/len(row): turns a sum bag into a mean bag."""
    counts = torch.diff(offsets, append=torch.tensor([nnz], device=offsets.device))
    return (1.0 / counts.clamp(min=1).float()).repeat_interleave(counts)


class ScalpelNet(nn.Module):
    """Sparse input (+ numeric) → ``layers`` hidden layers → heads."""

    def __init__(self, dim: int, classes: int = 0, regress: bool = False, hidden: int = 128, layers: int = 1,
                 dropout: float = 0.2, numeric: int = 0, activation: str = "relu", pooling: str = "weighted",
                 margin: bool = False):
        super().__init__()
        self.config = {"dim": dim, "classes": classes, "regress": regress, "hidden": hidden, "layers": layers,
                       "dropout": dropout, "numeric": numeric, "activation": activation, "pooling": pooling}
        if margin:
            self.config["margin"] = True
        self.pooling = pooling
        width = hidden if layers > 0 else classes + int(regress)
        self.input = SparseInput(dim, width)
        self.numeric = nn.Linear(numeric, width, bias=False) if numeric else None
        act = {"relu": nn.ReLU, "identity": nn.Identity}[activation]
        body: list[nn.Module] = []
        for i in range(layers):
            body += [act(), nn.Dropout(dropout)]
            if i < layers - 1:
                body.append(nn.Linear(hidden, hidden))
        self.body = nn.Sequential(*body)
        self.layers, self.classes, self.regress = layers, classes, regress
        self.heads = Heads(hidden, classes, regress) if layers > 0 else None
        self.margin = margin
        if margin:
            # LinearSVM (models/margin.py): weights start at zero, so a term never
            # trained on adds nothing; scores become probabilities through a
            # softmax at ``logit_scale``, fitted on the validation rows after training.
            self.input.init_std = 0.0
            self.register_buffer("logit_scale", torch.ones(()))

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None,
                numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        if weights is None or self.pooling == "mean":
            weights = mean_weights(offsets, indices.numel())
        return self.finish(self.input(indices, offsets, weights), numeric)

    def finish(self, h: torch.Tensor, numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Everything after the sparse first layer's sum ``h`` (batch × width):
        shared with the ONNX graph (:mod:`.onnx_graph`), which sums the bag its own way."""
        if self.numeric is not None and numeric is not None:
            h = h + self.numeric(numeric)
        h = self.body(h)
        if self.heads is not None:
            return self.heads(h)
        out = {}
        if self.classes:
            out["logits"] = h[:, :self.classes] * self.logit_scale if self.margin else h[:, :self.classes]
        if self.regress:
            out["value"] = h[:, -1]
        return out
