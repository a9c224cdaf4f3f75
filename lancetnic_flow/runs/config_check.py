"""A run's ``config.json`` and ``model.json`` checked for the fields that loading them reads.

``predict``, ``evaluate``, the estimators and ``train --resume`` take the
text columns, the label and target, the encoding and the losses from the
configuration the run was trained with. A field of the wrong kind failed as
an internal error mid-command (``'int' object is not iterable``), was read
otherwise than written (a string of text columns as a column a letter), or
scored ``evaluate``'s loss with another loss than the run's (an unknown
``class_loss``). In ``model.json``, a task its heads cannot do (``regress``
for a classifier: a KeyError in ``evaluate``; an unknown one: "0 rows"),
sizes that are not numbers, thresholds that are not probabilities (or not
one per label), failed
as internal errors or scored nothing. Each is damage, said in words naming
the file and the field.
"""
from __future__ import annotations

import json
import math
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
    ("data", "delimiter"): ("one character or null", lambda v: v is None or (isinstance(v, str) and len(v) == 1)),
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


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# model.json's network sizes (kwargs) that are whole numbers, and those that are true or false.
COUNTS = ("dim", "classes", "hidden", "layers", "embed", "numeric", "max_len", "vocab")
FLAGS = ("regress", "margin")


def _task_problem(meta: dict) -> str | None:
    """A ``task`` other than the heads in ``kwargs`` do."""
    task, kw = meta.get("task"), meta["kwargs"]
    if task is None:   # written before the task was: told by the heads
        return None
    classes, regress = bool(kw.get("classes")), bool(kw.get("regress"))
    can = (("multitask",) if classes and regress else ("regress",) if regress
           else ("classify", "multilabel") if classes else ())
    if task not in can:
        return (f"its task is {json.dumps(task)[:40]}, and its heads "
                f"({kw.get('classes') or 0} classes{', a value' if regress else ''}) do {' or '.join(can) or 'nothing'}")
    return None


def meta_problem(meta: dict) -> str | None:
    """What is wrong with ``meta`` (model.json, its "kwargs" an object) in words, or None."""
    kw = meta["kwargs"]
    bad = [f"kwargs.{k} is {json.dumps(kw[k])[:40]}, not a whole number" for k in COUNTS if k in kw and not _count(kw[k])]
    bad += [f"kwargs.{k} is {json.dumps(kw[k])[:40]}, not true or false" for k in FLAGS
            if k in kw and not isinstance(kw[k], bool)]
    if "dropout" in kw and not (isinstance(kw["dropout"], (int, float)) and not isinstance(kw["dropout"], bool)):
        bad.append(f"kwargs.dropout is {json.dumps(kw['dropout'])[:40]}, not a number")
    if bad:
        return "its " + bad[0]
    cuts = meta.get("thresholds")
    if cuts is not None and not (isinstance(cuts, list) and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and 0 <= t <= 1 for t in cuts)):
        return f"its thresholds are {json.dumps(cuts)[:40]}, not probabilities"
    if cuts is not None and _count(kw.get("classes")) and len(cuts) != kw["classes"]:
        # a label without its threshold would be decided by another label's, or by none
        return f"it has {len(cuts):,} thresholds for the {kw['classes']:,} labels of its network, not one per label"
    return _task_problem(meta)


__all__ = ["config_problem", "meta_problem"]
