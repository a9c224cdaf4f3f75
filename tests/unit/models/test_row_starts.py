"""The starting values of the sparse input rows (models/row_starts.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lancetnic_flow.models.row_starts import DRAWS, start_values

M64 = (1 << 64) - 1


def _mixed(key: int) -> int:
    key = ((key ^ (key >> 30)) * 0xBF58476D1CE4E5B9) & M64
    key = ((key ^ (key >> 27)) * 0x94D049BB133111EB) & M64
    return key ^ (key >> 31)


def _row(row: int, width: int, salt: int, std: float) -> list[float]:
    """One row's starting values, the polar method in plain Python integers and floats."""
    pairs, out = (width + 1) // 2, []
    for k in range(pairs):
        a = b = 0.0
        for draw in range(DRAWS):
            bits = _mixed((((row * pairs + k) << 4) | draw) ^ salt)
            u, v = (bits >> 32) * 2.0 ** -31 - 1.0, (bits & 0xFFFFFFFF) * 2.0 ** -31 - 1.0
            s = u * u + v * v
            if 0.0 < s < 1.0:
                scale = math.sqrt(-2.0 * math.log(s) / s) * std
                a, b = u * scale, v * scale
                break
        out += [a, b]
    return out[:width]


@pytest.mark.parametrize("salt,width", [(0, 8), (12345, 57), (2 ** 62 - 1, 3)])
def test_a_rows_values_are_the_salt_the_row_and_the_column_through_the_polar_method(salt, width):
    rows = [0, 1, 7, 2 ** 20 + 3, 2 ** 24 - 1]
    got = start_values(torch.tensor(rows), width, salt, 0.1)
    want = torch.tensor([_row(r, width, salt, 0.1) for r in rows], dtype=torch.float32)
    assert got.dtype == torch.float32 and got.shape == (len(rows), width)
    assert torch.equal(got, want)


def test_a_rows_values_are_the_same_whichever_rows_are_drawn_with_it_and_differ_by_salt():
    some = start_values(torch.tensor([7, 3, 9]), 8, 11, 0.1)
    assert torch.equal(some[[2, 0]], start_values(torch.tensor([9, 7]), 8, 11, 0.1))
    assert not torch.equal(start_values(torch.tensor([7]), 8, 12, 0.1), some[:1])
    assert len(set(some.flatten().tolist())) == 24
    assert start_values(torch.zeros(0, dtype=torch.long), 8, 5, 0.1).shape == (0, 8)


def test_starting_values_are_normal_with_the_asked_spread_and_no_column_or_pair_alike():
    values = start_values(torch.arange(20000), 16, 5, 0.1).double()
    assert abs(float(values.mean())) < 0.001 and float(values.std()) == pytest.approx(0.1, rel=0.01)
    z = (values / 0.1).flatten().numpy()
    assert np.mean(np.abs(z) < 1) == pytest.approx(0.6827, abs=0.005)   # a normal's share within one spread
    assert np.mean(np.abs(z) < 2) == pytest.approx(0.9545, abs=0.003)
    assert np.mean(z ** 4) == pytest.approx(3.0, abs=0.1)   # kurtosis: not a uniform's 1.8
    corr = np.corrcoef(values.numpy().T)
    assert np.abs(corr - np.eye(16)).max() < 0.04   # the two values of a pair and every column apart
