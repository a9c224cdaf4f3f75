"""Counts said in words: ``1 row``, ``2 rows``, ``1 label is``, ``3 labels are``."""
from __future__ import annotations


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` (with thousands separators) and its noun, singular for exactly one:
    ``counted(1, "row")`` is ``1 row``, ``counted(2_000, "row")`` ``2,000 rows``;
    ``many`` where the plural is not ``one`` + ``s``."""
    return f"{n:,} {one if n == 1 else (many if many is not None else one + 's')}"
