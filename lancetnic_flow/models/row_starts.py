"""The starting values of the sparse input rows (:class:`~.sparse_input.LazyRows`).

Each value is a function of a salt, its row and its column alone (a counter-based
generator: SplitMix64's finaliser of a key made of them), so a row starts from the
same values whichever rank or batch first uses it, and in a resumed run. Two columns
take a pair of normal values by Marsaglia's polar method, one logarithm a pair, from
the first of the keyed draws (:data:`DRAWS`) that lands in the unit disc; one compiled
pass writes the float32 rows. The NumPy form (two hashes, a logarithm and a cosine a
value, through temporaries of rows × width each) was most of a bag model's first epoch's
extra cost (docs/benchmarks.md, "Starting values of input rows").
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

_HALF_UNIT = 2.0 ** -31   # 32 bits as a float in [0, 2)
DRAWS = 16   # keyed draws a pair may take; a pair none of them lands for starts at zero (no run meets one)


@njit(cache=True, nogil=True, inline="always")
def _mixed(key: np.uint64) -> np.uint64:
    """SplitMix64's finaliser of ``key``: bits that look uniformly random."""
    key = (key ^ (key >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    key = (key ^ (key >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return key ^ (key >> np.uint64(31))


@njit(cache=True, nogil=True)
def _fill(rows: np.ndarray, width: int, salt: np.uint64, std: float, out: np.ndarray) -> None:
    pairs = np.uint64((width + 1) // 2)
    for i in range(rows.shape[0]):
        first = np.uint64(rows[i]) * pairs
        for k in range(int(pairs)):
            pair = (first + np.uint64(k)) << np.uint64(4)
            a = b = 0.0
            for draw in range(DRAWS):
                bits = _mixed((pair | np.uint64(draw)) ^ salt)
                u = np.float64(bits >> np.uint64(32)) * _HALF_UNIT - 1.0
                v = np.float64(bits & np.uint64(0xFFFFFFFF)) * _HALF_UNIT - 1.0
                s = u * u + v * v
                if 0.0 < s < 1.0:
                    scale = math.sqrt(-2.0 * math.log(s) / s) * std
                    a, b = u * scale, v * scale
                    break
            out[i, 2 * k] = np.float32(a)
            if 2 * k + 1 < width:
                out[i, 2 * k + 1] = np.float32(b)


def start_values(rows: torch.Tensor, width: int, salt: int, std: float) -> torch.Tensor:
    """Rows ``rows``' starting values, N(0, ``std``²) each (float32, rows × ``width``):
    a function of ``salt``, the row and the column alone, so a row starts from the same
    values whenever a run first uses it, on every ``--ddp`` rank and in a resumed run."""
    ids = np.ascontiguousarray(rows.detach().cpu().numpy(), dtype=np.int64)
    out = np.empty((len(ids), width), np.float32)
    _fill(ids, width, np.uint64(salt), float(std), out)
    return torch.from_numpy(out).to(rows.device)


def warm() -> None:
    """Load the compiled pass (a fraction of a second even from numba's cache), so the first
    batch does not wait for it: call in a background thread while a run starts."""
    start_values(torch.zeros(1, dtype=torch.long), 1, 0, 1.0)
