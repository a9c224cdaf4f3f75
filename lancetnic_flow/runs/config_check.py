"""A run's ``config.json`` checked for the fields that loading it reads.

``predict``, ``evaluate``, the estimators and ``train --resume`` take the
text columns, the label and target, the encoding and the losses from the
configuration the run was trained with. A field of the wrong kind failed as
an internal error mid-command (``'int' object is not iterable``), was read
otherwise than written (a string of text columns as a column a letter), or
scored ``evaluate``'s loss with another loss than the run's (an unknown
``class_loss``). Each is damage, said in words naming the file and the field.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from ..config import CLASS_LOSSES, VALUE_LOSSES

def _names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x for x in v)


def _name_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, str) and bool(v))


def _weights(v: Any) -> bool:
    return (isinstance(v, (list, tuple)) and len(v) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))


# field → (what it must be, in words; the test).
FIELDS: dict[tuple[str, str], tuple[str, Callable[[Any], bool]]] = {
    ("data", "text"): ("a list of column names", lambda v: _names(v) and bool(v)),
    ("data", "label"): ("a column name or null", _name_or_none),
    ("data", "target"): ("a column name or null", _name_or_none),
    ("data", "numeric"): ("a list of column names", _names),
    ("data", "label_sep"): ("a separator or null", _name_or_none),
    ("data", "encoding"): ("an encoding's name or null", _name_or_none),
    ("data", "storage_options"): ("an object", lambda v: isinstance(v, dict)),
    ("model", "name"): ("a model's name", lambda v: isinstance(v, str) and bool(v)),
    ("training", "class_loss"): (f"one of {', '.join(CLASS_LOSSES)}", lambda v: v in CLASS_LOSSES),
    ("training", "value_loss"): (f"one of {', '.join(VALUE_LOSSES)}", lambda v: v in VALUE_LOSSES),
    ("training", "loss_weights"): ("two numbers", _weights),
    ("training", "learn_val"): ("true, false or null", lambda v: v is None or isinstance(v, bool)),
}


def config_problem(config: dict) -> str | None:
    """What is wrong with ``config`` (config.json without its stamp) in words, or None.
    A field that is not there is not checked: files of earlier versions, and runs
    saved through the Python API, hold fewer."""
    for (section, name), (kind, ok) in FIELDS.items():
        part = config.get(section) or {}
        if name in part and not ok(part[name]):
            return f"its {section}.{name} is {json.dumps(part[name])[:40]}, not {kind}"
    return None


__all__ = ["config_problem"]
