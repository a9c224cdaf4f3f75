"""Label names that spell one value: ``1``, ``1.0``, ``1e0`` and ``01``; ``True``, ``true`` and ``TRUE``.

A run learns labels as text, as each reader names them: a CSV cell as it is
written (``1.0``, ``True``), a typed column (Parquet, Arrow IPC, JSON Lines)
as Arrow writes its value (a float ``1.0`` is ``1``, a boolean ``true``). So
one value can reach a run in two spellings: a CSV and a Parquet file of the
same frame, a run trained on one and evaluated on the other. The rule:

* where data meets a run (evaluation), a label the run does not know by name
  that is the same value as exactly one of its labels is that label: the run's
  spelling wins, and how many rows were read so is noted;
* where two spellings of one value meet in one run's data, both stay classes
  (a name is what the user wrote) and the run warns, pairing them
  (:func:`same_values`).

Numbers compare exactly (as decimals: ``2**53 + 1`` is not ``2**53``); NaN and
infinities name no value. All work is on the distinct names, not per row.
"""
from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .labelsets import is_label_sets
from ..plurals import counted, verb

# A decimal number as people and writers spell one; Python's float() would also take "1_0", "infinity".
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def value_of(name: str) -> tuple | None:
    """The value a label name spells, comparable across spellings; None for a name
    that is no number or boolean (a plain name is compared as it is written)."""
    text = str(name).strip()
    low = text.lower()
    if low in ("true", "false"):
        return ("bool", low == "true")
    if not _NUMBER.fullmatch(text):
        return None
    sign, digits, exponent = Decimal(text).as_tuple()
    digits = "".join(map(str, digits)).lstrip("0")
    if not digits:   # every zero, -0 and 0.00 included
        return ("number", 0, "", 0)
    kept = digits.rstrip("0")
    # exact, at any length: no rounding to a context's precision, as Decimal arithmetic does
    return ("number", sign, kept, exponent + len(digits) - len(kept))


def same_values(kept: list[str], other: list[str]) -> list[tuple[str, str]]:
    """Each name of ``other`` not in ``kept`` that spells the same value as a name
    of ``kept``, with that name (the first, where several do)."""
    values: dict = {}
    for name in kept:
        key = value_of(name)
        if key is not None:
            values.setdefault(key, name)
    names = set(kept)
    return [(name, values[key]) for name in other
            if name not in names and (key := value_of(name)) is not None and key in values]


def spelled_twice(labels: list[str]) -> list[tuple[str, str]]:
    """Pairs of ``labels`` (one run's classes) that spell one value: each later
    name with the first that spells it."""
    first: dict = {}
    pairs = []
    for name in labels:
        key = value_of(name)
        if key is None:
            continue
        if key in first:
            pairs.append((name, first[key]))
        else:
            first[key] = name
    return pairs


def _renames(names: list[str], labels: list[str]) -> dict[str, str]:
    """Of the distinct ``names`` given, those the run's ``labels`` hold under
    another spelling of their value, and that spelling: only where exactly one
    of the run's labels spells it (a run with ``1`` and ``1.0`` names neither)."""
    by_value: dict = {}
    for label in labels:
        key = value_of(label)
        if key is not None:
            by_value.setdefault(key, []).append(label)
    known = set(labels)
    out = {}
    for name in names:
        if name is None or name in known:
            continue
        match = by_value.get(value_of(name))
        if match is not None and len(match) == 1:
            out[name] = match[0]
    return out


def _renamed(values: pa.Array, labels: list[str]) -> tuple[pa.Array, dict[str, int]]:
    """Flat label ``values`` with each renamed (:func:`_renames`), and how many values each rename changed."""
    if not len(values) or not labels:
        return values, {}
    distinct = pc.unique(values).to_pylist()
    renames = _renames(distinct, labels)
    if not renames:
        return values, {}
    olds = pa.array(list(renames), pa.string())
    at = pc.index_in(values, value_set=olds)
    hit = pc.is_valid(at)
    news = pa.array(list(renames.values()), pa.string())
    out = pc.if_else(hit, pc.take(news, pc.fill_null(at, 0)), values)
    counts = pc.value_counts(values.filter(hit)).to_pylist()
    return out, {f"{c['values']} as {renames[c['values']]}": int(c["counts"]) for c in counts}


def as_run_labels(column, labels: list[str]) -> tuple:
    """A table's ``label`` column (one label a row, or label sets) with each label
    the run's ``labels`` hold only under another spelling of its value written as
    the run's; and how many labels each such rename changed (``"1.0 as 1": 12``)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    if is_label_sets(column):
        values, counts = _renamed(pc.list_flatten(column), labels)
        if not counts:
            return column, {}
        offsets = np.asarray(column.offsets.to_numpy(zero_copy_only=False))
        offsets = offsets - offsets[0]
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=pc.is_null(column)), counts
    return _renamed(column, labels)


def spelled_apart_warning(pairs: list[tuple[str, str]], whose: str, what: str) -> str | None:
    """The warning for ``pairs`` (a label, and another spelling of its value that
    ``whose`` labels hold) that ``what`` happens to them; None where there are none."""
    if not pairs:
        return None
    shown = ", ".join(f"{a!r} ({whose} {b!r})" for a, b in pairs[:5]) + (", …" if len(pairs) > 5 else "")
    return (f"{counted(len(pairs), 'label')} {verb(len(pairs), 'is', 'are')} the same value as another written otherwise: {shown}; {what}. A CSV "
            "keeps a label as written (1.0, True) where a Parquet, Arrow or JSON Lines column of numbers or "
            "booleans names it as Arrow writes the value (1, true): write the labels one way in every file")
