"""Label names that spell one value: ``1``, ``1.0``, ``1e0`` and ``01``; ``True``, ``true`` and ``TRUE``;
``2024-01-05`` and ``2024-01-05 00:00:00``.

A run learns labels as text, as each reader names them: a CSV cell as it is
written (``1.0``, ``True``), a typed column (Parquet, Arrow IPC, JSON Lines)
as Arrow writes its value (a float ``1.0`` is ``1``, a boolean ``true``; a
date or timestamp as pandas writes it to a CSV, :mod:`~lancetnic_flow.data.readers.times`). So
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
from datetime import date
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .labelsets import is_label_sets
from ..plurals import counted

# A decimal number as people and writers spell one; Python's float() would also take "1_0", "infinity".
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


# An ISO 8601 date or time as pandas and Arrow spell one: 2024-01-05, 2024-01-05 10:30:00.5, …T10:30+01:00.
_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?"
                   r"(Z|[+-][0-9]{2}:?[0-9]{2})?)?")


def _time_value(text: str) -> tuple | None:
    """The instant an ISO 8601 date or time spells (a date is its midnight; one with a
    zone is compared in UTC, apart from those without), or None."""
    m = _TIME.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    try:
        days = date(int(year), int(month), int(day)).toordinal()
    except ValueError:
        return None
    seconds = days * 86_400 + int(hour or 0) * 3_600 + int(minute or 0) * 60 + int(second or 0)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        seconds -= sign * (int(zone[1:3]) * 3_600 + int(zone[-2:]) * 60)
    return ("time", zone is not None, seconds * 10**9 + int((fraction or "").ljust(9, "0")))


def value_of(name: str) -> tuple | None:
    """The value a label name spells, comparable across spellings; None for a name
    that is no number, boolean, date or time (a plain name is compared as it is written)."""
    text = str(name).strip()
    low = text.lower()
    if low in ("true", "false"):
        return ("bool", low == "true")
    if not _NUMBER.fullmatch(text):
        return _time_value(text)
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
    known = set(labels)
    others = [name for name in names if name is not None and name not in known]
    if not others:   # every shard and chunk of a run's own labels: no label's value is read
        return {}
    by_value: dict = {}
    for label in labels:
        key = value_of(label)
        if key is not None:
            by_value.setdefault(key, []).append(label)
    out = {}
    for name in others:
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
    return (f"{counted(len(pairs), 'label is', 'labels are')} the same value as another written otherwise: "
            f"{shown}; {what}. A CSV "
            "keeps a label as written (1.0, True) where a Parquet, Arrow or JSON Lines column of numbers or "
            "booleans names it as Arrow writes the value (1, true): write the labels one way in every file")


# Noted: labels read in the run's spelling of their value (per spelling: ``label_as_run:1.0 as 1``).
LABEL_AS_RUN = "label_as_run"


def in_run_spelling(table: pa.Table, labels: list[str], noted: dict) -> pa.Table:
    """``table`` with each label the run knows only in another spelling of its value
    (``1.0`` for its ``1``: a Parquet float column against a CSV's text) in the
    run's; noted, per spelling (``label_as_run:1.0 as 1``) and in all (``label_as_run``)."""
    if "label" not in table.column_names or not labels or not table.num_rows:
        return table
    column, renamed = as_run_labels(table.column("label"), labels)
    noted_read_as(noted, renamed)
    return table.set_column(table.column_names.index("label"), "label", column) if renamed else table


def in_run_names(names: list[str], labels: list[str]) -> list[str]:
    """Distinct label ``names`` (a raw shard's own) with each that the run's ``labels``
    hold only under another spelling of its value written as the run's."""
    renames = _renames(names, labels)
    return [renames.get(name, name) for name in names] if renames else list(names)


def run_label(name, labels: list[str]):
    """A label a caller names (``explain --label 1``, a JSON ``1`` or ``true``) as the run's
    ``labels`` hold it: by name, else the one label that spells its value; as given otherwise."""
    if name is None or name in labels:
        return name
    text = str(name).strip()
    return text if text in labels else _renames([text], labels).get(text, name)


def counted_names(counts: dict[str, int], labels: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Label ``counts`` (name → rows) against the run's ``labels``: how many rows of
    each rename (``"1.0 as 1": 12``, :func:`in_run_spelling`'s notes) and of each
    label the run does not know in any spelling."""
    renames = _renames(list(counts), labels)
    known = set(labels)
    read_as = {f"{name} as {renames[name]}": n for name, n in counts.items() if name in renames}
    unknown = {name: n for name, n in counts.items() if name not in known and name not in renames}
    return read_as, unknown


def noted_read_as(noted: dict[str, int], read_as: dict[str, int]) -> None:
    """Add ``read_as`` (``"1.0 as 1": 12``) to ``noted``, per spelling and in all."""
    for pair, n in read_as.items():
        noted[f"{LABEL_AS_RUN}:{pair}"] = noted.get(f"{LABEL_AS_RUN}:{pair}", 0) + n
        noted[LABEL_AS_RUN] = noted.get(LABEL_AS_RUN, 0) + n


def read_as_of(noted: dict[str, int]) -> dict[str, int]:
    """Take the per-spelling notes out of ``noted`` (rows' notes, by reason): ``{"1.0 as 1": 12}``;
    ``noted`` keeps the total (``label_as_run``)."""
    keys = [k for k in noted if k.startswith(LABEL_AS_RUN + ":")]
    return {k.split(":", 1)[1]: noted.pop(k) for k in keys}


def read_as_warning(read_as: dict[str, int], whose: str, where: str = f"{LABEL_AS_RUN} in metrics.json") -> str | None:
    """The warning that labels written otherwise than ``whose`` were read as its
    spelling of their value (``read_as``: :func:`read_as_of`), counted ``where``;
    None where none were."""
    if not read_as:
        return None
    shown = ", ".join(f"{pair} ({n:,})" for pair, n in list(read_as.items())[:5])
    shown += ", …" if len(read_as) > 5 else ""
    total = sum(read_as.values())
    return (f"{counted(total, 'label was', 'labels were')} read as {whose} spelling of the same value: "
            f"{shown} ({where}). A CSV keeps a label as written (1.0, True) where a Parquet, "
            "Arrow or JSON Lines column of numbers or booleans names it as Arrow writes the value (1, true): "
            "write the labels one way in every file")
