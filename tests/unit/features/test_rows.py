"""features/rows.py: RowBlock (CSR rows with labels, targets, numbers) —
take, slice and concat equal the dense reference, its bytes round trip, and
reading bytes never unpickles."""
from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

from lancetnic_flow.features.rows import RowBlock

from ..blocks import dense_of, random_block


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


@pytest.mark.parametrize("seed", [12, 13, 14])
def test_rowblock_take_gathers_the_rows_asked_in_any_order_with_repeats(seed):
    block, dense = random_block(60, seed=seed)
    rng = np.random.default_rng(4)
    for rows in (rng.permutation(60), rng.integers(0, 60, 200), np.array([59, 30, 0]), np.zeros(0, np.int64)):
        got = block.take(rows)
        np.testing.assert_array_equal(dense_of(got), dense[rows])
        np.testing.assert_array_equal(got.labels, block.labels[rows])
        assert got.offsets[-1] == len(got.indices) == len(got.values)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_gather_from_several_blocks_equals_take_from_their_concatenation(parts):
    blocks = [random_block(n, seed=s, start_id=100 * s)[0] for s, n in zip(range(parts), (17, 9, 23))]
    whole = RowBlock.concat(blocks)
    starts = np.cumsum([0] + [len(b) for b in blocks])
    rng = np.random.default_rng(parts)
    places = rng.integers(0, starts[-1], 40)          # any order, repeats allowed
    which = np.searchsorted(starts, places, side="right") - 1
    got, want = RowBlock.gather(blocks, which, places - starts[which]), whole.take(places)
    for name in ("indices", "offsets", "values", "labels", "targets", "numeric"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def test_labels_training_never_had_follow_their_rows_and_a_block_cut_from_another_names_none():
    """``missed`` is per row (take, slice, gather, concat, bytes); the block's labels by name
    describe all its rows, so a block cut from it does not claim them."""
    hot = np.array([[1, 0], [0, 0], [0, 1]], np.uint8)
    block = RowBlock(np.array([1, 2, 3], np.int32), np.array([0, 1, 2, 3], np.int64),
                     np.ones(3, np.float32), labels=hot)
    block.set_missed(np.array([0, 2, 1]), {"q": 2, "r": 1})
    assert block.take(np.array([2, 1])).missed.tolist() == [1, 2]
    assert block.slice(1, 3).missed.tolist() == [2, 1]
    assert RowBlock.concat([block, block]).missed.tolist() == [0, 2, 1, 0, 2, 1]
    assert RowBlock.gather([block, block], np.array([1, 0]), np.array([1, 2])).missed.tolist() == [2, 1]
    for cut in (block.take(np.array([0])), block.slice(0, 1), RowBlock.concat([block, block])):
        assert cut.missed_by_label() == {}
    back = RowBlock.from_bytes(block.to_bytes())
    assert back.missed.tolist() == [0, 2, 1] and back.missed_by_label() == {"q": 2, "r": 1}
    assert RowBlock.empty(block).missed.dtype == np.int32 and RowBlock.empty(block).missed_by_label() == {}
