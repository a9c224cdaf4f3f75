"""Prediction and evaluation with a saved run.

:class:`Predictor` works in-process on a list of texts or a table, in
batches so memory stays bounded. :func:`predict_files` and
:func:`evaluate_files` run over Dask partitions: each task loads the run
once per worker process, reads its partition, and returns only output
bytes (prediction) or a confusion matrix (evaluation).
"""
from __future__ import annotations

import io
from typing import Any, Sequence

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import torch
import torch.nn.functional as F

from .errors import UserError
from .metrics import ClassificationMetrics
from .runs import LoadedRun, load_run
from .readers import read_partition
from .sources import Columns, Partition
from .stream import Featurizer

_BATCH = 4096


class Predictor:
    """A trained run, ready to predict: ``Predictor("runs/x").predict(["text"])``."""

    def __init__(self, run: str | LoadedRun, storage_options: dict | None = None, device: str = "cpu"):
        self.run = run if isinstance(run, LoadedRun) else load_run(run, storage_options, device)
        self.device = torch.device(device)
        self.labels = self.run.features.labels

    def logits(self, texts: pa.Array) -> np.ndarray:
        from .trainer import to_tensors

        out = []
        with torch.no_grad():
            for start in range(0, len(texts), _BATCH):
                block = self.run.features.transform_texts(texts.slice(start, _BATCH))
                out.append(self.run.model(*to_tensors(block, self.device)).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, len(self.labels)), np.float32)

    def predict_proba(self, texts: Sequence[str] | pa.Array) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``self.labels`` order."""
        texts = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.string())
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        return torch.softmax(torch.from_numpy(self.logits(texts)), dim=1).numpy()

    def predict(self, texts: Sequence[str] | pa.Array) -> list[dict[str, Any]]:
        """``[{"label": ..., "probability": ...}, ...]`` for each text."""
        p = self.predict_proba(texts)
        best = p.argmax(1)
        return [{"label": self.labels[i], "probability": float(p[r, i])} for r, i in enumerate(best)]

    def predict_table(self, table: pa.Table) -> pa.Table:
        p = self.predict_proba(table["text"])
        best = p.argmax(1)
        names = pa.array(self.labels, pa.string()).take(pa.array(best))
        return table.append_column("predicted", names).append_column("probability", pa.array(p[np.arange(len(p)), best]))


_PREDICTORS: dict[str, Predictor] = {}


def _predictor(run: str, storage_options: dict) -> Predictor:
    """One loaded run per worker process, reused by every task."""
    if run not in _PREDICTORS:
        torch.set_num_threads(1)
        _PREDICTORS[run] = Predictor(run, storage_options)
    return _PREDICTORS[run]


def output_format(url: str) -> str:
    name = url.lower()
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        name = name.removesuffix(ext)
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    raise UserError(f"--output {url}: cannot tell the format from the name", "end it in .csv or .jsonl")


def _encode(table: pa.Table, fmt: str) -> bytes:
    if fmt == "csv":
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False))
        return buf.getvalue()
    text = table.to_pandas().to_json(orient="records", lines=True, force_ascii=False)
    return (text if text.endswith("\n") or not text else text + "\n").encode()


def predict_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                      chunk_bytes: int, fmt: str) -> tuple[bytes, int, dict]:
    """Worker task: one partition's predictions, encoded."""
    pred = _predictor(run, run_options)
    out, rows, skipped = [], 0, {}
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        rows += chunk.rows_read
        for k, v in chunk.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        if chunk.table.num_rows:
            out.append(_encode(pred.predict_table(chunk.table), fmt))
    return b"".join(out), rows, skipped


def predict_files(client: Any, run: str, plan, columns: Columns, output: str, *, storage_options: dict,
                  run_options: dict, chunk_bytes: int, window: int) -> dict:
    """Predict every row of ``plan`` into ``output`` (CSV or JSON Lines), in input order."""
    fmt = output_format(output)
    feed = Featurizer(client, predict_partition, [(p,) for p in plan.partitions], window, columns=columns,
                      run=run, run_options=run_options, storage_options=storage_options,
                      chunk_bytes=chunk_bytes, fmt=fmt)
    rows, written, skipped = 0, 0, {}
    with fsspec.open(output, "wb", compression="infer", **storage_options) as f:
        if fmt == "csv":
            names = ["text"] + (["label"] if columns.label else []) + ["predicted", "probability"]
            f.write((",".join(f'"{n}"' for n in names) + "\n").encode())
        for data, n, sk in feed:
            f.write(data)
            rows += n
            written += data.count(b"\n")
            for k, v in sk.items():
                skipped[k] = skipped.get(k, 0) + v
    return {"output": output, "rows_read": rows, "rows_written": written, "skipped": skipped}


def evaluate_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                       chunk_bytes: int) -> tuple[ClassificationMetrics, int, dict]:
    """Worker task: the confusion matrix and loss of one partition."""
    pred = _predictor(run, run_options)
    m = ClassificationMetrics(len(pred.labels))
    rows, skipped = 0, {}
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        rows += chunk.rows_read
        for k, v in chunk.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        y = pred.run.features.label_ids(chunk.table["label"])
        known = y >= 0
        if (~known).any():
            skipped["unknown_label"] = skipped.get("unknown_label", 0) + int((~known).sum())
        table = chunk.table.filter(pa.array(known))
        if not table.num_rows:
            continue
        logits = torch.from_numpy(pred.logits(table["text"].combine_chunks()))
        yt = torch.from_numpy(y[known].astype(np.int64))
        m.update(y[known].astype(np.int64), logits.argmax(1).numpy(), F.cross_entropy(logits, yt, reduction="sum").item())
    return m, rows, skipped


def evaluate_files(client: Any, run: str, plan, columns: Columns, *, storage_options: dict, run_options: dict,
                   chunk_bytes: int, window: int, classes: int) -> dict:
    """Metrics of a saved run on labelled data, computed on the workers."""
    feed = Featurizer(client, evaluate_partition, [(p,) for p in plan.partitions], window, columns=columns,
                      run=run, run_options=run_options, storage_options=storage_options, chunk_bytes=chunk_bytes)
    total = ClassificationMetrics(classes)
    rows, skipped = 0, {}
    for m, n, sk in feed:
        total.merge(m)
        rows += n
        for k, v in sk.items():
            skipped[k] = skipped.get(k, 0) + v
    out = total.result()
    out["rows"] = {"read": rows, "evaluated": total.rows, "skipped": skipped}
    return out
