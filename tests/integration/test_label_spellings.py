"""A label is the same label whatever file it comes from: a CSV keeps ``1.0`` as
written where a Parquet float column names it ``1``. Evaluating a run on the
other format scores its rows as the run's labels; one run over both warns."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lancetnic_flow.data.synth import write_corpus

from helpers import cli


@pytest.fixture(scope="module")
def floats(tmp_path_factory) -> Path:
    """1,200 rows whose labels are the floats 1.0, 2.0, 3.0: train.csv, and test.csv / test.parquet of one frame."""
    d = tmp_path_factory.mktemp("spellings")
    write_corpus(str(d / "all.csv"), 1200, classes=3, seed=3)
    df = pd.read_csv(d / "all.csv")[["text", "label"]]
    df["label"] = df["label"].map({n: float(i + 1) for i, n in enumerate(sorted(df["label"].unique()))})
    df.iloc[:900].to_csv(d / "train.csv", index=False)
    df.iloc[900:].to_csv(d / "test.csv", index=False)
    df.iloc[900:].to_parquet(d / "test.parquet", index=False)
    (d / "mixed").mkdir()
    df.iloc[:600].to_csv(d / "mixed" / "a.csv", index=False)
    df.iloc[600:900].to_parquet(d / "mixed" / "b.parquet", index=False)
    p = cli("train", d / "train.csv", "--out", d / "runs", "--name", "csv", "--epochs", "2", "--workers", "1",
            "--no-plots", cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    return d


def _evaluated(run: Path, data: Path, cwd: Path) -> dict:
    p = cli("evaluate", run, data, "--json", "--workers", "1", cwd=cwd)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_run_trained_on_csv_float_labels_scores_the_same_frame_in_parquet_as_in_csv(floats):
    run = floats / "runs" / "csv"
    as_csv, as_parquet = _evaluated(run, floats / "test.csv", floats), _evaluated(run, floats / "test.parquet", floats)
    assert as_csv["labels"] == as_parquet["labels"] and sorted(as_csv["labels"]) == ["1.0", "2.0", "3.0"]
    assert as_parquet["accuracy"] == as_csv["accuracy"] > 0.5 and "unseen_labels" not in as_parquet
    assert sum(as_parquet["labels_read_as"].values()) == 300 == as_parquet["rows"]["noted"]["label_as_run"]
    assert set(as_parquet["labels_read_as"]) == {"1 as 1.0", "2 as 2.0", "3 as 3.0"}


def test_one_run_over_csv_and_parquet_spelling_one_label_two_ways_warns_pairing_them(floats):
    p = cli("train", floats / "mixed", "--out", floats / "runs", "--name", "mixed", "--epochs", "1", "--workers", "1",
            "--no-plots", cwd=floats)
    assert p.returncode == 0, p.stdout + p.stderr
    out = " ".join((p.stdout + p.stderr).split())
    assert "3 labels are the same value as another written otherwise" in out and "'1' (and '1.0')" in out
    decided = json.loads((floats / "runs" / "mixed" / "metrics.json").read_text())["decided"]
    assert sorted(decided["labels_spelled_twice"]) == [["1", "1.0"], ["2", "2.0"], ["3", "3.0"]]


@pytest.mark.parametrize("features", ["tfidf", "hashing"])
def test_a_validation_file_spelling_the_training_labels_otherwise_validates_as_them_counted_and_warned(floats,
                                                                                                      features):
    """A --val Parquet whose floats read 1, 2, 3 against a CSV run's 1.0, 2.0, 3.0: every row validates as
    the run's label (none skipped as unknown_label), counted and warned of, with a fitted vocabulary as with hashing."""
    name = f"val-{features}"
    p = cli("train", floats / "train.csv", "--val", floats / "test.parquet", "--out", floats / "runs", "--name", name,
            "--epochs", "1", "--workers", "1", "--no-plots", "--features", features, cwd=floats)
    assert p.returncode == 0, p.stdout + p.stderr
    out = " ".join((p.stdout + p.stderr).split())
    assert "300 labels were read as training's spelling of the same value: 1 as 1.0" in out
    metrics = json.loads((floats / "runs" / name / "metrics.json").read_text())
    assert metrics["rows"]["validated"] == 300 and "unknown_label" not in metrics["rows"]["skipped"]
    assert metrics["rows"]["noted"]["label_as_run"] == 300 == sum(metrics["labels_read_as"].values())
    assert set(metrics["labels_read_as"]) == {"1 as 1.0", "2 as 2.0", "3 as 3.0"}
    assert metrics["val_accuracy"] > 0.5 and "unseen_labels" not in metrics


