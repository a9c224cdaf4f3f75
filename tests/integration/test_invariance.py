"""Partition invariance, property-tested: for any block size, the vocabulary,
a row's features and the validation split are the same."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.features.fit import finish_fit, fit_partition
from lancetnic_flow.features.split import validation_mask
from lancetnic_flow.features.vocab import merge_stats

COLS = Columns(text=("text",), label="label")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("inv") / "c.csv"
    write_corpus(str(path), 1500, classes=3, seed=11)
    return str(path)


def _fit(path: str, blocksize: int, ngrams: int):
    fc = FeatureConfig(mode="tfidf", ngrams=ngrams, max_features=3000, min_df=2)
    plan = plan_source([path], blocksize=blocksize)
    stats = merge_stats([fit_partition(p, COLS, fc, {}, blocksize, 0.2) for p in plan.partitions])
    return plan, finish_fit(stats, fc, COLS)


def _rows(path: str, blocksize: int, features):
    plan = plan_source([path], blocksize=blocksize)
    tables = [c.table for p in plan.partitions for c in read_partition(p, COLS, chunk_bytes=blocksize)]
    table = pa.concat_tables(tables)
    return table, features.transform(table), validation_mask(table, 0.2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocksize=st.integers(min_value=2_000, max_value=600_000), ngrams=st.sampled_from([1, 2]))
def test_vocabulary_features_and_split_do_not_depend_on_block_size(corpus, blocksize, ngrams):
    ref_plan, ref = _fit(corpus, 10**9, ngrams)
    plan, got = _fit(corpus, blocksize, ngrams)
    assert len(ref_plan.partitions) == 1
    assert got.vocabulary.equals(ref.vocabulary)
    np.testing.assert_array_equal(got.idf, ref.idf)
    assert got.labels == ref.labels and got.docs == ref.docs
    t_ref, rows_ref, val_ref = _rows(corpus, 10**9, ref)
    t_got, rows_got, val_got = _rows(corpus, blocksize, got)
    assert t_got["text"].equals(t_ref["text"])
    np.testing.assert_array_equal(rows_got.indices, rows_ref.indices)
    np.testing.assert_array_equal(rows_got.offsets, rows_ref.offsets)
    np.testing.assert_allclose(rows_got.values, rows_ref.values, rtol=1e-6)
    np.testing.assert_array_equal(val_got, val_ref)
