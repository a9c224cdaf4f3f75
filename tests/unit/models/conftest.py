"""Seeded torch on one thread for the model tests, and CSR rows as the models take them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

TOL = 1e-5


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    torch.set_num_threads(1)


def csr(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows → (indices, offsets) as the models take them."""
    lengths = [len(r) for r in rows]
    offsets = torch.tensor([0] + list(np.cumsum(lengths)[:-1]), dtype=torch.long)
    indices = torch.tensor([i for r in rows for i in r], dtype=torch.long)
    return indices, offsets
