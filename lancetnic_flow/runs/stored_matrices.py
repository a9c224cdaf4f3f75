"""The matrices ``model.safetensors`` stores as parts (:mod:`.stored_weights`
writes them: the non-zero entries, optionally as 8-bit integers with a scale
per column) made dense again, in NumPy.

One reader for both ways a run is loaded: the torch network
(:func:`.stored_weights.decode` wraps this) and the linear model scored
without torch (:mod:`.linear_scores`), so a damaged file is the same
``ValueError`` on either, and both hold the same float32 weights, bit for
bit: every step here (an integer widened to float32, one float32 product
per entry, a scatter) rounds as torch's did.
"""
from __future__ import annotations

from typing import Any

import numpy as np

SUFFIXES = ("shape", "rows", "counts", "cols", "values", "scale", "int8")


def decode_arrays(stored: dict[str, Any]) -> dict[str, Any]:
    """The model state a file's tensors hold: each matrix stored as parts
    becomes a dense float32 NumPy array under its own name; every other
    tensor is passed on as it is (a NumPy array, or a torch tensor when the
    file was read by ``safetensors.torch``). Parts that do not fit together
    are a ``ValueError`` naming the matrix."""
    out: dict[str, Any] = {}
    sparse: dict[str, dict[str, np.ndarray]] = {}
    for key, t in stored.items():
        name, sep, part = key.rpartition(":")
        if sep and part in SUFFIXES:
            sparse.setdefault(name, {})[part] = np.asarray(t)
        else:
            out[key] = t
    for name, p in sparse.items():
        out[name] = dense_matrix(name, p)
    return out


def dense_matrix(name: str, p: dict[str, np.ndarray]) -> np.ndarray:
    """The float32 matrix ``name`` whose stored parts are ``p`` (suffix → array)."""
    if "int8" in p:   # a plain 8-bit matrix and its scale per column
        q, scale = p["int8"], p.get("scale")
        if q.ndim != 2 or scale is None or scale.shape != (q.shape[1],):
            raise ValueError(f"the stored matrix {name} has an 8-bit matrix of shape {list(q.shape)} and "
                             f"{'no scale' if scale is None else f'{scale.size:,} scales'}")
        return q.astype(np.float32) * scale.astype(np.float32)
    missing = [s for s in SUFFIXES[:5] if s not in p]
    if missing:
        raise ValueError(f"the stored matrix {name} lacks its {', '.join(missing)}")
    shape, rows, counts, cols, values = (p[s] for s in SUFFIXES[:5])
    if shape.size != 2:
        raise ValueError(f"the stored matrix {name} has a shape of {shape.size} numbers, not 2")
    n_rows, n_cols = (int(x) for x in shape.ravel())
    counts64 = counts.astype(np.int64)
    entries = int(counts64.sum())
    if not (len(rows) == len(counts) and entries == len(cols) == len(values)):
        raise ValueError(f"the stored matrix {name} has {len(rows):,} rows with {len(counts):,} counts "
                         f"summing to {entries:,}, for {len(cols):,} columns and {len(values):,} values")
    rows64, cols64 = rows.astype(np.int64), cols.astype(np.int64)
    if len(rows) and (int(rows64.min()) < 0 or int(rows64.max()) >= n_rows):
        raise ValueError(f"the stored matrix {name} names a row outside its {n_rows:,}")
    if entries and (int(cols64.min()) < 0 or int(cols64.max()) >= n_cols):
        raise ValueError(f"the stored matrix {name} names a column outside its {n_cols:,}")
    vals = values.astype(np.float32)
    if "scale" in p:
        scale = p["scale"].astype(np.float32)
        if scale.shape != (n_cols,):
            raise ValueError(f"the stored matrix {name} has {scale.size:,} scales for {n_cols:,} columns")
        vals = vals * scale[cols64]
    dense = np.zeros(n_rows * n_cols, dtype=np.float32)
    dense[np.repeat(rows64, counts64) * n_cols + cols64] = vals
    return dense.reshape(n_rows, n_cols)


def is_quantised(stored_names: list[str] | set[str]) -> bool:
    """Whether a file's tensors include 8-bit matrices (a compacted copy of a run)."""
    return any(n.endswith(":scale") for n in stored_names)


__all__ = ["SUFFIXES", "decode_arrays", "dense_matrix", "is_quantised"]
