"""runs/linear_scores.py: a LinearSVM run scored in NumPy gives what its torch
network gives — the same labels and label sets, probabilities within float32
rounding, the same loss and metrics for evaluate — on tiny runs trained here,
in this process (one label a row, label sets, and an 8-bit compacted copy);
any other network is left to torch. (That predicting such a run imports no
torch is checked in a fresh interpreter: tests/integration/test_predict.py.)"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import safetensors.numpy
import torch

from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.compact import compact_run
from lancetnic_flow.runs.linear_scores import linear_shapes
from lancetnic_flow.runs.loading import load_run
from lancetnic_flow.runs.predict import Predictor
from lancetnic_flow.training.orchestrator import train

# Probabilities of the two paths: equal within float32 rounding.
TOL = 1e-6


def _train(tmp, name: str, corpus: str, **training) -> str:
    # 2^15 buckets × the classes is past stored_weights.MIN_ELEMENTS: the weight is stored as its entries.
    cfg = TrainConfig(data=DataConfig(train=[corpus], label_sep="|" if training.get("task") == "multilabel" else None),
                      features=FeatureConfig(buckets=2**15), model=ModelConfig(),
                      training=TrainingConfig(epochs=2, seed=0, **training),
                      output=OutputConfig(out=str(tmp / "runs"), name=name, cache=str(tmp / "cache"), plots=False))
    return str(train(cfg).run)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """LinearSVM trained in this process on 600 rows: 3 classes, and label sets of 4 labels."""
    tmp = tmp_path_factory.mktemp("linear")
    write_corpus(str(tmp / "one.csv"), 600, classes=3, seed=3)
    write_corpus(str(tmp / "sets.csv"), 600, classes=4, seed=4, multilabel=True)
    out = {"one": _train(tmp, "one", str(tmp / "one.csv"), task="classify"),
           "sets": _train(tmp, "sets", str(tmp / "sets.csv"), task="multilabel")}
    compact_run(out["one"], str(tmp / "int8"))
    out["int8"] = str(tmp / "int8")
    out["texts_one"] = pacsv.read_csv(tmp / "one.csv")["text"].to_pylist()[:300] + ["", None, "zzz unseen"]
    out["texts_sets"] = pacsv.read_csv(tmp / "sets.csv")["text"].to_pylist()[:300] + ["", None]
    return out


def both(run: str) -> tuple[Predictor, Predictor]:
    fast, net = Predictor(run), Predictor(run, numpy=False)
    assert not fast.uses_torch and fast.run.linear is not None
    assert net.uses_torch and net.run.linear is None
    assert fast.run.meta["model"] == "LinearSVM"
    return fast, net


@pytest.mark.parametrize("name", ["one", "int8"])
def test_one_label_a_row_gives_the_torch_networks_labels_and_probabilities(runs, name):
    fast, net = both(runs[name])
    texts = runs["texts_one"]
    a, b = fast.predict_proba(texts), net.predict_proba(texts)
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.isnan(a[-3]).all()
    assert np.nanmax(np.abs(a - b)) < TOL
    ok = ~np.isnan(a[:, 0])
    assert np.array_equal(a[ok].argmax(1), b[ok].argmax(1))
    mine, theirs = fast.predict(texts, top_k=3), net.predict(texts, top_k=3)
    assert [(p["status"], p["label"], p["top_labels"]) for p in mine] == \
           [(p["status"], p["label"], p["top_labels"]) for p in theirs]
    assert len({p["label"] for p in mine if p["label"]}) > 1   # a model that learnt something, not one class


def test_the_logits_are_the_networks_within_float32_rounding(runs):
    fast, net = both(runs["one"])
    block = fast.feature_rows(runs["texts_one"])
    with torch.no_grad():
        want = net.outputs(block)["logits"]
    got = fast.outputs(block)["logits"]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-6 * max(1.0, float(np.abs(want).max()))
    assert float(fast.run.linear.scale) == float(net.run.model.logit_scale) != 1.0   # the calibrated scale


def test_label_sets_are_the_torch_networks_at_the_runs_own_thresholds(runs):
    fast, net = both(runs["sets"])
    texts = runs["texts_sets"]
    assert fast.multilabel and np.array_equal(fast.thresholds, net.thresholds)
    assert len(set(fast.thresholds.tolist())) > 1          # thresholds chosen per label, not 0.5 for all
    a, b = fast.predict_proba(texts), net.predict_proba(texts)
    assert np.nanmax(np.abs(a - b)) < TOL
    mine, theirs = fast.predict(texts), net.predict(texts)
    assert [p["labels"] for p in mine] == [p["labels"] for p in theirs]
    assert sum(len(p["labels"] or []) > 1 for p in mine) > 10   # sets, not one label a row
    assert fast.predict_table(texts)["predicted"].to_pylist() == net.predict_table(texts)["predicted"].to_pylist()


@pytest.mark.parametrize("name, labels", [
    ("one", lambda n: pa.array(["sports", "tech", "nope"] * (n // 3) + ["sports"] * (n % 3))),
    ("sets", lambda n: pa.array([["sports", "tech"], [], ["politics"]] * (n // 3) + [["tech"]] * (n % 3))),
])
def test_evaluate_gets_the_torch_networks_loss_and_metrics(runs, name, labels):
    """What evaluate_partition adds up per batch: the hinge summed in NumPy and the metrics of NumPy logits."""
    fast, net = both(runs[name])
    texts = [t for t in runs["texts_" + name] if t]
    table = pa.table({"text": texts, "label": labels(len(texts))})
    block = fast.run.features.transform(table)
    keep = np.flatnonzero(block.labels.any(1) if block.labels.ndim == 2 else block.labels >= 0)
    block = block.take(keep)
    task = fast.run.task()
    got = fast.outputs(block)
    loss = task.array_loss(got["logits"], block.labels)
    from lancetnic_flow.models.inputs import answers, model_inputs

    with torch.no_grad():
        want = net.run.model(**model_inputs(block, net.device))
        want_loss = task.loss(want, answers(block, net.device)[0], None, reduction="sum").item()
    assert loss == pytest.approx(want_loss, rel=1e-5) and loss > 0
    m_fast, m_net = task.new_metrics(), task.new_metrics()
    m_fast.update(got, block.labels, None, loss)
    m_net.update(want, block.labels, None, want_loss)
    r_fast, r_net = m_fast.result(), m_net.result()
    assert r_fast.pop("loss") == pytest.approx(r_net.pop("loss"), rel=1e-5)
    assert r_fast == r_net


def _unrecorded(run, weights: bytes) -> None:
    """``weights`` in place of ``run``'s, model.json no longer recording which file it was saved with."""
    (run / "model.safetensors").write_bytes(weights)
    meta = json.loads((run / "model.json").read_text())
    del meta["weights"]
    (run / "model.json").write_text(json.dumps(meta))


