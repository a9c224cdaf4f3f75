"""Byte sizes as people write and read them: ``4GiB``, ``512MB``, ``1.5G``.

Parsing follows Dask's (``dask.utils.parse_bytes``, rule for rule: a unit
test compares the two), so sizes read the same here as in Dask's own
options, without importing Dask for it: a run in this process never
imports Dask. A bare ``K``/``M``/``G``/``T`` means KiB/MiB/GiB/TiB, as
memory sizes usually do. Printing keeps one decimal
(``3.3 GiB``), in one place for the plan, the errors and the dashboard.
"""
from __future__ import annotations

import re

from .errors import UserError

_UNITS = {"b": 1, "": 1}
for _i, _letter in enumerate("kmgtp", 1):
    _UNITS.update({_letter: 1000 ** _i, f"{_letter}b": 1000 ** _i, f"{_letter}i": 1024 ** _i,
                   f"{_letter}ib": 1024 ** _i})

_BINARY_LETTER = re.compile(r"^\s*([0-9.eE+-]+)\s*([kKmMgGtT])\s*$")


def parse_size(text: str | int | float, what: str = "size") -> int:
    """Parse ``'4GiB'`` → bytes. Raises :class:`UserError` on nonsense or a negative size."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        n = int(text)
    else:
        s = str(text)
        if not re.search(r"\d", s):
            # Dask reads "" as 1 byte and a bare unit ("GiB") as one of it: a typo, not a size.
            raise UserError(f"{what}: {text!r} has no number", "write e.g. 4GiB, 512MiB, 1.5GB or a number of bytes")
        m = _BINARY_LETTER.match(s)
        if m:
            s = f"{m.group(1)}{m.group(2).upper()}iB"
        try:
            n = int(parse_bytes(s))
        except (ValueError, TypeError):
            raise UserError(f"{what}: cannot read {text!r} as a size",
                            "write e.g. 4GiB, 512MiB, 1.5GB or a number of bytes") from None
    if n < 0:
        raise UserError(f"{what}: a size cannot be negative, got {text!r}", "write e.g. 4GiB or 512MiB")
    return n


def parse_bytes(s: float | str) -> int:
    """``dask.utils.parse_bytes``: ``'100 MB'`` → 100,000,000, ``'1kiB'`` → 1024,
    ``'1e6'``, ``'MB'`` (one of it); an unknown unit or number is a ValueError."""
    if isinstance(s, (int, float)):
        return int(s)
    s = s.replace(" ", "")
    if not any(char.isdigit() for char in s):
        s = f"1{s}"
    index = len(s)
    while index > 0 and s[index - 1].isalpha():
        index -= 1
    prefix, suffix = s[:index], s[index:]
    try:
        n = float(prefix)
    except ValueError as e:
        raise ValueError(f"Could not interpret '{prefix}' as a number") from e
    try:
        multiplier = _UNITS[suffix.lower()]
    except KeyError as e:
        raise ValueError(f"Could not interpret '{suffix}' as a byte unit") from e
    return int(n * multiplier)


def format_size(n: float, short: bool = False) -> str:
    """Bytes → ``'3.3 GiB'``; ``short``: ``'438M'``, ``'2.0G'`` for narrow columns."""
    n = float(n)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            break
        n /= 1024
    if short:
        return f"{n:.0f}{unit}" if unit in ("B", "K", "M") else f"{n:.1f}{unit}"
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}iB"
