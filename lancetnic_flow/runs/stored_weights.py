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

from typing import Any

import torch

from .tensor_file import Streamed

SUFFIXES = ("shape", "rows", "counts", "cols", "values", "scale", "int8")
# Matrices smaller than this are stored as they are: a few KiB, not worth a second format.
MIN_ELEMENTS = 1 << 16
# Sparse storage takes about 5 bytes an entry (4 with the dense layout): past this share of
# non-zero entries it would not be smaller.
MAX_DENSITY = 0.6
CHUNK = 1 << 13


def _narrow(top: int) -> torch.dtype:
    """The smallest integer type safetensors and torch share that holds 0..top."""
    if top < 256:
        return torch.uint8
    if top < 2**15:
        return torch.int16
    return torch.int32


def _eligible(t: torch.Tensor) -> bool:
    return t.ndim == 2 and t.dtype == torch.float32 and t.numel() >= MIN_ELEMENTS


def _chunks(t: torch.Tensor, scale: torch.Tensor | None):
    """``t`` in CHUNK rows at a time: (first row, the rows — 8-bit integers as floats
    with ``scale`` —, their non-zero mask)."""
    for start in range(0, t.shape[0], CHUNK):
        block = t[start:start + CHUNK]
        if scale is not None:
            block = torch.round(block / scale).clamp_(-127, 127)
        yield start, block, block != 0


def sparse_parts(name: str, t: torch.Tensor, int8: bool = False) -> dict[str, Any] | None:
    """``t``'s stored tensors under ``name``, or None when storing it dense is as small (or ``t`` is not
    a float32 matrix large enough to matter) and it is not to be quantised. The entries are
    :class:`~.tensor_file.Streamed`: made chunk by chunk as the file is written, never whole."""
    if not _eligible(t):
        return None
    t = t.detach().cpu()
    n_rows, n_cols = t.shape
    scale = None
    if int8:
        top = t.abs().amax(dim=0)
        scale = torch.where(top > 0, top / 127, torch.ones_like(top))
    held = entries = 0
    for _, _, mask in _chunks(t, scale):   # a first pass counts: the header needs the sizes
        held += int(mask.any(dim=1).sum())
        entries += int(mask.sum())
    if scale is None and entries > MAX_DENSITY * t.numel():
        return None
    if scale is not None and entries > 0.5 * t.numel():
        # Mostly non-zero (a network that starts from random weights): a byte an entry
        # as a plain matrix, where entries would take two.
        q = torch.round(t / scale).clamp_(-127, 127).to(torch.int8)
        return {f"{name}:int8": q, f"{name}:scale": scale.to(torch.float32)}
    col_type, count_type = _narrow(n_cols - 1), _narrow(n_cols)
    value_type = torch.int8 if scale is not None else torch.float32

    def rows():
        for start, _, mask in _chunks(t, scale):
            yield (mask.any(dim=1).nonzero().squeeze(1) + start).to(torch.int32)

    def counts():
        for _, _, mask in _chunks(t, scale):
            per_row = mask.sum(dim=1)
            yield per_row[per_row > 0].to(count_type)

    def cols():
        for _, _, mask in _chunks(t, scale):
            yield mask.nonzero(as_tuple=True)[1].to(col_type)   # row-major: a row's entries together

    def values():
        for _, block, mask in _chunks(t, scale):
            yield block[mask].to(value_type)                    # the same row-major order

    out: dict[str, Any] = {
        f"{name}:shape": torch.tensor([n_rows, n_cols], dtype=torch.int64),
        f"{name}:rows": Streamed(torch.int32, (held,), rows), f"{name}:counts": Streamed(count_type, (held,), counts),
        f"{name}:cols": Streamed(col_type, (entries,), cols), f"{name}:values": Streamed(value_type, (entries,), values)}
    if scale is not None:
        out[f"{name}:scale"] = scale.to(torch.float32)
    return out


def materialize(stored: dict[str, Any]) -> dict[str, torch.Tensor]:
    """:func:`encode`'s tensors with every streamed one made whole (for checks, not the trainer)."""
    def whole(t: Any) -> torch.Tensor:
        if not isinstance(t, Streamed):
            return t
        pieces = [torch.as_tensor(p) for p in t.pieces()]
        return torch.cat(pieces) if pieces else torch.zeros(t.shape, dtype=t.dtype)

    return {k: whole(v) for k, v in stored.items()}


def encode(state: dict[str, torch.Tensor], int8: bool = False) -> dict[str, Any]:
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
    """The model state a file's tensors hold (:func:`encode` undone). A
    stored matrix whose parts do not fit together is a ``ValueError`` naming it."""
    out: dict[str, torch.Tensor] = {}
    sparse: dict[str, dict[str, torch.Tensor]] = {}
    for key, t in stored.items():
        name, sep, part = key.rpartition(":")
        if sep and part in SUFFIXES:
            sparse.setdefault(name, {})[part] = t
        else:
            out[key] = t
    for name, p in sparse.items():
        out[name] = _dense(name, p)
    return out


def _dense(name: str, p: dict[str, torch.Tensor]) -> torch.Tensor:
    if "int8" in p:   # a plain 8-bit matrix and its scale per column
        q, scale = p["int8"], p.get("scale")
        if q.ndim != 2 or scale is None or scale.shape != (q.shape[1],):
            raise ValueError(f"the stored matrix {name} has an 8-bit matrix of shape {list(q.shape)} and "
                             f"{'no scale' if scale is None else f'{scale.numel():,} scales'}")
        return q.to(torch.float32) * scale.to(torch.float32)
    missing = [s for s in SUFFIXES[:5] if s not in p]
    if missing:
        raise ValueError(f"the stored matrix {name} lacks its {', '.join(missing)}")
    shape, rows, counts, cols, values = (p[s] for s in SUFFIXES[:5])
    if shape.numel() != 2:
        raise ValueError(f"the stored matrix {name} has a shape of {shape.numel()} numbers, not 2")
    n_rows, n_cols = (int(x) for x in shape)
    counts64 = counts.to(torch.int64)
    entries = int(counts64.sum())
    if not (len(rows) == len(counts) and entries == len(cols) == len(values)):
        raise ValueError(f"the stored matrix {name} has {len(rows):,} rows with {len(counts):,} counts "
                         f"summing to {entries:,}, for {len(cols):,} columns and {len(values):,} values")
    rows64, cols64 = rows.to(torch.int64), cols.to(torch.int64)
    if len(rows) and (int(rows64.min()) < 0 or int(rows64.max()) >= n_rows):
        raise ValueError(f"the stored matrix {name} names a row outside its {n_rows:,}")
    if entries and (int(cols64.min()) < 0 or int(cols64.max()) >= n_cols):
        raise ValueError(f"the stored matrix {name} names a column outside its {n_cols:,}")
    vals = values.to(torch.float32)
    if "scale" in p:
        scale = p["scale"].to(torch.float32)
        if scale.shape != (n_cols,):
            raise ValueError(f"the stored matrix {name} has {scale.numel():,} scales for {n_cols:,} columns")
        vals = vals * scale[cols64]
    dense = torch.zeros(n_rows * n_cols, dtype=torch.float32)
    dense[torch.repeat_interleave(rows64, counts64) * n_cols + cols64] = vals
    return dense.view(n_rows, n_cols)


def is_quantised(stored_names: list[str] | set[str]) -> bool:
    """Whether a file's tensors include 8-bit matrices (a compacted copy of a run)."""
    return any(n.endswith(":scale") for n in stored_names)


__all__ = ["encode", "decode", "materialize", "sparse_parts", "is_quantised"]