def _without_cols(run, sets) -> None:
    stored = safetensors.numpy.load((run / "model.safetensors").read_bytes())
    del stored["input.weight:cols"]
    _unrecorded(run, safetensors.numpy.save(stored))


DAMAGE = {
    "truncated": lambda run, sets: (run / "model.safetensors").write_bytes(
        (run / "model.safetensors").read_bytes()[:-100]),
    "another save": lambda run, sets: (run / "model.safetensors").write_bytes(
        (run / "model.safetensors").read_bytes()[:-4] + b"\x00\x00\x80\x3f"),
    "not safetensors": lambda run, sets: (run / "model.safetensors").write_bytes(b"\x80\x04K\x01." * 20),
    "another network": lambda run, sets: _unrecorded(run, (sets / "model.safetensors").read_bytes()),
    "parts that do not fit": _without_cols,
}

WORDS = {"truncated": "truncated", "another save": "not the file", "not safetensors": "not a valid safetensors",
         "another network": "[32768, 4] there, [32768, 3] in the network", "parts that do not fit": "lacks its cols"}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_run_is_refused_in_the_same_words_whether_scored_in_numpy_or_torch(runs, tmp_path, damage):
    run = tmp_path / "run"
    shutil.copytree(runs["one"], run)
    DAMAGE[damage](run, Path(runs["sets"]))
    said = []
    for numpy in (True, False):
        with pytest.raises(UserError) as e:
            load_run(str(run), numpy=numpy)
        said.append((e.value.message, e.value.hint))
    assert said[0] == said[1]
    assert "model.safetensors" in said[0][0] and WORDS[damage] in said[0][0], said[0][0]


def test_only_the_linear_svm_network_is_scored_in_numpy():
    svm = {"net": "ScalpelNet", "kwargs": {"dim": 8, "classes": 3, "regress": False, "hidden": 64, "layers": 0,
                                           "dropout": 0.2, "numeric": 0, "activation": "relu",
                                           "pooling": "weighted", "margin": True}}
    assert linear_shapes(svm) == {"logit_scale": (), "input.weight": (8, 3), "input.bias": (3,)}
    for change in ({"layers": 1}, {"margin": False}, {"numeric": 2}, {"regress": True}, {"pooling": "mean"},
                   {"dim": "8"}, {"classes": 0}, {"cell": "lstm"}):
        assert linear_shapes({**svm, "kwargs": {**svm["kwargs"], **change}}) is None, change
    assert linear_shapes({**svm, "net": "SequenceNet"}) is None
