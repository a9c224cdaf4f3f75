"""LinearSVM's weights as NumPy arrays: the model a run trains in its own process without torch.

``LinearSVM`` is a ``ScalpelNet`` with no hidden layer, trained by its own
compiled hinge step (:mod:`.margin`), scored by its own compiled sum
(:func:`bag_scores`, here: ``predict`` scores a saved run with it too,
:mod:`lancetnic_flow.runs.linear_scores`) and calibrated in NumPy: nothing
in its training needs torch, whose import alone is most of a small run's
time (docs/benchmarks.md, "The floor"). :class:`LinearArrays` holds the same
tensors under the same names (``logit_scale``, the twin's ``twin_weight`` and
``twin_bias``, ``input.weight``, ``input.bias``, in ``state_dict``'s order),
so its checkpoints, best-epoch copies and saved runs are the network's, file
for file, and a run resumed or continued by the network reads them as its
own.

The network stays where torch is needed anyway: ``--ddp`` ranks (their
weights averaged through ``torch.distributed``) and ``tune``'s trials.
``--init-from`` and ``partial_fit`` grow a finished run's arrays into the
new labels (:mod:`.grow`) and train on without torch too.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from numba import njit

from ..features.rows import RowBlock
from .tasks import as_array


@njit(cache=True, nogil=True, fastmath={"contract"})
def bag_scores(indices, offsets, values, weight, bias, scale, out):   # pragma: no cover - compiled
    """``out[r] = (Σ values[j] × weight[indices[j]] + bias) × scale`` over row
    ``r``'s entries ``offsets[r]:offsets[r + 1]``, in float32, in their order."""
    width = weight.shape[1]
    for r in range(len(offsets) - 1):
        for c in range(width):
            out[r, c] = 0.0
        for j in range(offsets[r], offsets[r + 1]):
            v = values[j]
            w = weight[indices[j]]
            for c in range(width):
                out[r, c] = out[r, c] + v * w[c]
        for c in range(width):
            out[r, c] = (out[r, c] + bias[c]) * scale


def linear_logits(block: RowBlock, weight: np.ndarray, bias: np.ndarray, scale: np.float32) -> np.ndarray:
    """The class scores (rows × classes, float32) of ``block``'s rows under
    ``weight``, ``bias`` and ``scale``, as the network's ``forward(...)["logits"]``
    gives them (:func:`bag_scores`; rows without values weigh their entries
    1 / length, as ScalpelNet does)."""
    rows = len(block.offsets) - 1
    indices = block.indices
    values = block.values if block.values is not None else _mean_weights(block.offsets)
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= len(weight)):
        # numba reads out of bounds silently where torch's index check raises.
        raise IndexError(f"a feature id outside the model's {len(weight):,} inputs")
    out = np.empty((rows, weight.shape[1]), np.float32)
    bag_scores(indices, block.offsets, values.astype(np.float32, copy=False), weight, bias, scale, out)
    return out


def _mean_weights(offsets: np.ndarray) -> np.ndarray:
    """1 / a row's length for each of its entries (ScalpelNet's weights for rows without values)."""
    counts = np.diff(offsets)
    return np.repeat(np.float32(1.0) / np.maximum(counts, 1).astype(np.float32), counts)


