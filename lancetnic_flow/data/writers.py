"""Table writers, one per registered format: what prediction outputs
(:mod:`lancetnic_flow.runs.outputs`) and ``make-data`` (:mod:`.synth`) both
write with. A format's record (:mod:`lancetnic_flow.formats`) names its
writer; ``fmt.open_writer(sink, schema)`` makes one for an open binary file,
and each ``write(table)`` appends rows with the first table's columns.

* CSV: a header line (names quoted only when they must be), strings quoted
  (Arrow's "needed"); TSV: fields plain unless a value holds a tab, a quote
  or a line end, then that table's strings are quoted. A list column (a
  label set) is its items joined by ``LIST_SEP``, an empty list an empty field.
* JSON Lines: one object per row, as ``json.dumps`` writes it
  (``ensure_ascii=False``), built with Arrow compute, not a Python loop per
  row; a float that is not finite is null, a whole float keeps its ``.0``.
* Parquet: zstd pages, one row group per table written (make-data writes a
  block at a time, so a row group is a block). Arrow IPC: the file layout
  (Feather v2), the record batches of each table written.
* text: the ``text`` column, a line per row; fastText: ``__label__`` tags
  (one per label of a set) then the text. A line end inside a text cannot be
  held by a line format: it is written as a space. Other columns are not
  held (``Format.columns``); the callers that must keep them check first.

:func:`compressed` is the one compression of written files: gzip without a
time stamp or file name (the same bytes run to run), zstd at level 3, bz2
and xz as fsspec writes them.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..errors import UserError

LIST_SEP = "|"   # a list in a CSV field: the --label-sep a CSV of label sets is read with
GZIP_LEVEL, ZSTD_LEVEL = 1, 3  # fast: higher levels gain little on text


@contextlib.contextmanager
def compressed(f, compression: str | None):
    """``f`` (an open binary file) as it should be written to, through ``compression``."""
    if compression is None:
        yield f
        return
    if compression == "gzip":
        sink = gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=GZIP_LEVEL, mtime=0)
    elif compression == "zstd":
        import zstandard

        sink = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(f, closefd=False)
    else:
        from fsspec.compression import compr

        sink = compr[compression](f, mode="wb")
    try:
        yield sink
    finally:
        sink.close()


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def flat_lists(table: pa.Table) -> pa.Table:
    """List columns (label sets, their probabilities) as text: the items joined
    by ``LIST_SEP``; an empty list is an empty field."""
    for i, field in enumerate(table.schema):
        if _is_list(field.type):
            joined = pc.binary_join(pc.cast(table.column(i), pa.list_(pa.string())), LIST_SEP)
            table = table.set_column(i, field.name, joined)
    return table


def lines_blob(lines) -> bytes:
    """Strings joined by newlines, with a final newline (nulls as empty lines)."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if not len(lines):
        return b""
    lines = pc.fill_null(lines, "")
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines), "\n")
    return joined[0].as_buffer().to_pybytes() + b"\n"


class DelimitedWriter:
    """CSV and TSV (the record's ``delimiter``)."""

    def __init__(self, sink, schema: pa.Schema, fmt) -> None:
        self.f, self.delimiter = sink, fmt.delimiter or ","
        self.always_quoted = self.delimiter == ","
        flat = flat_lists(schema.empty_table())
        plain = all(not any(ch in n for ch in (self.delimiter, '"', "\n", "\r")) for n in flat.column_names)
        self.f.write(self._csv(flat, include_header=True, quoting_header="none" if plain else "needed"))

    def _csv(self, table: pa.Table, **options) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(delimiter=self.delimiter, **options))
        return buf.getvalue()

    def write(self, table: pa.Table) -> None:
        table = flat_lists(table)
        if not table.num_rows:
            return
        if not self.always_quoted:
            try:
                self.f.write(self._csv(table, include_header=False, quoting_style="none"))
                return
            except pa.ArrowInvalid:   # a value holds a tab, a quote or a line end
                pass
        self.f.write(self._csv(table, include_header=False, quoting_style="needed"))

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- JSON Lines

_SHORT_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"),
                  ("\b", "\\b"), ("\f", "\\f"))
_OTHER_CONTROLS = "[\x00-\x07\x0b\x0e-\x1f]"


def json_strings(arr) -> pa.Array:
    """Strings as JSON string literals, as ``json.dumps(s, ensure_ascii=False)`` writes them."""
    for old, new in _SHORT_ESCAPES:
        arr = pc.replace_substring(arr, old, new)
    if pc.any(pc.match_substring_regex(arr, _OTHER_CONTROLS)).as_py():
        for code in [*range(0x00, 0x08), 0x0B, *range(0x0E, 0x20)]:
            arr = pc.replace_substring(arr, chr(code), f"\\u{code:04x}")
    return pc.binary_join_element_wise('"', arr, '"', "")


