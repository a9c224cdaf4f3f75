"""The validation split: which rows are held out, decided row by row from
the text alone, so it is known before any pass over the corpus and is the
same on every worker, for every partitioning and every run."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .hashing import unit_interval


def validation_mask(table: pa.Table, val_fraction: float) -> np.ndarray:
    """Rows that belong to validation: a stable hash of the text, so the split
    is the same on every worker, for every partitioning and every run."""
    if val_fraction <= 0:
        return np.zeros(table.num_rows, bool)
    if val_fraction >= 1:
        return np.ones(table.num_rows, bool)
    return unit_interval(table["text"]) < val_fraction
