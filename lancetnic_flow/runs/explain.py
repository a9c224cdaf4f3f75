"""Why a run predicts what it does: each prediction's terms with their
contributions (``Predictor.explain``, ``lancetnic-flow explain``, ``serve``'s
``POST /explain``), and each class's strongest terms (``top_terms.csv``).

What is available depends on the network:

* **exact** — a network whose outputs are affine in its sparse input:
  LinearSVM (no hidden layer: ``logits = (x·W + b) × logit_scale``),
  FastTextBag and any Scalpel network with ``activation="identity"`` (the
  layers compose into one matrix). A term's contribution to an output is its
  value in the row (``x``) times its weight (the composed matrix's entry);
  the contributions of a text's terms plus the bias are the output the
  predictor computes, up to float rounding. These networks also get
  ``top_terms.csv``: each class's terms of largest weight.
* **local** — a Scalpel network with ReLU hidden layers (ScalpelMC,
  ScalpelReg, ScalpelMTSK): at a given text every ReLU is on or off, and with
  that pattern held the network is affine; its contributions (gradient ×
  input) plus the local bias (the biases carried through the units that
  are on) are that text's output exactly. They hold for that text only: the
  same term weighs otherwise in another text. So no ``top_terms.csv``: a
  class's term weights are not one number per term.
* **not available** — the sequence models (Lancet*): an LSTM or GRU reads
  the tokens in order, so its output is not a sum over terms; explaining
  such a run is a :class:`~lancetnic_flow.errors.UserError` saying so.

The terms come from the text itself (:func:`~lancetnic_flow.features.names.text_terms`):
a hashed bucket needs no reverse map. When several terms of one text fall
into one bucket, each carries its own share of the bucket's value (by its
count in the text), with the bucket's weight: the sum is unchanged. A
vocabulary feature is named by its vocabulary entry. Numeric input columns
(``--numeric``) contribute as ``[numeric] NAME``.

The arithmetic is NumPy's on the run's weights (float64), so a LinearSVM run
is explained without importing torch, as it is predicted.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from ..errors import UserError
from ..features.label_values import run_label
from ..models.tasks import labels_taken
from ..registry import task_kind
from ..storage import join, write_bytes
from .asks import count

#: Terms a prediction lists by default (the rest are summed in ``rest``).
TOP = 10
#: top_terms.csv: terms per class, and the classes it covers (the first, most training rows first).
TOP_TERMS, MAX_CLASSES = 20, 1000
# Rows explained at once (Predictor's batches): bounds the feature rows and outputs held.
BATCH = 4096
# Rows of weights composed at once for top_terms.csv: bounds the temporary (rows × outputs, float64).
CHUNK = 8192


def _not_available(meta: dict, why: str) -> UserError:
    name = meta.get("model") or meta.get("net", "this network")
    return UserError(f"explain is not available for a {name} run: {why}",
                     "explain works for the bag-of-terms models: LinearSVM, FastTextBag, ScalpelMC, ScalpelReg, "
                     "ScalpelMTSK; predict still gives this run's predictions")


class Decomposition:
    """A Scalpel network (``meta``: its ``model.json``; ``state``: its weights as
    NumPy arrays by name) as affine maps from its first layer's sum to its
    outputs (the classes' logits, then the value, in the target's units).
    A :class:`UserError` for a network that is not a sum over terms."""

    def __init__(self, meta: dict, state: dict[str, np.ndarray], target: tuple[float, float] | None = None):
        kw = meta.get("kwargs") or {}
        if meta.get("net", "ScalpelNet") != "ScalpelNet":
            why = ("a sequence model reads the tokens in order (an LSTM or GRU over token ids), so its output is "
                   "not a sum of per-term contributions" if meta.get("net") == "SequenceNet"
                   else f"its network {meta.get('net')!r} is not a bag of terms this version can decompose")
            raise _not_available(meta, why)
        # The input rows stay as stored (float32: a float64 copy of 2^19 buckets × 135 labels is 566 MB,
        # which the trainer's plan does not hold at its save); the rest, small, in float64. Rows are
        # widened as they are read (E[ids], E[start:stop]).
        f64 = {k: np.asarray(v) if k == "input.weight" else np.asarray(v, np.float64) for k, v in state.items()}
        self.classes, self.regress = int(kw.get("classes") or 0), bool(kw.get("regress"))
        layers, act = int(kw.get("layers", 1)), kw.get("activation", "relu")
        self.mean_pooling = kw.get("pooling", "weighted") == "mean"
        self.E, self.bE = f64["input.weight"], f64["input.bias"]
        self.N = f64.get("numeric.weight")   # width × numeric columns
        self.width = self.E.shape[1]
        # The body: ("relu",) or ("linear", W, b) steps; dropout is off when predicting.
        self.steps: list[tuple] = []
        for i in range(layers):
            if act == "relu":
                self.steps.append(("relu",))
            if i < layers - 1:
                self.steps.append(("linear", f64[f"body.{3 * i + 2}.weight"], f64[f"body.{3 * i + 2}.bias"]))
        mean, std = target or (0.0, 1.0)
        if layers > 0:
            heads = []
            if self.classes:
                heads.append((f64["heads.classify.weight"], f64["heads.classify.bias"]))
            if self.regress:
                w, b = f64["heads.regress.weight"], f64["heads.regress.bias"]
                heads.append((w * std, b * std + mean))
            self.head = (np.concatenate([h[0] for h in heads]), np.concatenate([h[1] for h in heads]))
        else:   # the sum's first columns are the logits (× logit_scale for LinearSVM), its last the value
            scale = float(f64["logit_scale"]) if "logit_scale" in f64 else 1.0
            rows = [np.eye(self.width)[c] * scale for c in range(self.classes)]
            bias = [0.0] * self.classes
            if self.regress:
                rows.append(np.eye(self.width)[self.width - 1] * std)
                bias.append(mean)
            self.head = (np.stack(rows), np.asarray(bias, np.float64))
        self.exact = all(s[0] != "relu" for s in self.steps)
        self.method = "exact" if self.exact else "local"

    @classmethod
    def of(cls, run: Any) -> "Decomposition":
        """The decomposition of a :class:`~.loading.LoadedRun` (torch imported only for a network it holds)."""
        if run.meta.get("net", "ScalpelNet") != "ScalpelNet":
            cls(run.meta, {})   # raises: not a bag of terms
        state = run.linear.state if run.linear is not None else \
            {k: v.detach().float().cpu().numpy() for k, v in run.model.state_dict().items()}
        return cls(run.meta, state, run.features.target)

    @property
    def outputs(self) -> int:
        return self.classes + int(self.regress)

    def affine(self, h1: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(A, c): the outputs are ``h1 · A + c`` for first-layer sums ``h1`` that
        switch the same ReLUs on as this ``h1`` does (every ``h1`` when :attr:`exact`)."""
        A, c = np.eye(self.width), np.zeros(self.width)
        h = h1
        for step in self.steps:
            if step[0] == "relu":
                on = (h > 0).astype(np.float64)
                A, c, h = A * on, c * on, h * on
            else:
                _, W, b = step
                A, c = A @ W.T, c @ W.T + b
                h = h @ W.T + b if h is not None else None
        W, b = self.head
        return A @ W.T, c @ W.T + b

    def weights(self, ids: np.ndarray, A: np.ndarray) -> np.ndarray:
        """The weights (ids × outputs) of features ``ids`` under the map ``A``."""
        return self.E[ids].astype(np.float64) @ A

    def global_weights(self, column: int, start: int, stop: int) -> np.ndarray:
        """Features ``start:stop``'s weights for output ``column`` (an exact network's)."""
        A, _ = self.affine()
        return self.E[start:stop].astype(np.float64) @ A[:, column]


