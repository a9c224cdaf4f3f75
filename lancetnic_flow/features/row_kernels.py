"""Compiled kernels over CSR rows: the gather of a batch from the shuffle
buffer (:meth:`.rows.RowBlock.take`, :meth:`.rows.RowBlock.gather`), the weighting of a raw shard's
counts (:meth:`.vectorize.FittedFeatures.weigh`) and the decoding of a packed
shard's term ids (:func:`.packing.unpack`).

Both run once per row per epoch on the trainer, beside the training step,
and on 2 cores whatever they cost comes out of the step's core: in NumPy
they made int64 and float64 temporaries of every value (an index per value
to gather by; a row id, a square and a quotient per value to normalise).
Here each is one pass, with no temporary. The arithmetic of
:func:`weigh_rows` is NumPy's, operation for operation (float32 products,
float64 squares summed in row order, a float64 quotient rounded to
float32), so the values are the same bit for bit (tests/unit/features/
test_row_kernels.py). Compiled on first use and cached on disk.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

TF_TABLE_SIZE = 1 << 16   # a raw shard's counts are stored as uint16 (features/packing.py)


@functools.lru_cache(maxsize=2)
def tf_table(sublinear: bool) -> np.ndarray:
    """Each whole count's tf, for :func:`weigh_counts`: ``1 + log c`` by NumPy's
    float32 log when ``sublinear``, else ``c``."""
    counts = np.arange(TF_TABLE_SIZE, dtype=np.float32)
    if not sublinear:
        return counts
    with np.errstate(divide="ignore"):   # a count of 0 (never stored) gives -inf, as NumPy's formula does
        return 1.0 + np.log(counts)


@njit(cache=True, nogil=True)
def gather_rows(src, offsets, rows, out_offsets, out):   # pragma: no cover - compiled
    """``out[out_offsets[j]:out_offsets[j + 1]] = src[offsets[rows[j]]:…]``:
    row ``rows[j]``'s entries of ``src`` (indices or values), row after row."""
    for j in range(len(rows)):
        a = offsets[rows[j]]
        o = out_offsets[j]
        for p in range(out_offsets[j + 1] - o):
            out[o + p] = src[a + p]


@njit(cache=True, nogil=True)
def place_rows(src, offsets, rows, out_starts, out):   # pragma: no cover - compiled
    """``out[out_starts[j]:…] = src[offsets[rows[j]]:offsets[rows[j] + 1]]``: rows
    of one source put where a gather from several sources wants them."""
    for j in range(len(rows)):
        a = offsets[rows[j]]
        o = out_starts[j]
        for p in range(offsets[rows[j] + 1] - a):
            out[o + p] = src[a + p]


@njit(inline="always")
def _weigh_row(indices, a, e, tf, idf, has_idf, out):   # pragma: no cover - compiled
    acc = 0.0
    for p in range(a, e):
        v = tf[p] * idf[indices[p]] if has_idf else tf[p]
        out[p] = v
        x = np.float64(v)
        acc += x * x
    norm = np.sqrt(acc)
    if norm <= 0.0:
        norm = 1.0
    for p in range(a, e):
        out[p] = np.float32(np.float64(out[p]) / norm)


@njit(cache=True, nogil=True)
def weigh_rows(indices, offsets, tf, idf, has_idf, out):   # pragma: no cover - compiled
    """``out`` = each row's ``tf`` (times ``idf[indices]`` when ``has_idf``)
    divided by the row's l2 norm (rows whose norm is 0 are left as they are)."""
    for r in range(len(offsets) - 1):
        _weigh_row(indices, offsets[r], offsets[r + 1], tf, idf, has_idf, out)


@njit(cache=True, nogil=True)
def weigh_counts(indices, offsets, counts, table, idf, has_idf, out):   # pragma: no cover - compiled
    """:func:`weigh_rows` of whole term counts, each count's tf looked up in
    ``table`` (``1 + log c`` computed by NumPy once for every count, so the
    values are NumPy's; a log per value cost as much as the rest of the
    weighting). Returns False, ``out`` unfinished, at the first count that is
    not a whole number under ``len(table)``: the caller weighs those rows by
    NumPy's formula instead."""
    n = len(table)
    for r in range(len(offsets) - 1):
        a, e = offsets[r], offsets[r + 1]
        for p in range(a, e):   # the row's tf first (into out), then weighed in place, while in cache
            c = counts[p]
            if not (c >= 0 and c < n):   # NaN fails both
                return False
            k = int(c)
            if np.float32(k) != c:
                return False
            out[p] = table[k]
        _weigh_row(indices, a, e, out, idf, has_idf, out)
    return True


@njit(cache=True, nogil=True)
def ungap_planes(planes, offsets, out):   # pragma: no cover - compiled
    """A packed shard's term ids: ``planes`` holds each id's distance from the
    row's previous id (a row's first: the id itself) as byte planes, lowest
    first (:func:`.packing.pack`); ``out`` (int32) gets the ids, row by row.
    One pass, where NumPy took a widening copy per plane and two cumulative sums."""
    k = planes.shape[0]
    for r in range(len(offsets) - 1):
        acc = np.int64(0)
        for p in range(offsets[r], offsets[r + 1]):
            gap = np.int64(0)
            for j in range(k):
                gap |= np.int64(planes[j, p]) << (8 * j)
            acc += gap
            out[p] = acc


def warm() -> None:
    """Load (or compile, once per machine) the kernels on a tiny input."""
    offsets, rows = np.array([0, 1], np.int64), np.zeros(1, np.int64)
    gather_rows(np.zeros(1, np.int32), offsets, rows, offsets, np.zeros(1, np.int32))
    gather_rows(np.zeros(1, np.float32), offsets, rows, offsets, np.zeros(1, np.float32))
    place_rows(np.zeros(1, np.int32), offsets, rows, offsets, np.zeros(1, np.int32))
    place_rows(np.zeros(1, np.float32), offsets, rows, offsets, np.zeros(1, np.float32))
    weigh_rows(np.zeros(1, np.int32), offsets, np.ones(1, np.float32), np.ones(1, np.float32), True,
               np.zeros(1, np.float32))
    weigh_counts(np.zeros(1, np.int32), offsets, np.ones(1, np.float32), np.ones(2, np.float32),
                 np.ones(1, np.float32), True, np.zeros(1, np.float32))
    ungap_planes(np.frombuffer(b"\0", np.uint8).reshape(1, 1), offsets, np.zeros(1, np.int32))   # read-only, as unpack's
