"""runs/stored_weights.py: a mostly-zero weight matrix is stored as its
entries and reads back bit for bit, in a fraction of its dense bytes; small
or dense tensors go as they are; 8-bit storage keeps every weight within
half a step of its column's scale; parts that do not fit together are a
ValueError naming the matrix, never a wrong matrix."""
from __future__ import annotations

import io

import numpy as np

import pytest
import safetensors.torch
import torch

from lancetnic_flow.runs.stored_weights import decode, encode, is_quantised, materialize
from lancetnic_flow.runs.tensor_file import write_safetensors


def hinge_like(rows: int = 2**17, cols: int = 57, touched: float = 0.2, per_row: int = 3, seed: int = 0) -> torch.Tensor:
    """A linear model's matrix as the hinge step leaves it: most rows never
    touched, a touched row non-zero in a few classes only."""
    g = torch.Generator().manual_seed(seed)
    w = torch.zeros(rows, cols)
    hit = torch.nonzero(torch.rand(rows, generator=g) < touched).squeeze(1)
    for k in range(per_row):
        w[hit, torch.randint(0, cols, (len(hit),), generator=g)] = torch.randn(len(hit), generator=g)
    return w


def file_bytes(state: dict) -> int:
    buf = io.BytesIO()
    write_safetensors(buf, state)
    return len(buf.getvalue())


def round_trip(stored: dict) -> dict:
    buf = io.BytesIO()
    write_safetensors(buf, stored)
    return decode(safetensors.torch.load(buf.getvalue()))


def test_a_mostly_zero_matrix_reads_back_bit_for_bit_in_a_fraction_of_its_dense_bytes():
    w = hinge_like()
    state = {"input.weight": w, "input.bias": torch.randn(57), "logit_scale": torch.tensor(1.5)}
    stored = encode(state)
    assert "input.weight" not in stored and "input.weight:values" in stored
    back = round_trip(stored)
    assert set(back) == set(state)
    for name, t in state.items():
        assert back[name].dtype == t.dtype and back[name].shape == t.shape
        assert torch.equal(back[name].view(torch.int32) if t.dtype == torch.float32 else back[name],
                           t.view(torch.int32) if t.dtype == torch.float32 else t), name
    assert file_bytes(stored) < file_bytes(state) / 10


def test_negative_zero_nan_and_inf_entries_keep_their_bits():
    w = torch.zeros(2**16, 4)
    w[5, 1], w[7, 0], w[9, 3], w[2**16 - 1, 2] = float("nan"), float("inf"), -float("inf"), -1e-30
    w[11, 2] = -0.0                                     # stored as zero: -0.0 == 0, as the network reads it
    back = round_trip(encode({"w": w}))["w"]
    assert torch.equal(torch.isnan(back), torch.isnan(w))
    keep = ~torch.isnan(w)
    assert torch.equal(back[keep], w[keep])


def test_small_dense_and_non_float32_tensors_are_stored_as_they_are():
    dense = torch.randn(2**10, 128)                    # every entry non-zero: sparse would be larger
    small = torch.zeros(10, 10)                        # below the size worth a second format
    ids = torch.zeros(2**17, 2, dtype=torch.int64)
    stored = encode({"dense": dense, "small": small, "ids": ids})
    assert set(stored) == {"dense", "small", "ids"}


def test_an_all_zero_matrix_and_a_matrix_of_many_columns_round_trip():
    zero = torch.zeros(2**16, 3)
    wide = torch.zeros(300, 40_000)                    # columns past 32,767: 32-bit column ids
    wide[3, 39_999], wide[299, 0], wide[0, 32_768] = 1.0, -2.0, 3.0
    back = round_trip(encode({"zero": zero, "wide": wide}))
    assert torch.equal(back["zero"], zero) and torch.equal(back["wide"], wide)


def test_int8_keeps_each_weight_within_half_a_step_of_its_columns_scale():
    w = hinge_like(rows=2**16, cols=9, seed=1)
    w[:, 4] = 0                                        # a class never updated: scale 1, stays zero
    stored = encode({"w": w}, int8=True)
    assert stored["w:values"].dtype == np.int8 and is_quantised(stored)
    back = round_trip(stored)["w"]
    step = w.abs().amax(dim=0) / 127
    assert torch.all((back - w).abs() <= step / 2 + 1e-7)
    assert torch.equal(back[:, 4], torch.zeros(2**16))
    assert file_bytes(stored) < file_bytes(encode({"w": w})) * 0.6   # a byte an entry, not four
    assert not is_quantised(encode({"w": w}))


def test_int8_of_a_mostly_nonzero_matrix_is_a_plain_byte_matrix_within_half_a_step():
    w = torch.randn(2**14, 16, generator=torch.Generator().manual_seed(2))   # an MLP's random start
    stored = encode({"w": w}, int8=True)
    assert set(stored) == {"w:int8", "w:scale"} and stored["w:int8"].dtype == np.int8
    back = round_trip(stored)["w"]
    assert torch.all((back - w).abs() <= w.abs().amax(dim=0) / 254 + 1e-7)
    assert file_bytes(stored) < file_bytes({"w": w}) / 3.5
    with pytest.raises(ValueError, match="no scale"):
        decode({"w:int8": stored["w:int8"]})


@pytest.mark.parametrize("damage, match", [
    (lambda s: s.pop("w:cols"), "lacks its cols"),
    (lambda s: s.__setitem__("w:counts", s["w:counts"][:-1]), "counts"),
    (lambda s: s.__setitem__("w:rows", s["w:rows"] + 2**20), "row outside"),
    (lambda s: s.__setitem__("w:shape", torch.tensor([2**16, 2])), "column outside"),
    (lambda s: s.__setitem__("w:shape", torch.tensor([1, 2, 3])), "shape"),
])
def test_stored_parts_that_do_not_fit_together_are_a_value_error_naming_the_matrix(damage, match):
    stored = materialize(encode({"w": hinge_like(rows=2**16, cols=8)}))
    damage(stored)
    with pytest.raises(ValueError, match=match) as e:
        decode(stored)
    assert "w" in str(e.value)


def test_a_tensor_name_holding_the_part_separator_is_refused():
    with pytest.raises(ValueError, match="':'"):
        encode({"a:rows": torch.zeros(3)})


def _masked_parts(name: str, t: np.ndarray) -> dict:
    """The entries as NumPy masks give them: what the format is (and what saves wrote first)."""
    mask = t != 0
    per_row = mask.sum(axis=1)
    held = np.flatnonzero(per_row)
    return {f"{name}:shape": np.array(t.shape, np.int64), f"{name}:rows": held.astype(np.int32),
            f"{name}:counts": per_row[held].astype(np.uint8), f"{name}:cols": np.nonzero(mask)[1].astype(np.uint8),
            f"{name}:values": t[mask]}


def test_the_compiled_entry_passes_write_the_bytes_of_numpys_masks():
    w = hinge_like(rows=3 * 2**13 + 5, seed=4).numpy()     # chunks, and a last one short
    w[7, 3], w[9, 0], w[11, 5] = np.nan, -0.0, -np.inf
    stored = encode({"input.weight": w, "input.bias": np.ones(57, np.float32)})
    want = {**_masked_parts("input.weight", w), "input.bias": np.ones(57, np.float32)}
    got_buf, want_buf = io.BytesIO(), io.BytesIO()
    write_safetensors(got_buf, stored)
    write_safetensors(want_buf, want)
    assert got_buf.getvalue() == want_buf.getvalue()
