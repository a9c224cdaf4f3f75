"""Prediction with a saved run.

:class:`Predictor` works in-process on a list of texts or a table, in
batches so memory stays bounded. :func:`predict_files` runs over Dask
partitions: each task loads the run once per worker process (:func:`predictor`),
reads its partition, and returns only its output bytes, written in input order.
"""
from __future__ import annotations

import io
from typing import Any, Sequence

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import torch

from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..dataflow.window import OrderedWindow
from ..errors import UserError
from ..formats import COMPRESSION_SUFFIXES
from ..models.inputs import model_inputs
from .folder import LoadedRun, load_run

BATCH_ROWS = 4096


class Predictor:
    """A trained run, ready to predict: ``Predictor("runs/x").predict(["text"])``.

    Classifiers give a label and its probability, regressors a value in the
    target's original units, multi-task models both."""

    def __init__(self, run: str | LoadedRun, storage_options: dict | None = None, device: str = "cpu"):
        self.run = run if isinstance(run, LoadedRun) else load_run(run, storage_options, device)
        self.device = torch.device(device)
        self.labels = self.run.features.labels
        kw = self.run.meta["kwargs"]
        self.classifies = bool(kw.get("classes"))
        self.regresses = bool(kw.get("regress"))

    @staticmethod
    def _table(texts: Sequence[str] | pa.Array | pa.ChunkedArray | pa.Table) -> pa.Table:
        if isinstance(texts, pa.Table):
            return texts
        if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = pa.array(list(texts), pa.string())
        return pa.table({"text": texts})

    def outputs(self, texts: Sequence[str] | pa.Array | pa.Table) -> dict[str, np.ndarray]:
        """Raw model outputs in batches: ``logits`` and/or ``value`` (original units)."""
        table = self._table(texts).drop_columns([c for c in ("label",) if c in self._table(texts).column_names])
        parts: dict[str, list[np.ndarray]] = {}
        with torch.no_grad():
            for start in range(0, table.num_rows, BATCH_ROWS):
                block = self.run.features.transform(table.slice(start, BATCH_ROWS))
                for k, v in self.run.model(**model_inputs(block, self.device)).items():
                    parts.setdefault(k, []).append(v.cpu().numpy())
        out = {k: np.concatenate(v) for k, v in parts.items()}
        if self.classifies and "logits" not in out:
            out["logits"] = np.zeros((0, len(self.labels)), np.float32)
        if self.regresses:
            mean, std = self.run.features.target or (0.0, 1.0)
            out["value"] = out.get("value", np.zeros(0, np.float32)).astype(np.float64) * std + mean
        return out

    def predict_proba(self, texts: Sequence[str] | pa.Array | pa.Table) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``self.labels`` order."""
        if not self.classifies:
            raise UserError(f"{self.run.url} is a regression model: it predicts values, not probabilities",
                            "use predict() or predict_values()")
        return torch.softmax(torch.from_numpy(self.outputs(texts)["logits"]), dim=1).numpy()

    def predict_values(self, texts: Sequence[str] | pa.Array | pa.Table) -> np.ndarray:
        """Predicted target values in the original units."""
        if not self.regresses:
            raise UserError(f"{self.run.url} is a classifier: it has no value head", "use predict()")
        return self.outputs(texts)["value"]

    def predict(self, texts: Sequence[str] | pa.Array | pa.Table) -> list[dict[str, Any]]:
        """One dict per text: ``label`` and ``probability``, and/or ``value``."""
        cols = self._columns(self.outputs(texts))
        n = len(next(iter(cols.values())))
        return [{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in cols.items()} for i in range(n)]

    def _columns(self, out: dict[str, np.ndarray]) -> dict[str, Any]:
        cols: dict[str, Any] = {}
        if self.classifies:
            p = torch.softmax(torch.from_numpy(out["logits"]), dim=1).numpy()
            best = p.argmax(1)
            cols["label"] = [self.labels[i] for i in best]
            cols["probability"] = p[np.arange(len(p)), best]
        if self.regresses:
            cols["value"] = out["value"]
        return cols

    def predict_table(self, table: pa.Table) -> pa.Table:
        """``table`` plus ``predicted`` and ``probability`` and/or ``predicted_value`` columns."""
        cols = self._columns(self.outputs(table))
        if "label" in cols:
            table = table.append_column("predicted", pa.array(cols["label"], pa.string()))
            table = table.append_column("probability", pa.array(cols["probability"], pa.float64()))
        if "value" in cols:
            # Not "value": an input column may well be called that.
            table = table.append_column("predicted_value", pa.array(cols["value"], pa.float64()))
        return table


_PREDICTORS: dict[str, Predictor] = {}


def predictor(run: str, storage_options: dict) -> Predictor:
    """One loaded run per worker process, reused by every task."""
    if run not in _PREDICTORS:
        torch.set_num_threads(1)
        _PREDICTORS[run] = Predictor(run, storage_options)
    return _PREDICTORS[run]


def output_format(url: str) -> str:
    name = url.lower()
    for ext in COMPRESSION_SUFFIXES:
        name = name.removesuffix(ext)
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    raise UserError(f"--output {url}: cannot tell the format from the name", "end it in .csv or .jsonl")


def encode(table: pa.Table, fmt: str) -> bytes:
    if fmt == "csv":
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False))
        return buf.getvalue()
    text = table.to_pandas().to_json(orient="records", lines=True, force_ascii=False)
    return (text if text.endswith("\n") or not text else text + "\n").encode()


def predict_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                      chunk_bytes: int, fmt: str) -> tuple[bytes, int, dict]:
    """Worker task: one partition's predictions, encoded."""
    pred = predictor(run, run_options)
    out, rows, skipped = [], 0, {}
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        rows += chunk.rows_read
        for k, v in chunk.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        if chunk.table.num_rows:
            out.append(encode(pred.predict_table(chunk.table), fmt))
    return b"".join(out), rows, skipped


def predict_files(client: Any, run: str, plan, columns: Columns, output: str, *, storage_options: dict,
                  run_options: dict, chunk_bytes: int, window: int) -> dict:
    """Predict every row of ``plan`` into ``output`` (CSV or JSON Lines), in input order."""
    fmt = output_format(output)
    feed = OrderedWindow(client, predict_partition, [(p,) for p in plan.partitions], window, columns=columns,
                      run=run, run_options=run_options, storage_options=storage_options,
                      chunk_bytes=chunk_bytes, fmt=fmt)
    rows, written, skipped = 0, 0, {}
    with fsspec.open(output, "wb", compression="infer", **storage_options) as f:
        if fmt == "csv":
            pred = Predictor(run, run_options)
            names = (["text"] + (["label"] if columns.label else []) + list(columns.numeric)
                     + (["predicted", "probability"] if pred.classifies else []) + (["predicted_value"] if pred.regresses else []))
            f.write((",".join(f'"{n}"' for n in names) + "\n").encode())
        for data, n, sk in feed:
            f.write(data)
            rows += n
            written += data.count(b"\n")
            for k, v in sk.items():
                skipped[k] = skipped.get(k, 0) + v
    return {"output": output, "rows_read": rows, "rows_written": written, "skipped": skipped}