def entry_weights(block, r: int, mean_pooling: bool) -> np.ndarray:
    """Row ``r``'s entry weights as the network reads them: its values, or 1/len(row)
    (mean pooling, or a row without values) rounded to float32 as ScalpelNet does."""
    o0, o1 = int(block.offsets[r]), int(block.offsets[r + 1])
    if block.values is None or mean_pooling:
        return np.full(o1 - o0, np.float32(1.0) / np.float32(max(o1 - o0, 1)), np.float64)
    return block.values[o0:o1].astype(np.float64)


def _named_entries(features, block, r: int, values: np.ndarray, terms) -> list[tuple[str, int, int, float]]:
    """Row ``r``'s entries as (term, feature id, count in the text, value): a hashed bucket
    split among the text's terms in it by their counts, an unnamed one as ``#bucket``."""
    o0, o1 = int(block.offsets[r]), int(block.offsets[r + 1])
    ids = block.indices[o0:o1]
    if features.mode != "hashing":
        vocab = features.vocabulary
        first = 2 if features.mode == "ids" else 0
        return [(vocab[int(i) - first].as_py() if 0 <= int(i) - first < len(vocab) else f"#{int(i)}", int(i), 0,
                 float(v)) for i, v in zip(ids, values)]
    by_id: dict[int, dict[str, int]] = {}
    if terms is not None:
        mask = terms.rows == r
        for t, i in zip(terms.terms.filter(pa.array(mask)).to_pylist(), terms.ids[mask].tolist()):
            d = by_id.setdefault(i, {})
            d[t] = d.get(t, 0) + 1
    out = []
    for i, v in zip(ids.tolist(), values.tolist()):
        named = by_id.get(i)
        if not named:
            out.append((f"#{i}", i, 0, v))
            continue
        total = sum(named.values())
        out += [(t, i, n, v * n / total) for t, n in sorted(named.items())]
    return out


