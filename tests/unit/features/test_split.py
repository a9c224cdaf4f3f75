"""features/split.py: the validation split is decided by each row's text
alone — the same for every partitioning — at about the fraction asked, and
templated texts differing only in the middle split independently; a
continued run's split trains the rows its model learned."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from lancetnic_flow.features.hashing import hash_strings
from lancetnic_flow.features.split import (Holdout, held_out_hashes, learned_rows, merge_hashes, split_rows,
                                           validation_mask)


def test_the_split_holds_out_about_the_fraction_and_all_or_none_at_the_ends():
    table = pa.table({"text": [f"{'header ' * 20} case {i} {'footer ' * 20}" for i in range(4000)]})
    assert 0.08 < validation_mask(table, 0.1).mean() < 0.12
    assert not validation_mask(table, 0).any() and validation_mask(table, 1).all()


def test_a_rows_side_depends_on_its_text_not_on_the_block_it_is_in():
    texts = [f"row {i} of the corpus" for i in range(500)]
    whole = validation_mask(pa.table({"text": texts}), 0.3)
    pieces = np.concatenate([validation_mask(pa.table({"text": texts[i:i + 37]}), 0.3) for i in range(0, 500, 37)])
    assert np.array_equal(whole, pieces)
    same = validation_mask(pa.table({"text": ["same text"] * 5}), 0.5)
    assert same.all() or not same.any()


def _texts(n: int = 2000) -> pa.Table:
    return pa.table({"text": [f"row {i} of a corpus" for i in range(n)]})


def test_a_continued_runs_split_trains_the_held_out_rows_its_model_learned_and_counts_them():
    table = _texts()
    plain = validation_mask(table, 0.2)
    val_rows = np.flatnonzero(plain)
    learned_rows_ = val_rows[::3]
    learned = np.unique(hash_strings(table["text"].take(pa.array(learned_rows_))))
    # Hashes of texts that are not in the table change nothing.
    learned = np.unique(np.concatenate([learned, hash_strings(pa.array(["elsewhere", "not here"]))]))
    is_val, moved = split_rows(table, Holdout(0.2, learned))
    assert moved == len(learned_rows_)
    assert not is_val[learned_rows_].any()                                   # learned: trained on
    assert np.array_equal(is_val, plain & ~np.isin(np.arange(len(plain)), learned_rows_))
    assert np.array_equal(validation_mask(table, Holdout(0.2)), plain)       # no record: the plain split


def test_a_separate_validation_source_keeps_every_row_and_finds_its_learned_ones_to_leave_out():
    table = _texts(50)
    learned = np.unique(hash_strings(pa.array(["row 3 of a corpus", "row 7 of a corpus"])))
    is_val, moved = split_rows(table, Holdout(0.0, learned), "val")
    assert is_val.all() and moved == 0
    assert np.flatnonzero(learned_rows(table, Holdout(0.0, learned))).tolist() == [3, 7]
    assert learned_rows(table, Holdout(0.0)) is None and learned_rows(table, 0.1) is None
    assert not split_rows(table, Holdout(0.3, learned), "train")[0].any()


def test_held_out_hashes_are_those_of_the_validation_rows_text():
    table = _texts(300)
    is_val = validation_mask(table, 0.3)
    got = held_out_hashes(table, is_val)
    assert np.array_equal(got, hash_strings(table["text"].filter(pa.array(is_val))))
    assert held_out_hashes(table, np.zeros(300, bool)).size == 0


def test_merged_records_are_sorted_and_unique_and_past_their_limit_are_dropped_and_counted():
    a, b = np.array([5, 1, 9], np.uint64), np.array([9, 3], np.uint64)
    merged, lost = merge_hashes([a, b], limit=10)
    assert merged.tolist() == [1, 3, 5, 9] and lost == 0
    merged, lost = merge_hashes([a, b], limit=4)
    assert merged is None and lost == 5
