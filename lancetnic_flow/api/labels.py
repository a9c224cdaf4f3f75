"""An estimator's labels as the run names them, and back.

A run learns labels as text, read as a CSV reader reads a cell: trimmed of
the spaces at its ends, an empty one missing. scikit-learn's classifiers
answer with the values ``y`` holds: ``classes_`` and ``predict`` of the same
values and dtype as ``np.unique(y)``, or ``accuracy_score(y, predict(X))``
compares ``"pos\\n"`` with ``"pos"`` (0.0 for a model right on every row) and
``3`` with ``"3"`` (an error, and NaN from a scorer). :class:`LabelNames`
keeps, for each name the run learns, the value it came from; two values the
run would learn as one class (``"Sports"`` and ``"Sports "``, ``1`` and
``"1"``) are refused rather than merged.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..data.frames import arrow_of, is_missing
from ..data.readers.labels import LONE_SURROGATE
from ..errors import UserError

# Saved beside a run folder's files by an estimator's save(): the values its labels came from.
FILE = "estimator_labels.json"


def run_name(v: Any) -> str | None:
    """The label the run learns for the value ``v`` (None: no label). Numbers
    are named as NumPy compares them: ``1`` and ``1.0`` are one class, "1"."""
    if is_missing(v):
        return None
    if isinstance(v, (bytes, np.bytes_)):
        v = bytes(v).decode("utf-8", "replace")
    if isinstance(v, (str, np.str_)):
        # a lone surrogate, which Arrow cannot hold (fit stopped on it), names as U+FFFD, as bytes do
        name = LONE_SURROGATE.sub("\ufffd", str(v).strip())
    elif isinstance(v, (bool, np.bool_)):
        name = str(bool(v))
    elif isinstance(v, (int, np.integer)):
        name = str(int(v))
    elif isinstance(v, (float, np.floating)):
        name = str(int(v)) if float(v).is_integer() else repr(float(v))
    else:
        name = str(v).strip()
    return name or None


def _plain(v: Any) -> Any:
    """A NumPy scalar as the Python value it holds (JSON, and dtype inference, read those)."""
    return v.item() if isinstance(v, np.generic) else v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) != isinstance(b, str):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


# The kinds of NumPy dtype classes_ takes from y as it is (int8, uint16, bool, float32, object); a
# string dtype's width is the longest class's, which the classes themselves give.
KEPT_KINDS = "biufO"


def answers_dtype(y: Any) -> np.dtype | None:
    """The dtype scikit-learn's ``classes_`` has for the answers ``y``, ``np.unique(y)``'s:
    a NumPy array's own, a pandas Series' as NumPy reads it (object for text, a category's
    values'), an Arrow or polars array's as it converts; None where the values decide (a
    list, a string array)."""
    if isinstance(y, (list, tuple)):
        return None
    arrow = arrow_of(y)
    y = arrow if arrow is not None else y
    try:
        if isinstance(y, (pa.Array, pa.ChunkedArray)):   # by its type: no Python object per row
            t = y.type.value_type if pa.types.is_dictionary(y.type) else y.type
            dtype = np.dtype(t.to_pandas_dtype())
        else:
            dtype = np.asarray(y).dtype
    except (TypeError, ValueError, NotImplementedError):
        return None
    return dtype if dtype.kind in KEPT_KINDS else None


def wider(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    """The dtype holding the answers of two calls (``partial_fit``): NumPy's promotion,
    object where a kind has no common number type; None where either is decided by values."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    if object in (a.type, b.type) or a.kind == "b" or b.kind == "b":
        return np.dtype(object)
    return np.result_type(a, b)


class LabelNames:
    """Each label name of a run → the value of ``y`` it came from; ``dtype``: the
    dtype of ``y`` classes_ and predict answer in (:func:`answers_dtype`)."""

    # An estimator pickled before labels kept their dtype unpickles without these: values decide.
    dtype: np.dtype | None = None
    _dtype_seen = True

    def __init__(self, values: dict[str, Any] | None = None, dtype: np.dtype | None = None):
        self.values: dict[str, Any] = dict(values or {})
        self.dtype = dtype
        self._dtype_seen = bool(self.values)   # loaded, or set from values: a later y widens it

    def of_sets(self) -> None:
        """``y`` holds label sets: its dtype (object, for lists) is not its labels', which
        their values decide (from now on: a later call's sets are read alike)."""
        self.dtype, self._dtype_seen = None, True

    def note_dtype(self, y: Any) -> None:
        """Keep the dtype of the answers ``y`` (with those noted before: :func:`wider`)."""
        dtype = answers_dtype(y)
        self.dtype = dtype if not self._dtype_seen else wider(self.dtype, dtype)
        self._dtype_seen = True

    def add(self, labels: Iterable[Any]) -> list[str | None]:
        """The run's names of ``labels`` (None where missing), remembering each value;
        a UserError for two values that would be one class."""
        names = []
        for v in labels:
            name = run_name(v)
            names.append(name)
            if name is None:
                continue
            v = _plain(v)
            known = self.values.setdefault(name, v)
            if not _same(known, v):
                raise UserError(f"y holds {known!r} and {v!r}, which would be one class ({name!r}): labels are "
                                "learned as text, trimmed of the spaces at their ends",
                                "give labels that differ in more than spaces, all of one type")
        return names

    def value(self, name: str | None) -> Any:
        return None if name is None else self.values.get(name, name)

    def array(self, names: Iterable[str | None], dtype: Any = None) -> np.ndarray:
        """The values of ``names`` as an array: ``dtype`` (classes_'), or the one
        NumPy gives the values (int64 for ints, <U for strings) when they are of one
        kind; object for mixed kinds or a missing answer (None)."""
        values = [self.value(n) for n in names]
        if any(v is None for v in values):
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out
        dtype = dtype if dtype is not None else self.dtype
        if dtype is not None and np.dtype(dtype) == object:
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out
        if dtype is not None:
            return np.array(values, dtype=dtype)
        kinds = {_kind(v) for v in values}
        if len(kinds) == 1 and None not in kinds:
            return np.array(values)
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out

    def to_json(self) -> str:
        """The names and values JSON can hold (others are left as their names)."""
        kept = {k: v for k, v in self.values.items() if isinstance(v, (str, bool, int, float))}
        doc: dict[str, Any] = {"labels": [[k, v] for k, v in kept.items()]}
        if self.dtype is not None:
            doc["dtype"] = self.dtype.str
        text = json.dumps(doc, ensure_ascii=False)
        # a value holding a lone surrogate has no UTF-8 bytes: as a \u escape, it is saved and read back whole
        return json.dumps(doc) if LONE_SURROGATE.search(text) else text

    @classmethod
    def from_json(cls, text: str, where: str = FILE) -> "LabelNames":
        """The labels :meth:`to_json` wrote, checked: a file that is not that, or that maps
        a name to a value the run would name otherwise (two labels swapped: every answer
        of either would be the other), is a UserError naming ``where``."""
        try:
            doc = json.loads(text)
            pairs = doc["labels"]
            values = {k: v for k, v in pairs}
            dtype = np.dtype(doc["dtype"]) if doc.get("dtype") is not None else None
            if dtype is not None and dtype.kind not in KEPT_KINDS:
                raise ValueError(f"a dtype of kind {dtype.kind!r}")
        except (ValueError, TypeError, KeyError) as exc:   # a JSONDecodeError is a ValueError
            raise _damaged(where, f"it is not the labels a save writes ({type(exc).__name__}: {exc})") from None
        wrong = [(k, v) for k, v in values.items() if not isinstance(k, str) or run_name(v) != k]
        if wrong or len(values) != len(pairs):
            what = f"it maps the label {wrong[0][0]!r} to {wrong[0][1]!r}" if wrong else "it names a label twice"
            raise _damaged(where, f"{what}, which is not the value that label was learned from")
        return cls(values, dtype)


def _damaged(where: str, what: str) -> UserError:
    return UserError(f"{where} is damaged: {what}", "restore the folder from a copy, or fit and save the "
                     "estimator again")


def _kind(v: Any) -> str | None:
    if isinstance(v, str):
        return "str"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):   # np.unique([1, 2.5]): float64
        return "number"
    return None


__all__ = ["FILE", "KEPT_KINDS", "LabelNames", "answers_dtype", "run_name", "wider"]
