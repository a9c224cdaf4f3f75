"""A rank's kept shards as an epoch of batches named by their rows, not copied.

Once every shard of a ``--ddp`` rank's share is kept in memory (it owns its
share for the run: training/ddp/rank.py), an epoch's batches need no
gathering: :func:`.stream.shuffled_ids` names the rows the shuffle buffer
would let out, and the linear model's step reads each row where it lies
(models/margin.py, ``hinge_picks``). The rows, their order and the batches
are those of :class:`.stream.BatchStream` over the same blocks, so the
weights are the same bit for bit; what goes is the copying, about a
quarter of a rank's CPU on two cores (docs/benchmarks.md).

Memory: the blocks are the kept ones (nothing copied); an epoch adds, per
row, its block and place (8 bytes each), its label and its length — about
30 bytes a row (6 MB for 220,000 rows).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..features.rows import RowBlock
from .stream import shuffle_rng, shuffled_ids


@dataclass
class PickedBatch:
    """A batch named by its rows: row ``rows[j]`` of block ``which[j]``."""

    which: np.ndarray
    rows: np.ndarray
    labels: np.ndarray
    nnz: int                 # the rows' stored terms (the batch's tokens)
    targets: None = None

    def __len__(self) -> int:
        return len(self.rows)


class KeptEpoch:
    """One epoch of batches over kept ``blocks`` (in the epoch's arrival
    order), as :class:`~.stream.BatchStream` would cut them with the same
    seed, epoch, batch size and buffer."""

    def __init__(self, blocks: list[RowBlock], *, batch_size: int, shuffle_buffer: int, seed: int, epoch: int):
        self.blocks = [b for b in blocks if len(b)]
        lengths = np.array([len(b) for b in self.blocks], np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)])
        self.block_of = np.repeat(np.arange(len(self.blocks), dtype=np.int64), lengths)
        self.row_of = np.arange(int(starts[-1]), dtype=np.int64) - starts[self.block_of]
        self.labels = (np.concatenate([b.labels for b in self.blocks]) if self.blocks
                       else np.zeros(0, np.int32))
        self.row_nnz = (np.concatenate([np.diff(b.offsets) for b in self.blocks]) if self.blocks
                        else np.zeros(0, np.int64))
        self.batch_size, self.shuffle_buffer, self.seed, self.epoch = batch_size, shuffle_buffer, seed, epoch
        self.compiled = None   # the blocks' arrays as the compiled step takes them (models/margin.py)

    @staticmethod
    def fits(blocks: list[RowBlock]) -> bool:
        """Blocks a picked epoch can train on: weighted rows with labels, no
        targets or numeric columns, and arrays of one kind in every block (the
        compiled step takes each kind as one typed list)."""
        blocks = [b for b in blocks if len(b)]
        if not all(b.values is not None and b.labels is not None and b.targets is None and b.numeric is None
                   and b.label_names is None for b in blocks):
            return False
        arrays = [(b.indices, b.offsets, b.values, b.labels) for b in blocks]
        kinds = {tuple((a.dtype, a.ndim) for a in group) for group in arrays}
        return len(kinds) == 1 and all(a.flags.c_contiguous for group in arrays for a in group)

    def __iter__(self) -> Iterator[PickedBatch]:
        rng = shuffle_rng(self.seed, self.epoch)   # BatchStream's
        for ids in shuffled_ids((len(b) for b in self.blocks), self.batch_size, self.shuffle_buffer, rng):
            yield PickedBatch(self.block_of[ids], self.row_of[ids], self.labels[ids], int(self.row_nnz[ids].sum()))
