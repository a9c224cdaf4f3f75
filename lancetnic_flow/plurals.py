"""A count and its noun, as a message says them: "1 row", "2,000 rows".

Every message that counts something a run may hold once (a row, a file, a
partition, a worker, an epoch, a trial) says its noun through
:func:`counted`, so a count of one never reads "1 rows" or "1 row(s)".
"""
from __future__ import annotations


# Nouns whose plural the spelling rules below would get wrong (a hard "ch").
_AS_WRITTEN = {"epoch": "epochs"}


def plural(noun: str) -> str:
    """``noun``'s plural: "rows", "classes", "entries", "batches", "epochs"; of a
    phrase, its last word's ("training rows")."""
    last = noun.rsplit(" ", 1)[-1]
    if last in _AS_WRITTEN:
        return noun[:len(noun) - len(last)] + _AS_WRITTEN[last]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def counted(n: int | float, noun: str, many: str | None = None) -> str:
    """``n`` with thousands separators and ``noun``, plural unless ``n`` is 1
    (``many`` where the plural is not the noun's regular one): ``counted(1,
    "row")`` → "1 row", ``counted(2000, "row")`` → "2,000 rows"."""
    return f"{n:,} {noun if n == 1 else many or plural(noun)}"


def verb(n: int | float, one: str, many: str) -> str:
    """The verb that agrees with a count ``n``: ``verb(1, "is", "are")`` → "is"."""
    return one if n == 1 else many
