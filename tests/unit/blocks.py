"""Small random row blocks with a dense reference, for the unit tests of
RowBlock and of the streaming side (features/rows.py, dataflow/stream.py)."""
from __future__ import annotations

import numpy as np

from lancetnic_flow.features.rows import RowBlock

DIM = 11


def random_block(n: int, seed: int = 0, start_id: int = 0) -> tuple[RowBlock, np.ndarray]:
    """A random CSR block and its dense reference; labels carry a unique row id."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n, DIM)) < 0.3, rng.random((n, DIM)), 0.0).astype(np.float32)
    dense[rng.random(n) < 0.2] = 0.0  # some empty rows
    rows, cols = np.nonzero(dense)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    block = RowBlock(cols.astype(np.int32), offsets, dense[rows, cols],
                     labels=np.arange(start_id, start_id + n, dtype=np.int32),
                     targets=rng.random(n).astype(np.float32),
                     numeric=rng.random((n, 2)).astype(np.float32))
    return block, dense


def dense_of(block: RowBlock) -> np.ndarray:
    out = np.zeros((len(block), DIM), np.float32)
    for i in range(len(block)):
        s, e = block.offsets[i], block.offsets[i + 1]
        out[i, block.indices[s:e]] = block.values[s:e]
    return out


def blocks_of(sizes: list[int], seed: int = 0) -> list[RowBlock]:
    out, start = [], 0
    for i, n in enumerate(sizes):
        out.append(random_block(n, seed=seed + i, start_id=start)[0])
        start += n
    return out


SIZES = [37, 120, 5, 0, 64, 300, 1, 88, 150, 41]
