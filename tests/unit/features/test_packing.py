"""features/packing.py: a shard's compact bytes give back every row exactly —
bags of terms (counts and weights), token sequences in their order, label
sets and names, targets and numbers — in a fraction of a plain .npz; a
shard of an earlier cache (a plain .npz) still reads; nothing is unpickled."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.features.packing import is_packed, pack, unpack
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.features.vectorize import FittedFeatures

from ..blocks import dense_of, random_block

TEXTS = ["the cat sat on the mat", "", "a dog and a cat and a bird", "zebra", "the the the the"] * 40


def counts_block() -> RowBlock:
    """Hashed word and word-pair counts, as the fit pass writes them, with label sets named."""
    block = FittedFeatures(mode="hashing", ngrams=2, buckets=2**19).counts(pa.array(TEXTS))
    block.labels = np.eye(3, dtype=np.uint8)[np.arange(len(TEXTS)) % 3]
    block.label_names = np.array(["a", "b", "c"])
    block.targets = np.linspace(0, 1, len(TEXTS))
    return block


def assert_same(a: RowBlock, b: RowBlock) -> None:
    for name in ("indices", "offsets", "values", "labels", "targets", "numeric", "label_names"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=name)
            assert x.dtype == y.dtype, name


def test_hashed_counts_round_trip_exactly_in_a_fraction_of_an_npz():
    block = counts_block()
    assert block.offsets[-1] > 800 and block.values.max() > 1      # words and pairs, some counted twice
    data = pack(block)
    assert is_packed(data)
    assert_same(RowBlock.from_bytes(data), block)          # the kernels give ids ascending: nothing is reordered
    buf = io.BytesIO()
    np.savez(buf, **block._arrays())
    assert len(data) < len(buf.getvalue()) / 4


def test_weights_that_are_not_whole_numbers_stay_float32_and_rows_out_of_order_are_sorted_in_place():
    block, dense = random_block(60, seed=7)
    shuffled = block.take(np.arange(60))
    for r in range(60):   # each row's terms reversed: a sum is the same in any order
        s, e = shuffled.offsets[r], shuffled.offsets[r + 1]
        shuffled.indices[s:e], shuffled.values[s:e] = shuffled.indices[s:e][::-1], shuffled.values[s:e][::-1]
    back = RowBlock.from_bytes(pack(shuffled))
    np.testing.assert_array_equal(dense_of(back), dense)
    assert back.values.dtype == np.float32
    for r in range(60):
        row = back.indices[back.offsets[r]:back.offsets[r + 1]]
        assert (np.diff(row) > 0).all()


def test_token_sequences_keep_their_order():
    seq = RowBlock(np.array([5, 1, 2, 9, 9, 3, 70000], np.int32), np.array([0, 3, 3, 7], np.int64),
                   labels=np.array([2, -1, 0], np.int32))
    back = RowBlock.from_bytes(pack(seq))
    assert back.values is None
    assert_same(back, seq)


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_one_row_blocks_round_trip(n):
    block = RowBlock(np.zeros(0, np.int32), np.zeros(n + 1, np.int64), np.zeros(0, np.float32))
    assert_same(RowBlock.from_bytes(pack(block)), block)


def test_a_shard_of_an_earlier_cache_a_plain_npz_still_reads():
    block = counts_block()
    buf = io.BytesIO()
    np.savez(buf, **block._arrays())
    assert not is_packed(buf.getvalue())
    assert_same(RowBlock.from_bytes(buf.getvalue()), block)
    assert_same(RowBlock.from_bytes(block.to_bytes()), block)


def test_a_packed_payload_naming_an_object_array_or_running_short_is_refused_not_unpickled():
    import json
    import struct

    import zstandard

    def frame(header: dict, body: bytes) -> bytes:
        head = json.dumps(header).encode()
        return zstandard.ZstdCompressor().compress(b"LFPK" + struct.pack("<I", len(head)) + head + body)

    with pytest.raises(ValueError, match="dtype"):
        unpack(frame({"ids": ["|O", [1], 0], "lengths": ["|u1", [1, 1], 8]}, bytes(16)))
    with pytest.raises(ValueError, match="past the end"):
        unpack(frame({"ids": ["|u1", [1, 100], 0], "lengths": ["|u1", [1, 1], 0]}, bytes(8)))
    with pytest.raises(ValueError, match="zstd"):
        unpack(pack(counts_block())[:-10])
    with pytest.raises(TypeError):
        pack(RowBlock(indices=np.zeros(1, np.int32), offsets=np.array([0, 1]), values=None,
                      label_names=np.array([object()], dtype=object)))


def test_float_planes_give_the_idf_back_bit_for_bit_and_damaged_bytes_are_a_value_error():
    from lancetnic_flow.features.packing import float_planes, float_unplanes

    df = np.minimum(np.random.default_rng(0).zipf(1.8, 2**14), 5000)   # most buckets hold a term or two
    idf = (np.log((1 + 20_000) / (1 + df)) + 1).astype(np.float32)
    assert np.array_equal(float_unplanes(float_planes(idf)), idf)
    assert len(float_planes(idf)) < idf.nbytes / 4          # a few hundred distinct values over 16k buckets
    many = np.random.default_rng(1).standard_normal(70_000).astype(np.float32)   # past a 16-bit table
    many[:3] = [-0.0, 0.0, np.inf]
    back = float_unplanes(float_planes(many))
    assert back.dtype == np.float32 and np.array_equal(back.view(np.uint32), many.view(np.uint32))
    signed = np.array([0.0, -0.0, 1.5], np.float32)                                # unique() sees -0.0 as 0.0
    assert np.array_equal(float_unplanes(float_planes(signed)).view(np.uint32), signed.view(np.uint32))
    with pytest.raises(ValueError):
        float_unplanes(b"not zstd")
    features = FittedFeatures(mode="hashing", buckets=2**14)
    features.idf = idf
    assert np.array_equal(FittedFeatures.from_json(features.to_json()).idf, idf)


@pytest.mark.parametrize("top", [200, 60_000, 2**23, 2**31 - 1])
def test_ids_of_every_width_come_back_exactly_with_empty_rows_between(top):
    # The compiled decoding sums a row's gaps from 1 to 4 byte planes: ids up
    # to the largest an int32 holds, rows starting at 0 and at the top.
    rng = np.random.default_rng(top % 97)
    rows = []
    for r in range(50):
        n = 0 if r % 7 == 3 else int(rng.integers(1, 30))
        rows.append(np.unique(rng.integers(0, top, n, endpoint=True)))
    rows[0] = np.array([0, top])
    rows[1] = np.array([top])
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    block = RowBlock(np.concatenate(rows).astype(np.int32), offsets,
                     rng.integers(1, 5, offsets[-1]).astype(np.float32))
    assert_same(RowBlock.from_bytes(pack(block)), block)


def test_a_payload_whose_ids_and_rows_disagree_is_a_value_error_not_a_read_past_the_end():
    from lancetnic_flow.features import packing

    block = counts_block()
    arrays = {"ids": np.zeros((1, 3), np.uint8), "counts": np.ones((1, 3), np.uint8),
              "lengths": np.array([[2, 2]], np.uint8)}   # two rows of 2 terms, 3 ids
    import zstandard

    data = zstandard.ZstdCompressor().compress(packing._container(arrays))
    with pytest.raises(ValueError, match="rows hold 4 terms, its ids 3"):
        unpack(data)
    assert_same(RowBlock.from_bytes(pack(block)), block)
