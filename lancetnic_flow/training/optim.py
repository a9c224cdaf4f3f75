"""Optimisers as lancetnic offered them, fitted to a sparse first layer.

Adam and SGD run row-wise on the sparse layer (a step touches only the rows
a batch used) and plainly on the dense rest. RAdam, RMSprop and Adadelta
have no row-wise form here: the sparse layer then produces a dense gradient
and ``torch.optim`` updates every parameter — correct, and slower per step
on a large vocabulary.
"""
from __future__ import annotations

import torch
from torch import nn

from ..models.sparse_input import DenseOptimizer, RowOptimizer

ROW_WISE = ("adam", "sgd")


def make_optimizers(model: nn.Module, name: str, lr: float) -> list:
    """The optimisers for ``model`` (whose sparse layer is ``model.input``)."""
    if name in ROW_WISE:
        dense = [p for n, p in model.named_parameters() if n != "input.weight"]
        return [RowOptimizer(model.input, name, lr), DenseOptimizer(dense, name, lr)]
    model.input.row_wise = False
    cls = {"radam": torch.optim.RAdam, "rmsprop": torch.optim.RMSprop, "adadelta": torch.optim.Adadelta}[name]
    return [cls(model.parameters(), lr=lr)]


def set_lr(opts: list, lr: float) -> None:
    for o in opts:
        if isinstance(o, (RowOptimizer, DenseOptimizer)):
            o.lr = lr
        else:
            for g in o.param_groups:
                g["lr"] = lr


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
