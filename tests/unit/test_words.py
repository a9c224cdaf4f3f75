"""words.py: a count says its noun in the singular for exactly one, in the plural otherwise."""
from __future__ import annotations

from lancetnic_flow.words import counted


def test_one_is_singular_and_every_other_count_plural():
    assert counted(1, "row") == "1 row" and counted(0, "row") == "0 rows" and counted(2_000, "row") == "2,000 rows"
    assert counted(1, "label was", "labels were") == "1 label was"
    assert counted(3, "label was", "labels were") == "3 labels were"
