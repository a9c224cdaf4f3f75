"""Options the data gives nothing to do, refused before any work.

``--label-sep`` splits label strings: fastText lines tag each label on its
own, and a label column of lists (a Parquet or Arrow list column, a JSON
array) holds each label as an item, so there is no string to split.
``--encoding`` decodes text files and Parquet/Arrow columns of bytes: where
every input is Parquet or Arrow and none of the columns read holds bytes,
their strings are already text. An option that would change nothing is
refused by name (exit 2), as the project refuses others.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from ..formats import format_named
from ..options import bad
from .heads import column_type, head_schema
from .readers.labels import is_list_type
from .readers.table import holds_bytes
from .sources import Columns, FileInfo, SourcePlan

# The formats whose labels may be lists, or tags: where every file is one, --label-sep may split nothing.
LISTED_FORMATS = ("fasttext", "parquet", "arrow", "jsonl")
# Files whose heads are read at once (a remote store answers each in its own time).
HEAD_THREADS = 8


def _head(plan: SourcePlan, fi: FileInfo, storage_options: dict | None, columns: Columns) -> pa.Schema | None:
    """What the head of ``fi`` says its columns hold: as the column check read it
    (``plan.heads``), else read now (a plan no check has read)."""
    if fi.url in plan.heads:
        return plan.heads[fi.url]
    return head_schema(fi, storage_options, columns.encoding, rows=columns.label_sep is not None)


def _files(plans: tuple) -> list[tuple[SourcePlan, FileInfo]]:
    return [(p, f) for p in plans if p is not None for f in p.files]


def _each(files: list[tuple[SourcePlan, FileInfo]], look) -> list:
    """``look(plan, file)`` of every file, in the files' order (heads not read yet read at once)."""
    if len(files) <= 1 or all(f.url in p.heads for p, f in files):
        return [look(p, f) for p, f in files]
    with ThreadPoolExecutor(min(HEAD_THREADS, len(files)), thread_name_prefix="lancetnic-idle") as pool:
        return list(pool.map(lambda pf: look(*pf), files))


def refuse_idle_label_sep(columns: Columns, *plans: SourcePlan | None, storage_options: dict | None = None) -> None:
    """``--label-sep`` where no file has a label string to split: every file is
    fastText (each label its own ``__label__`` tag) or holds its labels as lists
    (a Parquet/Arrow list column; a JSON Lines file whose every label is an array,
    :func:`~.heads.head_schema`)."""
    pairs = _files(plans)
    files = [f for _, f in pairs]
    if columns.label_sep is None or not files:
        return
    if all(f.format == "fasttext" for f in files):
        raise bad("data.label_sep", f"{{name}} {columns.label_sep!r} splits a label string, and fastText lines "
                  "give each label its own __label__ tag (every tag of a line is one of its labels)", "drop {name}")
    if any(f.format not in LISTED_FORMATS for f in files):
        return   # CSV/TSV labels are strings

    def lists(plan: SourcePlan, fi: FileInfo) -> bool | None:
        """Whether the file's labels are lists (None: an empty file, which says nothing)."""
        if fi.format == "fasttext":
            return True
        schema = _head(plan, fi, storage_options, columns)
        return None if schema is None else is_list_type(column_type(schema, columns.label) or pa.string())

    found = _each(pairs, lists)
    listed = [f for f, lists_ in zip(files, found) if lists_ and f.format != "fasttext"]
    if listed and all(x is not False for x in found):
        raise bad("data.label_sep", f"{{name}} {columns.label_sep!r} splits a label string, and {listed[0].url}'s "
                  f"label column {columns.label!r} holds lists (each item one label)"
                  + (", as every input's does" if len(files) > 1 else ""), "drop {name}")


def refuse_idle_encoding(columns: Columns, *plans: SourcePlan | None, storage_options: dict | None = None,
                         named: str | None = None) -> None:
    """``--encoding`` where every input is Parquet or Arrow IPC and none of the
    columns it would decode (text, label, kept) holds bytes in any file;
    ``named``: the encoding as the user spelled it."""
    pairs = _files(plans)
    files = [f for _, f in pairs]
    if columns.encoding is None or not files or any(format_named(f.format).splits_by_bytes for f in files):
        return
    wanted = {*columns.text, columns.label, *columns.keep} - {None}

    def decodes(plan: SourcePlan, fi: FileInfo) -> bool:
        schema = _head(plan, fi, storage_options, columns)
        return schema is not None and any(holds_bytes(f.type) for f in schema
                                          if columns.keep_all or f.name in wanted)

    if not any(_each(pairs, decodes)):
        read = ", ".join(repr(c) for c in (*columns.text, columns.label) if c)
        raise bad("data.encoding", f"{{name}} {named or columns.encoding}: it decodes text files and Parquet/Arrow columns "
                  f"of bytes, and the columns read ({read}) of {files[0].url}"
                  + (f" and the {len(files) - 1} other inputs" if len(files) > 1 else "")
                  + " hold strings, already text: it would change nothing", "drop {name}")


def refuse_idle_delimiter(columns: Columns, *plans: SourcePlan | None) -> None:
    """``--delimiter`` where no input is read as CSV: it splits nothing (a TSV file's fields are
    split by tabs), so it would change nothing."""
    files = [f for _, f in _files(plans)]
    if columns.delimiter is None or not files or any(f.format == "csv" for f in files):
        return
    raise bad("data.delimiter", f"{{name}} {columns.delimiter!r} splits the fields of CSV files, and "
              f"{files[0].url}" + (f" and the {len(files) - 1} other inputs are" if len(files) > 1 else " is")
              + f" read as {format_named(files[0].format).shown}: it would change nothing",
              "drop {name}, or pass {data.format} csv for a delimited file of another name")
