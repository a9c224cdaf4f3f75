"""features/split.py: the validation split is decided by each row's text
alone — the same for every partitioning — at about the fraction asked, and
templated texts differing only in the middle split independently."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from lancetnic_flow.features.split import validation_mask


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
