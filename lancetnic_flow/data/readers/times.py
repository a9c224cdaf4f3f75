"""Dates and timestamps read as text, in the ISO 8601 spelling pandas writes to a CSV.

A Parquet or Arrow column of dates (a label of days, months, reporting
periods) is the same data as the CSV pandas writes from the same frame, so
it names the same labels: a date ``2024-01-05``; a timestamp
``2024-01-05 10:30:00``, with the fraction of a second it holds in 3, 6 or 9
digits (``10:30:00.500``) and, in a time zone, its local time and offset
(``2024-01-05 10:30:00+01:00``); a timestamp at midnight without a zone is
its date. pandas picks one shape for a whole column (a column with one
time of day writes ``2024-02-01 00:00:00`` for a midnight); here each value
is spelled alone, so a value reads the same in every chunk and file, and
:mod:`~lancetnic_flow.features.label_values` holds both spellings as one value.

Vectorised: no Python object per row.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def is_time_type(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` holds dates or timestamps (read by :func:`iso_text`)."""
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def iso_text(arr) -> pa.Array:
    """A date or timestamp column as ISO 8601 text, as pandas writes it to a CSV (see the module)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    if pa.types.is_date(arr.type):
        return pc.strftime(pc.cast(arr, pa.timestamp("s")), "%Y-%m-%d")
    unit, zone = arr.type.unit, arr.type.tz
    local = pc.local_timestamp(arr) if zone else arr
    ticks = pc.cast(local, pa.int64()).to_numpy(zero_copy_only=False)
    per = _PER_SECOND[unit]
    seconds, part = np.divmod(np.nan_to_num(ticks).astype(np.int64), per)   # floor: before 1970 too
    whole = pc.strftime(pa.array(seconds, pa.timestamp("s")), "%Y-%m-%d %H:%M:%S")
    text = pc.binary_join_element_wise(whole, _fraction(part, per), "")
    if zone:
        utc = pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False)
        text = pc.binary_join_element_wise(text, _offsets(np.nan_to_num(ticks - utc).astype(np.int64) // per), "")
    else:
        day = (seconds % 86_400 == 0) & (part == 0)
        text = pc.if_else(pa.array(day), pc.utf8_slice_codeunits(text, 0, 10), text)
    return pc.if_else(pc.is_valid(arr), text, pa.scalar(None, pa.string()))


def _fraction(part: np.ndarray, per: int) -> pa.Array:
    """``.500`` / ``.500001`` / ``.500000001``: the fewest of 3, 6 or 9 digits that hold
    ``part`` (of ``per`` a second); nothing for a whole second."""
    nanos = part.astype(np.int64) * (10**9 // per)
    digits = np.where(nanos == 0, 0, np.where(nanos % 10**6 == 0, 3, np.where(nanos % 10**3 == 0, 6, 9)))
    padded = pc.utf8_lpad(pc.cast(pa.array(nanos), pa.string()), 9, "0")
    kept = pc.if_else(pa.array(digits == 3), pc.utf8_slice_codeunits(padded, 0, 3),
                      pc.if_else(pa.array(digits == 6), pc.utf8_slice_codeunits(padded, 0, 6), padded))
    return pc.if_else(pa.array(digits == 0), pa.scalar(""), pc.binary_join_element_wise(pa.scalar("."), kept, ""))


def _offsets(seconds: np.ndarray) -> pa.Array:
    """A zone's offset from UTC of each value, ``+01:00`` / ``-05:30`` / ``+00:00``."""
    minutes = seconds // 60
    sign = pa.array(np.where(minutes < 0, "-", "+"))
    hours, mins = np.divmod(np.abs(minutes), 60)
    two = lambda x: pc.utf8_lpad(pc.cast(pa.array(x), pa.string()), 2, "0")   # noqa: E731
    return pc.binary_join_element_wise(sign, two(hours), pa.scalar(":"), two(mins), "")
