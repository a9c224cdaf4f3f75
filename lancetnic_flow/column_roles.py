"""One column, one role: the columns a run reads as text, label, target and
numeric inputs, checked for a name given twice.

A column named as two roles is read twice, and one of the readings is
wrong whichever wins: a text column that is also the label puts each row's
answer in its own input, a column read as text and as a number trains its
digits twice, a label that is also the target learns one column as two
tasks. A column named twice in one role is read twice as that role. The
training options, ``evaluate``'s and ``predict``'s column options and the
Python API check their columns here, each naming them as its reader types
them.
"""
from __future__ import annotations

from typing import Iterable, Sequence


def named_twice(roles: Iterable[tuple[str, Sequence[str | None]]]) -> tuple[str, str, str] | None:
    """The first column that ``roles`` (role, its columns; ``None`` columns are
    no column) name a second time, as (column, the role that named it first,
    the role that named it again); None when each column is named once."""
    seen: dict[str, str] = {}
    for role, columns in roles:
        for column in columns:
            if column is None:
                continue
            if column in seen:
                return column, seen[column], role
            seen[column] = role
    return None


#: Why a column read in two roles is refused, by (the role that named it first, the one that named it again).
WHY_TWICE = {
    ("text", "text"): "it would be read twice as text, each of its words counted twice",
    ("text", "label"): "the model would read each row's label in its input",
    ("text", "target"): "the model would read each row's target in its input",
    ("text", "numeric"): "one column is read either as words or as a number, not both",
    ("label", "target"): "a multi-task run learns a label column and a numeric target column, two columns",
    ("label", "numeric"): "the model would be given each row's label as an input",
    ("target", "numeric"): "the model would be given each row's target as an input",
    ("numeric", "numeric"): "it would be one input twice",
}
