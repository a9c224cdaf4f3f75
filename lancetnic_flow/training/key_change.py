"""What changed between the data and options a checkpoint was written for and today's.

A checkpoint keeps its cache key's parts in the clear
(:func:`~lancetnic_flow.dataflow.manifest.key_parts`); a resume whose key
differs compares them with today's, and its refusal names each change: an
input file changed, added or gone, an option's old and new value, a tokenizer's
code or word files, a reader revised since.
"""
from __future__ import annotations

import json
from typing import Any

from ..options import BY_FIELD
from ..plurals import counted

# Each reader's latest revision and what it reads otherwise than the one before (formats.py's
# ``revision``): named only where the checkpoint's reader is that one's predecessor.
READER_NEWS = {
    "csv": (8, "a BOM after a line end inside a quoted field is now kept as the field's text"),
    "tsv": (8, "a BOM after a line end inside a quoted field is now kept as the field's text"),
    "jsonl": (5, "a JSON object written across lines is now read as malformed lines"),
    "text": (1, "a BOM at a line's start is now stripped"),
    "fasttext": (4, "a line of lone \\r line ends is now refused wherever the file is cut"),
}
# The revisions of a reading that is no one format's, as a refusal names them.
READINGS = {"lower": "lower-casing", "label_sets": "the reading of label sets",
            "encoded_bytes": "the decoding of a typed file's bytes with {data.encoding}",
            "encoded_text": "the decoding of text files with {data.encoding}",
            "zstd": "the reading of .zst files", "numbers": "the reading of {data.numeric} and {data.target} values",
            "val_labels": "the reading of {data.val} labels"}
# What a continued run's key counts besides the feature options (keep_learning.key_options), in words.
CONTINUED = {"init_from": "the run it continues ({training.init_from}) changed since: trained again, or replaced",
             "learned_rows": "the rows the run it continues learned changed since",
             "labels_as_run": "the reading of labels spelled otherwise than the continued run's was revised since"}
SHORT = 40        # a value longer than this, as JSON writes it, is said to have changed, not shown
SHOWN_FILES = 3   # input files named, the rest counted


def key_changes(before: dict, now: dict) -> list[str]:
    """Each difference between a checkpoint's key parts (``before``) and today's (``now``),
    in words; empty where the parts agree (the key then differs by what they do not hold)."""
    return [*_input_changes(before.get("inputs") or {}, now.get("inputs") or {}),
            *_option_changes(before.get("options") or {}, now.get("options") or {}),
            *_tokenizer_changes(before.get("tokenizer"), now.get("tokenizer"), now.get("options") or {}),
            *_column_changes(before.get("columns") or {}, now.get("columns") or {}),
            *_fraction_change(before.get("val_fraction"), now.get("val_fraction")),
            *_revision_changes(before.get("revisions") or {}, now.get("revisions") or {},
                               _formats(before) & _formats(now))]


def _formats(parts: dict) -> set[str]:
    """The formats the inputs of these parts are read as."""
    return {row[3] for rows in (parts.get("inputs") or {}).values() for row in rows or ()}


