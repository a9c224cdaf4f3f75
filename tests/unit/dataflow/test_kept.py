"""A rank's kept shards as batches named in place (dataflow/kept.py, stream.shuffled_ids)."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.dataflow.kept import KeptEpoch
from lancetnic_flow.dataflow.stream import BatchStream, shuffled_batches, shuffled_ids
from lancetnic_flow.features.rows import RowBlock


def _blocks(lengths: list[int], seed: int = 0, multilabel: bool = False) -> list[RowBlock]:
    """Blocks whose rows say who they are: row k of the concatenation has one term, k."""
    rng = np.random.default_rng(seed)
    out, first = [], 0
    for n in lengths:
        labels = (rng.integers(0, 2, (n, 3)).astype(np.uint8) if multilabel
                  else rng.integers(0, 7, n).astype(np.int32))
        out.append(RowBlock(np.arange(first, first + n, dtype=np.int32), np.arange(n + 1, dtype=np.int64),
                            np.ones(n, np.float32), labels=labels))
        first += n
    return out


@pytest.mark.parametrize("lengths, batch, buffer", [
    ([300, 0, 250, 410, 90], 32, 200),     # an empty block, a buffer smaller than a block
    ([50] * 12, 16, 1000),                 # a buffer larger than the epoch
    ([1000, 7, 333], 100, 0),              # no buffer
    ([5], 8, 3),                           # fewer rows than a batch
])
def test_shuffled_ids_name_the_rows_shuffled_batches_lets_out_in_the_same_batches(lengths, batch, buffer):
    blocks = _blocks(lengths)
    want = [b.indices.copy() for b in shuffled_batches(blocks, batch, buffer, np.random.default_rng(4))]
    got = list(shuffled_ids(lengths, batch, buffer, np.random.default_rng(4)))
    assert [len(g) for g in got] == [len(w) for w in want]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert sorted(np.concatenate(got).tolist()) == list(range(sum(lengths)))   # every row once


@pytest.mark.parametrize("multilabel", [False, True])
def test_a_kept_epoch_cuts_the_batches_a_batch_stream_cuts_with_their_labels_and_terms(multilabel):
    blocks = _blocks([120, 0, 75, 260, 31], seed=2, multilabel=multilabel)
    for epoch in range(3):
        stream = list(BatchStream(lambda: iter(blocks), batch_size=24, shuffle_buffer=100, seed=9, epoch=epoch))
        kept = KeptEpoch(blocks, batch_size=24, shuffle_buffer=100, seed=9, epoch=epoch)
        picked = list(kept)
        assert len(picked) == len(stream)
        for p, b in zip(picked, stream):
            named = np.array([kept.blocks[w].indices[r] for w, r in zip(p.which, p.rows)])
            assert np.array_equal(named, b.indices)
            assert np.array_equal(p.labels, b.labels) and p.nnz == int(b.offsets[-1]) and len(p) == len(b)


def test_only_weighted_labelled_blocks_without_targets_are_trained_in_place():
    block = _blocks([10])[0]
    assert KeptEpoch.fits([block])
    assert not KeptEpoch.fits([RowBlock(block.indices, block.offsets, None, labels=block.labels)])   # token ids
    assert not KeptEpoch.fits([RowBlock(block.indices, block.offsets, block.values, labels=block.labels,
                                        targets=np.zeros(10, np.float32))])


def test_blocks_of_mixed_array_kinds_or_strided_arrays_stream_instead():
    a, b = _blocks([10, 12])
    assert KeptEpoch.fits([a, b, RowBlock.empty(a)])
    wide = RowBlock(b.indices, b.offsets, b.values, labels=b.labels.astype(np.int64))
    assert not KeptEpoch.fits([a, wide])
    strided = RowBlock(np.repeat(a.indices, 2)[::2], a.offsets, a.values, labels=a.labels)
    assert not KeptEpoch.fits([strided])
