"""Evaluation of a saved run on labelled data, over Dask partitions: each
task loads the run once per worker process, reads its partition and returns
only its streaming metrics, merged here.

A row whose label the run never saw is scored, as scikit-learn would score
the same predictions: wrong, and counted apart by label (``unseen_labels``);
in a label set, such a label is a false negative. A label the run knows in
another spelling of its value (``1.0`` for its ``1``) is read as the run's
(:mod:`~lancetnic_flow.features.label_values`), and noted (``label_as_run``).

A LinearSVM run is scored and its hinge summed in NumPy, without torch
(:meth:`.predict.Predictor.outputs`, :meth:`~lancetnic_flow.models.tasks.Task.array_loss`)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from ..data.checks import skip_hint
from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..dataflow.window import OrderedWindow
from ..errors import UserError
from ..data.readers.labels import separator_counts
from ..features.label_values import in_run_spelling, read_as_of
from ..features.labelsets import refuse_joined_sets, unseen
from ..features.rows import RowBlock
from ..features.vectorize import TRUNCATED, cut_rows
from ..models.tasks import Task, TaskMetrics
from .loading import weights_stamp
from .predict import BATCH_ROWS, predictor
from ..plurals import counted


def evaluate_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                       chunk_bytes: int, stamp: str = "") -> tuple[TaskMetrics, int, dict, dict]:
    """Worker task: the streaming metrics of one partition, rows read, skipped and noted by reason."""
    pred = predictor(run, run_options, stamp)
    columns = replace(columns, text_rule=pred.text_rule)   # the run's analyzer decides, whoever built the columns
    task = pred.run.task()
    m = task.new_metrics()
    rows, skipped, noted = 0, {}, {}
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        rows += chunk.rows_read
        for k, v in chunk.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        for k, v in chunk.noted.items():
            noted[k] = noted.get(k, 0) + v
        table = in_run_spelling(chunk.table, pred.run.features.labels, noted)
        cut: list = []
        block = pred.run.features.transform(table, cut)
        longer = int(cut_rows(cut, len(block)).sum())
        if longer:   # scored on the first --max-len tokens, as the model reads them
            noted[TRUNCATED] = noted.get(TRUNCATED, 0) + longer
        if block.labels is not None:
            flags, counts = unseen(table.column("label"), pred.run.features.labels)
            if task.multilabel:   # the rows' counts of such labels are the block's ``missed``
                m.cls.update_unseen(counts)
            elif flags.any():   # one label a row: the row has no class to score a loss with
                _score_unseen(pred, m, block.take(np.flatnonzero(flags)), counts,
                              table.column("label").combine_chunks().filter(pa.array(flags)))
                block = block.take(np.flatnonzero(~flags))
        for start in range(0, len(block), BATCH_ROWS):
            b = block.slice(start, start + BATCH_ROWS)
            out, loss = _scored(pred, task, b)
            m.update(out, b.labels, b.targets, loss, b.missed)
    return m, rows, skipped, noted


def _scored(pred, task: Task, b: RowBlock) -> tuple[dict, float]:
    """The model's outputs for ``b`` and their summed loss: in NumPy where the run is
    scored so and its loss has a NumPy form (LinearSVM's hinge), else with torch.
    A hinge is taken on the raw scores, before the logit scale fitted after
    training (which sets the probabilities): the loss the run's ``val_loss``
    reports, not a hinge at whatever scale the calibration chose."""
    scale = _fitted_scale(pred) if task.class_loss == "hinge" else 1.0
    if not pred.uses_torch:
        out = pred.outputs(b)
        loss = task.array_loss(out["logits"] / np.float32(scale), b.labels) if b.labels is not None else None
        if loss is not None:
            return out, loss
    import torch

    from ..models.inputs import answers, model_inputs

    with torch.no_grad():
        labels, targets = answers(b, pred.device)
        out = pred.run.model(**model_inputs(b, pred.device))
        raw = {**out, "logits": out["logits"] / scale} if "logits" in out and scale != 1.0 else out
        return out, task.loss(raw, labels, targets, reduction="sum").item()


def _fitted_scale(pred) -> float:
    """The logit scale the run's calibration fitted (1 where it has none)."""
    if pred.run.linear is not None:
        return float(pred.run.linear.scale)
    scale = getattr(pred.run.model, "logit_scale", None)
    return 1.0 if scale is None else float(np.asarray(scale).reshape(-1)[0])


def _score_unseen(pred, m: TaskMetrics, block: RowBlock, counts: dict[str, int], names) -> None:
    """Rows whose label the run never saw (``counts``: how many per label; ``names``: each
    row's): wrong in the class scores, counted apart, and in the confusion matrix by label.
    A multi-task run's value head is scored on them as on any row: their targets are as
    good as the others', and the rows evaluated include them."""
    outs = [pred.outputs(block.slice(s, s + BATCH_ROWS)) for s in range(0, len(block), BATCH_ROWS)]
    logits = np.concatenate([o["logits"] for o in outs]) if outs else np.zeros((0, m.cls.classes), np.float32)
    m.cls.update_unseen(counts, logits.argmax(1), names)
    if m.reg is not None and len(block):
        m.reg.update(block.targets, np.concatenate([o["value"] for o in outs]))


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
    read_as = read_as_of(noted)
    if read_as:
        out["labels_read_as"] = read_as
    unseen_rows = total.unseen_rows if total is not None else 0
    split = separator_counts(noted)   # what the separator split changed no row: said apart, not noted
    out["rows"] = {"read": rows, "evaluated": out.get("rows", 0), "skipped": skipped,
                   **({"noted": noted} if noted else {}), **({"label_sep": split} if split else {}), **({"unseen_label": unseen_rows} if unseen_rows else {})}
    return out, total


def check_label_sets_split(out: dict, labels: list[str], columns: Columns) -> None:
    """Refuse a multilabel evaluation whose labels the run never saw are the run's own labels
    joined (``sports|tech`` for a run of ``sports`` and ``tech``): the data joins each row's labels
    by a separator the run was not given (one trained on lists has none), and each such row was
    scored as missing every label it has."""
    if columns.multilabel:
        refuse_joined_sets(out.get("unseen_labels") or {}, labels, columns.label_sep)


def check_scored(data: list[str], rows: dict, columns: Columns) -> None:
    """Refuse an evaluation that scored no row (a header-only file, a --label or
    --target column with no usable value): its scores would all be None, and exit 0
    would pass a wrong column off as a finished evaluation."""
    if rows.get("evaluated"):
        return
    names = ", ".join(data)
    skipped = {k: n for k, n in (rows.get("skipped") or {}).items() if n}
    if not skipped:
        raise UserError(f"no rows to evaluate in {names}", "the input holds a header only; check the file and --format")
    reasons = ", ".join(f"{n:,} {k}" for k, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
    raise UserError(f"no rows to evaluate in {names}: {counted(rows.get('read', 0), 'row')} read, "
                    f"{sum(skipped.values()):,} skipped ({reasons})",
                    skip_hint(max(skipped, key=skipped.get), label=columns.label, target=columns.target,
                              text=columns.text))
