"""Evaluation of a saved run on labelled data, over Dask partitions: each
task loads the run once per worker process, reads its partition and returns
only its streaming metrics, merged here."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..dataflow.window import OrderedWindow
from ..models.inputs import answers, model_inputs
from ..models.tasks import TaskMetrics
from .folder import weights_stamp
from .predict import BATCH_ROWS, predictor


def evaluate_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                       chunk_bytes: int, stamp: str = "") -> tuple[TaskMetrics, int, dict, dict]:
    """Worker task: the streaming metrics of one partition, rows read, skipped and noted by reason."""
    pred = predictor(run, run_options, stamp)
    task = pred.run.task()
    m = task.new_metrics()
    rows, skipped, noted = 0, {}, {}
    with torch.no_grad():
        for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
            rows += chunk.rows_read
            for k, v in chunk.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
            for k, v in chunk.noted.items():
                noted[k] = noted.get(k, 0) + v
            block = pred.run.features.transform(chunk.table)
            if block.labels is not None and (block.labels < 0).any():
                unknown = block.labels < 0
                skipped["unknown_label"] = skipped.get("unknown_label", 0) + int(unknown.sum())
                block = block.take(np.flatnonzero(~unknown))
            for start in range(0, len(block), BATCH_ROWS):
                b = block.slice(start, start + BATCH_ROWS)
                labels, targets = answers(b, pred.device)
                out = pred.run.model(**model_inputs(b, pred.device))
                m.update(out, b.labels, b.targets, task.loss(out, labels, targets, reduction="sum").item())
    return m, rows, skipped, noted


def evaluate_files(client: Any, run: str, plan, columns: Columns, *, storage_options: dict, run_options: dict,
                   chunk_bytes: int, window: int) -> tuple[dict, TaskMetrics]:
    """Metrics of a saved run on labelled data, computed on the workers;
    also the merged :class:`TaskMetrics` (for plots)."""
    feed = OrderedWindow(client, evaluate_partition, [(p,) for p in plan.partitions], window, columns=columns,
                      run=run, run_options=run_options, storage_options=storage_options, chunk_bytes=chunk_bytes,
                      stamp=weights_stamp(run, run_options))
    total: TaskMetrics | None = None
    rows, skipped, noted = 0, {}, {}
    for m, n, sk, nt in feed:
        total = m if total is None else total.merge(m)
        rows += n
        for k, v in sk.items():
            skipped[k] = skipped.get(k, 0) + v
        for k, v in nt.items():
            noted[k] = noted.get(k, 0) + v
    out = total.result() if total is not None else {}
    out["rows"] = {"read": rows, "evaluated": total.rows if total is not None else 0, "skipped": skipped,
                   **({"noted": noted} if noted else {})}
    return out, total
