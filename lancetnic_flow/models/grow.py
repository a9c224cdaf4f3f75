"""A saved model's weights in a network with more classes: the output layer grows.

Keep learning (``train --init-from RUN``, ``partial_fit``) builds the network
afresh for the labels the old run had plus those the new data adds (appended:
the old classes keep their ids), then takes every weight of the old network.
A tensor whose shape did not change is copied whole. A tensor with a class
axis (the class head's weight and bias; a model without hidden layers has
its classes as the columns of its sparse input layer, and a value column
after them) takes the old classes' slices in their places, and any column
after the classes (the value's) at the end; a new class keeps what the fresh
network gave it (zeros for LinearSVM, whose weights start at zero; the
layer's own initialisation otherwise).

The weights are a network's tensors or a model's NumPy arrays
(:mod:`.linear_arrays`), old and fresh alike or mixed: each grown tensor is
of the fresh model's kind.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tasks import as_array


def class_axis(old: tuple, new: tuple, old_classes: int, new_classes: int) -> int | None:
    """The one axis along which a tensor of shape ``old`` grew by the classes added
    to become ``new``; None when the shapes are equal. Any other change is a ValueError."""
    if tuple(old) == tuple(new):
        return None
    grown = new_classes - old_classes
    axes = [i for i, (a, b) in enumerate(zip(old, new)) if a != b] if len(old) == len(new) else []
    if len(axes) != 1 or grown <= 0 or new[axes[0]] - old[axes[0]] != grown or old[axes[0]] < old_classes:
        raise ValueError(f"a tensor of shape {list(old)} cannot grow into {list(new)} by {grown} class(es)")
    return axes[0]


def grown_tensor(old: Any, fresh: Any, old_classes: int, new_classes: int) -> Any:
    """``old`` in the shape of ``fresh``: the old classes' slices first, the columns after
    them (a value head's) last, the new classes' slices as ``fresh`` has them. Arrays
    or tensors; the result is ``fresh``'s kind and type."""
    axis = class_axis(tuple(old.shape), tuple(fresh.shape), old_classes, new_classes)
    if isinstance(fresh, np.ndarray):
        old = as_array(old).astype(fresh.dtype, copy=False)
        out = old.copy() if axis is None else fresh.copy()
    else:
        import torch

        old = torch.as_tensor(old).to(fresh.dtype)
        out = old if axis is None else fresh.detach().clone()
    if axis is None:
        return out
    extra = old.shape[axis] - old_classes   # columns after the classes (a value head's)
    n = out.shape[axis]
    _part(out, axis, 0, old_classes)[...] = _part(old, axis, 0, old_classes)
    if extra:
        _part(out, axis, n - extra, n)[...] = _part(old, axis, old_classes, old_classes + extra)
    return out


def _part(t: Any, axis: int, start: int, stop: int) -> Any:
    """The slice ``start:stop`` of ``t`` along ``axis``, a view (of an array or a tensor)."""
    return t[(slice(None),) * axis + (slice(start, stop),)]


def grow_into(model: Any, old_state: dict[str, Any], old_classes: int, new_classes: int) -> list[str]:
    """Load ``old_state`` (a network of the same family with ``old_classes`` classes) into
    ``model`` (built for ``new_classes``, as many or more), growing the tensors with a class axis;
    returns the names of those that grew. A tensor the old network lacks, or has
    more of, is a ValueError: the two are not the same network."""
    fresh = model.state_dict()
    missing = sorted(set(fresh) - set(old_state))
    extra = sorted(set(old_state) - set(fresh))
    if missing or extra:
        raise ValueError(f"the saved weights are another network's (missing {missing[:3]}, extra {extra[:3]})")
    state, grew = {}, []
    for name, tensor in fresh.items():
        state[name] = grown_tensor(old_state[name], tensor, old_classes, new_classes)
        if tuple(old_state[name].shape) != tuple(tensor.shape):
            grew.append(name)
    model.load_state_dict(state)
    return grew
