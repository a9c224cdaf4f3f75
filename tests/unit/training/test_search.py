"""training/search.py: what tune searches comes from the model's spec, and
trial 0 trains exactly the defaults."""
from __future__ import annotations

import pytest

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.registry import MODELS, ModelSpec
from lancetnic_flow.training import search


def space_of(name: str, **training) -> dict:
    cfg = TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name=name),
                      training=TrainingConfig(**training)).validate()
    space = search.search_space(cfg)
    first = search.initial(cfg, space)
    for p in space:
        v = first[p.name]
        assert (v in p.choices) if p.kind == "choice" else (p.low <= v <= p.high), (name, p, v)
    assert search.apply(cfg, first) == cfg   # trial 0 trains exactly the defaults
    return {p.name: p for p in space}


@pytest.mark.parametrize("name", sorted(n for n, s in MODELS.items() if s.task == "classify"))
def test_every_built_in_model_searches_only_what_its_spec_names(name):
    assert set(space_of(name)) <= set(MODELS[name].search)


def test_the_linear_models_rate_is_searched_over_its_specs_range():
    p = space_of("LinearSVM")["sparse_lr"]
    assert (p.low, p.high) == MODELS["LinearSVM"].search_ranges["sparse_lr"]
    assert "lr" not in space_of("LinearSVM")


def test_a_registered_model_searches_what_its_spec_declares(monkeypatch):
    monkeypatch.setitem(MODELS, "Tiny", ModelSpec("ScalpelNet", search=("lr", "epochs")))
    assert set(space_of("Tiny")) == {"lr", "epochs"}


def test_given_values_widen_the_ranges():
    p = space_of("ScalpelMC", lr=0.2)["lr"]
    assert p.high == 0.2


def test_typed_epochs_cap_the_trials_epochs_and_the_default_leaves_the_range_open():
    # docs/tune.md says to cap --epochs for quicker trials: trials still drew up to 20 epochs
    def epochs(given: frozenset, n: int):
        cfg = TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="ScalpelMC"),
                          training=TrainingConfig(epochs=n), given=given).validate()
        p = {p.name: p for p in search.search_space(cfg)}["epochs"]
        return p.low, p.high

    assert epochs(frozenset({"training.epochs"}), 5) == (1, 5)
    assert epochs(frozenset({"data.train"}), 5) == (1, 20)   # the command line's DATA alone: epochs not typed
    assert epochs(frozenset(), 5) == (1, 5)   # a TrainConfig built in Python: epochs=5 set is given
    assert epochs(frozenset({"training.epochs"}), 30) == (1, 30)


def test_a_bag_without_a_hidden_layer_searches_no_lr_that_would_move_its_bias_alone():
    # --layers 0: the rows step at sparse_lr (searched); --lr set the bias's rate only, the trials' accuracy alike
    def space(name: str = "ScalpelMC", numeric: tuple = (), **training) -> dict:
        cfg = TrainConfig(data=DataConfig(train=["x.csv"], numeric=list(numeric)),
                          model=ModelConfig(name=name, layers=0), training=TrainingConfig(**training)).validate()
        return {p.name for p in search.search_space(cfg)}

    assert "lr" not in space() and "sparse_lr" in space()
    assert "lr" not in space("FastTextBag")
    assert "lr" in space(numeric=("value",))              # --numeric's weights are dense: --lr moves them
    assert "lr" in space(optimizer="rmsprop")              # one optimiser steps the rows too, at --lr
    assert "lr" in space_of("ScalpelMC")                   # a hidden layer: the dense part --lr trains


def test_an_optimizer_that_steps_every_parameter_searches_no_sparse_rate():
    # with --optimizer rmsprop the input rows step at --lr: a searched --sparse-lr trained the same trial twice
    assert "sparse_lr" not in space_of("ScalpelMC", optimizer="rmsprop")
    assert "sparse_lr" in space_of("ScalpelMC", optimizer="sgd")
