"""runs/asks.py: the Python API's top, top_k and threshold held to the command line's and serve's rules."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.asks import count, threshold


def test_a_count_the_command_line_refuses_is_refused_not_cut_to_its_whole_part():
    # top=2.7 listed 2 terms, top_k=0 ranked nothing without a word, top="x" was a ValueError
    assert count(None, "top_k", 3) is None and count(2, "top_k", 3) == 2 and count(np.int64(4), "top", 10) == 4
    for bad in (0, -1, 2.7, "3", "x", True, np.float64(2.0)):
        with pytest.raises(UserError, match="must be a whole number ≥ 1"):
            count(bad, "top_k", 3)


def test_a_threshold_no_probability_can_reach_or_every_one_passes_is_refused_as_the_command_line_does():
    # threshold=1.5 predicted no label a row, -1 every label, nan none, all without a word
    assert threshold(None) is None and threshold(0.3) == 0.3 and threshold(np.float32(0.5)) == 0.5
    for bad in (0, 1, 1.5, -1, float("nan"), "0.5", True):
        with pytest.raises(UserError, match="between 0 and 1"):
            threshold(bad)
