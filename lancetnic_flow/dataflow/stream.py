"""From shards to batches: the streaming side of the dataflow.

* :func:`cached_blocks` and :func:`live_blocks` yield an epoch's row blocks:
  partitions in a per-epoch seeded order from the manifest, or as a
  :class:`~.window.OrderedWindow` of featurisation tasks hands them back.
* :class:`BatchStream` is an epoch's iterable of batches: a background
  prefetch thread, a bounded row shuffle buffer, fixed-size batches. It
  needs no torch (a LinearSVM run never imports it); a loop of one's own
  iterates it directly (workflows/custom_loop.py).

Trainer memory: ``in_flight`` task results (addresses and counts only),
``prefetch_depth`` + 2 loaded shards (queued, being read, being shuffled
in), the shuffle buffer (under twice ``shuffle_buffer`` rows + one shard's,
three times ``shuffle_buffer`` while it is compacted: :class:`_Buffer`),
and ``BATCHES_AHEAD`` batches.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, Iterator

import numpy as np

from ..features.rows import RowBlock
from .shards import PartitionResult, ShardInfo, load_shard


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order partitions are visited in ``epoch``: a pure function of seed and epoch."""
    return np.random.default_rng([seed, epoch, 0xA5]).permutation(n)


def shuffle_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator an epoch's shuffle buffer draws from: a pure function of seed and epoch."""
    return np.random.default_rng([seed, epoch, 0x5B])


def cached_blocks(shards: list[ShardInfo], seed: int, epoch: int,
                  load: Callable[[ShardInfo], RowBlock]) -> Iterator[RowBlock]:
    """An epoch's training blocks from the cache, partitions in seeded order."""
    by_part: dict[int, list[ShardInfo]] = {}
    for s in shards:
        by_part.setdefault(s.partition, []).append(s)
    keys = sorted(by_part)
    for i in epoch_order(len(keys), seed, epoch):
        for s in sorted(by_part[keys[i]], key=lambda s: s.chunk):
            yield load(s)


def live_blocks(results: Iterable[PartitionResult], split: str, cache_options: dict) -> Iterator[RowBlock]:
    """Blocks of ``split`` as featurisation results arrive."""
    for res in results:
        for s in res.shards:
            if s.split == split:
                yield load_shard(s, cache_options)


def prefetch(it: Iterator, depth: int = 2) -> Iterator:
    """Run ``it`` in a thread, ``depth`` items ahead; errors re-raise here."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put((item, None), timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((done, None))
        except BaseException as exc:  # handed to the consumer
            q.put((done, exc))

    t = threading.Thread(target=run, name="lancetnic-prefetch", daemon=True)
    t.start()
    try:
        while True:
            item, exc = q.get()
            if item is done:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()


class _Buffer:
    """The shuffle buffer's rows: the blocks as they arrived (and, after a
    compaction, one block of the rows kept from them), each row addressed by
    its place in arrival order. Blocks are never concatenated: a batch is
    gathered from all of them at once (:meth:`RowBlock.gather`).

    Rows let out stay in their block until the rows let out outnumber those
    still waiting (or the blocks pass ``MAX_PARTS``); only then are the
    waiting rows gathered into one block. Compacting at every block copied
    the whole buffer for each block's worth of batches (four copies of a row
    for a 20,000-row buffer of 5,000-row shards); this way a row is copied
    about once more than the batch it ends in, and what is held stays under
    twice the waiting rows plus the block just arrived."""

    MAX_PARTS = 16

    def __init__(self) -> None:
        self.parts: list[RowBlock] = []
        self.starts = np.zeros(1, np.int64)   # each part's first place, then the total

    def __len__(self) -> int:
        return int(self.starts[-1])

    def add(self, block: RowBlock) -> None:
        self.parts.append(block)
        self.starts = np.append(self.starts, self.starts[-1] + len(block))

    def _where(self, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        which = np.searchsorted(self.starts, places, side="right") - 1
        return which, places - self.starts[which]

    def take(self, places: np.ndarray) -> RowBlock:
        return RowBlock.gather(self.parts, *self._where(places))

    def lengths(self, places: np.ndarray) -> np.ndarray:
        which, rows = self._where(places)
        out = np.empty(len(places), np.int64)
        for k, part in enumerate(self.parts):
            sel = np.flatnonzero(which == k)
            out[sel] = part.offsets[rows[sel] + 1] - part.offsets[rows[sel]]
        return out

    def waiting(self, order: np.ndarray) -> np.ndarray:
        """``order`` (the places of the rows not let out yet, in their shuffled
        order) after compacting when it is due; the same rows in the same order,
        their places renumbered if the buffer was compacted."""
        let_out = len(self) - len(order)
        if let_out < len(order) and len(self.parts) <= self.MAX_PARTS:
            return order
        # The waiting rows gathered in the buffer's own order: a gather that
        # reads memory front to back (a permuted one misses the cache on every row).
        by_place = np.argsort(order, kind="stable")
        kept = self.take(order[by_place])
        self.parts, self.starts = [kept], np.array([0, len(kept)], np.int64)
        renumbered = np.empty(len(order), np.int64)
        renumbered[by_place] = np.arange(len(order), dtype=np.int64)
        return renumbered


def _cut(buf: _Buffer, rows: np.ndarray, batch_size: int, rng: np.random.Generator,
         by_length: bool) -> Iterator[RowBlock]:
    """``rows`` of ``buf`` (in their shuffled order) as batches; ``by_length``:
    the rows sorted by length first, so each batch holds rows of similar
    length, and the batches in a shuffled order."""
    if not by_length:
        for first in range(0, len(rows), batch_size):
            yield buf.take(rows[first:first + batch_size])
        return
    lengths = buf.lengths(rows)
    rows = rows[np.argsort(lengths, kind="stable")]
    firsts = np.arange(0, len(rows), batch_size)
    for first in firsts[rng.permutation(len(firsts))]:
        yield buf.take(rows[first:first + batch_size])


def shuffled_batches(blocks: Iterable[RowBlock], batch_size: int, buffer_rows: int,
                     rng: np.random.Generator | None, by_length: bool = False) -> Iterator[RowBlock]:
    """Cut blocks into batches; with ``rng``, rows pass a bounded shuffle buffer.

    The buffer holds at most ``buffer_rows`` rows plus one incoming block:
    its rows in arrival order, and a permuted order over them. Each block is
    added (not copied: :class:`_Buffer`) and the order permuted; each batch
    is gathered from the buffer on its own (vectorised CSR gathers, never row
    by row), and the rows that stay are gathered into one block when enough
    rows have left (:class:`_Buffer`). So no batch holds on to the buffer.
    Rows come out exactly as if the buffer were permuted in place every time.

    ``by_length`` (rows that are sequences): the rows let out at once are
    batched by length, in a shuffled batch order; a sequence model then pads
    a batch's rows to about their own length (models/lancet.py)."""
    if rng is None:
        yield from _batches_in_order(blocks, batch_size)
        return
    buf = _Buffer()
    order = np.zeros(0, np.int64)
    for block in blocks:
        if not len(block):
            continue
        start = len(buf)
        buf.add(block)
        block = None   # noqa: F841  (the buffer has its rows: let the block go)
        order = np.concatenate([order, np.arange(start, len(buf), dtype=np.int64)])
        order = order[rng.permutation(len(order))]
        n_out = (len(order) - buffer_rows) // batch_size * batch_size
        if n_out > 0:
            yield from _cut(buf, order[:n_out], batch_size, rng, by_length)
            order = buf.waiting(order[n_out:])
    order = order[rng.permutation(len(order))]
    if len(buf):
        yield from _cut(buf, order, batch_size, rng, by_length)


