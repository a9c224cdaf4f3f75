"""The validation split: which rows are held out, decided row by row from
the text alone, so it is known before any pass over the corpus and is the
same on every worker, for every partitioning and every run.

A continued run (``--init-from``, ``partial_fit``) holds out less: the rows
its starting model already learned (a LinearSVM's twin learns its validation
rows, :mod:`lancetnic_flow.models.margin`) would not test it, so those the
hash holds out train instead, and those of a separate validation source are
skipped (counted, with their reason). The run folder names those rows by the 64-bit hashes of their text
(:mod:`lancetnic_flow.runs.learned_rows`); :class:`Holdout` carries them to
every task that splits rows, so the fit pass, the shards and every epoch
agree on the split.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .hashing import hash_strings, unit_of

# At most this many held-out rows' hashes are recorded (8 bytes each: 32 MiB), whatever --learn-val asks.
RECORD_MAX = 1 << 22


def _no_hashes() -> np.ndarray:
    return np.zeros(0, np.uint64)


@dataclass(frozen=True, eq=False)
class Holdout:
    """A run's validation split: ``fraction`` of the rows by the hash of their
    text (0 when a separate source validates), less the rows whose text hash
    is in ``learned`` (sorted, unique): rows the model a continued run starts
    from already learned, which train instead. ``record``: the fit pass
    returns the hashes of up to this many held-out rows (0: none), for the
    run folder to say which rows its model learned."""

    fraction: float
    learned: np.ndarray = field(default_factory=_no_hashes)
    record: int = 0


def fraction_of(held: float | Holdout) -> float:
    return held.fraction if isinstance(held, Holdout) else float(held)


def split_rows(table: pa.Table, held: float | Holdout, split: str | None = None) -> tuple[np.ndarray, int]:
    """Which of ``table``'s rows are validation rows, and how many rows the hash
    would have held out that the starting model learned (they train instead).
    ``split`` forces the source's rows into one split ("val": a separate
    validation source, whose learned rows :func:`learned_rows` finds)."""
    n = table.num_rows
    fraction = fraction_of(held)
    learned = held.learned if isinstance(held, Holdout) else _no_hashes()
    if split is not None:
        return np.full(n, split == "val"), 0
    if fraction <= 0:
        return np.zeros(n, bool), 0
    if fraction >= 1 and not learned.size:
        return np.ones(n, bool), 0
    hashes = hash_strings(table["text"])
    is_val = unit_of(hashes) < fraction
    if not learned.size or not is_val.any():
        return is_val, 0
    seen = np.zeros(n, bool)
    rows = np.flatnonzero(is_val)
    seen[rows] = _among(hashes[rows], learned)
    return is_val & ~seen, int(seen.sum())


def learned_rows(table: pa.Table, held: float | Holdout) -> np.ndarray | None:
    """The rows whose text the starting model learned (None: it learned none
    beyond its training rows): a separate validation source leaves them out."""
    if not isinstance(held, Holdout) or not held.learned.size or not table.num_rows:
        return None
    return _among(hash_strings(table["text"]), held.learned)


def validation_mask(table: pa.Table, held: float | Holdout, split: str | None = None) -> np.ndarray:
    """Rows that belong to validation (:func:`split_rows`, without the count)."""
    return split_rows(table, held, split)[0]


def held_out_hashes(table: pa.Table, is_val: np.ndarray) -> np.ndarray:
    """The text hashes of the validation rows (``is_val``), what the run folder records."""
    if not is_val.any():
        return _no_hashes()
    return hash_strings(table["text"] if is_val.all() else table["text"].filter(pa.array(is_val)))


def _among(hashes: np.ndarray, learned: np.ndarray) -> np.ndarray:
    """Which ``hashes`` are in ``learned`` (sorted): a binary search each."""
    at = np.searchsorted(learned, hashes)
    return learned[np.minimum(at, len(learned) - 1)] == hashes


def merge_hashes(parts: list[np.ndarray], limit: int) -> tuple[np.ndarray | None, int]:
    """Recorded hashes of several partitions as one sorted, unique array, or
    None when there are more than ``limit`` (then the count of them, which the
    record lost)."""
    total = sum(len(p) for p in parts)
    if total > limit:
        return None, total
    return np.unique(np.concatenate(parts)) if parts else _no_hashes(), 0
