"""Which rows a run's model learned besides its training rows.

A LinearSVM that learns its validation rows (``--learn-val``, on by default
up to ``LEARN_VAL_MAX_ROWS`` training rows) is saved having learned every
row of its data. A run continued from it (``--init-from``, ``partial_fit``)
on data that repeats those rows would validate on rows its starting model
learned, and report (and calibrate its probabilities on) a score the model
does not have on new text. So the run folder keeps the 64-bit hashes of the
text of those validation rows, and of the rows its own starting model had
learned, in ``learned_rows.u64`` (little-endian uint64, sorted, unique);
model.json records their count, the file's SHA-256, and whether the record
is complete. A continued run trains on those rows instead of holding them
out (:class:`lancetnic_flow.features.split.Holdout`).

Memory and size: 8 bytes per row, at most
:data:`~lancetnic_flow.features.split.RECORD_MAX` rows (32 MiB); a default
run records at most ``LEARN_VAL_MAX_ROWS`` rows (2 MB).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..errors import UserError
from ..storage import join, read_bytes, write_bytes

FILE = "learned_rows.u64"


def _none() -> np.ndarray:
    return np.zeros(0, np.uint64)


def hashes_bytes(hashes: np.ndarray) -> bytes:
    """Text hashes as stored: little-endian uint64, one after the other."""
    return np.ascontiguousarray(hashes, "<u8").tobytes()


def hashes_of(data: bytes) -> np.ndarray:
    """:func:`hashes_bytes` read back (ValueError when the bytes are not whole hashes)."""
    if len(data) % 8:
        raise ValueError(f"{len(data)} bytes are not a whole number of 8-byte hashes")
    return np.frombuffer(data, "<u8").astype(np.uint64)


@dataclass
class LearnedRows:
    """The text hashes of rows a model learned beyond its training rows (sorted,
    unique), and whether every such row is in them (``complete``: False when a
    record was too long, or the run that learned them kept none)."""

    hashes: np.ndarray = field(default_factory=_none)
    complete: bool = True

    def union(self, other: "LearnedRows") -> "LearnedRows":
        return LearnedRows(np.union1d(self.hashes, other.hashes).astype(np.uint64),
                           self.complete and other.complete)

    def digest(self) -> str:
        """Names the record in a cache key: the shards of a continued run depend on it."""
        return hashlib.sha256(self.hashes.astype("<u8").tobytes()).hexdigest()[:16] + ("" if self.complete else "-")


def write_learned(run: str, learned: LearnedRows, storage_options: dict) -> dict | None:
    """Write the record into ``run`` and return what model.json keeps of it (None: nothing to record)."""
    if not learned.hashes.size and learned.complete:
        return None
    data = hashes_bytes(learned.hashes)
    write_bytes(join(run, FILE), data, storage_options)
    return {"file": FILE, "rows": int(learned.hashes.size), "sha256": hashlib.sha256(data).hexdigest(),
            "complete": bool(learned.complete)}


def read_learned(run: str, meta: dict, config: dict, storage_options: dict) -> LearnedRows:
    """The record of a finished run (model.json ``meta``, its ``config``), checked
    against model.json. A run without one learned nothing beyond its training rows,
    unless it learned its validation rows (a run saved before the record): then
    the record is empty and incomplete."""
    record = meta.get("learned_rows")
    if not isinstance(record, dict):
        learned_val = bool((config.get("training") or {}).get("learn_val"))
        return LearnedRows(complete=not learned_val)
    url = join(run, FILE)
    try:
        data = read_bytes(url, storage_options)
    except FileNotFoundError:
        raise UserError(f"{url} is missing: {join(run, 'model.json')} records {record.get('rows')} learned rows "
                        "there", "restore the run folder whole (copy every file of it)") from None
    if hashlib.sha256(data).hexdigest() != record.get("sha256") or len(data) != 8 * int(record.get("rows", -1)):
        raise UserError(f"{url} is not the file {join(run, 'model.json')} was saved with (size or SHA-256 "
                        "differs)", "restore the run folder whole (copy every file of it)")
    return LearnedRows(hashes_of(data), bool(record.get("complete", True)))
