"""features/row_kernels.py: the compiled weighting of raw counts gives the
values NumPy's formula gives, bit for bit (the formula below is the one the
trainer used before the kernel), for rows of every kind: empty, one term,
all-zero, with and without an idf."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.features.row_kernels import weigh_rows
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.features.vectorize import FittedFeatures


def numpy_weigh(tf: np.ndarray, indices: np.ndarray, offsets: np.ndarray, idf: np.ndarray | None) -> np.ndarray:
    values = tf * idf[indices] if idf is not None else tf
    n = len(offsets) - 1
    rows = np.repeat(np.arange(n), np.diff(offsets))
    norms = np.sqrt(np.bincount(rows, weights=values.astype(np.float64) ** 2, minlength=n))
    return (values / np.where(norms > 0, norms, 1.0)[rows]).astype(np.float32)


def counts_block(seed: int, rows: int = 300, dim: int = 1000) -> RowBlock:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, rows)
    lengths[:3] = [0, 1, 0]   # empty rows and a one-term row among the others
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, dim, offsets[-1]).astype(np.int32)
    values = rng.integers(1, 30, offsets[-1]).astype(np.float32)
    values[offsets[5]:offsets[6]] = 0.0   # a row whose counts are all zero: norm 0, left as it is
    return RowBlock(indices, offsets, values)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sublinear, with_idf", [(True, True), (False, True), (True, False), (False, False)])
def test_the_weighted_values_are_numpys_bit_for_bit(seed, sublinear, with_idf):
    block = counts_block(seed)
    rng = np.random.default_rng(seed + 100)
    idf = (np.log(rng.uniform(1.5, 400.0, 1000)) + 1.0).astype(np.float32) if with_idf else None
    tf = block.values.astype(np.float32)
    if sublinear:
        tf = 1.0 + np.log(np.where(tf > 0, tf, 1.0)).astype(np.float32)
    want = numpy_weigh(tf, block.indices, block.offsets, idf)
    got = np.empty(len(tf), np.float32)
    weigh_rows(block.indices, block.offsets, tf, idf if idf is not None else np.ones(1, np.float32), idf is not None,
               got)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fitted_features_weigh_with_the_kernel_as_numpy_did():
    block = counts_block(7)
    block.values[block.values == 0] = 1.0   # raw shards hold counts of 1 and more
    f = FittedFeatures(mode="hashing", buckets=1000, labels=["a"], sublinear_tf=True,
                       idf=(np.linspace(1.0, 5.0, 1000)).astype(np.float32))
    got = f.weigh(block)
    want = numpy_weigh(1.0 + np.log(block.values.astype(np.float32)), block.indices, block.offsets, f.idf)
    assert np.array_equal(got.values.view(np.uint32), want.view(np.uint32))
    assert got.indices is block.indices and got.offsets is block.offsets


def test_a_row_with_a_feature_past_the_idf_is_refused_not_read_out_of_bounds():
    block = counts_block(3, dim=1000)
    f = FittedFeatures(mode="hashing", buckets=500, labels=["a"], idf=np.ones(500, np.float32))
    with pytest.raises(ValueError, match="past these features' 500"):
        f.weigh(block)


@pytest.mark.parametrize("sublinear", [True, False])
def test_counts_weighed_by_the_table_are_numpys_formula_bit_for_bit_up_to_the_largest_stored_count(sublinear):
    from lancetnic_flow.features.row_kernels import tf_table, weigh_counts

    block = counts_block(11)
    block.values[:] = np.random.default_rng(3).integers(1, 65536, len(block.values))
    block.values[:5] = [1, 2, 65535, 3, 1]
    idf = np.linspace(1.0, 5.0, 1000).astype(np.float32)
    tf = 1.0 + np.log(block.values) if sublinear else block.values
    want = numpy_weigh(tf, block.indices, block.offsets, idf)
    got = np.empty(len(tf), np.float32)
    assert weigh_counts(block.indices, block.offsets, block.values, tf_table(sublinear), idf, True, got)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("odd", [0.5, 65536.0, 1e9, -1.0, np.nan])
def test_values_that_are_not_stored_counts_are_weighed_by_numpys_formula(odd):
    # weigh() gets counts; a value the table does not hold must not be looked
    # up (or cut to a whole number): it takes NumPy's path, same result.
    block = counts_block(5)
    block.values[block.values == 0] = 1.0
    block.values[7] = odd
    f = FittedFeatures(mode="hashing", buckets=1000, labels=["a"], sublinear_tf=True,
                       idf=(np.linspace(1.0, 5.0, 1000)).astype(np.float32))
    with np.errstate(invalid="ignore"):
        tf = 1.0 + np.log(block.values.astype(np.float32))
    want = np.empty(len(tf), np.float32)
    weigh_rows(block.indices, block.offsets, tf, f.idf, True, want)   # the weighting before the table
    with np.errstate(invalid="ignore"):   # log(-1), NaN: NumPy says so, as it did before the table
        got = f.weigh(block).values
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