def explain(pred: Any, data: Any, top: int = TOP, label: str | None = None,
            text_column: str | Sequence[str] | None = None) -> list[dict[str, Any]]:
    """:meth:`Predictor.explain <.predict.Predictor.explain>`: one dict per input row, in order."""
    from ..features.names import text_terms

    top = count(top, "top", TOP)
    if top is None:
        raise UserError("top must be a whole number ≥ 1, got None", f"e.g. top={TOP}")
    dec = pred.decomposition()
    if label is not None and not pred.classifies:
        raise UserError("label: this run is a regression model, it explains its value", "leave label out",
                        cli=("--label: this run is a regression model, it explains its value", "drop --label"))
    # a label named in another spelling of a value the run holds (1 for its 1.0) is the run's
    label = run_label(label, pred.labels) if pred.classifies else label
    if label is not None and label not in pred.labels:
        labels = f"one of: {', '.join(map(str, pred.labels[:10]))}{' …' if len(pred.labels) > 10 else ''}"
        raise UserError(f"label {label!r} is not one of this run's labels", labels,
                        cli=(f"--label {label!r} is not one of this run's labels", labels))
    rows = pred.rows(data, text_column=text_column)
    features = pred.run.features
    multilabel = task_kind(pred.run.meta) == "multilabel"
    out: list[dict[str, Any]] = []
    for start in range(0, rows.num_rows, BATCH):
        part = rows.slice(start, BATCH)
        table = part.select([c for c in part.column_names if c == "text" or c in pred.numeric])
        table = table.set_column(table.column_names.index("text"), "text",
                                 pc.fill_null(table["text"].cast(pa.string()), ""))
        block = features.transform(table)
        raw = pred.outputs(block)
        terms = text_terms(features, table["text"]) if features.mode == "hashing" else None
        for r, status in enumerate(part["status"].to_pylist()):
            if status != "ok":
                out.append({"status": status, "label" if pred.classifies else "value": None, "terms": None,
                            **({"value": None} if pred.classifies and dec.regress else {})})
                continue
            out.append(_explain_row(pred, dec, features, block, r, raw, terms, top, label, multilabel))
    return out


def _explain_row(pred, dec: Decomposition, features, block, r: int, raw: dict, terms, top: int,
                 label: str | None, multilabel: bool) -> dict[str, Any]:
    values = entry_weights(block, r, dec.mean_pooling)
    o0, o1 = int(block.offsets[r]), int(block.offsets[r + 1])
    ids = block.indices[o0:o1].astype(np.int64)
    numeric = block.numeric[r].astype(np.float64) if block.numeric is not None and dec.N is not None else None
    h1 = values @ dec.E[ids].astype(np.float64) + dec.bE + (dec.N @ numeric if numeric is not None else 0.0)
    A, c = dec.affine(None if dec.exact else h1)
    row = (ids, values, numeric, A, c)
    doc: dict[str, Any] = {"status": "ok"}
    if not pred.classifies:
        doc["value"] = _value(features, raw, r)
        return {**doc, **_output_terms(dec, features, block, r, terms, top, row, dec.classes)}
    logits = raw["logits"][r]
    proba = pred.probabilities(logits[None])[0]
    k = predicted_label(proba, pred, multilabel, doc, logits)
    k = pred.labels.index(label) if label is not None else k
    doc.update(label=pred.labels[k], probability=float(proba[k]), logit=float(logits[k]))
    doc.update(_output_terms(dec, features, block, r, terms, top, row, k))
    if dec.regress:   # a multitask run predicts a value too: explained as a regressor's, in its own terms
        doc["value"] = _value(features, raw, r)
        doc["value_explained"] = _output_terms(dec, features, block, r, terms, top, row, dec.classes)
    return doc


def _value(features, raw: dict, r: int) -> float:
    """Row ``r``'s value in the target's units, computed as :meth:`Predictor.predict_values` does:
    in float64, since the network's float32 output scaled in float32 loses a large mean's digits."""
    mean, std = features.target or (0.0, 1.0)
    return float(raw["value"][r]) * std + mean


