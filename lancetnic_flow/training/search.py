"""What ``tune`` searches: the options that matter for the chosen model, their
ranges, and a trial's options applied to a configuration.

A parameter is plain data (:class:`Param`), so the space can be written to
``tune.json`` and drawn from by any sampler; :func:`suggest` draws with an
Optuna trial (the ask/tell interface), :func:`apply` makes the
:class:`~lancetnic_flow.config.TrainConfig` a trial trains. The defaults'
values are always inside the ranges: trial 0 trains them, so the search is
measured against them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..config import TrainConfig
from ..registry import MODELS, ROW_WISE

HIDDEN = (16, 32, 64, 128, 256)
BATCH = (64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                    # "float" (log-uniform), "int" (log-uniform), "choice"
    low: float = 0.0
    high: float = 0.0
    choices: tuple = ()
    log: bool = True

    def to_dict(self) -> dict:
        """As ``tune.json`` lists it: a choice's values, or a range and its scale."""
        if self.kind == "choice":
            return {"name": self.name, "kind": self.kind, "choices": list(self.choices)}
        return {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high, "log": self.log}


def _span(name: str, low: float, high: float, default: float, kind: str = "float", log: bool = True) -> Param:
    # The default is inside the range, whatever the user passed: trial 0 trains it.
    return Param(name, kind, min(low, default), max(high, default), log=log)


def _choice(name: str, choices: tuple, default: Any) -> Param:
    return Param(name, "choice", choices=tuple(sorted(set(choices) | {default})))


def defaults_of(cfg: TrainConfig) -> dict:
    """The options a validated ``cfg`` trains, by parameter name (trial 0)."""
    t, m = cfg.training, cfg.model
    return {"lr": t.lr, "sparse_lr": t.sparse_lr, "hidden": m.hidden, "epochs": t.epochs,
            "batch_size": t.batch_size, "dropout": m.dropout, "ngrams": cfg.features.ngrams}


# A parameter's range when the model's spec names none (ModelSpec.search_ranges).
# The sparse rows' rate: per example with SGD (fastText's lr is of this kind), about --lr with lazy Adam.
RANGES = {"lr": (1e-3, 5e-2), "sparse_lr": (1e-3, 1e-1), "epochs": (1, 20), "dropout": (0.0, 0.5)}
SGD_RANGE = (0.25, 25.0)


def search_space(cfg: TrainConfig, fits: Any = None) -> list[Param]:
    """The parameters worth searching for ``cfg``'s model (resolved): those its
    spec names (``ModelSpec.search``) that the options leave open — the
    learning rates, width and dropout where there are hidden layers (or a
    recurrent one), epochs, batch size, and word pairs where the features can
    drop them — over the spec's ranges. ``fits(hidden) -> bool`` leaves out
    widths that would not fit a worker."""
    spec = MODELS[cfg.model.name]
    t, m, d = cfg.training, cfg.model, defaults_of(cfg)
    # The input rows' own rate where they have one: the model's own step, or a row-wise optimiser.
    sparse_rate = spec.sparse_optimizer is None or t.optimizer in ROW_WISE   # LinearSVM's own, or a row-wise one
    hidden_layers = m.layers > 0 or spec.input_width == "embed"
    f = cfg.features
    # Each n-gram setting is a cache entry of its own: words, or words and pairs (with any longer n-grams
    # the user asked for). A model that wants pairs always reads them, and character n-grams or a minimum
    # above 1 are the user's deliberate choice.
    words = f.analyzer == "word" and f.ngram_min == 1
    # A bag without a hidden layer has a bias for its dense part (and --numeric's weights); where its rows
    # take a searched rate of their own, --lr moves that bias alone, and a search over it spends its trials there.
    dense = hidden_layers or bool(cfg.data.numeric) or not (sparse_rate and "sparse_lr" in spec.search)
    open_ = {"lr": dense, "sparse_lr": sparse_rate, "hidden": hidden_layers,
             "epochs": True, "batch_size": True, "dropout": m.layers > 0 and "dropout" not in spec.fixed,
             "ngrams": f.mode in ("hashing", "tfidf") and not spec.ngrams and words}
    space = []
    for name in spec.search:
        if not open_[name]:
            continue
        if name == "hidden":
            widths = tuple(h for h in HIDDEN if fits is None or fits(h) or h == m.hidden)
            space.append(_choice("hidden", widths, m.hidden))
        elif name == "batch_size":
            space.append(_choice("batch_size", BATCH, t.batch_size))
        elif name == "ngrams":
            space.append(_choice("ngrams", (1, 2), f.ngrams))
        elif name == "sparse_lr":
            d["sparse_lr"] = t.sparse_lr or t.lr
            space.append(_span("sparse_lr", *_sparse_range(t.sparse_optimizer, spec), d["sparse_lr"]))
        else:
            low, high = RANGES[name]
            if name == "epochs" and "training.epochs" in cfg.given:
                high = t.epochs   # typed, it caps the trials' epochs (and is trial 0's)
            space.append(_span(name, low, high, d[name], kind="int" if name == "epochs" else "float",
                               log=name != "dropout"))
    return space


def _sparse_range(optimizer: str | None, spec: Any) -> tuple[float, float]:
    """The sparse rate's range: the spec's for its own step, else by the optimiser the user named."""
    if optimizer == spec.sparse_optimizer and "sparse_lr" in spec.search_ranges:
        return spec.search_ranges["sparse_lr"]
    return SGD_RANGE if optimizer == "sgd" else RANGES["sparse_lr"]


def suggest(trial: Any, space: list[Param]) -> dict:
    """A trial's options, drawn by an Optuna ``trial`` from ``space``."""
    out = {}
    for p in space:
        if p.kind == "choice":
            out[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif p.kind == "int":
            out[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
        else:
            out[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log and p.low > 0)
    return out


def apply(cfg: TrainConfig, params: dict) -> TrainConfig:
    """A copy of ``cfg`` training ``params`` (validated)."""
    out = copy.deepcopy(cfg)
    t, m, f = out.training, out.model, out.features
    for name, value in params.items():
        if name in ("lr", "sparse_lr", "epochs", "batch_size"):
            setattr(t, name, value)
        elif name in ("hidden", "dropout"):
            setattr(m, name, value)
        elif name == "ngrams":
            f.ngrams = value
        else:
            raise ValueError(f"unknown search parameter {name!r}")
    return out.validate()


def initial(cfg: TrainConfig, space: list[Param]) -> dict:
    """Trial 0's options: the defaults' values of the searched parameters."""
    d = defaults_of(cfg)
    d["sparse_lr"] = d["sparse_lr"] or cfg.training.lr
    return {p.name: d[p.name] for p in space}
