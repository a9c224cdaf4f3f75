"""The rows a run holds out, and the record of those its model learned.

A LinearSVM whose twin learns the validation rows is saved having learned
them; the run folder says which (:mod:`lancetnic_flow.runs.learned_rows`),
so a run continued from it trains on them instead of validating on them
(:class:`~lancetnic_flow.features.split.Holdout`).

Where the hashes come from: the fit pass, which splits every row anyway,
returns the text hashes of the validation rows when the run may learn them
(:func:`holdout_for`), and a cache entry keeps them (``held_out.v2.u64``) for
the runs that reuse it. When neither has them (an entry written without
them, a separate validation source that the vocabulary modes' fit pass
does not read, or validation rows of a label training never had, which the
model skips and never learns) a pass that only reads and hashes the text of
the rows of the run's classes makes them, on the cluster while the epochs train.

Memory: 8 bytes per validation row, at most ``Holdout.record`` rows
(``LEARN_VAL_MAX_ROWS`` by default, :data:`~lancetnic_flow.features.split.RECORD_MAX`
with ``--learn-val``); past it the record is marked incomplete.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..data.sources import Columns, Partition
from ..features.fit import held_out_partition
from ..features.label_values import counted_names
from ..features.split import RECORD_MAX, Holdout
from ..features.vocab import FitStats, merge_stats
from ..resolve import LEARN_VAL_MAX_ROWS
from ..runs.learned_rows import LearnedRows, hashes_bytes, hashes_of
from ..storage import join, read_bytes, write_bytes
from .keep_learning import InitRun

# Versioned: an entry written before records left out the validation rows of
# labels training never had keeps those rows too, so it is not read.
ENTRY_FILE = "held_out.v2.u64"


def holdout_for(fraction: float, init: InitRun | None, learn_val: bool | None, learns_val: bool) -> float | Holdout:
    """The split a run's tasks apply: ``fraction`` by hash, less the rows ``init`` (the
    run continued) learned; recording the validation rows' hashes when the model may
    learn them (``learn_val`` True, or None: decided by the rows, up to ``LEARN_VAL_MAX_ROWS``).
    A plain fraction when there is neither, as every run before continued runs had."""
    learned = init.learned.hashes if init is not None else np.zeros(0, np.uint64)
    record = 0 if not learns_val or learn_val is False else RECORD_MAX if learn_val else LEARN_VAL_MAX_ROWS
    if not learned.size and not record:
        return fraction
    return Holdout(fraction, learned, record)


class HeldOut:
    """The text hashes of this run's validation rows, from the fit pass, the
    cache entry, or a pass of their own (:meth:`start_pass`)."""

    def __init__(self, held: float | Holdout):
        self.held = held
        self.record = held.record if isinstance(held, Holdout) else 0
        self.hashes: np.ndarray | None = None
        self.lost = 0                 # validation rows past the record's limit
        self.pending: list | None = None
        self.missing: list[tuple[Partition, str | None]] = []   # partitions the fit pass did not record

    def take(self, stats: FitStats, unread: list[tuple[Partition, str | None]] = (),
             labels: list[str] | None = None, partitions: list[tuple[Partition, str | None]] = ()) -> None:
        """The fit pass's record (its totals); ``unread``: the partitions (with their
        forced split) that pass did not read, left for :meth:`start_pass`.

        The fit pass hashes its validation rows before the classes are known, so
        when one has a label outside ``labels`` (the run's classes) its record
        holds a row no model learns: :meth:`start_pass` then hashes every one of
        ``partitions`` again, keeping only the rows of those classes (a label
        written otherwise, read as the run's, is one of them)."""
        if not self.record:
            return
        self.lost = stats.held_out_lost
        self.hashes = None if self.lost else np.unique(stats.held_out if stats.held_out is not None
                                                       else np.zeros(0, np.uint64))
        self.missing = list(unread)
        if not self.lost and labels is not None and counted_names(stats.val_labels, labels)[1]:
            self.hashes, self.missing = None, list(partitions)

    def write_entry(self, entry: str, cache_options: dict) -> None:
        """Keep a whole record in the cache entry, for the runs that reuse it."""
        if self.hashes is not None and not self.missing:
            write_bytes(join(entry, ENTRY_FILE), hashes_bytes(self.hashes), cache_options)

    def read_entry(self, entry: str, cache_options: dict, partitions: list[tuple[Partition, str | None]]) -> None:
        """The record a cache entry kept; without one (an entry written without it,
        or a damaged one) every one of ``partitions`` is left for :meth:`start_pass`."""
        if not self.record:
            return
        try:
            data = read_bytes(join(entry, ENTRY_FILE), cache_options)
        except FileNotFoundError:
            data = None
        if data is not None and len(data) % 8 == 0 and len(data) // 8 <= self.record:
            self.hashes = hashes_of(data)
        else:
            self.missing = list(partitions)

    def start_pass(self, client: Any, columns: Columns, storage_options: dict, chunk_bytes: int,
                   labels: list[str] | None = None) -> None:
        """Hash the validation rows (of ``labels``, the run's classes, when given) of the
        partitions no record covers, on the cluster beside the epochs; :meth:`learned` waits for them."""
        if not self.missing or self.lost:
            return
        parts, splits = zip(*self.missing)
        self.pending = client.map(held_out_partition, list(parts), list(splits), columns=columns,
                                  storage_options=storage_options, chunk_bytes=chunk_bytes, val_fraction=self.held,
                                  labels=labels, pure=False, priority=-10)

    def learned(self, model_learned_them: bool, init: InitRun | None) -> LearnedRows:
        """What the saved model learned besides its training rows: the rows ``init``
        learned, and this run's validation rows when ``model_learned_them``."""
        out = init.learned if init is not None else LearnedRows()
        if not model_learned_them:
            return out
        if self.pending is not None:
            mine = FitStats(held_out=self.hashes, held_out_limit=self.record) if self.hashes is not None else None
            stats = merge_stats([f.result() for f in self.pending] + [mine])
            self.pending = None
            self.take(stats)
        complete = self.hashes is not None and not self.missing
        return out.union(LearnedRows(self.hashes, True) if complete else LearnedRows(complete=False))
