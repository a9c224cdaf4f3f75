"""Model families, built from a name and plain keyword arguments, so a run
folder stores them as JSON (``model.json``), never as pickled code.

:data:`MODELS` maps the names users pick (lancetnic's) to a network class,
its fixed options, the tasks it does (the first is its default) and the
feature modes it reads (the first is its default). The task decides the
heads: any Scalpel or Lancet network can classify, regress or both.
:data:`NETS` maps the class names stored in run folders to classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from .lancet import SequenceNet
from .scalpel import ScalpelNet

_ALL = ("classify", "regress", "multitask")


@dataclass(frozen=True)
class ModelSpec:
    net: str
    fixed: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = _ALL
    features: tuple[str, ...] = ("tfidf", "hashing")
    ngrams: int = 0                 # the n-grams the model wants by default (0: as configured)
    summary: str = ""

    @property
    def task(self) -> str:
        return self.tasks[0]


MODELS: dict[str, ModelSpec] = {
    "ScalpelMC": ModelSpec("ScalpelNet", summary="MLP over sparse TF-IDF or hashed rows"),
    "ScalpelReg": ModelSpec("ScalpelNet", tasks=("regress", "classify", "multitask"),
                            summary="the same MLP, regressing a numeric target"),
    "ScalpelMTSK": ModelSpec("ScalpelNet", tasks=("multitask", "classify", "regress"),
                             summary="the same MLP with a class head and a regression head"),
    "FastTextBag": ModelSpec("ScalpelNet", {"activation": "identity", "pooling": "mean", "dropout": 0.0},
                             features=("hashing", "tfidf"), ngrams=2,
                             summary="fastText-style: mean of word + bigram embeddings, linear output"),
    "LancetMC": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                          summary="LSTM over token ids, last hidden state"),
    "LancetMCA": ModelSpec("SequenceNet", {"cell": "lstm", "attention": True}, features=("ids",),
                           summary="LSTM with attention pooling"),
    "LancetMCA_gru": ModelSpec("SequenceNet", {"cell": "gru", "attention": True}, features=("ids",),
                               summary="GRU with attention pooling"),
    "LancetReg": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                           tasks=("regress", "classify", "multitask"), summary="LSTM regressor"),
}

NETS: dict[str, type[nn.Module]] = {"ScalpelNet": ScalpelNet, "SequenceNet": SequenceNet}


def create_model(name: str, *, dim: int, classes: int, regress: bool, hidden: int, layers: int,
                 dropout: float, embed: int, numeric: int) -> tuple[nn.Module, dict]:
    """A fresh model for ``name``; returns it and its ``model.json`` record."""
    spec = MODELS[name]
    kw: dict[str, Any] = {"dim": dim, "classes": classes, "regress": regress, "hidden": hidden, "layers": layers,
                          "dropout": dropout, "numeric": numeric}
    if spec.net == "SequenceNet":
        kw["embed"] = embed
    kw.update(spec.fixed)
    model = NETS[spec.net](**kw)
    return model, {"model": name, "net": spec.net, "kwargs": model.config}


def build_model(net: str, **kwargs) -> nn.Module:
    """Rebuild a stored model: ``net`` is a class name in :data:`NETS`."""
    return NETS[net](**kwargs)


__all__ = ["MODELS", "NETS", "ModelSpec", "create_model", "build_model", "ScalpelNet", "SequenceNet"]
