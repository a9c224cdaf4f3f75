"""runs/tensor_file.py: weights written as a safetensors stream read back
with safetensors' own loader, bit for bit, dtypes kept."""
from __future__ import annotations

import io

import safetensors.torch
import torch

from lancetnic_flow.runs.tensor_file import write_safetensors


def test_a_streamed_safetensors_file_loads_back_equal_with_safetensors():
    state = {"w": torch.randn(7, 3), "b": torch.zeros(3, dtype=torch.float64), "ids": torch.arange(5),
             "empty": torch.zeros(0, 4)}
    buf = io.BytesIO()
    write_safetensors(buf, state)
    back = safetensors.torch.load(buf.getvalue())
    assert set(back) == set(state)
    for name, t in state.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name], t), name
