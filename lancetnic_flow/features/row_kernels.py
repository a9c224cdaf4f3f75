"""Compiled kernels over CSR rows: the gather of a batch from the shuffle
buffer (:meth:`.rows.RowBlock.take`, :meth:`.rows.RowBlock.gather`) and the weighting of a raw shard's
counts (:meth:`.vectorize.FittedFeatures.weigh`).

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

import numpy as np
from numba import njit


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


@njit(cache=True, nogil=True)
def weigh_rows(indices, offsets, tf, idf, has_idf, out):   # pragma: no cover - compiled
    """``out`` = each row's ``tf`` (times ``idf[indices]`` when ``has_idf``)
    divided by the row's l2 norm (rows whose norm is 0 are left as they are)."""
    for r in range(len(offsets) - 1):
        a, e = offsets[r], offsets[r + 1]
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


def warm() -> None:
    """Load (or compile, once per machine) the kernels on a tiny input."""
    offsets, rows = np.array([0, 1], np.int64), np.zeros(1, np.int64)
    gather_rows(np.zeros(1, np.int32), offsets, rows, offsets, np.zeros(1, np.int32))
    gather_rows(np.zeros(1, np.float32), offsets, rows, offsets, np.zeros(1, np.float32))
    place_rows(np.zeros(1, np.int32), offsets, rows, offsets, np.zeros(1, np.int32))
    place_rows(np.zeros(1, np.float32), offsets, rows, offsets, np.zeros(1, np.float32))
    weigh_rows(np.zeros(1, np.int32), offsets, np.ones(1, np.float32), np.ones(1, np.float32), True,
               np.zeros(1, np.float32))
