"""Model families, built from a name and plain keyword arguments, so a run
folder stores them as JSON (``model.json``), never as pickled code
(re-exported by :mod:`lancetnic_flow.models`, which imports this module,
and so torch, only when one of these names is used).

:data:`MODELS` (kept in :mod:`lancetnic_flow.registry`, which needs no
torch) maps the names users pick (lancetnic's) to a network class, its fixed
options, the tasks it does (the first is its default) and the feature modes
it reads (the first is its default). The task decides the heads: any Scalpel
or Lancet network can classify, regress or both. :data:`NETS` maps the class
names stored in run folders to classes.
"""
from __future__ import annotations

import inspect
from typing import Any

from torch import nn

from ..errors import UserError
from ..registry import MODELS, ModelSpec
from .lancet import SequenceNet
from .scalpel import ScalpelNet

NETS: dict[str, type[nn.Module]] = {"ScalpelNet": ScalpelNet, "SequenceNet": SequenceNet}


def create_model(name: str, *, dim: int, classes: int, regress: bool, hidden: int, layers: int,
                 dropout: float, embed: int, numeric: int) -> tuple[nn.Module, dict]:
    """A fresh model for ``name``; returns it and its ``model.json`` record."""
    spec = MODELS[name]
    net = NETS[spec.net]
    kw: dict[str, Any] = {"dim": dim, "classes": classes, "regress": regress, "hidden": hidden, "layers": layers,
                          "dropout": dropout, "numeric": numeric}
    if "embed" in inspect.signature(net).parameters:   # a network with token embeddings of their own width
        kw["embed"] = embed
    kw.update(spec.fixed)
    model = net(**kw)
    return model, {"model": name, "net": spec.net, "kwargs": model.config}


def registration(name: str) -> tuple[str, ModelSpec, type[nn.Module]]:
    """Model ``name``'s entry (its name, spec and network class), to hand to a
    worker process — a ``tune`` trial, a ``--ddp`` rank — where a model
    registered by the user's script at run time is not registered."""
    spec = MODELS[name]
    return name, spec, NETS[spec.net]


def register(entry: tuple[str, ModelSpec, type[nn.Module]]) -> None:
    """Register a :func:`registration` entry in this process (the built-in ones are already)."""
    name, spec, net = entry
    MODELS.setdefault(name, spec)
    NETS.setdefault(spec.net, net)


def build_model(net: str, **kwargs) -> nn.Module:
    """Rebuild a stored model: ``net`` is a class name in :data:`NETS`. A class
    this process never registered is a :class:`UserError` saying so."""
    if net not in NETS:
        raise UserError(f"the model's network {net!r} is not registered in this process (known: "
                        f"{', '.join(sorted(NETS))})",
                        "import the module that registers it first (lancetnic_flow.models.NETS and MODELS), "
                        "e.g. from Python: import my_models; Predictor(run) — see workflows/custom_model.py")
    return NETS[net](**kwargs)


__all__ = ["NETS", "create_model", "build_model", "registration", "register", "ScalpelNet", "SequenceNet"]
