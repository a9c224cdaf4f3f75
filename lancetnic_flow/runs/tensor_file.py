"""The safetensors layout written tensor by tensor, to any open file.

``safetensors.torch.save`` builds the whole file as one ``bytes`` first: a
second copy of every weight at the moment the trainer's memory is highest
(the best epoch's weights are held too). Streaming from the tensors' own
memory keeps a save to one copy, the file's; reading stays with the
safetensors library, and reading never unpickles. NumPy arrays and torch
tensors are written alike, the same bytes for the same values: a model
trained as arrays is saved without importing torch.
"""
from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

_ARRAY_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.float16): "F16",
                 np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
                 np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}


def is_tensor(t: Any) -> bool:
    """Whether ``t`` is a torch tensor, asked without importing torch."""
    torch = sys.modules.get("torch")   # no torch imported: nothing here is a tensor
    return torch is not None and isinstance(t, torch.Tensor)


def _code(dtype: Any) -> str | None:
    """The safetensors name of a NumPy dtype or a torch dtype (None: not writable)."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        return _ARRAY_DTYPES.get(np.dtype(dtype))
    import torch

    if dtype == torch.bfloat16:   # no NumPy twin
        return "BF16"
    try:
        return _ARRAY_DTYPES.get(np.dtype(torch.empty(0, dtype=dtype).numpy().dtype))
    except TypeError:
        return None


def _bytes(t: Any) -> np.ndarray:
    """A tensor's or an array's values as a contiguous NumPy array, over its own memory where it can be."""
    if is_tensor(t):
        import torch

        t = t.detach().cpu().contiguous()
        # bfloat16 has no numpy dtype: its bytes through a same-size integer view.
        return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return t if t.flags.c_contiguous else t.copy(order="C")


class Streamed:
    """A tensor written in pieces: its ``dtype`` (NumPy's) and ``shape`` known
    up front, its bytes made by ``pieces()`` (arrays or tensors, in order) only
    while it is written, so a large derived tensor never exists whole in memory."""

    def __init__(self, dtype: Any, shape: tuple[int, ...], pieces: Any):
        self.dtype, self.shape, self.pieces = np.dtype(dtype), tuple(shape), pieces

    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.dtype.itemsize


def write_safetensors(f: Any, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (NumPy arrays; CPU tensors, contiguous or not; or
    :class:`Streamed`) to the binary file ``f`` in the safetensors layout."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, t in tensors.items():
        code = _code(t.dtype)
        if code is None:
            raise TypeError(f"cannot write a {t.dtype} tensor ({name}) as safetensors")
        n = t.nbytes() if isinstance(t, Streamed) else _nbytes(t)
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    f.write(len(raw).to_bytes(8, "little"))
    f.write(raw)
    for name, t in tensors.items():
        if isinstance(t, Streamed):
            written = 0
            for piece in t.pieces():
                arr = _bytes(piece)
                f.write(memoryview(arr).cast("B"))
                written += arr.nbytes
            if written != t.nbytes():
                raise RuntimeError(f"{name} wrote {written:,} bytes, its header says {t.nbytes():,}")
            continue
        if _nbytes(t):
            f.write(memoryview(_bytes(t)).cast("B"))


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size() if is_tensor(t) else t.nbytes
