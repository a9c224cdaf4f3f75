"""RowBlock (CSR) round trips, safe shard bytes, the bounded shuffle buffer,
the OrderedWindow's window and order, and seeded epoch order."""
from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
import pytest

from lancetnic_flow.dataflow.stream import BatchStream, epoch_order, prefetch, shuffled_batches
from lancetnic_flow.dataflow.window import OrderedWindow
from lancetnic_flow.features import rows as rows_module
from lancetnic_flow.features.rows import RowBlock

from helpers import timed_task

DIM = 11


def random_block(n: int, seed: int = 0, start_id: int = 0) -> tuple[RowBlock, np.ndarray]:
    """A random CSR block and its dense reference; labels carry a unique row id."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n, DIM)) < 0.3, rng.random((n, DIM)), 0.0).astype(np.float32)
    dense[rng.random(n) < 0.2] = 0.0  # some empty rows
    rows, cols = np.nonzero(dense)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    block = RowBlock(cols.astype(np.int32), offsets, dense[rows, cols],
                     labels=np.arange(start_id, start_id + n, dtype=np.int32),
                     targets=rng.random(n).astype(np.float32),
                     numeric=rng.random((n, 2)).astype(np.float32))
    return block, dense


def dense_of(block: RowBlock) -> np.ndarray:
    out = np.zeros((len(block), DIM), np.float32)
    for i in range(len(block)):
        s, e = block.offsets[i], block.offsets[i + 1]
        out[i, block.indices[s:e]] = block.values[s:e]
    return out


# ---------------------------------------------------------------- RowBlock


def test_rowblock_take_matches_dense_fancy_indexing():
    block, dense = random_block(40, seed=1)
    for rows in (np.array([3, 0, 39, 3, 17]), np.arange(40)[::-1], np.array([], np.int64),
                 np.random.default_rng(2).permutation(40)):
        got = block.take(rows)
        assert len(got) == len(rows)
        np.testing.assert_array_equal(dense_of(got), dense[rows])
        np.testing.assert_array_equal(got.labels, block.labels[rows])
        np.testing.assert_array_equal(got.targets, block.targets[rows])
        np.testing.assert_array_equal(got.numeric, block.numeric[rows])
        assert got.offsets[0] == 0 and (np.diff(got.offsets) >= 0).all()


def test_rowblock_slice_and_concat_round_trip_to_the_dense_reference():
    block, dense = random_block(50, seed=3)
    pieces = [block.slice(0, 7), block.slice(7, 7), block.slice(7, 31), block.slice(31, 999)]
    assert [len(p) for p in pieces] == [7, 0, 24, 19]
    back = RowBlock.concat(pieces)
    np.testing.assert_array_equal(dense_of(back), dense)
    np.testing.assert_array_equal(back.labels, block.labels)
    np.testing.assert_array_equal(back.numeric, block.numeric)
    np.testing.assert_array_equal(back.offsets, block.offsets)
    other, dense2 = random_block(9, seed=4, start_id=50)
    both = RowBlock.concat([block, other])
    np.testing.assert_array_equal(dense_of(both), np.concatenate([dense, dense2]))
    np.testing.assert_array_equal(both.labels, np.arange(59))


def test_rowblock_bytes_round_trip_keeps_every_array():
    block, dense = random_block(30, seed=5)
    back = RowBlock.from_bytes(block.to_bytes())
    for name in ("indices", "offsets", "values", "labels", "targets", "numeric"):
        np.testing.assert_array_equal(getattr(back, name), getattr(block, name))
        assert getattr(back, name).dtype == getattr(block, name).dtype
    seq = RowBlock(np.array([5, 1, 2], np.int32), np.array([0, 2, 3], np.int64))
    back = RowBlock.from_bytes(seq.to_bytes())
    assert back.values is None and back.indices.tolist() == [5, 1, 2]


class _Plant:
    """Unpickling this would create ``path``."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_rowblock_from_bytes_refuses_pickled_data(tmp_path):
    marker = tmp_path / "pwned"
    # an .npz whose member is an object array: numpy would need pickle to read it
    buf = io.BytesIO()
    np.savez(buf, indices=np.array([_Plant(str(marker))], dtype=object), offsets=np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="pickle"):
        RowBlock.from_bytes(buf.getvalue())
    # a bare pickle
    with pytest.raises(ValueError):
        RowBlock.from_bytes(pickle.dumps(_Plant(str(marker))))
    assert not marker.exists()


# ---------------------------------------------------------------- shuffle buffer


def blocks_of(sizes: list[int], seed: int = 0) -> list[RowBlock]:
    out, start = [], 0
    for i, n in enumerate(sizes):
        out.append(random_block(n, seed=seed + i, start_id=start)[0])
        start += n
    return out


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


SIZES = [37, 120, 5, 0, 64, 300, 1, 88, 150, 41]


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


# ---------------------------------------------------------------- OrderedWindow (real Dask tasks)


def _max_concurrency(log_dir: Path) -> tuple[int, int]:
    spans = [tuple(map(float, p.read_text().split()[:2])) for p in log_dir.iterdir()]
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best, len(spans)


def test_featurizer_never_has_more_than_window_tasks_in_flight(client, tmp_path):
    # 2 worker processes could run 2 tasks at once; a window of 1 must keep it to 1.
    log = tmp_path / "log"
    log.mkdir()
    jobs = [(i, 0.25) for i in range(6)]
    got = list(OrderedWindow(client, timed_task, jobs, 1, log_dir=str(log)))
    assert got == list(range(6))
    best, n = _max_concurrency(log)
    assert n == 6
    assert best == 1


def test_featurizer_uses_the_window_and_yields_in_submission_order(client, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    # later jobs finish first; results still come back in submission order
    jobs = [(i, 0.6 - 0.1 * i) for i in range(6)]
    got = list(OrderedWindow(client, timed_task, jobs, 2, log_dir=str(log)))
    assert got == list(range(6))
    best, n = _max_concurrency(log)
    assert n == 6 and best == 2  # the two workers were both used, never more


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


@pytest.mark.parametrize("step", [8192, 7, 1])
def test_rowblock_take_in_several_gather_steps_matches_one(step, monkeypatch):
    monkeypatch.setattr(rows_module, "GATHER_ROWS", step)
    block, dense = random_block(60, seed=12)
    rng = np.random.default_rng(4)
    for rows in (rng.permutation(60), rng.integers(0, 60, 200), np.array([59, 30, 0]), np.zeros(0, np.int64)):
        got = block.take(rows)
        np.testing.assert_array_equal(dense_of(got), dense[rows])
        np.testing.assert_array_equal(got.labels, block.labels[rows])
        assert got.offsets[-1] == len(got.indices) == len(got.values)