def _name(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


def _input_changes(before: dict, now: dict) -> list[str]:
    said = []
    for split, role in (("train", "training"), ("val", "{data.val}")):
        old, new = before.get(split), now.get(split)
        if old is None and new is None:
            continue
        if old is None or new is None:
            said.append(f"a {{data.val}} source was {'added' if old is None else 'dropped'}" if split == "val"
                        else "the training inputs changed")
            continue
        said += _file_changes({r[0]: r for r in old}, {r[0]: r for r in new}, role)
    return said


def _file_changes(old: dict[str, list], new: dict[str, list], role: str) -> list[str]:
    """The files of one role (training or validation) that changed, by URL: each row is
    ``[url, size, change token, format, compression]`` (SourcePlan.file_rows)."""
    changed = []
    for url in sorted(old.keys() & new.keys()):
        (_, size0, token0, fmt0, comp0), (_, size1, token1, fmt1, comp1) = old[url], new[url]
        if fmt0 != fmt1 or comp0 != comp1:
            changed.append(f"{_name(url)} is read as {fmt1}{' ' + comp1 if comp1 else ''}, was "
                           f"{fmt0}{' ' + comp0 if comp0 else ''}")
        elif size0 != size1:
            changed.append(f"{_name(url)}'s content changed ({size0:,} bytes, now {size1:,})")
        elif token0 != token1:
            changed.append(f"{_name(url)} was changed (the same size; its modification time or version differs)")
    gone = [_name(u) for u in sorted(old.keys() - new.keys())]
    added = [_name(u) for u in sorted(new.keys() - old.keys())]
    if gone:
        changed.append(f"{_listed(gone)} {'is' if len(gone) == 1 else 'are'} no longer among the {role} inputs")
    if added:
        changed.append(f"{_listed(added)} {'is a new' if len(added) == 1 else 'are new'} {role} "
                       f"input{'' if len(added) == 1 else 's'}")
    return changed


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_FILES])
    return shown + (f" and {counted(len(names) - SHOWN_FILES, 'more')}" if len(names) > SHOWN_FILES else "")


def _short(value: Any) -> str | None:
    text = json.dumps(value, default=str)
    return text if len(text) <= SHORT else None


def _option_changes(before: dict, now: dict) -> list[str]:
    said = []
    for key in sorted((before.keys() | now.keys()) - {"tokenizer_code"}):
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        if key in CONTINUED and old is not None and new is not None:
            said.append(CONTINUED[key])
            continue
        field = f"features.{key}"
        name = f"{{{field}}}" if field in BY_FIELD else key
        shown = _short(old), _short(new)
        said.append(f"{name} was {shown[0]}, now {shown[1]}" if None not in shown else f"{name} changed")
    return said


def _tokenizer_changes(before: dict | None, now: dict | None, options: dict) -> list[str]:
    """A tokenizer of the same name whose code or ``depends_on`` files changed (another
    name is an option's change); a checkpoint without the parts counts by its fingerprint."""
    name = str(options.get("tokenizer") or "").rpartition(":")[2]
    if not name or before is None or now is None:
        return []
    said = []
    if before.get("code") != now.get("code"):
        said.append(f"tokenizer {name}'s code changed")
    if before.get("files") != now.get("files"):
        said.append(f"the files tokenizer {name} depends on changed")
    return said


def _column_changes(before: dict, now: dict) -> list[str]:
    said = []
    for key in sorted(before.keys() | now.keys()):
        if before.get(key) != now.get(key):
            shown = _short(before.get(key)), _short(now.get(key))
            said.append(f"the columns' {key} was {shown[0]}, now {shown[1]}" if None not in shown
                        else f"the columns' {key} changed")
    return said


def _fraction_change(before: float | None, now: float | None) -> list[str]:
    return [] if before == now else [f"the share held out for validation was {before}, now {now}"]


def _revision_changes(before: dict, now: dict, formats: set[str]) -> list[str]:
    """Readings revised since; a format's reader only where inputs of that format were read then and
    now (another format is an input's change). A reader at revision 0 is not in the parts."""
    said = []
    for key in sorted(before.keys() | now.keys()):
        old, new = before.get(key, 0), now.get(key, 0)
        if old == new:
            continue
        if key in READINGS:   # present on one side only: a column or option asked for it (said as such)
            if old and new:
                said.append(f"{READINGS[key]} was revised since")
        elif key in formats:
            latest, news = READER_NEWS.get(key, (None, ""))
            why = f" ({news})" if new == latest and old == latest - 1 else ""
            said.append(f"the {_title(key)} reader was revised since{why}")
    return said


def _title(fmt: str) -> str:
    from ..formats import format_named

    try:
        return format_named(fmt).title or fmt
    except Exception:   # a format registered by a plugin no longer loaded
        return fmt
