"""Stable 64-bit hashes of strings, over Arrow buffers.

Python's ``hash`` is salted per process, so it cannot decide a hashing
bucket or a validation split that must agree across Dask workers and runs.

* :func:`hash_strings` — every byte of each string (FNV-1a 64, finalised;
  :mod:`.kernels`): strings that differ anywhere, even only in the middle
  of a long templated text, hash apart. The validation split and the
  features of runs written since feature format 2 use it.
* :func:`legacy_hashes` — the hash of feature format 1 (the first and last
  ``width`` bytes and the length), kept so that hashing runs written by
  earlier versions still predict as they were trained.
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


def hash_strings(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 hash of each whole string (null hashes like ``""``)."""
    from . import kernels
    from .tokenize import text_buffers

    arr = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    if len(arr) == 0:
        return np.zeros(0, np.uint64)
    data, offsets = text_buffers(arr, lowercase=False)
    valid = np.ones(len(arr), np.uint8) if not arr.null_count else \
        arr.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)
    return kernels.whole_hashes(data, offsets, valid)


def legacy_hashes(strings: pa.Array | pa.ChunkedArray, width: int = 32) -> np.ndarray:
    """Feature format 1's uint64 hash of each string, from its first and last
    ``width`` bytes and its length (null hashes like ``""``)."""
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
    """Map strings to stable floats in [0, 1) from every byte of each (the validation split)."""
    return unit_of(hash_strings(strings))


def unit_of(hashes: np.ndarray) -> np.ndarray:
    """:func:`hash_strings`' hashes as the floats in [0, 1) :func:`unit_interval` gives their strings."""
    return (hashes >> np.uint64(11)).astype(np.float64) / float(1 << 53)
