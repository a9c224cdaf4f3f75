"""runs/stored_matrices.py: the NumPy reader of stored matrices gives back
the matrix written — bit for bit from its entries, within half a step of
its column's scale from 8 bits (entries, or a plain 8-bit matrix) — as
float32 arrays, the torch path's weights; it passes other tensors on
untouched, and refuses parts that do not fit together with a ValueError
naming the matrix."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lancetnic_flow.runs.stored_matrices import decode_arrays
from lancetnic_flow.runs.stored_weights import decode, encode, materialize


def _mostly_zero(rows: int = 2**15, cols: int = 5) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(rows, cols, generator=g)
    return torch.where(torch.rand(rows, cols, generator=g) < 0.05, w, 0.0)


@pytest.mark.parametrize("weight, int8", [(_mostly_zero(), False), (_mostly_zero(), True),
                                          (torch.randn(2**14, 8, generator=torch.Generator().manual_seed(1)), True)])
def test_the_numpy_reader_gives_the_torch_readers_weights_bit_for_bit(weight, int8):
    stored = materialize(encode({"w": weight, "b": torch.arange(3.0)}, int8=int8))
    assert any(":" in k for k in stored)                      # stored as parts, not as it is
    as_arrays = {k: v.numpy() for k, v in stored.items()}
    got, want = decode_arrays(as_arrays), decode(stored)
    assert got["w"].dtype == np.float32 and got["w"].shape == tuple(want["w"].shape)
    assert np.array_equal(got["w"].view(np.int32), want["w"].numpy().view(np.int32))
    assert got["b"] is as_arrays["b"]
    w = weight.numpy()
    if int8:   # each weight within half a step (1/254) of its column's largest, and float32's rounding of it
        assert np.all(np.abs(got["w"] - w) <= np.abs(w).max(0) * (1 / 254 + 2**-20))
    else:
        assert np.array_equal(got["w"].view(np.int32), w.view(np.int32))


def test_parts_that_do_not_fit_are_the_same_value_error():
    stored = {k: v.numpy() for k, v in materialize(encode({"w": _mostly_zero()})).items()}
    stored["w:counts"] = stored["w:counts"][:-1]
    with pytest.raises(ValueError) as numpy_error:
        decode_arrays(stored)
    with pytest.raises(ValueError) as torch_error:
        decode({k: torch.from_numpy(v) for k, v in stored.items()})
    assert str(numpy_error.value) == str(torch_error.value) and "w" in str(numpy_error.value)