def _output_terms(dec: Decomposition, features, block, r: int, terms, top: int, row: tuple, k: int) -> dict:
    """Output ``k``'s (a class's logit, or the value) decomposition at row ``r``: method, bias,
    the ``top`` terms by the size of their contribution, the rest summed, and their count."""
    ids, values, numeric, A, c = row
    weight = dec.weights(ids, A[:, [k]])[:, 0]
    bias = float(dec.bE @ A[:, k] + c[k])
    by_id = dict(zip(ids.tolist(), weight.tolist()))   # a row's ids are distinct
    entries = [{"term": t, "feature": i, **({"count": n} if n else {}), "value": v, "weight": by_id[i],
                "contribution": v * by_id[i]} for t, i, n, v in _named_entries(features, block, r, values, terms)]
    if numeric is not None:
        nw = dec.N.T @ A[:, k]
        entries += [{"term": f"[numeric] {name}", "feature": None, "value": float(x), "weight": float(w),
                     "contribution": float(x * w)} for name, x, w in zip(features.numeric, numeric, nw)]
    entries.sort(key=lambda e: (-abs(e["contribution"]), e["term"]))
    total = float(sum(e["contribution"] for e in entries))
    shown = entries[:top]
    return dict(method=dec.method, bias=bias, terms=shown, rest=float(total - sum(e["contribution"] for e in shown)),
                terms_total=len(entries))


def predicted_label(proba: np.ndarray, pred, multilabel: bool, doc: dict, logits: np.ndarray) -> int:
    """The label a row's explanation is of: the most probable (by its ``logits``, as
    ``predict`` ranks them). A multilabel run predicts each label at or above its own
    threshold, so its most probable label may not be predicted while another is: the
    most probable of those predicted then, and ``doc`` gets ``labels``, the set as
    ``predict`` gives it."""
    order = np.argsort(-np.asarray(logits), kind="stable")
    if not multilabel:
        return int(order[0])
    on = labels_taken(np.asarray(logits), pred.cuts(None))
    taken = [int(i) for i in order if on[i]]
    doc["labels"] = [pred.labels[i] for i in taken]
    return taken[0] if taken else int(order[0])


# ---------------------------------------------------------------- top_terms.csv


@njit(cache=True, nogil=True)
def keep_top_rows(w, start, best_w, best_i):   # pragma: no cover - compiled
    """Fold rows ``start…`` (``w``: rows × columns) into each column's running
    top ``k`` (``best_w``/``best_i``: k × columns, -inf/-1 while unfilled),
    in the order weight descending, then feature id ascending: a row enters
    a column when it outweighs that column's worst kept entry, which on a tie
    is the larger id (rows come in id order, so a tie keeps the earlier
    row). One pass over ``w`` and O(k) per entry that enters, where a
    partial sort of every column cost a sort's work per element."""
    k, cols = best_w.shape
    worst = np.zeros(cols, np.int64)
    for j in range(cols):
        worst[j] = _worst(best_w, best_i, j)
    for r in range(w.shape[0]):
        for j in range(cols):
            if w[r, j] > best_w[worst[j], j]:
                best_w[worst[j], j] = w[r, j]
                best_i[worst[j], j] = start + r
                worst[j] = _worst(best_w, best_i, j)


@njit(cache=True, nogil=True)
def _worst(best_w, best_i, j):   # pragma: no cover - compiled
    m = 0
    for r in range(1, best_w.shape[0]):
        if best_w[r, j] < best_w[m, j] or (best_w[r, j] == best_w[m, j] and best_i[r, j] > best_i[m, j]):
            m = r
    return m



def exact_decomposition(model: Any, meta: dict, target: tuple[float, float] | None = None) -> Decomposition | None:
    """A trained model (a network or its arrays; ``meta``: its model.json's
    ``net`` and ``kwargs``) as a :class:`Decomposition`, when its outputs are an
    exact sum over terms; None for another network (a sequence model, ReLU
    layers: a term's weight depends on the text)."""
    from ..models.linear_arrays import is_arrays

    if meta.get("net", "ScalpelNet") != "ScalpelNet":
        return None
    state = {k: np.asarray(v, np.float32) if is_arrays(model) else v.detach().float().cpu().numpy()
             for k, v in model.state_dict().items()}
    dec = Decomposition(meta, state, target)
    return dec if dec.exact else None


def _top_columns(dec: Decomposition, max_classes: int) -> list[int]:
    """The outputs whose strongest terms a run lists: the first ``max_classes`` classes, then the value."""
    return list(range(min(dec.classes, max_classes))) + ([dec.classes] if dec.regress else [])


