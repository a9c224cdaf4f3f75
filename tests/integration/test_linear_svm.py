"""LinearSVM, the default classifier: its per-example hinge step is the rule
it claims, ``--model auto`` picks it only where it applies, options it cannot
apply are refused, and its scores become probabilities without changing a
single prediction."""
from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from helpers import cli

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.models import create_model
from lancetnic_flow.models.calibrate import calibrate
from lancetnic_flow.models.margin import BIAS_RATE, hinge_pass
from lancetnic_flow.resolve import FitCounts, resolve_counts
from lancetnic_flow.training.rules import rule_for


def _random_csr(rng, rows: int, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = rng.integers(0, 6, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = np.concatenate([rng.choice(dim, n, replace=False) for n in lengths]).astype(np.int32)
    values = rng.random(len(indices)).astype(np.float32)
    return indices, offsets, values


def test_the_hinge_step_updates_one_example_at_a_time_like_the_written_rule():
    rng = np.random.default_rng(3)
    dim, classes, rows = 12, 4, 40
    indices, offsets, values = _random_csr(rng, rows, dim)
    labels = rng.integers(-1, classes, rows).astype(np.int32)   # -1: no usable label, scored but not trained
    w0 = rng.normal(0, 0.3, (dim, classes)).astype(np.float32)
    b0 = rng.normal(0, 0.1, classes).astype(np.float32)
    w, b = w0.copy(), b0.copy()
    scores = np.empty((rows, classes), np.float32)
    total, used = hinge_pass(indices, offsets, values, labels, w, b, np.float32(0.5), scores)

    ww, bb, want_total = w0.astype(np.float64), b0.astype(np.float64), 0.0
    for r in range(rows):
        cols, vals = indices[offsets[r]:offsets[r + 1]], values[offsets[r]:offsets[r + 1]]
        s = bb + vals @ ww[cols]
        np.testing.assert_allclose(scores[r], s, rtol=1e-4, atol=1e-5)
        if labels[r] < 0:
            continue
        for k in range(classes):
            t = 1.0 if k == labels[r] else -1.0
            if t * s[k] < 1.0:
                want_total += 1.0 - t * s[k]
                ww[cols, k] += 0.5 * t * vals
                bb[k] += 0.5 * t * BIAS_RATE
    assert used == int((labels >= 0).sum())
    np.testing.assert_allclose(w, ww, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, bb, rtol=1e-4, atol=1e-5)
    assert total == pytest.approx(want_total, rel=1e-4)


def _config(**kw) -> TrainConfig:
    data = {k: kw.pop(k) for k in ("label", "target", "numeric", "label_sep") if k in kw}
    model = {k: kw.pop(k) for k in ("name", "hidden", "layers", "dropout") if k in kw}
    return TrainConfig(data=DataConfig(train=["x.csv"], **{"label": "label", **data}),
                       model=ModelConfig(**model), training=TrainingConfig(**kw)).validate()


@pytest.mark.parametrize("kw,model", [
    ({}, "LinearSVM"),
    ({"task": "classify"}, "LinearSVM"),
    ({"numeric": ["x"]}, "ScalpelMC"),
    ({"task": "multilabel"}, "LinearSVM"),   # one margin per label
    ({"target": "y", "task": "multitask"}, "ScalpelMC"),
    ({"ddp": 2}, "LinearSVM"),   # its ranks average their weights
    ({"hidden": 128}, "ScalpelMC"),
    ({"layers": 2}, "ScalpelMC"),
    ({"class_weights": "balanced"}, "ScalpelMC"),
    ({"class_loss": "bce"}, "ScalpelMC"),
    ({"sparse_optimizer": "adam"}, "ScalpelMC"),
    ({"device": "cuda"}, "ScalpelMC"),
])
def test_auto_picks_linear_svm_for_classes_and_label_sets_and_the_mlp_for_what_only_it_has(kw, model):
    cfg = _config(**kw)
    assert cfg.model.name == model
    if model == "LinearSVM":
        t = cfg.training
        assert (t.class_loss, t.sparse_optimizer, t.device, cfg.model.layers) == ("hinge", None, "cpu", 0)
        assert rule_for(cfg).optimizers(None) == []   # its own step, no optimiser
    else:
        assert cfg.training.sparse_optimizer in ("sgd", "adam")


@pytest.mark.parametrize("kw,flag", [
    ({"numeric": ["x"]}, "--numeric"),
    ({"class_weights": "balanced"}, "--class-weights"),
    ({"device": "cuda"}, "--device"),
    ({"sparse_optimizer": "adam"}, "--sparse-optimizer"),
    ({"class_loss": "bce"}, "--class-loss"),
])
def test_linear_svm_by_name_refuses_an_option_it_cannot_apply_instead_of_ignoring_it(kw, flag):
    with pytest.raises(UserError, match=flag.lstrip("-").replace("-", "_")) as e:
        _config(name="LinearSVM", **kw)
    assert "ScalpelMC" in e.value.hint
    assert e.value.cli[0].startswith(flag) and "--model" in e.value.cli[1]   # the command line names the flags


def test_the_hinge_step_belongs_to_linear_svm_only():
    with pytest.raises(UserError, match="a linear model's own step"):
        _config(name="ScalpelMC", sparse_optimizer="hinge")


def test_auto_turns_back_to_the_mlp_with_the_options_as_given_when_classes_outgrow_it():
    given = TrainConfig(data=DataConfig(train=["x.csv"], label="label"), training=TrainingConfig(epochs=7))
    resolved = given.validate()
    assert resolved.model.name == "LinearSVM"
    cfg, _ = resolve_counts(given, resolved, FitCounts(rows=1000, classes=300), lambda c: True)
    t = cfg.training
    assert cfg.model.name == "ScalpelMC"
    assert (t.class_loss, t.sparse_optimizer, t.sparse_lr, t.device, t.epochs) == ("cross_entropy", "sgd", 2.5,
                                                                                  "auto", 7)
    assert cfg.model.layers == 1
    kept, _ = resolve_counts(given, resolved, FitCounts(rows=1000, classes=4), lambda c: True)
    assert kept.model.name == "LinearSVM" and kept.training.learn_val is True
    named = dataclasses.replace(given, model=ModelConfig(name="LinearSVM"))
    assert resolve_counts(named, named.validate(), FitCounts(rows=1000, classes=300),
                          lambda c: True)[0].model.name == "LinearSVM"   # named, it stays


def test_scores_become_probabilities_at_a_fitted_scale_and_no_prediction_changes():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model, meta = create_model("LinearSVM", dim=50, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                               embed=8, numeric=0)
    assert meta["kwargs"]["margin"] and float(model.input.weight.detach().abs().sum()) == 0.0   # untrained terms add nothing
    indices, offsets, values = _random_csr(rng, 400, 50)
    labels = (indices[offsets[:-1].clip(max=len(indices) - 1)] % 3).astype(np.int32)
    w, b = model.input.weight.detach().numpy(), model.input.bias.detach().numpy()
    for _ in range(5):
        hinge_pass(indices, offsets, values, labels, w, b, np.float32(0.3), np.empty((400, 3), np.float32))
    block = RowBlock(indices, offsets, values, labels)
    from lancetnic_flow.models.inputs import model_inputs

    model.eval()
    before = model(**model_inputs(block, torch.device("cpu")))["logits"].detach()
    fitted = calibrate(model, [block], scale=True)
    scale = fitted.scale
    after = model(**model_inputs(block, torch.device("cpu")))["logits"].detach()
    y = torch.from_numpy(labels.astype(np.int64))
    assert scale != 1.0
    assert torch.equal(before.argmax(1), after.argmax(1))
    ce = torch.nn.functional.cross_entropy
    assert float(ce(after, y)) < float(ce(before, y))
    assert float(ce(after, y)) <= min(float(ce(before * s, y)) for s in (0.5, 2, 4, 8, 16)) + 1e-4
    # The loss it reports is that of the probabilities at the fitted scale, not of the raw scores.
    assert fitted.loss == pytest.approx(float(ce(after.double(), y)), rel=1e-5)


def test_the_default_cli_run_is_linear_svm_and_its_probabilities_are_calibrated(tmp_path):
    write_corpus(str(tmp_path / "d.csv"), 3000, seed=1)
    p = cli("train", "d.csv", "--epochs", "3", "--name", "r", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    run = tmp_path / "runs" / "r"
    assert json.loads((run / "config.json").read_text())["model"]["name"] == "LinearSVM"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["val_accuracy"] > 0.7
    # val_loss is the raw scores' (scale 1, as each epoch's); the probabilities' own is reported beside it
    calibrated = metrics["calibration"]
    assert calibrated["rows"] == metrics["rows"]["validated"] and calibrated["scale"] > 1.0
    assert calibrated["val_loss"] < metrics["val_loss"]
    assert re.search(rf"loss, calibrated +{calibrated['val_loss']:.4f}", p.stderr), p.stderr
    p = cli("predict", str(run), "--input", "d.csv", "--output", "p.csv", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    import csv

    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert len(rows) == 3000
    probs = np.array([float(r["probability"]) for r in rows if r["status"] == "ok"])
    # A softmax of raw margins (about ±1 over 4 classes) would put every top class near 0.3–0.5.
    assert np.median(probs) > 0.6 and probs.max() <= 1.0


def test_linear_svm_defaults_keep_the_last_epoch_and_learn_the_split_validation_rows():
    cfg = _config()
    t = cfg.training
    assert (t.early_stopping, rule_for(cfg).keeps_last_epoch(), t.learn_val) == (0, True, None)   # None: by the rows
    assert rule_for(_config(early_stopping=2)).keeps_last_epoch() is False   # asked for: the best epoch again
    with_file = TrainConfig(data=DataConfig(train=["x.csv"], val=["v.csv"], label="label")).validate()
    assert with_file.training.learn_val is False   # a validation file stays held out unless asked
    mlp = _config(name="ScalpelMC")
    assert (mlp.training.early_stopping, rule_for(mlp).keeps_last_epoch(), mlp.training.learn_val) == (2, False, False)


def test_learn_val_is_refused_for_a_model_without_a_twin():
    with pytest.raises(UserError, match="learn_val") as e:
        _config(name="ScalpelMC", learn_val=True)
    assert "LinearSVM" in e.value.hint


def _svm_config(train_csv, tmp_path, name, *, val_csv=None, epochs=3, **training):
    """A LinearSVM run with the model's own defaults (rate, monitor, early stopping) and ``training`` set."""
    from helpers import make_config

    cfg = make_config(train_csv, tmp_path, epochs=epochs, **({"val": [val_csv]} if val_csv else {}))
    cfg.model.name, cfg.output.name = "LinearSVM", name
    cfg.training.sparse_optimizer = cfg.training.monitor = cfg.training.early_stopping = None
    cfg.model = ModelConfig(name="LinearSVM")   # no hidden layer: the MLP's width options are refused
    cfg.training.lr = TrainingConfig().lr       # its rate is --sparse-lr: another --lr is refused
    for k, v in training.items():
        setattr(cfg.training, k, v)
    return cfg


def test_the_saved_model_learns_the_validation_rows_while_the_figures_stay_those_of_a_twin_that_never_saw_them(
        client, tmp_path):
    from lancetnic_flow.runs.predict import Predictor
    from lancetnic_flow.training.orchestrator import train

    write_corpus(str(tmp_path / "t.csv"), 2000, classes=4, seed=11)
    write_corpus(str(tmp_path / "v.csv"), 1200, classes=4, seed=12)
    learned = train(_svm_config(tmp_path / "t.csv", tmp_path, "learned", val_csv=tmp_path / "v.csv", learn_val=True),
                    client=client)
    held = train(_svm_config(tmp_path / "t.csv", tmp_path, "held", val_csv=tmp_path / "v.csv", learn_val=False),
                 client=client)
    # The reported figures are the held-out twin's: exactly a run that never learns the validation rows.
    for key in ("val_accuracy", "val_loss"):
        assert learned.metrics[key] == held.metrics[key], key
    assert [e["val_accuracy"] for e in learned.metrics["epochs"]] == [e["val_accuracy"] for e in held.metrics["epochs"]]
    assert learned.metrics["kept"] == "last" and learned.metrics["best_epoch"] == 3
    assert learned.metrics["val_accuracy"] == learned.metrics["epochs"][-1]["val_accuracy"]
    # The saved model is a plain LinearSVM (no twin buffers) that did learn them: lower hinge loss on them.
    import csv

    rows = list(csv.DictReader(open(tmp_path / "v.csv")))
    texts = [r["text"] for r in rows]

    def margins_loss(run: str) -> float:
        p = Predictor(run, {})
        names = set(__import__("safetensors.torch", fromlist=["x"]).load_file(run + "/model.safetensors"))
        assert not any("twin" in n for n in names)
        proba = p.predict_proba(texts)
        y = np.array([p.labels.index(r["label"]) for r in rows])
        return float(-np.log(np.clip(proba[np.arange(len(y)), y], 1e-9, 1)).mean())

    assert margins_loss(learned.run) < margins_loss(held.run)


def test_past_its_row_limit_the_split_validation_rows_stay_held_out_unless_asked(client, tmp_path, monkeypatch):
    from lancetnic_flow import resolve
    from lancetnic_flow.training.orchestrator import train

    write_corpus(str(tmp_path / "t.csv"), 1500, classes=3, seed=21)
    monkeypatch.setattr(resolve, "LEARN_VAL_MAX_ROWS", 1000)   # the 1,350 training rows are past it

    def run(name, **training):
        cfg = _svm_config(tmp_path / "t.csv", tmp_path, name, epochs=2, **training)
        train(cfg, client=client)
        return json.loads((tmp_path / "runs" / name / "config.json").read_text())["training"]["learn_val"]

    assert run("auto") is False
    assert run("asked", learn_val=True) is True
