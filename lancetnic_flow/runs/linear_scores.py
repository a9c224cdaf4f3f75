"""The default model's scores in NumPy and numba: a LinearSVM run predicted without torch.

``LinearSVM`` (``--model auto``'s choice for classes and label sets) is a
``ScalpelNet`` with no hidden layer: one sparse layer (terms × classes, and
a bias per class) whose sums are multiplied by the logit scale fitted at
calibration. That is a gather and a multiply-add per non-zero of a row, too
little to need torch, whose import alone takes 1.8–2.0 s on a 2-core host:
more than predicting a thousand rows. So ``predict``, ``evaluate``,
``serve`` and the estimators score such a run here, from the weights
``safetensors.numpy`` read (:func:`.loading.load_run`), and import torch
only for another model, or when something asks for the network itself
(``export``, :attr:`.loading.LoadedRun.model`).

The arithmetic is torch's. ``F.embedding_bag(mode="sum",
per_sample_weights=...)`` adds a row's entries in order into a zeroed sum,
each as one fused multiply-add (fbgemm's kernel on an x86 CPU with FMA);
:func:`bag_scores` does the same: each row's terms in order, LLVM allowed
to contract ``sum + value × weight`` into that FMA (``fastmath`` "contract"
only: no reordering, no other liberty). Then the bias is added and the
scale multiplied, each rounded once to float32, as ``ScalpelNet`` does. On
such a CPU the logits equal torch's bit for bit; without FMA they are
within float32 rounding (tests/unit/runs/test_linear_scores.py compares
both paths on trained runs).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..features.rows import RowBlock
from ..models.linear_arrays import bag_scores, linear_logits, sigmoid

# The network LinearSVM stores (models/__init__.py create_model, registry.py's "LinearSVM"):
# any other model.json, or one of these sizes that does not hold, goes the torch way.
NET = "ScalpelNet"
KWARGS = {"dim", "classes", "regress", "hidden", "layers", "dropout", "numeric", "activation", "pooling", "margin"}


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def linear_shapes(meta: dict) -> dict[str, tuple[int, ...]] | None:
    """The tensors (name → shape) of the network ``model.json`` (``meta``)
    describes when it is one this module scores: LinearSVM's ScalpelNet, no
    hidden layer, no numeric input, no value head. None for any other
    network (which the torch path builds and checks as before)."""
    kw = meta.get("kwargs")
    if meta.get("net", NET) != NET or not isinstance(kw, dict) or not set(kw) <= KWARGS:
        return None
    dim, classes = kw.get("dim"), kw.get("classes")
    if not (_count(dim) and dim >= 0 and _count(classes) and classes > 0):
        return None
    if kw.get("layers") != 0 or kw.get("margin") is not True or kw.get("regress", False) is not False \
            or kw.get("numeric", 0) != 0 or kw.get("pooling", "weighted") != "weighted" \
            or kw.get("activation", "relu") not in ("relu", "identity"):
        return None
    # As ScalpelNet's state_dict lists them (so a misfit reads the same on both paths);
    # a vocabulary of 0 still has one (zero) row.
    return {"logit_scale": (), "input.weight": (max(dim, 1), classes), "input.bias": (classes,)}


class LinearScores:
    """A LinearSVM run's weights as NumPy arrays (``state``: the network's
    tensors by name, shaped as :func:`linear_shapes` says), scoring CSR rows."""

    def __init__(self, state: dict[str, np.ndarray]):
        self.state = state
        self.weight = np.ascontiguousarray(state["input.weight"], dtype=np.float32)
        self.bias = np.ascontiguousarray(state["input.bias"], dtype=np.float32)
        self.scale = np.float32(state["logit_scale"])

    def logits(self, block: RowBlock) -> np.ndarray:
        """The class scores (rows × classes, float32) of ``block``'s rows, as
        the network's ``forward(...)["logits"]`` gives them."""
        return linear_logits(block, self.weight, self.bias, self.scale)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Each row's softmax (float32), shifted by its largest score as torch's is."""
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


__all__ = ["LinearScores", "linear_shapes", "bag_scores", "softmax", "sigmoid"]
