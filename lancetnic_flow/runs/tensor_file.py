"""The safetensors layout written tensor by tensor, to any open file.

``safetensors.torch.save`` builds the whole file as one ``bytes`` first: a
second copy of every weight at the moment the trainer's memory is highest
(the best epoch's weights are held too). Streaming from the tensors' own
memory keeps a save to one copy, the file's; reading stays with the
safetensors library, and reading never unpickles.
"""
from __future__ import annotations

import json
from typing import Any

import torch

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


class Streamed:
    """A tensor written in pieces: its ``dtype`` and ``shape`` known up front,
    its bytes made by ``pieces()`` (arrays or tensors, in order) only while it
    is written, so a large derived tensor never exists whole in memory."""

    def __init__(self, dtype: torch.dtype, shape: tuple[int, ...], pieces: Any):
        self.dtype, self.shape, self.pieces = dtype, tuple(shape), pieces

    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * torch.empty(0, dtype=self.dtype).element_size()


def write_safetensors(f: Any, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (CPU, contiguous or not, or :class:`Streamed`) to the
    binary file ``f`` in the safetensors layout."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise TypeError(f"cannot write a {t.dtype} tensor ({name}) as safetensors")
        n = t.nbytes() if isinstance(t, Streamed) else t.numel() * t.element_size()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    f.write(len(raw).to_bytes(8, "little"))
    f.write(raw)
    for name, t in tensors.items():
        if isinstance(t, Streamed):
            written = 0
            for piece in t.pieces():
                arr = piece.detach().cpu().contiguous().numpy() if isinstance(piece, torch.Tensor) else piece
                f.write(memoryview(arr).cast("B"))
                written += arr.nbytes
            if written != t.nbytes():
                raise RuntimeError(f"{name} wrote {written:,} bytes, its header says {t.nbytes():,}")
            continue
        if t.numel():
            t = t.detach().cpu().contiguous()
            # bfloat16 has no numpy dtype: write its bytes through a same-size integer view.
            arr = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
            f.write(memoryview(arr).cast("B"))
