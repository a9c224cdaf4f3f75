"""How much memory a run's model takes once loaded, read from its file's
header before anything is loaded.

``predict`` and ``evaluate`` hold the loaded run in this process and in every
worker (:func:`~.predict.predictor` keeps it, and other runs within the
worker's room: :mod:`.held_runs` counts each at this size), so their memory
plan must know its size before it starts workers: a LinearSVM of hashed inputs
× thousands of classes is a dense matrix many times larger than the file that
stores its non-zero entries (docs/memory.md). The header gives every stored tensor's shape;
a matrix stored as entries (:mod:`.stored_weights`) keeps its dense shape in a
16-byte tensor of its own, read from the file alone.
"""
from __future__ import annotations

import json
import struct

from ..storage import join, special_kind, url_to_fs
from .folder import WEIGHTS_FILE, folder_options

# Bytes per element of the dtypes safetensors names.
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
               "U16": 2, "I8": 1, "U8": 1, "BOOL": 1}
# While a run loads it holds the file's bytes and the tensors parsed from them
# (twice the file) and, for a matrix stored as entries, 64-bit row, column and
# position indices and a float32 value per entry while the dense matrix is
# filled (stored_matrices.dense_matrix).
PARSED_COPIES = 2
PER_ENTRY = 3 * 8 + 4


def _elements(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _header(f) -> tuple[dict, int]:
    """The safetensors header of the open file ``f`` and where its data starts."""
    head = f.read(8)
    if len(head) < 8:
        raise ValueError("shorter than a safetensors header")
    n = struct.unpack("<Q", head)[0]
    doc = json.loads(f.read(n))
    doc.pop("__metadata__", None)
    return doc, 8 + n


def loaded_bytes(run: str, storage_options: dict | None = None, *, torch_network: bool = True) -> int:
    """The most memory loading ``run``'s weights holds at once: the dense
    float32 tensors the model is made of, plus the loading's transient copies
    (the file twice, :data:`PER_ENTRY` bytes per stored entry, and with
    ``torch_network`` the decoded state beside the network it is copied into).
    0 when the file cannot be read (loading it then says what is wrong)."""
    url = join(run, WEIGHTS_FILE)
    if special_kind(url) is not None:
        return 0   # a pipe would wait for a writer here; loading says what it is
    try:
        fs, path = url_to_fs(url, **folder_options(run, storage_options))
        size = fs.size(path)
        with fs.open(path, "rb") as f:
            header, start = _header(f)
            dense = entries = 0
            for key, t in header.items():
                name, sep, part = key.rpartition(":")
                if not sep:
                    dense += _elements(t["shape"]) * DTYPE_BYTES.get(t["dtype"], 4)
                elif part == "int8":   # a plain 8-bit matrix, widened to float32
                    dense += _elements(t["shape"]) * 4
                elif part == "shape":  # a matrix stored as entries: its shape is the tensor's data
                    f.seek(start + t["data_offsets"][0])
                    rows, cols = struct.unpack("<qq", f.read(16))
                    dense += rows * cols * 4
                elif part == "cols":
                    entries += _elements(t["shape"])
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return 0
    return dense * (2 if torch_network else 1) + PARSED_COPIES * size + PER_ENTRY * entries


__all__ = ["loaded_bytes"]