def json_numbers(arr) -> pa.Array:
    """Numbers as JSON: a float that is not finite is null, a whole float keeps ``.0``."""
    if pa.types.is_floating(arr.type):
        arr = pc.cast(arr, pa.float64())
        arr = pc.if_else(pc.is_finite(arr), arr, pa.scalar(None, pa.float64()))
        text = pc.cast(arr, pa.string())
        whole = pc.match_substring_regex(text, "^-?[0-9]+$")
        return pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    return pc.cast(arr, pa.string())


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    return v


def json_values(arr) -> pa.Array:
    """One column's values as JSON text (null as ``null``)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        return json_values(pc.cast(arr, t.value_type))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        out = json_strings(pc.cast(arr, pa.string()))
    elif pa.types.is_floating(t) or pa.types.is_integer(t):
        out = json_numbers(arr)
    elif pa.types.is_boolean(t):
        out = pc.if_else(arr, pa.scalar("true"), pa.scalar("false"))
    elif pa.types.is_null(t):
        out = pa.nulls(len(arr), pa.string())
    elif _is_list(t) and not pa.types.is_nested(t.value_type):
        items = json_values(arr.values)
        listed = pa.ListArray.from_arrays(pc.cast(arr.offsets, pa.int32()), pc.fill_null(items, "null"),
                                          mask=arr.is_null())
        out = pc.binary_join_element_wise("[", pc.binary_join(listed, ", "), "]", "")
    else:   # structs, maps, dates, bytes: json.dumps per value, as the old writer did
        out = pa.array([None if v is None else json.dumps(_json_value(v), ensure_ascii=False, default=str)
                        for v in arr.to_pylist()], pa.string())
    return pc.fill_null(out, "null")


def json_lines(table: pa.Table) -> bytes:
    """``table``'s rows as JSON Lines, one object per row, keys in column order."""
    if not table.num_rows:
        return b""
    if not table.num_columns:
        return b"{}\n" * table.num_rows
    parts: list = []
    for i, name in enumerate(table.column_names):
        parts += [("{" if i == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": ",
                  json_values(table.column(i))]
    parts.append("}")
    return lines_blob(pc.binary_join_element_wise(*parts, ""))


class JsonLinesWriter:
    def __init__(self, sink, schema: pa.Schema, fmt) -> None:
        self.f = sink

    def write(self, table: pa.Table) -> None:
        self.f.write(json_lines(table))

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- Parquet

PARQUET_MAX_GROUP = 1 << 20   # rows


class ParquetTableWriter:
    def __init__(self, sink, schema: pa.Schema, fmt) -> None:
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(sink, schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self.writer.write_table(table, row_group_size=min(table.num_rows, PARQUET_MAX_GROUP))

    def close(self) -> None:
        self.writer.close()


class ArrowFileWriter:
    """An Arrow IPC file (the layout ``.arrow`` and Feather v2 name; ``.arrows``
    is the stream's): each table written appends its record batches, and the
    footer lists them, so it is read back a range of batches at a time."""

    def __init__(self, sink, schema: pa.Schema, fmt) -> None:
        import pyarrow.ipc as ipc

        self.writer = ipc.new_file(sink, schema)

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self.writer.write_table(table)

    def close(self) -> None:
        self.writer.close()


# ---------------------------------------------------------------- lines


def _one_line(arr) -> pa.Array:
    return pc.replace_substring_regex(pc.fill_null(arr, ""), "\r\n|\r|\n", " ")


class TextLinesWriter:
    """The ``text`` column, one line per row."""

    def __init__(self, sink, schema: pa.Schema, fmt) -> None:
        if "text" not in schema.names:
            raise UserError(f"the {fmt.shown} format holds a column named 'text', and this table has none",
                            "name the text column 'text', or write a table format (.csv, .jsonl, .parquet)")
        self.f = sink

    def write(self, table: pa.Table) -> None:
        self.f.write(lines_blob(_one_line(pc.cast(table.column("text"), pa.string()))))

    def close(self) -> None:
        pass


class FastTextWriter(TextLinesWriter):
    """``__label__x text``: a tag per label (a list column is a label set), then the text."""

    def write(self, table: pa.Table) -> None:
        text = _one_line(pc.cast(table.column("text"), pa.string()))
        if "label" not in table.column_names:
            self.f.write(lines_blob(text))
            return
        label = table.column("label").combine_chunks()
        if not _is_list(label.type):   # one label a row: a list of one
            label = pa.ListArray.from_arrays(pa.array(range(len(label) + 1), pa.int32()), pc.cast(label, pa.string()))
        label = pc.cast(label, pa.list_(pa.string()))
        joined = pc.binary_join(label, " __label__")
        tagged = pc.if_else(pc.greater(pc.fill_null(pc.utf8_length(joined), 0), 0),
                            pc.binary_join_element_wise("__label__", joined, " ", ""), pa.scalar(""))
        self.f.write(lines_blob(pc.binary_join_element_wise(tagged, text, "")))


__all__ = ["DelimitedWriter", "FastTextWriter", "JsonLinesWriter", "LIST_SEP", "ParquetTableWriter",
           "TextLinesWriter", "compressed", "flat_lists", "json_lines"]
