"""Thousands of classes train, evaluate, save and plot in seconds, inside the
memory plan: the confusion matrix is kept as its non-zero cells (dense only
up to 50 classes), metrics.json stays small, charts draw the top classes only,
the plan counts the output layer, and the summary's time and peak include
the save (issue 15, item 7; docs/benchmarks.md "Many classes")."""
from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from lancetnic_flow.models.metrics import (DENSE_CONFUSION_MAX, ClassificationMetrics, cells_of, confusion_cells,
                                           dense_confusion)

from helpers import charts_drawn, cli, make_config

CLASSES = 1500
ROWS = 9000
# One worker; a trainer share (budget / 8) with room for 1,500 classes' outputs, which 3 GiB's has not.
CLUSTER = ["--workers", "1", "--memory-budget", "6GiB"]


def assert_png(path: Path) -> tuple[int, int]:
    """A PNG file's width and height (from its IHDR chunk)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1024, path
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """make-data with 1,500 classes, one epoch of training and an evaluation, all through the CLI."""
    d = tmp_path_factory.mktemp("many")
    made = cli("make-data", "k.csv", "--rows", ROWS, "--classes", CLASSES, cwd=d)
    assert made.returncode == 0, made.stderr
    trained = cli("train", "k.csv", *CLUSTER, "--epochs", "1", "--buckets", "65536", "--out", d / "runs",
                  "--cache", d / "cache", "--name", "many", cwd=d)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    charts_drawn(trained.stdout + trained.stderr)
    run = d / "runs" / "many"
    evaluated = cli("evaluate", run, "k.csv", "--json", *CLUSTER, cwd=d)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    out = json.loads([line for line in evaluated.stdout.splitlines() if line.startswith("{")][-1])
    return run, json.loads((run / "metrics.json").read_text()), out, trained.stdout + trained.stderr


def test_a_1500_class_run_saves_in_seconds_with_a_small_metrics_json(many):
    run, m, _, _ = many
    k = len(m["labels"])   # a class whose rows all fell into validation is not learned
    assert CLASSES * 0.95 < k <= CLASSES
    assert m["stage_seconds"]["save"] < 10
    assert (run / "metrics.json").stat().st_size < 1_000_000
    # No dense K × K matrix anywhere in it: not the final one, not per epoch.
    assert m["confusion"] is None and all(e.get("val_confusion") is None for e in m["epochs"])
    cells = np.asarray(m["confusion_cells"])
    assert cells.shape[1] == 3 and cells[:, 2].sum() == m["rows"]["validated"] and (cells[:, 2] > 0).all()
    assert len(m["per_class"]["f1"]) == k and sum(m["per_class"]["support"]) == m["rows"]["validated"]


def test_auto_trains_the_mlp_past_linear_svms_class_limit_and_config_json_says_so(many):
    """LinearSVM's weight is terms × classes: --model auto counts the classes
    after the fit and turns to ScalpelMC (whose output layer is hidden × classes)."""
    run, m, _, _ = many
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["name"] == m["model"] == "ScalpelMC"
    assert config["training"]["sparse_optimizer"] == "sgd" and config["training"]["class_loss"] == "cross_entropy"


def test_many_class_plots_exist_and_are_of_bounded_size(many):
    run, m, _, _ = many
    for name in ("confusion_matrix.png", "per_class.png", "class_distribution.png"):
        assert name in m["plots"]
        w, h = assert_png(run / name)
        assert w <= 3000 and h <= 3500 and (run / name).stat().st_size < 1_500_000, name
    with open(run / "per_class.csv", newline="") as f:
        assert len(list(csv.reader(f))) == len(m["labels"]) + 1   # the table keeps every class


def test_evaluate_json_gives_per_class_scores_and_sparse_confusion_for_many_classes(many):
    _, m, out, _ = many
    k = len(m["labels"])
    assert out["rows"]["evaluated"] > 0 and len(out["labels"]) == k
    # Rows whose class the training rows never had are evaluated too, as wrong, and counted apart.
    known = out["rows"]["evaluated"] - out["rows"].get("unseen_label", 0)
    assert sum(out.get("unseen_labels", {}).values()) == out["rows"].get("unseen_label", 0)
    assert len(out["per_class"]["f1"]) == k and sum(out["per_class"]["support"]) == known
    assert out["confusion"] is None
    assert sum(c[2] for c in out["confusion_cells"]) == known


def test_the_summary_time_and_peak_memory_include_the_save_and_stay_inside_the_plan(many):
    _, m, _, printed = many
    stages = m["stage_seconds"]
    assert "save" in stages and m["seconds"] >= sum(stages.values()) - 0.5
    assert m["memory"]["trainer_peak_rss_bytes"] <= m["memory"]["plan"]["trainer"]
    assert "save" in printed


def test_confusion_cells_round_trip_through_merge_checkpoint_and_dense_form():
    rng = np.random.default_rng(0)
    k = 9
    a, b, ref = ClassificationMetrics(k), ClassificationMetrics(k), np.zeros((k, k), np.int64)
    for m in (a, b, a, b, a):
        t, p = rng.integers(0, k, 200), rng.integers(0, k, 200)
        np.add.at(ref, (t, p), 1)
        m.update(t, p, 1.0)
    a.merge(b)
    assert (a.confusion == ref).all()
    r = a.result()
    assert r["confusion"] == ref.tolist() and r["accuracy"] == pytest.approx(np.trace(ref) / ref.sum())
    assert (dense_confusion(r["confusion_cells"], k) == ref).all()
    assert confusion_cells(ref) == r["confusion_cells"]
    assert (cells_of({"confusion": ref.tolist()}) == np.asarray(r["confusion_cells"])).all()
    again = ClassificationMetrics(k)
    again.load_state(a.state())
    assert (again.confusion == ref).all()
    old = ClassificationMetrics(k)   # a checkpoint written before the sparse cells
    old.load_state({"confusion": ref, "loss_sum": 1.0, "rows": int(ref.sum())})
    assert (old.confusion == ref).all()


def test_the_dense_confusion_is_given_up_to_50_classes_and_only_the_cells_above():
    for k, dense in ((DENSE_CONFUSION_MAX, True), (DENSE_CONFUSION_MAX + 1, False), (3000, False)):
        m = ClassificationMetrics(k)
        m.update(np.arange(k) % k, (np.arange(k) + 1) % k, 0.0)
        r = m.result()
        assert (r["confusion"] is not None) == dense
        assert len(r["confusion_cells"]) == k and len(r["per_class"]["f1"]) == k


def test_the_trainer_plan_counts_the_output_layer_for_thousands_of_classes():
    from lancetnic_flow.training.orchestrator import estimate_model_bytes

    cfg = make_config("unused.csv", Path("unused")).validate()   # the model's estimate reads its resolved options
    few, many = estimate_model_bytes(cfg, 65536, 64), estimate_model_bytes(cfg, 65536, 3000)
    # hidden × classes weights with moments, best copy and gradient (~4 copies), and a batch's outputs.
    assert many - few >= 4 * cfg.model.hidden * (3000 - 64) * 4


def test_a_3000_class_confusion_chart_draws_the_top_classes_only(tmp_path):
    from lancetnic_flow.runs import plots

    rng = np.random.default_rng(1)
    k, n = 3000, 20000
    t = rng.integers(0, k, n)
    p = np.where(rng.random(n) < 0.7, t, rng.integers(0, k, n))
    cells = np.asarray(confusion_cells(np.bincount(t * k + p, minlength=k * k).reshape(k, k)))
    labels = [f"class_{i}" for i in range(k)]
    w, h = assert_png(Path(plots.confusion_chart(cells, labels, str(tmp_path / "cm.png"), {})))
    assert w <= 3000 and h <= 3000
    assert len(plots.top_classes(np.arange(k), k, plots.TOP_CLASSES)) == plots.TOP_CLASSES