def shuffled_ids(lengths: Iterable[int], batch_size: int, buffer_rows: int,
                 rng: np.random.Generator) -> Iterator[np.ndarray]:
    """The rows :func:`shuffled_batches` lets out of blocks of ``lengths`` rows
    (arrival order), batch by batch, as places in the blocks' concatenation:
    the same rows in the same batches, drawn by the same calls on ``rng``,
    and no row copied. For rows already held in memory (a ``--ddp`` rank's
    kept shards: :mod:`.kept`), where gathering each batch cost a rank as
    much CPU as a quarter of its training."""
    order = np.zeros(0, np.int64)
    start = 0
    for n in lengths:
        if not n:
            continue
        order = np.concatenate([order, np.arange(start, start + n, dtype=np.int64)])
        start += n
        order = order[rng.permutation(len(order))]
        n_out = (len(order) - buffer_rows) // batch_size * batch_size
        if n_out > 0:
            for first in range(0, n_out, batch_size):
                yield order[first:first + batch_size]
            order = order[n_out:]
    order = order[rng.permutation(len(order))]
    for first in range(0, len(order), batch_size):
        yield order[first:first + batch_size]


def _batches_in_order(blocks: Iterable[RowBlock], batch_size: int) -> Iterator[RowBlock]:
    buf: RowBlock | None = None
    for block in blocks:
        if not len(block):
            continue
        buf = block if buf is None or not len(buf) else RowBlock.concat([buf, block])
        n_out = len(buf) // batch_size * batch_size
        for start in range(0, n_out, batch_size):
            yield buf.slice(start, start + batch_size)
        buf = buf.slice(n_out, len(buf))
    if buf is not None:
        for start in range(0, len(buf), batch_size):
            yield buf.slice(start, start + batch_size)


BATCHES_AHEAD = 8


class BatchStream:
    """Batches of one epoch, as :class:`RowBlock`; ``blocks`` is called once per iteration."""

    def __init__(self, blocks: Callable[[], Iterator[RowBlock]], *, batch_size: int, shuffle_buffer: int,
                 seed: int, epoch: int, shuffle: bool = True, prefetch_depth: int = 2, by_length: bool = False):
        self.blocks, self.batch_size, self.shuffle_buffer = blocks, batch_size, shuffle_buffer
        self.seed, self.epoch, self.shuffle, self.prefetch_depth = seed, epoch, shuffle, prefetch_depth
        self.by_length = by_length

    def __iter__(self) -> Iterator[RowBlock]:
        rng = shuffle_rng(self.seed, self.epoch) if self.shuffle else None
        # Two threads ahead of the training loop: one reads shards, one shuffles
        # them into batches; the loop itself only trains.
        batches = shuffled_batches(prefetch(self.blocks(), self.prefetch_depth), self.batch_size,
                                   self.shuffle_buffer, rng, self.by_length)
        return prefetch(batches, BATCHES_AHEAD)
