"""The networks, their losses and metrics. :data:`MODELS` (kept in
:mod:`lancetnic_flow.registry`) maps the names users pick to their specs;
:data:`NETS`, :func:`create_model`, :func:`build_model`, :func:`registration`,
:func:`register` and the network classes are in :mod:`.nets`.

Those are imported on first use (PEP 562): importing this package, or a
module of it that needs no network (``tasks``, ``metrics``: what
``evaluate`` of a LinearSVM run uses), does not import torch, whose import
alone is 1.8–2.0 s on a 2-core host (runs/linear_scores.py).
"""
from __future__ import annotations

from typing import Any

from ..registry import MODELS, ModelSpec

NETWORK_NAMES = ("NETS", "create_model", "build_model", "registration", "register", "ScalpelNet", "SequenceNet")


def __getattr__(name: str) -> Any:
    if name in NETWORK_NAMES:
        from . import nets

        return getattr(nets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MODELS", "ModelSpec", *NETWORK_NAMES]
