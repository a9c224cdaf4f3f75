"""Arrow-native inputs end to end: a folder written by
``datasets.Dataset.save_to_disk`` and Parquet written by polars or datasets
train from the command line, every row read; a polars DataFrame or Series
and a ``datasets.Dataset`` train and predict through the estimators as the
same rows given as lists do."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from lancetnic_flow import TextClassifier, write_corpus

from helpers import cli

datasets = pytest.importorskip("datasets")
pl = pytest.importorskip("polars")

ROWS = 600
SEED = ["--seed", "0", "--epochs", "1", "--no-plots"]


@pytest.fixture(scope="module")
def table(data_dir) -> pa.Table:
    path = data_dir / "arrow-inputs.csv"
    if not path.exists():
        write_corpus(str(path), ROWS, classes=3, seed=13)
    return pcsv.read_csv(path).select(["text", "label"])


def rows_of(run) -> dict:
    return json.loads((run / "metrics.json").read_text())["rows"]


def test_a_save_to_disk_folder_trains_from_the_cli_and_predicts_every_row(tmp_path, table):
    folder = tmp_path / "saved"
    datasets.Dataset(table).save_to_disk(str(folder), max_shard_size="20KB")
    assert len(list(folder.glob("data-*.arrow"))) > 1   # several shards: each read, in order
    p = cli("train", folder, *SEED, "--out", tmp_path / "runs", "--name", "ds", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert rows_of(tmp_path / "runs" / "ds")["read"] == ROWS
    p = cli("predict", tmp_path / "runs" / "ds", "--input", folder, "--output", tmp_path / "p.arrow", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    out = pl.read_ipc(tmp_path / "p.arrow").to_arrow()   # the output in Arrow's file layout, as polars reads it
    assert out.num_rows == ROWS and out.column("text").to_pylist() == table.column("text").to_pylist()


@pytest.mark.parametrize("writer", ["polars", "datasets"])
def test_parquet_written_by_polars_or_datasets_trains_from_the_cli_every_row_read(tmp_path, table, writer):
    path = tmp_path / f"{writer}.parquet"
    if writer == "polars":
        pl.from_arrow(table).write_parquet(path)
    else:
        datasets.Dataset(table).to_parquet(str(path))
    p = cli("train", path, *SEED, "--out", tmp_path / "runs", "--name", writer, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert rows_of(tmp_path / "runs" / writer)["read"] == ROWS


def test_polars_and_datasets_objects_train_and_predict_as_the_same_rows_given_as_lists(table):
    texts, labels = table.column("text").to_pylist(), table.column("label").to_pylist()
    as_lists = TextClassifier(epochs=1, random_state=0, progress=False).fit(texts, labels)
    want = as_lists.predict(texts)
    frame = pl.from_arrow(table)
    for X, y in ((frame, "label"), (frame["text"], frame["label"]), (datasets.Dataset(table), "label")):
        clf = TextClassifier(epochs=1, random_state=0, progress=False).fit(X, y)
        assert clf.metrics_["rows"]["read"] == ROWS, type(X)
        assert list(clf.predict(X)) == list(want), type(X)
        assert list(clf.classes_) == list(as_lists.classes_)
    out = clf.predictor_.predict_table(frame)
    assert isinstance(out, pl.DataFrame) and out["predicted"].to_list() == list(want)
    assert np.allclose(clf.predict_proba(datasets.Dataset(table)), as_lists.predict_proba(texts))
