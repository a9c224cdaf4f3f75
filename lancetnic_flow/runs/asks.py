"""The Python API's count and threshold arguments (``Predictor.predict``'s
``top_k`` and ``threshold``, ``Predictor.explain``'s ``top``) held to the rules
the command line and ``serve`` apply to the same options: a value they
refuse is a :class:`~lancetnic_flow.errors.UserError` here too, never a
count cut to its whole part, a ``ValueError``, or a threshold no probability
can reach that predicts nothing without a word."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from ..errors import UserError


def count(value: Any, name: str, example: int) -> int | None:
    """``value`` as a whole number ≥ 1 (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise UserError(f"{name} must be a whole number ≥ 1, got {value!r}", f"e.g. {name}={example}")
    return int(value)


def threshold(value: Any) -> float | None:
    """``value`` as a probability threshold strictly between 0 and 1 (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value) or not 0.0 < value < 1.0:
        raise UserError(f"threshold must be between 0 and 1, got {value!r}", "e.g. threshold=0.3")
    return float(value)


__all__ = ["count", "threshold"]
