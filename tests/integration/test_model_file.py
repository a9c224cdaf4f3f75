"""The saved model file (docs/serving.md, "The model file"): the default
model's weights are stored as the entries it learned — a fraction of the
dense matrix's bytes, loading to the same weights — and
``export RUN --compact DIR`` writes a run folder with 8-bit weights that
predicts like the run; bad uses of it are refused with exit 2."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from lancetnic_flow.runs.predict import Predictor

from helpers import CLUSTER, assert_user_error, cli


@pytest.fixture(scope="module")
def default_run(small_corpus, tmp_path_factory) -> Path:
    """The defaults (LinearSVM on 2^19 hashed buckets) on 2,000 rows of 4 classes."""
    out = tmp_path_factory.mktemp("model-file")
    p = cli("train", small_corpus, "--out", out, "--name", "r", "--epochs", "2", "--no-plots", *CLUSTER, cwd=out)
    assert p.returncode == 0, p.stdout + p.stderr
    return out / "r"


def texts_and_labels(corpus: Path, n: int = 600) -> tuple[list[str], list[str]]:
    rows = list(csv.DictReader(open(corpus, newline="")))[:n]
    return [r["text"] for r in rows], [r["label"] for r in rows]


def test_the_default_models_weights_file_holds_its_learned_entries_not_the_dense_matrix(default_run):
    meta = json.loads((default_run / "model.json").read_text())
    assert meta["model"] == "LinearSVM"
    dense = 2**19 * 4 * 4                                   # buckets × classes × float32
    size = (default_run / "model.safetensors").stat().st_size
    assert size == meta["weights"]["bytes"] and size < dense / 5, size
    w = Predictor(str(default_run)).run.model.state_dict()["input.weight"]
    assert tuple(w.shape) == (2**19, 4) and 0 < int((w != 0).sum()) < w.numel() / 5


def test_export_compact_writes_an_8bit_run_that_predicts_like_the_run(default_run, small_corpus, tmp_path):
    out = tmp_path / "int8"
    p = cli("export", default_run, "--compact", out, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    said = p.stdout + p.stderr
    assert "in 8 bits" in said and "evaluate" in said
    meta = json.loads((out / "model.json").read_text())
    assert meta["quantised"]["bits"] == 8 and meta["quantised"]["from"] == str(default_run)
    assert 0 < meta["quantised"]["max_error"] <= 0.5 / 127 + 1e-6
    # the copied metrics.json held the float run's figures as if the copy's own
    figures = json.loads((out / "metrics.json").read_text())
    assert figures["figures_of"]["run"] == str(default_run) and "evaluate" in figures["figures_of"]["measure"]
    assert figures["val_accuracy"] == json.loads((default_run / "metrics.json").read_text())["val_accuracy"]
    before, after = ((r / "model.safetensors").stat().st_size for r in (default_run, out))
    assert after < before * 0.6, (before, after)
    texts, labels = texts_and_labels(small_corpus)
    full, small = Predictor(str(default_run)), Predictor(str(out))
    a, b = full.predict_proba(texts), small.predict_proba(texts)
    assert (a.argmax(1) == b.argmax(1)).mean() >= 0.98
    assert np.abs(a - b).mean() < 0.01 and np.abs(a - b).max() < 0.2
    assert small.labels == full.labels
    for r in (default_run, out):            # evaluate reads the copy as any run
        e = cli("evaluate", r, small_corpus, *CLUSTER, cwd=tmp_path)
        assert e.returncode == 0, e.stdout + e.stderr


def test_export_compact_refuses_a_second_target_an_occupied_folder_and_a_compacted_run(default_run, tmp_path):
    assert_user_error(cli("export", default_run, cwd=tmp_path), "say which", "--compact DIR")
    assert_user_error(cli("export", default_run, "--onnx", tmp_path / "m.onnx", "--compact", tmp_path / "c",
                          cwd=tmp_path), "not both")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    assert_user_error(cli("export", default_run, "--compact", tmp_path / "taken", cwd=tmp_path),
                      "not an empty folder")
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    assert_user_error(cli("export", default_run, "--compact", default_run, cwd=tmp_path), "the run itself")
    first = tmp_path / "once"
    assert cli("export", default_run, "--compact", first, cwd=tmp_path).returncode == 0
    assert_user_error(cli("export", first, "--compact", tmp_path / "twice", cwd=tmp_path), "8-bit weights already")
    assert not (tmp_path / "twice" / "model.json").exists()
