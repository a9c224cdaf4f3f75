"""A batch of rows as the tensors a model takes and the answers its loss compares with.

Every model's ``forward`` takes the same keyword arguments, so the training
step, evaluation, prediction and the ``--ddp`` ranks build them in one place.
A model trained without torch (:class:`~.linear_arrays.LinearArrays`) scores
the row block itself: :func:`outputs_of` asks either kind.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..features.rows import RowBlock
from .linear_arrays import is_arrays

if TYPE_CHECKING:
    import torch


def model_inputs(batch: RowBlock, device: torch.device) -> dict[str, torch.Tensor | None]:
    """A row block as the keyword arguments every model's ``forward`` takes."""
    import torch

    return {
        "indices": torch.from_numpy(batch.indices.astype(np.int64)).to(device),
        "offsets": torch.from_numpy(batch.offsets[:-1]).to(device),
        "weights": torch.from_numpy(batch.values).to(device) if batch.values is not None else None,
        "numeric": torch.from_numpy(batch.numeric).to(device) if batch.numeric is not None else None,
    }


def answers(batch: RowBlock, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The batch's class ids (or multi-hot label sets, as float 0/1) and
    standardised targets as tensors (None where it has none)."""
    import torch

    labels = None
    if batch.labels is not None:
        as_type = np.float32 if batch.labels.ndim == 2 else np.int64
        labels = torch.from_numpy(batch.labels.astype(as_type)).to(device)
    targets = torch.from_numpy(batch.targets).to(device) if batch.targets is not None else None
    return labels, targets


def outputs_of(model: Any, block: RowBlock, device: Any) -> dict[str, Any]:
    """The model's outputs for ``block``, without gradients: NumPy arrays from
    a model trained without torch, tensors from a network (in eval mode)."""
    if is_arrays(model):
        return {"logits": model.logits(block)}
    import torch

    with torch.no_grad():
        return model(**model_inputs(block, device))