def test_a_parquet_column_of_dates_names_the_labels_its_csv_names(tmp_path):
    """One frame whose labels are dates, in CSV and in Parquet: a run trained on either knows the
    other's labels by name (ISO 8601, as pandas writes them to a CSV), and scores both alike."""
    write_corpus(str(tmp_path / "all.csv"), 900, classes=3, seed=5)
    df = pd.read_csv(tmp_path / "all.csv")[["text", "label"]]
    days = {n: pd.Timestamp(f"2024-0{i + 1}-15") for i, n in enumerate(sorted(df["label"].unique()))}
    df["label"] = df["label"].map(days)
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet", index=False)
    p = cli("train", tmp_path / "d.parquet", "--out", tmp_path / "runs", "--name", "pq", "--epochs", "1",
            "--workers", "1", "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    run = tmp_path / "runs" / "pq"
    labels = json.loads((run / "metrics.json").read_text())["labels"]
    assert sorted(labels) == ["2024-01-15", "2024-02-15", "2024-03-15"]
    as_csv = _evaluated(run, tmp_path / "d.csv", tmp_path)
    as_parquet = _evaluated(run, tmp_path / "d.parquet", tmp_path)
    assert as_csv["accuracy"] == as_parquet["accuracy"] > 0.5 and "labels_read_as" not in as_csv
    assert "unseen_labels" not in as_csv


def test_a_run_continued_on_data_spelling_its_labels_otherwise_trains_them_as_its_own_labels(floats):
    """--init-from a CSV run (1.0, 2.0, 3.0) on the Parquet of the same frame (1, 2, 3): its rows train
    and validate as the run's labels, no class added, counted and warned of."""
    p = cli("train", floats / "test.parquet", "--init-from", floats / "runs" / "csv", "--out", floats / "runs",
            "--name", "more", "--epochs", "1", "--workers", "1", "--no-plots", cwd=floats)
    assert p.returncode == 0, p.stdout + p.stderr
    out = " ".join((p.stdout + p.stderr).split())
    assert "277 labels were read as" in out and "1 as 1.0 (" in out
    metrics = json.loads((floats / "runs" / "more" / "metrics.json").read_text())
    assert sorted(metrics["labels"]) == ["1.0", "2.0", "3.0"] and metrics["decided"]["init_from"]["labels_added"] == []
    assert set(metrics["decided"]["init_from"]["labels_read_as"]) == {"1 as 1.0", "2 as 2.0", "3 as 3.0"}
    assert "unknown_label" not in metrics["rows"]["skipped"]
    assert metrics["rows"]["trained"] + metrics["rows"]["validated"] == 300
    # A second such run reuses the cache entry, without a fit pass: it says the same.
    p = cli("train", floats / "test.parquet", "--init-from", floats / "runs" / "csv", "--out", floats / "runs",
            "--name", "more-again", "--epochs", "1", "--workers", "1", "--no-plots", cwd=floats)
    assert p.returncode == 0 and "from cache" in p.stdout + p.stderr, p.stdout + p.stderr
    assert "277 labels were read as" in " ".join((p.stdout + p.stderr).split())
    again = json.loads((floats / "runs" / "more-again" / "metrics.json").read_text())
    assert again["decided"]["init_from"]["labels_read_as"] == metrics["decided"]["init_from"]["labels_read_as"]
