"""models/heads.py: a class head, a value head or both, and no model without one."""
from __future__ import annotations

import pytest
import torch

from lancetnic_flow.models.heads import Heads


def test_heads_give_logits_per_class_and_one_value_per_row():
    h = torch.randn(4, 6)
    assert Heads(6, classes=3)(h)["logits"].shape == (4, 3)
    both = Heads(6, classes=2, regress=True)(h)
    assert both["logits"].shape == (4, 2) and both["value"].shape == (4,)
    assert set(Heads(6, regress=True)(h)) == {"value"}


def test_a_model_without_any_head_is_refused():
    with pytest.raises(ValueError, match="needs a classification head"):
        Heads(6)
