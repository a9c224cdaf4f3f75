"""Stable 64-bit hashes of strings, vectorised over Arrow buffers.

Python's ``hash`` is salted per process, so it cannot decide a hashing
bucket or a validation split that must agree across Dask workers and runs.
A string is hashed from its first and last ``width`` bytes and its length:
one fixed-width gather per array, no loop over strings or bytes. Strings
that agree on all three are near-duplicates, and sharing a bucket or a
split is what one wants for them.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray) -> np.ndarray:
    # splitmix64 finaliser: every input bit affects every output bit.
    h ^= h >> np.uint64(30)
    h *= _M1
    h ^= h >> np.uint64(27)
    h *= _M2
    h ^= h >> np.uint64(31)
    return h


def hash_strings(strings: pa.Array | pa.ChunkedArray, width: int = 32) -> np.ndarray:
    """uint64 hash of each string (null hashes like ``""``); ``width`` must be a multiple of 8."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    strings = strings.cast(pa.large_string())
    n = len(strings)
    if n == 0:
        return np.zeros(0, np.uint64)
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=strings.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and len(bufs[2]) else np.zeros(1, np.uint8)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    if strings.null_count:
        lengths = np.where(strings.is_null().to_numpy(zero_copy_only=False), 0, lengths)
    pos = np.arange(width, dtype=np.int64)
    h = lengths.astype(np.uint64) * _GOLD
    with np.errstate(over="ignore"):
        for base in (starts[:, None] + pos, starts[:, None] + lengths[:, None] - width + pos):
            inside = (base >= starts[:, None]) & (base < (starts + lengths)[:, None])
            raw = np.where(inside, data[np.clip(base, 0, len(data) - 1)], 0).astype(np.uint8)
            words = np.ascontiguousarray(raw).view(np.uint64)  # (n, width // 8)
            for k in range(words.shape[1]):
                h = _mix(h ^ words[:, k] ^ np.uint64(k + 1) * _GOLD)
    return h


def unit_interval(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Map strings to stable floats in [0, 1) (used for the validation split)."""
    return (hash_strings(strings, width=64) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
