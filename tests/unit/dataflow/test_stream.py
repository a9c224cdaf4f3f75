"""dataflow/stream.py: the bounded shuffle buffer, seeded batches and epoch
order, the prefetch thread, and an epoch's blocks read from cached shards."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.dataflow.stream import BatchStream, epoch_order, prefetch, shuffled_batches
from lancetnic_flow.features.rows import RowBlock

from ..blocks import SIZES, blocks_of, dense_of


class Meter:
    """Wraps a block iterator; records how many rows the consumer held each time it asked for more."""

    def __init__(self, blocks):
        self.blocks, self.consumed, self.yielded, self.held_at_pull = blocks, 0, 0, []

    def __iter__(self):
        for b in self.blocks:
            self.held_at_pull.append(self.consumed - self.yielded)
            self.consumed += len(b)
            yield b

    def batches(self, it):
        for batch in it:
            self.yielded += len(batch)
            yield batch


@pytest.mark.parametrize("shuffle", [True, False])
def test_shuffled_batches_yield_every_row_exactly_once_in_full_batches(shuffle):
    total = sum(SIZES)
    rng = np.random.default_rng(7) if shuffle else None
    batches = list(shuffled_batches(blocks_of(SIZES), 32, 100, rng))
    ids = np.concatenate([b.labels for b in batches])
    assert sorted(ids.tolist()) == list(range(total))
    sizes = [len(b) for b in batches]
    assert all(s == 32 for s in sizes[:-1]) and 0 < sizes[-1] <= 32
    assert len(batches) == -(-total // 32)
    if shuffle:
        assert ids.tolist() != list(range(total))
    else:
        assert ids.tolist() == list(range(total))  # no rng: input order
    # rows stay whole: every row's features travel with its label
    ref = {int(l): d for blk in blocks_of(SIZES) for l, d in zip(blk.labels, dense_of(blk))}
    for b in batches[:3]:
        for l, d in zip(b.labels, dense_of(b)):
            np.testing.assert_array_equal(d, ref[int(l)])


@pytest.mark.parametrize("block_rows,batch", [(50, 64), (50, 50), (173, 32)])
def test_shuffle_buffer_holds_at_most_buffer_rows_plus_one_block(block_rows, batch):
    sizes = [block_rows] * 30
    meter = Meter(blocks_of(sizes))
    buffer_rows = 300
    out = list(meter.batches(shuffled_batches(meter, batch, buffer_rows, np.random.default_rng(0))))
    assert sum(len(b) for b in out) == sum(sizes)
    # Before a new block is pulled the consumer holds at most buffer_rows (plus a partial batch),
    # so with the block it holds at most buffer + one block (+ < one batch).
    assert max(meter.held_at_pull) <= buffer_rows + batch - 1
    assert max(h + block_rows for h in meter.held_at_pull) <= buffer_rows + block_rows + batch - 1
    if block_rows % batch == 0 and buffer_rows % batch == 0:
        assert max(meter.held_at_pull) == buffer_rows  # aligned: exactly the buffer
    # and it streams: batches come out long before the input ends
    assert meter.held_at_pull[-1] < sum(sizes) // 4


def test_same_seed_gives_identical_batches_and_another_seed_different_ones():
    def run(seed):
        return [b.labels.tolist() for b in shuffled_batches(blocks_of(SIZES), 32, 100, np.random.default_rng(seed))]

    assert run(1) == run(1)
    assert run(1) != run(2)
    stream = lambda seed, epoch: [b.labels.tolist() for b in BatchStream(  # noqa: E731
        lambda: iter(blocks_of(SIZES)), batch_size=32, shuffle_buffer=100, seed=seed, epoch=epoch)]
    assert stream(0, 0) == stream(0, 0)
    assert stream(0, 0) != stream(0, 1)
    assert stream(0, 0) != stream(1, 0)
    assert sorted(sum(stream(0, 1), [])) == list(range(sum(SIZES)))


def test_prefetch_reraises_the_producers_error():
    def gen():
        yield 1
        yield 2
        raise RuntimeError("boom in producer")

    got = []
    with pytest.raises(RuntimeError, match="boom in producer"):
        for x in prefetch(gen(), depth=1):
            got.append(x)
    assert got == [1, 2]


def test_epoch_order_is_a_permutation_that_changes_per_epoch_and_repeats_per_seed():
    a0, a1, b0 = epoch_order(20, 0, 0), epoch_order(20, 0, 1), epoch_order(20, 1, 0)
    assert sorted(a0.tolist()) == list(range(20))
    assert a0.tolist() != a1.tolist() and a0.tolist() != b0.tolist()
    np.testing.assert_array_equal(a0, epoch_order(20, 0, 0))
    np.testing.assert_array_equal(a1, epoch_order(20, 0, 1))


def _concat_and_permute(blocks, batch_size, buffer_rows, rng):
    """The shuffle buffer as first written: concatenate, permute, cut, every block."""
    buf = None
    for block in blocks:
        if not len(block):
            continue
        buf = block if buf is None or not len(buf) else RowBlock.concat([buf, block])
        buf = buf.take(rng.permutation(len(buf)))
        n_out = (len(buf) - buffer_rows) // batch_size * batch_size
        if n_out > 0:
            for start in range(0, n_out, batch_size):
                yield buf.slice(start, start + batch_size)
            buf = buf.slice(n_out, len(buf))
    if buf is not None and len(buf):
        buf = buf.take(rng.permutation(len(buf)))
        for start in range(0, len(buf), batch_size):
            yield buf.slice(start, start + batch_size)


@pytest.mark.parametrize("sizes,batch,buffer_rows", [
    (SIZES, 32, 100), ([50] * 30, 64, 300), ([173, 0, 5, 400, 1, 90], 32, 0),
    ([7] * 40, 16, 1000), ([500, 3], 50, 50)])
def test_shuffle_buffer_gives_exactly_the_rows_of_concatenating_and_permuting(sizes, batch, buffer_rows):
    # Training results, resume equality and partition invariance rest on the
    # rows a seed gives: the copy-saving buffer must give the same batches.
    got = list(shuffled_batches(blocks_of(sizes), batch, buffer_rows, np.random.default_rng(3)))
    want = list(_concat_and_permute(blocks_of(sizes), batch, buffer_rows, np.random.default_rng(3)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for name in ("indices", "offsets", "values", "labels", "targets", "numeric"):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name))


def test_batches_by_length_hold_every_row_once_in_as_many_batches_each_of_similar_lengths():
    total = sum(SIZES)
    plain = list(shuffled_batches(blocks_of(SIZES), 32, 100, np.random.default_rng(3)))
    bucketed = list(shuffled_batches(blocks_of(SIZES), 32, 100, np.random.default_rng(3), by_length=True))
    ids = np.concatenate([b.labels for b in bucketed])
    assert sorted(ids.tolist()) == list(range(total))
    assert sorted(len(b) for b in bucketed) == sorted(len(b) for b in plain)
    # rows stay whole
    ref = {int(l): d for blk in blocks_of(SIZES) for l, d in zip(blk.labels, dense_of(blk))}
    for b in bucketed[:3]:
        for l, d in zip(b.labels, dense_of(b)):
            np.testing.assert_array_equal(d, ref[int(l)])

    def padding(batches):   # the steps a padded batch spends on padding
        return sum(len(b) * np.diff(b.offsets).max() - np.diff(b.offsets).sum() for b in batches)

    assert padding(bucketed) < 0.5 * padding(plain)
    # the batch order is shuffled, not shortest first
    longest = [np.diff(b.offsets).max() for b in bucketed]
    assert longest != sorted(longest)
    again = list(shuffled_batches(blocks_of(SIZES), 32, 100, np.random.default_rng(3), by_length=True))
    assert [b.labels.tolist() for b in again] == [b.labels.tolist() for b in bucketed]


def test_the_shuffle_buffer_copies_a_row_about_once_besides_its_batch_and_holds_under_twice_its_rows(monkeypatch):
    # Compacting the waiting rows after every block copied the whole buffer
    # per block (here: 4 copies of a row). Rows let out now stay in their
    # block until they outnumber the waiting ones.
    from lancetnic_flow.dataflow import stream

    held, copied = [], []
    waiting = stream._Buffer.waiting

    def record(self, order):
        held.append(len(self))
        out = waiting(self, order)
        if len(self) != held[-1]:
            copied.append(len(order))
        return out

    monkeypatch.setattr(stream._Buffer, "waiting", record)
    sizes, buffer_rows, batch = [500] * 40, 2000, 50
    got = list(shuffled_batches(blocks_of(sizes), batch, buffer_rows, np.random.default_rng(0)))
    assert sum(len(b) for b in got) == sum(sizes)
    assert max(held) <= 2 * buffer_rows + 500
    assert sum(copied) <= sum(sizes) + buffer_rows
    assert len(copied) >= 5   # and it does compact: held stays bounded
