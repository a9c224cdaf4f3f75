"""A batch of rows as the tensors a model takes and the answers its loss compares with.

Every model's ``forward`` takes the same keyword arguments, so the training
step, evaluation, prediction and the ``--ddp`` ranks build them in one place.
"""
from __future__ import annotations

import numpy as np
import torch

from ..features.rows import RowBlock


def model_inputs(batch: RowBlock, device: torch.device) -> dict[str, torch.Tensor | None]:
    """A row block as the keyword arguments every model's ``forward`` takes."""
    return {
        "indices": torch.from_numpy(batch.indices.astype(np.int64)).to(device),
        "offsets": torch.from_numpy(batch.offsets[:-1]).to(device),
        "weights": torch.from_numpy(batch.values).to(device) if batch.values is not None else None,
        "numeric": torch.from_numpy(batch.numeric).to(device) if batch.numeric is not None else None,
    }


def answers(batch: RowBlock, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The batch's class ids (or multi-hot label sets, as float 0/1) and
    standardised targets as tensors (None where it has none)."""
    labels = None
    if batch.labels is not None:
        as_type = np.float32 if batch.labels.ndim == 2 else np.int64
        labels = torch.from_numpy(batch.labels.astype(as_type)).to(device)
    targets = torch.from_numpy(batch.targets).to(device) if batch.targets is not None else None
    return labels, targets