class LinearArrays:
    """A linear model over sparse rows (terms × classes, a bias per class,
    zeros to start) and the softmax scale of its scores; with a twin once
    :meth:`add_twin` gives it one. Has what the training loop, calibration and
    the save ask of a model: ``state_dict``, ``load_state_dict``, scores of a
    row block, and ``train``/``eval``/``to`` that change nothing."""

    margin = True
    batches_by_length = False

    def __init__(self, config: dict):
        self.config = dict(config)
        dim, classes = config["dim"], config["classes"]
        self.weight = np.zeros((max(dim, 1), classes), np.float32)
        self.bias = np.zeros(classes, np.float32)
        self.logit_scale = np.ones((), np.float32)
        self.twin_weight: np.ndarray | None = None
        self.twin_bias: np.ndarray | None = None
        self.twin_pending: deque = deque()   # the twin's steps submitted, not yet waited for (margin.TWIN_BEHIND)
        # The weights as created, all zeros: nothing has stepped (margin.weights_of) or loaded them yet.
        self.pristine = True

    # ---- the twin (models/margin.py says what it is for)
    def add_twin(self) -> None:
        if self.pristine:
            # Zeros as the weights are: untouched pages cost nothing until a step writes them, where a
            # copy of the weights' zero pages reads and writes every page (a quarter second at 2^19 × 57).
            self.twin_weight = np.zeros(self.weight.shape, self.weight.dtype)   # calloc: no page written
            self.twin_bias = np.zeros(self.bias.shape, self.bias.dtype)
        else:
            self.twin_weight, self.twin_bias = self.weight.copy(), self.bias.copy()

    def drop_twin(self) -> None:
        self.twin_weight = self.twin_bias = None

    def _caught_up(self) -> None:
        while self.twin_pending:
            self.twin_pending.popleft().result()

    # ---- what the loop asks of a model
    def state_dict(self) -> dict[str, np.ndarray]:
        """The tensors by the network's names, in its order (the arrays themselves, not copies);
        every twin step submitted is taken first."""
        self._caught_up()
        state = {"logit_scale": self.logit_scale}
        if self.twin_weight is not None:
            state.update(twin_weight=self.twin_weight, twin_bias=self.twin_bias)
        state.update({"input.weight": self.weight, "input.bias": self.bias})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy ``state`` (arrays or tensors, by the network's names) into the
        weights; a missing or unexpected name, or a shape that differs, is an error."""
        self._caught_up()
        self.pristine = False
        mine = self.state_dict()
        if set(state) != set(mine):
            raise RuntimeError(f"the weights name {sorted(state)}, a LinearSVM with{'' if self.twin_weight is not None else 'out'}"
                               f" its twin holds {sorted(mine)}")
        for name, target in mine.items():
            value = as_array(state[name])
            if value.shape != target.shape:
                raise RuntimeError(f"{name} is {tuple(value.shape)}, the model's is {target.shape}")
            np.copyto(target, value, casting="same_kind")

    def logits(self, block: RowBlock) -> np.ndarray:
        """The class scores of ``block``'s rows (rows × classes, float32), as the network's forward gives them."""
        return linear_logits(block, self.weight, self.bias, np.float32(self.logit_scale))

    def train(self, mode: bool = True) -> "LinearArrays":
        return self

    def eval(self) -> "LinearArrays":
        return self

    def to(self, device: Any) -> "LinearArrays":
        return self


def is_arrays(model: Any) -> bool:
    """Whether ``model`` is a :class:`LinearArrays` (trained and scored without torch)."""
    return isinstance(model, LinearArrays)


def create_linear(name: str, *, dim: int, classes: int, regress: bool, hidden: int, layers: int,
                  dropout: float, embed: int, numeric: int) -> tuple[LinearArrays, dict]:
    """A fresh LinearSVM as arrays, from :func:`~lancetnic_flow.models.nets.create_model`'s
    arguments; returns it and the ``model.json`` record the network would have, key for key."""
    from ..registry import MODELS

    spec = MODELS[name]
    if regress or numeric or spec.fixed.get("layers", layers) != 0:
        raise ValueError(f"{name} as arrays has no value head, numeric input or hidden layer")
    # ScalpelNet's config (models/scalpel.py): the options given, its fixed ones, its defaults.
    config = {"dim": dim, "classes": classes, "regress": regress, "hidden": hidden, "layers": layers,
              "dropout": dropout, "numeric": numeric, **spec.fixed}
    config = {**{k: v for k, v in config.items() if k != "margin"}, "activation": "relu", "pooling": "weighted",
              "margin": True}
    return LinearArrays(config), {"model": name, "net": spec.net, "kwargs": config}


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Each score's sigmoid, in its own dtype; a very negative score gives 0 (its exp
    overflows to inf, on purpose: no warning said to the user)."""
    one = np.asarray(1.0, dtype=getattr(logits, "dtype", np.float64))
    with np.errstate(over="ignore"):
        return one / (one + np.exp(-logits))
