"""What the head of an input file says its columns hold, read once per file.

The column check (:func:`~.checks.check_columns`) reads each file's head for
its column names; the same read gives what the columns hold, which the checks
of options the data gives nothing to do (:mod:`.idle_options`) judge from:
a Parquet or Arrow IPC file's schema, a CSV or TSV header (every column text),
a JSON Lines file's first objects (a column of lists only where every object
read holds a list there and those are the whole file).
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from ..errors import UserError
from ..formats import format_named
from .sources import FileInfo, open_error

# How much of a JSON Lines file is read where --label-sep asks whether its labels are
# lists: a longer file is not known to hold lists alone, and a string label there would
# be split by the separator, so it counts as holding strings.
LIST_WINDOW = 1 << 20
# JSON Lines heads read at once for their keys (remote stores answer in parallel; each holds a
# window of the file while read).
HEAD_THREADS = 16


def head_schema(fi: FileInfo, storage_options: dict | None = None, encoding: str | None = None,
                rows: bool = False, wanted: Sequence[str] = (), delimiter: str | None = None) -> pa.Schema | None:
    """The columns in the head of one file with what they hold (None: a line
    format, or an empty file); ``encoding``: its text encoding (None: UTF-8);
    ``rows``: a JSON Lines file's objects in its first :data:`LIST_WINDOW`
    bytes are read, not its first alone, to tell a column of lists;
    ``wanted``: columns a JSON Lines file's first object may leave out and a
    later one hold (looked for further in its head); ``delimiter``: a CSV file's (--delimiter)."""
    head = format_named(fi.format).head_columns()
    if head is None or fi.size == 0:
        return None
    try:
        if fi.format == "parquet":
            from .readers.parquet import schema_of

            return schema_of(fi.url, storage_options)
        if fi.format == "arrow":
            from .readers.arrow import schema_of as arrow_schema

            return arrow_schema(fi, storage_options)
        if fi.format == "jsonl":
            from .readers.jsonl import head_schema as jsonl_schema

            return jsonl_schema(fi, storage_options, encoding, LIST_WINDOW if rows else 0, wanted)
        names = head(fi, storage_options, encoding, delimiter) if delimiter and fi.format == "csv" else \
            head(fi, storage_options, encoding)
        return None if names is None else pa.schema([(name, pa.string()) for name in names])
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise open_error(fi.url, exc) from exc


def file_columns(fi: FileInfo, storage_options: dict | None = None, encoding: str | None = None,
                 delimiter: str | None = None) -> list[str] | None:
    """The columns in the head of one file (None: a line format, or an empty file);
    ``encoding``: its text encoding (None: UTF-8); ``delimiter``: a CSV file's."""
    schema = head_schema(fi, storage_options, encoding, delimiter=delimiter)
    return None if schema is None else schema.names


def column_type(schema: pa.Schema | None, name: str | None) -> pa.DataType | None:
    """What the column ``name`` holds by ``schema`` (the first of that name); None where it has none."""
    if schema is None or name not in schema.names:
        return None
    return schema.types[schema.names.index(name)]


def keys_ahead(files: Sequence[FileInfo], storage_options: dict | None = None,
               encoding: str | None = None) -> list[str] | None:
    """The columns of JSON Lines inputs, whose objects may each name other keys: the keys of
    each file's first objects (:func:`~.readers.jsonl.window_keys`), merged file by file in
    order, so a key that only a later file of a glob holds is a column too; None where the
    first file that holds anything is of a format whose columns its header or schema names
    once. The heads are read :data:`HEAD_THREADS` at a time: one after another, thousands of
    remote files took a round trip each before the first row was predicted."""
    sized = [fi for fi in files if fi.size and fi.format == "jsonl"]
    if not sized or next(fi for fi in files if fi.size).format != "jsonl":
        return None
    from concurrent.futures import ThreadPoolExecutor

    from .readers.jsonl import window_keys

    def keys(fi: FileInfo) -> list[str]:
        try:
            return window_keys(fi, storage_options, encoding)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise open_error(fi.url, exc) from exc

    found: dict[str, None] = {}
    with ThreadPoolExecutor(min(HEAD_THREADS, len(sized)), thread_name_prefix="lancetnic-keys") as pool:
        for names in pool.map(keys, sized):   # in the files' order: the error said is the first file's
            found.update(dict.fromkeys(names))
    return list(found)