def top_rows(dec: Decomposition, per_class: int = TOP_TERMS,
             max_classes: int = MAX_CLASSES) -> tuple[np.ndarray, np.ndarray] | None:
    """Each listed output's ``per_class`` largest weights and their feature ids
    (``per_class × outputs`` each; an exact network's), by a running top-k over
    chunks of the input rows; None when there is nothing to list. A ``--ddp``
    run's rank 0 computes this where its compiled kernels are already loaded
    (:func:`top_terms`'s ``top``): the first compiled call in a client that
    has made none costs it over a second."""
    cols = _top_columns(dec, max_classes)
    dim = dec.E.shape[0]
    if not dim or not cols:
        return None
    A, _ = dec.affine()
    best_w = np.full((min(per_class, dim), len(cols)), -np.inf)
    best_i = np.full(best_w.shape, -1, np.int64)
    for start in range(0, dim, CHUNK):   # a running top-k per column: never dim × outputs at once
        keep_top_rows(np.ascontiguousarray(dec.E[start:start + CHUNK].astype(np.float64) @ A[:, cols]), start,
                      best_w, best_i)
    return best_w, best_i


def top_terms(dec: Decomposition, features, names: pa.Table | None = None, per_class: int = TOP_TERMS,
              max_classes: int = MAX_CLASSES, top: tuple[np.ndarray, np.ndarray] | None = None
              ) -> list[dict[str, Any]]:
    """Each output's ``per_class`` features of largest weight (an exact network's), for the
    first ``max_classes`` classes (most training rows first), then the value: rows of
    ``class``, ``rank``, ``terms`` (a vocabulary term; a bucket's sampled terms, ``a | b``,
    or ``#bucket``), ``weight`` and ``feature`` (the id). ``top``: :func:`top_rows`'s
    result for these weights, when it was computed elsewhere."""
    from ..features.names import bucket_labels

    cols = _top_columns(dec, max_classes)
    outputs = [(c, features.labels[c] if c < dec.classes else "value") for c in cols]
    if top is None:
        top = top_rows(dec, per_class, max_classes)
    if top is None:
        return []
    best_w, best_i = top
    rows: list[dict[str, Any]] = []
    for j, (_, name) in enumerate(outputs):
        order = np.lexsort((best_i[:, j], -best_w[:, j]))
        ids, ws = best_i[order, j], best_w[order, j]
        if features.mode == "hashing":
            labels = bucket_labels(names, ids)
        else:
            first = 2 if features.mode == "ids" else 0
            labels = [features.vocabulary[int(i) - first].as_py() for i in ids]
        rows += [{"class": name, "rank": rank + 1, "terms": t, "weight": float(w), "feature": int(i)}
                 for rank, (t, w, i) in enumerate(zip(labels, ws, ids))]
    return rows


def top_terms_jobs(folder: str, dec: Decomposition, features, names: pa.Table | None,
                   options: dict, top: tuple[np.ndarray, np.ndarray] | None = None) -> list:
    """``top_terms.csv`` and ``top_terms.png`` in ``folder`` as plot jobs
    (:class:`~lancetnic_flow.runs.plots.PlotJob`), unwritten: a run writes the
    table with its others and draws the chart with its charts (perhaps after
    it ends); none when no class has a term."""
    from .plots import PlotJob

    rows = top_terms(dec, features, names, top=top)
    if not rows:
        return []
    table_url, chart_url = join(folder, "top_terms.csv"), join(folder, "top_terms.png")

    def table() -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=["class", "rank", "terms", "weight", "feature"])
        w.writeheader()
        for row in rows:
            w.writerow({**row, "weight": f"{row['weight']:.6g}"})
        write_bytes(table_url, buf.getvalue().encode(), options)
        return table_url

    def chart() -> str:
        from .plots import top_terms_chart

        return top_terms_chart(rows, chart_url, options, classes=dec.classes + int(dec.regress))

    return [PlotJob([table_url], table, False), PlotJob([chart_url], chart, True)]


def write_top_terms(folder: str, dec: Decomposition, features, names: pa.Table | None, options: dict,
                    charts: bool = True) -> list[str]:
    """``top_terms.csv`` (and ``top_terms.png`` with ``charts``) in ``folder``; the files written."""
    from .plots import write_jobs

    return write_jobs([j for j in top_terms_jobs(folder, dec, features, names, options) if charts or not j.chart])


__all__ = ["Decomposition", "exact_decomposition", "explain", "top_rows", "top_terms", "top_terms_jobs",
           "write_top_terms", "TOP", "TOP_TERMS", "MAX_CLASSES"]
