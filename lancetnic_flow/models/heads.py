"""Output heads shared by every model family: class logits, a regression
value, or both (multi-task). A model's ``forward`` returns a dict with
``"logits"`` (batch × classes) and/or ``"value"`` (batch,)."""
from __future__ import annotations

import torch
from torch import nn


class Heads(nn.Module):
    def __init__(self, width: int, classes: int = 0, regress: bool = False):
        super().__init__()
        if not classes and not regress:
            raise ValueError("a model needs a classification head, a regression head, or both")
        self.classify = nn.Linear(width, classes) if classes else None
        self.regress = nn.Linear(width, 1) if regress else None

    def forward(self, h: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {}
        if self.classify is not None:
            out["logits"] = self.classify(h)
        if self.regress is not None:
            out["value"] = self.regress(h).squeeze(-1)
        return out
