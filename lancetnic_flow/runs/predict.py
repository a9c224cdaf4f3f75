"""Prediction with a saved run: one output row for every input row, in order.

:class:`Predictor` works in-process on a list of texts, a NumPy array, a
pandas Series or DataFrame, or an Arrow table, in batches so memory stays
bounded. :func:`predict_files` runs over Dask partitions: each task loads
the run once per worker process (:func:`predictor`), reads its partition
with every row kept, and returns its output table, written in input order
as CSV, JSON Lines or Parquet (:mod:`.outputs`).

A row that cannot be predicted (empty or missing text, a malformed or
undecodable line) is never dropped: it gets empty prediction columns and a
``status`` naming the reason; every other row has status ``ok``.

A LinearSVM run (the default model) is scored in NumPy without importing
torch (:mod:`.linear_scores`); every other model through its torch network,
torch imported when such a run is loaded.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.heads import keys_ahead
from ..data.frames import as_table, input_rows, is_table, like_input
from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..data.usable import text_rule
from ..dataflow.window import OrderedWindow
from ..errors import RunWarning, UserError
from ..features.rows import RowBlock
from ..features.vectorize import TRUNCATED, cut_rows
from ..models.tasks import labels_taken
from ..registry import task_kind
from . import asks
from .linear_scores import sigmoid, softmax
from .held_runs import HeldRuns, room_for_runs, run_bytes, worker_memory
from .loading import LoadedRun, load_run, weights_stamp
from .outputs import BytesAfterText, OutputFile, check_output_place, output_format, output_names
from ..plurals import counted, verb
from ..storage import options_for, refuse_existing_file, refuse_local_storage_options

BATCH_ROWS = 4096
# Scores (rows × labels) made at once when predicting a table: the logits, their
# probabilities and their order by probability are each this many cells. A partition
# of a run with thousands of labels scored whole outgrew its worker (docs/memory.md).
SCORE_CELLS = 1 << 21



def _said(param: str, flag: str, message: str, hint: str) -> UserError:
    """An error about an argument the Python API (and serve's JSON) names ``param``
    and the command line ``flag``: each reader is told its own name."""
    return UserError(message.format(param), hint.format(param), cli=(message.format(flag), hint.format(flag)))

class Predictor:
    """A trained run, ready to predict: ``Predictor("runs/x").predict(["text"])``.

    Classifiers give a label and its probability, regressors a value in the
    target's original units, multi-task models both. Every method returns
    one result per input row, in order; rows without usable text get empty
    results and a status."""

    def __init__(self, run: str | LoadedRun, storage_options: dict | None = None, device: str = "cpu",
                 numpy: bool = True):
        # numpy: a LinearSVM run scored without torch (False: through its torch network, as any other model).
        if not isinstance(run, LoadedRun):   # options for a run on this machine's disk would open nothing
            refuse_local_storage_options(storage_options, {"the run": str(run)})
        self.run = run if isinstance(run, LoadedRun) else load_run(run, storage_options, device, numpy)
        self.device_name = str(device)
        self.labels = self.run.features.labels
        kw = self.run.meta["kwargs"]
        self.classifies = bool(kw.get("classes"))
        self.regresses = bool(kw.get("regress"))
        # A multilabel run: a sigmoid probability per label, every label at or above its threshold
        # (the run's own, chosen per label on its validation rows; 0.5 for a run without them).
        self.multilabel = task_kind(self.run.meta) == "multilabel"
        saved = self.run.meta.get("thresholds") if self.multilabel else None
        self.thresholds = np.asarray(saved if saved else [0.5] * len(self.labels), np.float64)
        data = self.run.config.get("data", {})
        self.text_columns = tuple(data.get("text") or ("text",))
        self.numeric = tuple(data.get("numeric") or ())
        self.text_rule = text_rule(self.run.features)   # which texts its analyzer reads: the others are empty_text
        self._decomposition = None
        # Texts of the last call given no ``cut`` that held more tokens than the run's --max-len
        # (a sequence run reads the first ones): what predict --input notes as longer_than_max_len.
        self.longer_than_max_len = 0

    @property
    def device(self):
        """The torch device the network runs on (imports torch)."""
        import torch

        return torch.device(self.device_name)

    @property
    def uses_torch(self) -> bool:
        """Whether this run is scored by its torch network (False: in NumPy, a LinearSVM run)."""
        return self.run.linear is None

    # ------------------------------------------------------------ inputs

    def rows(self, data: Any, keep: Sequence[str] | str | None = None,
             text_column: str | Sequence[str] | None = None) -> pa.Table:
        """``data`` as rows: ``text``, numeric inputs, kept columns (``keep:NAME``) and ``status``.
        ``text_column``: the column(s) holding the text in a table (default: the run's)."""
        text = (text_column,) if isinstance(text_column, str) else tuple(text_column or self.text_columns)
        table = input_rows(data, text, keep, self.numeric, self.text_rule).table
        if "status" not in table.column_names:   # no rows at all
            table = table.append_column("status", pa.array([], pa.string()))
        return table

    def outputs(self, block: RowBlock) -> dict[str, np.ndarray]:
        """The model's raw outputs (``logits`` and/or ``value``, standardised) for a
        block of feature rows: in NumPy for a LinearSVM run, else from the torch network."""
        if self.run.linear is not None:
            return {"logits": self.run.linear.logits(block)}
        import torch

        from ..models.inputs import model_inputs

        with torch.no_grad():
            return {k: v.cpu().numpy() for k, v in self.run.model(**model_inputs(block, self.device)).items()}

    def _model_outputs(self, table: pa.Table, cut: list | None = None) -> dict[str, np.ndarray]:
        """Raw outputs for every row of ``table`` (text and numeric columns), in batches;
        ``cut`` as :meth:`~..features.vectorize.FittedFeatures.transform` takes it."""
        table = table.select([c for c in table.column_names if c == "text" or c in self.numeric])
        parts: dict[str, list[np.ndarray]] = {}
        for start in range(0, table.num_rows, BATCH_ROWS):
            block = self.run.features.transform(table.slice(start, BATCH_ROWS), cut)
            for k, v in self.outputs(block).items():
                parts.setdefault(k, []).append(v)
        out = {k: np.concatenate(v) for k, v in parts.items()}
        if self.classifies and "logits" not in out:
            out["logits"] = np.zeros((0, len(self.labels)), np.float32)
        if self.regresses:
            mean, std = self.run.features.target or (0.0, 1.0)
            out["value"] = out.get("value", np.zeros(0, np.float32)).astype(np.float64) * std + mean
        return out

    def feature_rows(self, data: Any, text_column: str | Sequence[str] | None = None,
                     cut: list | None = None) -> RowBlock:
        """``data``'s rows as the model's CSR input rows, every row in its place: one that
        cannot be predicted (no text) is an empty row, which :meth:`predict` reports by its status.
        ``cut`` as :meth:`predict` takes it."""
        rows = self.rows(data, text_column=text_column)
        table = rows.select([c for c in rows.column_names if c == "text" or c in self.numeric])
        table = table.set_column(table.column_names.index("text"), "text",
                                 pc.fill_null(table["text"].cast(pa.string()), ""))
        mine = [] if cut is None else cut
        block = self.run.features.transform(table, mine)
        if cut is None:
            self.note_cut(mine)
        return block

    def featurize(self, data: Any, text_column: str | Sequence[str] | None = None, *,
                  cut: list | None = None) -> dict[str, np.ndarray]:
        """The inputs of the run's ONNX graph (``lancetnic-flow export RUN --onnx FILE``) for
        ``data`` (texts, or a table with the run's text and numeric columns), keyed by the
        graph's input names: ``session.run(None, pred.featurize(texts))`` gives what
        :meth:`predict` computes. One row per input row (see :meth:`feature_rows`), padded
        to the longest (docs/serving.md): give it bounded batches, its size is rows × the longest row.
        Texts read only to the run's ``--max-len``: as :meth:`predict` says them (``cut`` alike)."""
        from ..models.onnx_graph import graph_inputs

        return graph_inputs(self.run.model, self.feature_rows(data, text_column, cut))

    def note_cut(self, cut: list) -> int:
        """The texts ``cut`` marks as read only to the run's ``--max-len`` (the masks a call
        appended to it), kept in :attr:`longer_than_max_len` and, when any, said once as a
        :class:`~lancetnic_flow.errors.RunWarning`, as ``predict --input`` notes them."""
        n = int(cut_rows(cut, 0).sum())
        self.longer_than_max_len = n
        if n:
            warnings.warn(cut_message(n, self.run.features.max_len), RunWarning, stacklevel=3)
        return n

    def scores(self, rows: pa.Table, cut: list | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(indices of the rows with status ok, their outputs: ``proba`` and ``logits``, and/or ``value``).
        Labels are ranked by their logits: a float32 probability rounds a confident model's
        unlikely labels to 0.0 alike (and its likely ones to 1.0), the logits keep their order.
        ``cut`` (a list; sequence runs): a mask of the ok rows cut at ``--max-len`` is appended
        to it per batch (:func:`~..features.vectorize.cut_rows` joins them)."""
        ok = np.flatnonzero(pc.equal(rows["status"], "ok").to_numpy(zero_copy_only=False))
        usable = rows if len(ok) == rows.num_rows else rows.take(pa.array(ok))
        out = self._model_outputs(usable, cut)
        scored: dict[str, np.ndarray] = {}
        if self.classifies:
            scored["logits"] = out["logits"]
            scored["proba"] = self.probabilities(out["logits"])
        if self.regresses:
            scored["value"] = out["value"]
        return ok, scored

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """The probabilities of ``logits`` (rows × labels, float32): softmax, or a multilabel run's
        sigmoid per label; in NumPy for a run scored so, else by torch, as its network's are.
        Every answer of the run (predict, explain, serve) takes them from here, bit for bit alike."""
        if not self.uses_torch:   # in NumPy: equal to torch's within float32 rounding
            return sigmoid(logits) if self.multilabel else softmax(logits)
        import torch

        z = torch.from_numpy(np.ascontiguousarray(logits, np.float32))
        return (torch.sigmoid(z) if self.multilabel else torch.softmax(z, dim=1)).numpy()

    # ------------------------------------------------------------ explanations

    def decomposition(self):
        """The run's network as affine maps from its terms to its outputs
        (:class:`~.explain.Decomposition`), made once; a :class:`UserError` for a
        sequence model, whose output is not a sum over terms."""
        if self._decomposition is None:
            from .explain import Decomposition

            self._decomposition = Decomposition.of(self.run)
        return self._decomposition

    def explain(self, data: Any, top: int = 10, label: str | None = None,
                text_column: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Why each row is predicted as it is: one dict per input row, in order, with
        ``status``; the explained ``label`` (the predicted one, or ``label``), its
        ``probability`` and ``logit`` (a regressor: its ``value``; a multitask run: both, the value's
        own decomposition under ``value_explained``); ``terms``, the ``top``
        terms of the text by the size of their ``contribution`` (``value`` in the row ×
        ``weight``; with the ``feature`` id, and a hashed term's ``count`` in the text);
        ``rest``, the other terms' contributions summed; ``bias``; and ``method``: ``exact``
        (a linear or bag model: contributions + rest + bias = the logit) or ``local`` (ReLU
        hidden layers: the same sum, exact at this text only). None where a row cannot be
        predicted. A sequence model (Lancet*) is a :class:`UserError`: its output is no sum
        over terms. See docs/python.md and runs/explain.py."""
        from .explain import explain

        return explain(self, data, top=top, label=label, text_column=text_column)

    # ------------------------------------------------------------ results

    def predict_proba(self, data: Any, *, cut: list | None = None) -> np.ndarray:
        """Class probabilities, one row per input row, columns in ``self.labels``
        order; a row that cannot be predicted is all NaN. A multilabel run gives
        each label's own (sigmoid) probability: a row's do not sum to 1.
        ``cut`` as :meth:`predict` takes it."""
        if not self.classifies:
            raise UserError(f"{self.run.url} is a regression model: it predicts values, not probabilities",
                            "use predict() or predict_values()")
        rows = self.rows(data)
        mine = [] if cut is None else cut
        ok, scored = self.scores(rows, mine)
        if cut is None:
            self.note_cut(mine)
        full = np.full((rows.num_rows, len(self.labels)), np.nan, np.float32)
        full[ok] = scored["proba"]
        return full

    def predict_values(self, data: Any, *, cut: list | None = None) -> np.ndarray:
        """Predicted target values in the original units; NaN for a row that cannot be predicted.
        ``cut`` as :meth:`predict` takes it."""
        if not self.regresses:
            raise UserError(f"{self.run.url} is a classifier: it has no value head", "use predict()")
        rows = self.rows(data)
        mine = [] if cut is None else cut
        ok, scored = self.scores(rows, mine)
        if cut is None:
            self.note_cut(mine)
        full = np.full(rows.num_rows, np.nan)
        full[ok] = scored["value"]
        return full

    def cuts(self, threshold: float | None = None) -> np.ndarray:
        """A multilabel run's probability threshold per label: ``threshold`` for
        every label when given, else the run's own (:attr:`thresholds`)."""
        return self.thresholds if threshold is None else np.full(len(self.labels), float(threshold))

    def predict(self, data: Any, top_k: int | None = None,
                text_column: str | Sequence[str] | None = None, threshold: float | None = None,
                *, cut: list | None = None) -> list[dict[str, Any]]:
        """One dict per input row: ``status``, then ``label`` and ``probability``
        (with ``top_k``, also ``top_labels`` and ``top_probabilities``) and/or
        ``value``; None where the row cannot be predicted. A multilabel run
        gives ``labels`` (those with probability ≥ their threshold: ``threshold``
        for every label, or by default the run's own per label; decided on the logits,
        as evaluate and the ONNX graph decide: :func:`~..models.tasks.labels_taken`; most
        likely first) and their ``probabilities``.

        A sequence run reads a text's first ``--max-len`` tokens: the texts that held
        more are counted in :attr:`longer_than_max_len` and said in one
        :class:`~lancetnic_flow.errors.RunWarning` (:meth:`note_cut`); given ``cut`` (a
        list), their masks are appended to it instead, for the caller to count
        (:func:`~..features.vectorize.cut_rows`), and nothing is said."""
        self.check_asks(top_k, threshold)
        mine = [] if cut is None else cut
        out = self._predict(self.rows(data, text_column=text_column), top_k, threshold, mine)
        if cut is None:
            self.note_cut(mine)
        return out

    def _predict(self, rows: pa.Table, top_k: int | None, threshold: float | None, cut: list
                 ) -> list[dict[str, Any]]:
        if self.multilabel:
            return self.label_sets(rows, threshold, self.top(top_k), cut)
        top_k = self.top(top_k)
        cols = self.prediction_columns(rows, top_k, cut=cut)
        out: list[dict[str, Any]] = [{"status": s} for s in rows["status"].to_pylist()]
        names = {"predicted": "label", "probability": "probability", "predicted_value": "value"}
        for name, key in names.items():
            if name in cols:
                for d, v in zip(out, cols[name].to_pylist()):
                    d[key] = v
        if top_k:
            labels = [cols[f"label_{i}"].to_pylist() for i in range(1, top_k + 1)]
            probs = [cols[f"probability_{i}"].to_pylist() for i in range(1, top_k + 1)]
            for j, d in enumerate(out):
                d["top_labels"] = None if d["status"] != "ok" else [lab[j] for lab in labels if lab[j] is not None]
                d["top_probabilities"] = None if d["status"] != "ok" else [p[j] for p in probs if p[j] is not None]
        return out

    def check_asks(self, top_k: int | None, threshold: float | None) -> None:
        """Refuse what this run cannot do rather than ignore it: ``top_k`` on a
        run that predicts no label, ``threshold`` on one that predicts one
        label a row (its most probable); a ``top_k`` or ``threshold`` the command
        line would refuse (:mod:`.asks`)."""
        asks.count(top_k, "top_k", 3)
        asks.threshold(threshold)
        if top_k and not self.classifies:
            raise _said("top_k", "--top-k", "{} ranks labels: this run is a regression model", "drop {}")
        if threshold is not None and not self.multilabel:
            raise _said("threshold", "--threshold", "{} applies to a multilabel run: this run predicts one label "
                        "a row, its most probable", "drop {}")

    def top(self, top_k: int | None) -> int | None:
        """``top_k`` capped at the run's labels: ranks past the last label hold
        nothing (asking for more gives every label, once each)."""
        return min(int(top_k), len(self.labels)) if top_k and self.labels else top_k

    def _ranked(self, p: np.ndarray, threshold: float | None, logits: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(label ids most likely first, by their ``logits``; their probabilities ``p``;
        whether each is taken) per row."""
        order = np.argsort(-logits, axis=1, kind="stable")
        ranked = np.take_along_axis(p, order, axis=1)
        return order, ranked, np.take_along_axis(labels_taken(logits, self.cuts(threshold)), order, axis=1)

    def label_sets(self, rows: pa.Table, threshold: float | None = None, top_k: int | None = None,
                   cut: list | None = None) -> list[dict[str, Any]]:
        """A multilabel run's predictions for ``rows``: per row ``status``,
        ``labels`` at or above their threshold (see :meth:`predict`; most likely
        first) and their ``probabilities``, with ``top_k`` also the ``top_k``
        most probable labels whether taken or not (``top_labels``,
        ``top_probabilities``); None for a row that cannot be predicted.
        ``cut`` as :meth:`scores` takes it."""
        ok, scored = self.scores(rows, cut)
        top = {"top_labels": None, "top_probabilities": None} if top_k else {}
        out: list[dict[str, Any]] = [{"status": s, "labels": None, "probabilities": None, **top}
                                     for s in rows["status"].to_pylist()]
        order, ranked, taken = self._ranked(scored["proba"], threshold, scored["logits"])
        # One list per row of the output, which is what the caller asks for; the scoring above is batched.
        names = np.asarray(self.labels, dtype=object)
        for i, row in enumerate(ok.tolist()):
            out[row]["labels"] = names[order[i][taken[i]]].tolist()
            out[row]["probabilities"] = ranked[i][taken[i]].astype(float).tolist()
            if top_k:
                out[row]["top_labels"] = names[order[i][:top_k]].tolist()
                out[row]["top_probabilities"] = ranked[i][:top_k].astype(float).tolist()
        return out

    def prediction_columns(self, rows: pa.Table, top_k: int | None = None,
                           threshold: float | None = None, cut: list | None = None) -> dict[str, pa.Array]:
        """The prediction columns for ``rows`` (see :func:`~.outputs.output_names`), null where
        the status is not ok. A multilabel run's ``predicted`` and ``probabilities``
        are lists: the labels at or above their threshold (see :meth:`predict`), most likely first.
        Scored :meth:`rows_per_slice` rows at a time: a slice's scores, probabilities and
        their order are rows × labels each, whatever the partition's rows. ``cut`` as
        :meth:`scores` takes it."""
        self.check_asks(top_k, threshold)
        step = self.rows_per_slice()
        if rows.num_rows <= step:
            return self._slice_columns(rows, top_k, threshold, cut)
        parts = [self._slice_columns(rows.slice(s, step), top_k, threshold, cut)
                 for s in range(0, rows.num_rows, step)]
        return {k: pa.concat_arrays([p[k] for p in parts]) for k in parts[0]}

    def rows_per_slice(self) -> int:
        """Rows scored at once: :data:`SCORE_CELLS` scores (rows × labels)."""
        return max(1, SCORE_CELLS // max(1, len(self.labels)))

    def _slice_columns(self, rows: pa.Table, top_k: int | None, threshold: float | None,
                       cut: list | None = None) -> dict[str, pa.Array]:
        ok, scored = self.scores(rows, cut)
        n = rows.num_rows
        cols: dict[str, pa.Array] = {}
        top_k = self.top(top_k)

        def spread(values: np.ndarray, type_: pa.DataType, labels: bool = False) -> pa.Array:
            mask = np.ones(n, bool)
            mask[ok] = False
            full = np.zeros(n, np.int64 if labels else np.float64)
            full[ok] = values
            if labels:
                return pc.take(pa.array(self.labels, pa.string()), pa.array(full, mask=mask))
            return pa.array(full, type_, mask=mask)

        if self.classifies:
            p = scored["proba"]
            order = np.argsort(-scored["logits"], axis=1, kind="stable")[:, :max(1, top_k or 1)]
            best = order[:, 0] if len(p) else np.zeros(0, np.int64)
            if self.multilabel:
                cols.update(self._label_set_columns(n, ok, p, threshold, scored["logits"]))
            else:
                cols["predicted"] = spread(best, pa.string(), labels=True)
                cols["probability"] = spread(p[np.arange(len(p)), best], pa.float64())
            for i in range(1, (top_k or 0) + 1):
                k = i - 1
                cols[f"label_{i}"] = spread(order[:, k], pa.string(), labels=True)
                cols[f"probability_{i}"] = spread(p[np.arange(len(p)), order[:, k]], pa.float64())
        if self.regresses:
            cols["predicted_value"] = spread(scored["value"], pa.float64())
        return cols

    def _label_set_columns(self, n: int, ok: np.ndarray, p: np.ndarray, threshold: float | None,
                           logits: np.ndarray) -> dict[str, pa.Array]:
        """List columns of the labels at or above their threshold per row, most likely first
        (vectorised: one sort, one mask, list offsets from the counts)."""
        order, ranked, taken = self._ranked(p, threshold, logits)
        counts = np.zeros(n, np.int64)
        counts[ok] = taken.sum(1)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        mask = np.ones(n, bool)
        mask[ok] = False
        names = pc.take(pa.array(self.labels, pa.string()), pa.array(order[taken]))
        probs = pa.array(ranked[taken].astype(np.float64))
        missing = pa.array(mask)
        return {"predicted": pa.ListArray.from_arrays(pa.array(offsets), names, mask=missing),
                "probabilities": pa.ListArray.from_arrays(pa.array(offsets), probs, mask=missing)}

    def output_table(self, rows: pa.Table, top_k: int | None = None, inputs: pa.Table | None = None,
                     threshold: float | None = None, cut: list | None = None) -> pa.Table:
        """What prediction writes: the input columns (``inputs``; else the kept
        ``keep:NAME`` columns of ``rows``, or its ``text``), ``status`` and the
        prediction columns. ``cut`` as :meth:`scores` takes it."""
        if inputs is None:
            kept = [c for c in rows.column_names if c.startswith("keep:")] or ["text"]
            inputs = rows.select(kept).rename_columns([c.removeprefix("keep:") for c in kept])
        clash = set(inputs.column_names) & set(self.output_names(top_k))
        if clash:
            message = f"the input column {sorted(clash)[0]!r} has the name of a prediction column"
            raise UserError(message, "keep other columns (keep=[COL, ...]), or rename that column",
                            cli=(message, "keep other columns (--keep COL,...), or rename that column"))
        table = inputs.append_column("status", rows["status"])
        for name, col in self.prediction_columns(rows, top_k, threshold, cut).items():
            table = table.append_column(name, col)
        return table

    def output_names(self, top_k: int | None = None) -> list[str]:
        """The columns prediction adds to the input's."""
        return output_names(self.classifies, self.regresses, self.top(top_k), self.multilabel)

    def predict_table(self, data: Any, keep: Sequence[str] | str | None = "all", top_k: int | None = None,
                      text_column: str | Sequence[str] | None = None, threshold: float | None = None):
        """``data``'s columns (``keep``: "all", a list of names, or None for
        just the text), as they are, plus ``status`` and the prediction
        columns; a pandas DataFrame for pandas input (with its index, so a column assigned back
        lines up), a polars one for polars, an Arrow table otherwise. Texts read only to the
        run's ``--max-len``: as :meth:`predict` says them."""
        rows = self.rows(data, text_column=text_column)
        cut: list = []
        if not is_table(data) or keep is None:
            out = self.output_table(rows, top_k, threshold=threshold, cut=cut)
        else:
            source = as_table(data)
            names = source.column_names if keep == "all" else list(keep)
            for c in names:
                if c not in source.column_names:
                    raise UserError(f"keep: no column {c!r} (the columns: {', '.join(source.column_names)})",
                                    "name columns of the input")
            out = self.output_table(rows, top_k, inputs=source.select(names), threshold=threshold, cut=cut)
        self.note_cut(cut)
        return like_input(data, out)


def unread_message(texts: list[str], features) -> str:
    """What a prediction says of ``texts`` given that hold no term the run's ``features`` read
    (status ``empty_text``): the text is there, its words are not ones the run reads."""
    shown = ", ".join(repr(t if len(t) <= 40 else t[:39] + "…") for t in texts[:3]) + (", …" if len(texts) > 3 else "")
    analyzer = getattr(features, "analyzer", "word")
    if analyzer != "word":
        reads = f"{analyzer} n-grams"
    else:
        tokenizer, least = getattr(features, "tokenizer", None), getattr(features, "ngram_min", 1) or 1
        reads = (f"the tokens of its tokenizer {tokenizer}" if tokenizer else "words of two or more letters or digits")
        reads += (", not its stop words" if getattr(features, "stop_words", None) else "") + (
            f", {least} or more of them" if least > 1 else "")
    return (f"{counted(len(texts), 'text')} ({shown}) {verb(len(texts), 'holds', 'hold')} no term the run reads "
            f"(its {analyzer} analyzer reads {reads}), so {verb(len(texts), 'it was', 'they were')} not predicted "
            "(status empty_text)")


def cut_message(n: int, max_len: int) -> str:
    """What a prediction says of ``n`` texts read only to ``max_len`` tokens (the words of
    ``predict --input``'s line, and its key)."""
    return (f"{counted(n, 'text')} held more tokens than the run's --max-len {max_len}: the model read the first "
            f"{max_len} of each ({TRUNCATED}; a run trained with a larger --max-len reads more)")


_PREDICTORS = HeldRuns()
_LOADING = threading.Lock()


def predictor(run: str, storage_options: dict, stamp: str = "") -> Predictor:
    """A loaded run, kept in this process and reused by every task while ``stamp``
    (:func:`~.loading.weights_stamp`) says the weights in ``run`` are the same:
    a run folder written again is loaded again, by a long-lived worker too.
    A worker keeps the runs it served, least recently used dropped first, while they
    fit :func:`~.held_runs.room_for_runs` (its memory limit's band between Dask's
    target line and the worker's spill line, or its pause line where sooner, beside
    the run its plan holds: :func:`~.held_runs.worker_memory`): two commands sharing
    it load each run once, and one that served many runs holds no more than that
    room. Outside a worker (no limit known) one run is kept."""
    key = (run, stamp)
    with _LOADING:   # tasks on threads of one process (a worker's, or dataflow/inprocess.py's) load it once
        if key not in _PREDICTORS:
            size = run_bytes(run, storage_options)
            _PREDICTORS.make_room(run, size, room_for_runs(size, worker_memory()))
            pred = Predictor(run, storage_options)
            if pred.uses_torch:   # one thread a task: the worker's other tasks have the other cores
                import torch

                torch.set_num_threads(1)
            _PREDICTORS.put(key, pred, size)
        return _PREDICTORS.get(key)


def predict_partition(part: Partition, columns: Columns, run: str, run_options: dict, storage_options: dict,
                      chunk_bytes: int, top_k: int | None, threshold: float | None = None, stamp: str = ""
                      ) -> tuple[list[pa.Table], int, dict]:
    """Worker task: one partition's output tables (every row, in order), rows read, statuses
    (with the rows predicted whose values were read changed: ``noted:REASON``; a sequence
    run's rows read only to ``--max-len`` tokens among them, as evaluate counts them)."""
    pred = predictor(run, run_options, stamp)
    columns = replace(columns, text_rule=pred.text_rule)   # the run's analyzer decides, whoever built the columns
    out, rows, statuses = [], 0, {}
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        rows += chunk.rows_read
        for k, v in [*chunk.skipped.items(), *((f"noted:{k}", v) for k, v in chunk.noted.items())]:
            statuses[k] = statuses.get(k, 0) + v
        if chunk.table.num_rows:
            cut: list = []
            out.append(pred.output_table(chunk.table, top_k, threshold=threshold, cut=cut))
            longer = int(cut_rows(cut, 0).sum())
            if longer:
                statuses[f"noted:{TRUNCATED}"] = statuses.get(f"noted:{TRUNCATED}", 0) + longer
    return out, rows, statuses


def predict_files(client: Any, run: str, plan, columns: Columns, output: str, *, storage_options: dict,
                  run_options: dict, chunk_bytes: int, window: int, top_k: int | None = None,
                  threshold: float | None = None, force: bool = False) -> dict:
    """Predict every row of ``plan`` into ``output`` (CSV, JSON Lines or Parquet by
    its name), one output row per input row, in input order; a CSV file's fields are split
    by ``columns.delimiter``, as CSV inputs are read. An ``output`` that is a
    file already is refused unless ``force=True``; one that is an input or a run
    folder's own file is refused even then, before any work. Returns the counts:
    ``rows_read``, ``rows_written``, ``predicted`` and ``not_predicted`` by reason, and
    ``noted`` (when any): rows predicted with a value read changed, by reason
    (``unreadable_numeric``: a ``--numeric`` value that is no number, read as the mean;
    ``longer_than_max_len``: a sequence run's text of more tokens than it reads)."""
    check_output_place(output, storage_options, [f.url for f in plan.files], flag="output")   # its keyword
    if not force:
        refuse_existing_file(output, options_for(output, storage_options), f"output {output}", "predict_files",
                             "pass force=True to replace it, or give another path")
    columns = Columns(text=columns.text, numeric=columns.numeric, keep=columns.keep, keep_all=columns.keep_all,
                      all_rows=True, encoding=columns.encoding, delimiter=columns.delimiter,
                      text_rule=columns.text_rule)
    # --keep all of JSON Lines files: their columns, decided before any block is read (outputs.OutputFile)
    inputs = keys_ahead(plan.files, storage_options, columns.encoding) if columns.keep_all else None
    as_bytes: list[str] = []
    while True:
        # A kept column of a text file is text until a block holds a value that is not UTF-8; a Parquet
        # or Arrow file that wrote it as text by then is written again with it as bytes from its start.
        feed = OrderedWindow(client, predict_partition, [(p,) for p in plan.partitions], window, columns=columns,
                             run=run, run_options=run_options, storage_options=storage_options,
                             chunk_bytes=chunk_bytes, top_k=top_k, threshold=threshold,
                             stamp=weights_stamp(run, run_options))
        try:
            rows, written, statuses = _write_output(feed, plan, output, storage_options, inputs, as_bytes,
                                                    columns.delimiter)
            break
        except BytesAfterText as later:
            as_bytes += later.names
    if written != rows:   # a reader that lost a row: never silently
        raise RuntimeError(f"prediction read {rows:,} rows but wrote {written:,}: please report this")
    noted = {k.split(":", 1)[1]: statuses.pop(k) for k in [k for k in statuses if k.startswith("noted:")]}
    return {"output": output, "format": output_format(output), "rows_read": rows, "rows_written": written,
            "predicted": written - sum(statuses.values()), "not_predicted": statuses,
            **({"noted": noted} if noted else {})}


def _write_output(feed, plan, output: str, storage_options: dict, inputs: list[str] | None,
                  as_bytes: list[str], delimiter: str | None) -> tuple[int, int, dict]:
    """The tables of ``feed`` written into ``output`` (a CSV file's fields split by ``delimiter``,
    as its inputs': it reads back with their options): the rows read, the rows written, the statuses."""
    rows, written, statuses = 0, 0, {}
    with OutputFile(output, storage_options, inputs=inputs, as_bytes=as_bytes, delimiter=delimiter) as f:
        for tables, n, st in feed:
            for t in tables:
                f.write(t)
                written += t.num_rows
            rows += n
            for k, v in st.items():
                statuses[k] = statuses.get(k, 0) + v
        if not rows:   # raised inside: the output is not left as a file of no bytes that no reader opens
            raise UserError(f"no rows to predict in {', '.join(f.url for f in plan.files)} (a header, or nothing)",
                            "give files that hold rows")
    return rows, written, statuses


__all__ = ["Predictor", "predict_files", "predictor", "as_table", "cut_message", "unread_message"]
