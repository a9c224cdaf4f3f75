"""Optimisers as lancetnic offered them, fitted to a sparse first layer.

The sparse layer's rows are updated row-wise (a step touches only the rows
a batch used), by ``sparse_optimizer``: ``sgd`` — the bag models' default:
each row moves by ``sparse_lr`` per example that used it, so a term's
weight grows with the evidence for it, as in fastText — or ``adam`` (lazy
Adam, the sequence models' default). The dense rest takes ``--optimizer``.
RAdam, RMSprop and Adadelta have no row-wise form here: the sparse layer
then produces a dense gradient and ``torch.optim`` updates every parameter
at ``lr`` — correct, and slower per step on a large vocabulary (as lancetnic
did); such a run refuses ``--sparse-optimizer``/``--sparse-lr`` (resolve.py).
"""
from __future__ import annotations

import torch
from torch import nn

from ..models.sparse_input import DenseOptimizer, RowOptimizer
from ..registry import ROW_WISE


# The squared weight of its examples past which a batch's step of an input row is cut, when a
# value head learns (sparse_input.capped): from half an example on, measured (docs/benchmarks.md,
# "Regression on a few texts").
VALUE_ROW_CAP = 0.5


def make_optimizers(model: nn.Module, name: str, lr: float, sparse: str | None = None, sparse_lr: float | None = None,
                    batch_size: int = 1, cap: float | None = None) -> list:
    """The optimisers for ``model`` (whose sparse layer is ``model.input``):
    ``name`` at ``lr`` for the dense parameters, ``sparse`` (default: ``name``)
    at ``sparse_lr`` (default: ``lr``) for the sparse rows. A batch's loss is
    its examples' mean, so sparse SGD scales its step by the batch's rows:
    ``batch_size`` until :func:`mean_over` names a batch's own; ``cap``: the
    squared weight past which a batch's SGD step of a row is cut (:func:`~lancetnic_flow.models.sparse_input.capped`)."""
    if name in ROW_WISE:
        dense = [p for n, p in model.named_parameters() if n != "input.weight"]
        sparse = sparse or name
        scale = 1.0 if sparse_lr is None else sparse_lr / lr
        rows = batch_size if sparse == "sgd" and sparse_lr is not None else None
        return [RowOptimizer(model.input, sparse, lr, scale=scale, rows=rows, cap=cap if sparse == "sgd" else None),
                DenseOptimizer(dense, name, lr)]
    model.input.row_wise = False
    cls = {"radam": torch.optim.RAdam, "rmsprop": torch.optim.RMSprop, "adadelta": torch.optim.Adadelta}[name]
    return [cls(model.parameters(), lr=lr)]


def optimizers_for(model: nn.Module, tc) -> list:
    """The optimisers a :class:`~lancetnic_flow.config.TrainingConfig` asks for; a model
    whose value head learns cuts a batch's step of an input row (:data:`VALUE_ROW_CAP`)."""
    cap = VALUE_ROW_CAP if getattr(model, "regress", False) else None
    return make_optimizers(model, tc.optimizer, tc.lr, tc.sparse_optimizer, tc.sparse_lr, tc.batch_size, cap)


def set_lr(opts: list, lr: float) -> None:
    for o in opts:
        if isinstance(o, (RowOptimizer, DenseOptimizer)):
            o.lr = lr
        else:
            for g in o.param_groups:
                g["lr"] = lr


def mean_over(opts: list, rows: int) -> None:
    """Tell the row-wise optimisers the next gradient is the mean loss of ``rows``
    examples: a value head's per-example rate holds for a short batch too, which
    the configured batch size would step several times too far (a regression on
    fewer rows than a batch trained to nonsense)."""
    for o in opts:
        if isinstance(o, RowOptimizer):
            o.mean_over(rows)


def zero_grad(opts: list) -> None:
    for o in opts:
        o.zero_grad(set_to_none=True)


def step(opts: list, model: nn.Module, clip: float | None = None) -> None:
    """One update; with ``clip``, the global gradient norm (dense parameters
    and the sparse layer's used rows together) is first cut to ``clip``."""
    if clip:
        grads = [p for p in model.parameters() if p.grad is not None]
        active = getattr(model.input, "active", None)
        if active is not None and active[1].grad is not None:
            grads.append(active[1])
        torch.nn.utils.clip_grad_norm_(grads, clip)
    for o in opts:
        o.step()
