"""models/inputs.py: a row block as every model's keyword arguments (int64
indices, the row starts as offsets, values as weights, numbers), and its
answers (class ids as int64, label sets as float 0/1, targets)."""
from __future__ import annotations

import numpy as np
import torch

from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.models.inputs import answers, model_inputs

CPU = torch.device("cpu")


def test_a_tfidf_block_becomes_indices_offsets_weights_and_numbers():
    block = RowBlock(np.array([3, 1, 2], np.int32), np.array([0, 2, 2, 3], np.int64),
                     np.array([0.5, 0.5, 1.0], np.float32), numeric=np.ones((3, 2), np.float32))
    kw = model_inputs(block, CPU)
    assert kw["indices"].dtype == torch.int64 and kw["indices"].tolist() == [3, 1, 2]
    assert kw["offsets"].tolist() == [0, 2, 2] and kw["weights"].tolist() == [0.5, 0.5, 1.0]
    assert kw["numeric"].shape == (3, 2)
    ids = model_inputs(RowBlock(np.array([4, 5], np.int32), np.array([0, 2], np.int64)), CPU)
    assert ids["weights"] is None and ids["numeric"] is None


def test_answers_are_class_ids_or_float_label_sets_and_targets():
    one = RowBlock(np.zeros(0, np.int32), np.zeros(3, np.int64), labels=np.array([1, 0], np.int32),
                   targets=np.array([0.5, -1.0], np.float32))
    labels, targets = answers(one, CPU)
    assert labels.dtype == torch.int64 and labels.tolist() == [1, 0] and targets.tolist() == [0.5, -1.0]
    sets = RowBlock(np.zeros(0, np.int32), np.zeros(3, np.int64), labels=np.array([[1, 0], [1, 1]], np.uint8))
    labels, targets = answers(sets, CPU)
    assert labels.dtype == torch.float32 and labels.tolist() == [[1.0, 0.0], [1.0, 1.0]] and targets is None
