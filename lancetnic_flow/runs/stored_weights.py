"""A model's tensors as ``model.safetensors`` holds them: large, mostly-zero
matrices as their non-zero entries, and optionally as 8-bit integers.

A linear model over 2^19 hashed inputs is a matrix of 2^19 rows × classes,
and most of it stays exactly zero: a bucket no training text filled is never
updated, and the per-example hinge step updates only the classes a row's
margin involved. Storing the non-zero entries only is exact; a model of 57
classes shrinks from the dense matrix's size to a few bytes per entry it
learned.

A matrix is stored as five tensors beside the others (``NAME:shape``,
``NAME:rows`` the rows holding an entry, ``NAME:counts`` how many each,
``NAME:cols`` their columns, ``NAME:values``), in the narrowest integer type
that holds them; with ``int8`` the values are integers with a scale per
column (``NAME:scale``, symmetric: the column's largest magnitude is 127),
and an entry that rounds to zero is dropped; a quantised matrix mostly
non-zero (an MLP's, which starts from random weights) is kept as a plain
8-bit matrix (``NAME:int8``) with its scales instead, a byte an entry. Everything is a plain tensor
in a safetensors file: reading unpickles nothing, and a reader that knows
only safetensors sees named integer and float arrays.

Memory: writing makes the entries chunk by chunk (``CHUNK`` rows: their mask,
entry indices and values) as each part is written, so a save holds no more
than one chunk's beyond the weights (``int8`` of a mostly non-zero matrix:
the 8-bit matrix, a quarter of it); reading holds the entries and the dense
matrix, plus one 64-bit index per entry while they are scattered in.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from .stored_matrices import decode_arrays, is_quantised
from .tensor_file import Streamed, is_tensor
# Matrices smaller than this are stored as they are: a few KiB, not worth a second format.
MIN_ELEMENTS = 1 << 16
# Sparse storage takes about 5 bytes an entry (4 with the dense layout): past this share of
# non-zero entries it would not be smaller.
MAX_DENSITY = 0.6
CHUNK = 1 << 13

if TYPE_CHECKING:
    import torch


def _narrow(top: int) -> np.dtype:
    """The smallest integer type safetensors and torch share that holds 0..top."""
    if top < 256:
        return np.dtype(np.uint8)
    if top < 2**15:
        return np.dtype(np.int16)
    return np.dtype(np.int32)


def _matrix(t: Any) -> np.ndarray | None:
    """``t`` as a NumPy float32 matrix over its own memory when it is one large
    enough to store as entries (a tensor's or an array's); None otherwise."""
    if is_tensor(t):
        import torch

        if t.ndim != 2 or t.dtype != torch.float32:
            return None
        t = t.detach().cpu().numpy()
    if not isinstance(t, np.ndarray) or t.ndim != 2 or t.dtype != np.float32 or t.size < MIN_ELEMENTS:
        return None
    return t


def _chunks(t: np.ndarray, scale: np.ndarray | None):
    """``t`` in CHUNK rows at a time: (first row, the rows — 8-bit integers as floats
    with ``scale`` —, their non-zero mask)."""
    for start in range(0, t.shape[0], CHUNK):
        block = t[start:start + CHUNK]
        if scale is not None:
            block = np.clip(np.round(block / scale), -127, 127)
        yield start, block, block != 0


def sparse_parts(name: str, t: Any, int8: bool = False) -> dict[str, Any] | None:
    """``t``'s stored tensors under ``name``, or None when storing it dense is as small (or ``t`` is not
    a float32 matrix large enough to matter) and it is not to be quantised. The entries are
    :class:`~.tensor_file.Streamed`: made chunk by chunk as the file is written, never whole.
    ``t``: a tensor or a NumPy array; the parts are NumPy arrays."""
    t = _matrix(t)
    if t is None:
        return None
    n_rows, n_cols = t.shape
    scale = None
    if int8:
        top = np.abs(t).max(axis=0) if n_rows else np.zeros(n_cols, np.float32)
        scale = np.where(top > 0, top / np.float32(127), np.float32(1)).astype(np.float32)
    if scale is None:
        return _float_parts(name, t)
    held = entries = 0
    for _, _, mask in _chunks(t, scale):   # a first pass counts: the header needs the sizes
        held += int(mask.any(axis=1).sum())
        entries += int(mask.sum())
    if scale is not None and entries > 0.5 * t.size:
        # Mostly non-zero (a network that starts from random weights): a byte an entry
        # as a plain matrix, where entries would take two.
        q = np.clip(np.round(t / scale), -127, 127).astype(np.int8)
        return {f"{name}:int8": q, f"{name}:scale": scale}
    col_type, count_type = _narrow(n_cols - 1), _narrow(n_cols)
    value_type = np.dtype(np.int8) if scale is not None else np.dtype(np.float32)

    def rows():
        for start, _, mask in _chunks(t, scale):
            yield (np.flatnonzero(mask.any(axis=1)) + start).astype(np.int32)

    def counts():
        for _, _, mask in _chunks(t, scale):
            per_row = mask.sum(axis=1)
            yield per_row[per_row > 0].astype(count_type)

    def cols():
        for _, _, mask in _chunks(t, scale):
            yield np.nonzero(mask)[1].astype(col_type)   # row-major: a row's entries together

    def values():
        for _, block, mask in _chunks(t, scale):
            yield block[mask].astype(value_type)          # the same row-major order

    out: dict[str, Any] = {
        f"{name}:shape": np.array([n_rows, n_cols], dtype=np.int64),
        f"{name}:rows": Streamed(np.int32, (held,), rows), f"{name}:counts": Streamed(count_type, (held,), counts),
        f"{name}:cols": Streamed(col_type, (entries,), cols), f"{name}:values": Streamed(value_type, (entries,), values)}
    if scale is not None:
        out[f"{name}:scale"] = scale
    return out


def _float_parts(name: str, t: np.ndarray) -> dict[str, Any] | None:
    """:func:`sparse_parts` of a float32 matrix kept as it is: the same tensors,
    made by compiled passes over the matrix (one to count each row's entries,
    one each for the columns and the values) instead of a mask per part."""
    n_rows, n_cols = t.shape
    per_row = np.empty(n_rows, np.int32)   # 4 bytes a row: the count pass's only output
    for start in range(0, n_rows, CHUNK):
        _row_entries(t[start:start + CHUNK], per_row[start:start + CHUNK])
    entries = int(per_row.sum(dtype=np.int64))
    if entries > MAX_DENSITY * t.size:
        return None
    held_rows = np.flatnonzero(per_row)
    col_type, count_type = _narrow(n_cols - 1), _narrow(n_cols)

    def entry_parts(cols: bool):
        for start in range(0, n_rows, CHUNK):
            here = per_row[start:start + CHUNK]
            out = np.empty(int(here.sum(dtype=np.int64)), col_type if cols else np.float32)
            if cols:
                _entry_cols(t[start:start + CHUNK], out)
            else:
                _entry_values(t[start:start + CHUNK], out)
            yield out

    return {
        f"{name}:shape": np.array([n_rows, n_cols], dtype=np.int64),
        f"{name}:rows": held_rows.astype(np.int32), f"{name}:counts": per_row[held_rows].astype(count_type),
        f"{name}:cols": Streamed(col_type, (entries,), lambda: entry_parts(True)),
        f"{name}:values": Streamed(np.float32, (entries,), lambda: entry_parts(False))}


@njit(cache=True, nogil=True)
def _row_entries(block, out):   # pragma: no cover - compiled
    """``out[i]``: row ``i``'s entries that are not zero (``!= 0``, as NumPy's mask)."""
    for i in range(block.shape[0]):
        n = 0
        for k in range(block.shape[1]):
            if block[i, k] != 0:
                n += 1
        out[i] = n


@njit(cache=True, nogil=True)
def _entry_cols(block, out):   # pragma: no cover - compiled
    """The columns of ``block``'s non-zero entries, row-major (``np.nonzero(block != 0)[1]``)."""
    j = 0
    for i in range(block.shape[0]):
        for k in range(block.shape[1]):
            if block[i, k] != 0:
                out[j] = k
                j += 1


@njit(cache=True, nogil=True)
def _entry_values(block, out):   # pragma: no cover - compiled
    """``block``'s non-zero entries, row-major (``block[block != 0]``)."""
    j = 0
    for i in range(block.shape[0]):
        for k in range(block.shape[1]):
            v = block[i, k]
            if v != 0:
                out[j] = v
                j += 1


def materialize(stored: dict[str, Any]) -> dict[str, torch.Tensor]:
    """:func:`encode`'s tensors with every streamed one made whole, as torch
    tensors (for checks and ``export --compact``, not the trainer)."""
    import torch

    def whole(t: Any) -> torch.Tensor:
        if not isinstance(t, Streamed):
            return torch.as_tensor(t)
        pieces = [np.asarray(p) for p in t.pieces()]
        return torch.from_numpy(np.concatenate(pieces) if pieces else np.zeros(t.shape, dtype=t.dtype))

    return {k: whole(v) for k, v in stored.items()}


def encode(state: dict[str, Any], int8: bool = False) -> dict[str, Any]:
    """The tensors to write for the model state ``state``: each large float
    matrix as its entries when that is smaller (always with ``int8``), every
    other tensor as it is."""
    out: dict[str, Any] = {}
    for name, t in state.items():
        if ":" in name:
            raise ValueError(f"a tensor name with ':' ({name}) would read back as stored parts")
        parts = sparse_parts(name, t, int8)
        out.update(parts if parts is not None else {name: t})
    return out


def decode(stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model state a file's tensors hold (:func:`encode` undone), as torch
    tensors. A stored matrix whose parts do not fit together is a ``ValueError``
    naming it. The matrices are made dense by :func:`.stored_matrices.decode_arrays`,
    the one reader the NumPy path of a linear run shares."""
    import torch

    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in decode_arrays(stored).items()}


__all__ = ["encode", "decode", "materialize", "sparse_parts", "is_quantised"]
