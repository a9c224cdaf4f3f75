"""JSON Lines: one object per line; Arrow's reader, with a per-line slow
path for a block that holds a malformed line or mixed-type values.

A text field holding a number, boolean, list or object is not text: its row
is skipped as "not_text" (a status in prediction), never trained as the
value's JSON. The Arrow path sees it from the column's type, the slow path
from the value's Python type. Labels and targets may be numbers."""
from __future__ import annotations

import io
import json
import re
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ...errors import UserError
from ...formats import Format, Head, to_utf8
from ..decompress import check_not_packed
from ..sources import Chunk, Columns
from .labels import LONE_SURROGATE, json_values_as_text
from .table import (BOM, LINE_ENDS, decoded, empty_table, finish, open_head, read_lines, split_lines,
                    strip_bom, text_kinds, utf8_ok)


def parse(data: bytes, header: bytes | None, fmt: str, columns: Columns, url: str) -> Chunk:
    """The registry's reader for JSON Lines (no header line)."""
    return parse_jsonl(data, columns, url)


def head_columns(fi, storage_options: dict | None, encoding: str | None = None) -> list[str] | None:
    """The registry's ``head``: the keys of the file ``fi``'s first object."""
    with open_head(fi, storage_options) as f:
        return columns_of(f, fi.url, encoding)


def head_schema(fi, storage_options: dict | None, encoding: str | None = None, window: int = 0,
                wanted: Sequence[str] = ()) -> pa.Schema | None:
    """The columns of the file ``fi``, its first object's keys (None: a file of blank lines),
    with what they hold: a list where every object of the file that holds the column holds
    a list, and the objects on lines that start in its first ``window`` bytes are all of
    them; a string otherwise. Reading stops once no column can be a list. Where the first
    object lacks a column of ``wanted`` (a JSON Lines object may leave a key out), the keys of
    the objects in the file's first :data:`KEYS_WINDOW` bytes are its columns too (strings),
    read until they hold every column wanted."""
    schema = _head_schema(fi, storage_options, encoding, window)
    lacking = [n for n in wanted if schema is not None and n not in schema.names]
    if not lacking:
        return schema
    found = dict.fromkeys(schema.names)   # every key met, so a column still lacking is named beside them
    with open_head(fi, storage_options) as f:
        for at, obj in objects_of(f, fi.url, encoding):
            found.update(dict.fromkeys(obj))
            if at >= KEYS_WINDOW or all(n in found for n in lacking):
                break
    return pa.schema([*schema, *((n, pa.string()) for n in found if n not in schema.names)])


# How far into a JSON Lines file a column the run reads is looked for when its first object lacks it,
# and the keys of whose objects are the columns `predict --keep all` writes.
KEYS_WINDOW = 1 << 20


def window_keys(fi, storage_options: dict | None, encoding: str | None = None) -> list[str]:
    """The keys of the objects on the lines that start in the file ``fi``'s first
    :data:`KEYS_WINDOW` bytes, in the order they first come: a JSON Lines file's
    columns, decided before any block is read, so the same at every block size."""
    found: dict[str, None] = {}
    with open_head(fi, storage_options) as f:
        for at, obj in objects_of(f, fi.url, encoding):
            if at >= KEYS_WINDOW:
                break
            found.update(dict.fromkeys(obj))
    return list(found)


def _head_schema(fi, storage_options: dict | None, encoding: str | None, window: int) -> pa.Schema | None:
    """:func:`head_schema` of the first object's keys alone."""
    names: list[str] | None = None
    listed: dict[str, bool] = {}   # the columns of lists and nulls alone so far: whether a list was seen
    whole = True
    with open_head(fi, storage_options) as f:
        for at, obj in objects_of(f, fi.url, encoding):
            if names is None:
                names, listed = list(obj), dict.fromkeys(obj, False)
            elif at >= window:
                whole = False
                break
            for name in list(listed):
                value = obj.get(name)
                if isinstance(value, list):
                    listed[name] = True
                elif value is not None:
                    del listed[name]
            if not listed:   # no column can hold lists alone: nothing more to read
                break
    if names is None:
        return None
    return pa.schema([(n, pa.list_(pa.string()) if whole and listed.get(n) else pa.string()) for n in names])


def parse_jsonl(data: bytes, columns: Columns, url: str) -> Chunk:
    if columns.all_rows and not utf8_ok(data):
        return _rows_in_order(strip_bom(data), columns, url)
    data, skipped = decoded(data)
    undecodable = skipped.get("undecodable", 0)
    if not data.strip():
        return Chunk(empty_table(columns, "jsonl"), undecodable, skipped)
    names = columns.names()
    table = _as_written(data, columns)
    if table is not None and not _objects_end_their_lines(data, table.num_rows):
        table = None   # an object across lines: malformed lines, as the per-line path and a cut between them read it
    if table is not None:
        table = _with_missing_keys(table, names)
        get, not_text = text_kinds(columns, table.column) if table.num_rows else (table.column, None)
        return finish(columns, get, table.num_rows, table.num_rows + undecodable, skipped,
                      have=table.column_names, not_text=not_text)
    if columns.all_rows:
        return _rows_in_order(data, columns, url)
    return _slow_rows(data, columns, skipped, undecodable)


def _with_missing_keys(table: pa.Table, names: list[str]) -> pa.Table:
    """``table`` with a column of nulls for each of ``names`` no object of its block
    holds: the file's head holds the key (checked before the run), so a block past
    it without the key (unlabelled rows appended) holds rows missing that value,
    as pandas reads them, each then skipped or kept by its usual reason."""
    for n in names:
        if n not in table.column_names:
            table = table.append_column(n, pa.nulls(table.num_rows, pa.string()))
    return table


def _objects_end_their_lines(data: bytes, rows: int) -> bool:
    """Whether no JSON value of the block ``data`` (read by Arrow as ``rows``
    rows) runs on past its line, each line judged on its own. Arrow's reader
    takes an object written across lines (``{"text": "a",`` then
    ``"label": "b"}``) as one row when its block holds every line of it, where
    a block cut between them, or beside a malformed line, reads each line as
    malformed: the rows of a file would depend on where it was cut. A line
    that is not blank starts with ``{`` and ends with ``}`` unless a value
    crosses it (after a ``}`` inside a value comes ``,``, ``]`` or ``}``)."""
    if _SEVERAL_VALUES.search(data) is None:
        # Every line then gives one row at most, and a value across lines fewer rows than lines:
        # a row a line (blank ones aside) is the common block, told by counting bytes.
        lines = int(np.count_nonzero(np.frombuffer(data, np.uint8) == ord("\n"))) + (not data.endswith(b"\n"))
        if rows == lines or rows == lines - data.count(b"\n\n") - data.count(b"\n\r\n"):
            return True
    text = pc.utf8_trim(split_lines(data), " \t\r\ufeff")
    text = pc.filter(text, pc.greater(pc.utf8_length(text), 0))
    return pc.all(pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))).as_py() is not False


# Where a line may hold a second value (``{..} {..}``: two rows), whose extra row would hide a
# value across lines from the count of rows; a text holding "} {" only sends its block to the exact check.
_SEVERAL_VALUES = re.compile(rb"\}[ \t\r]*\{")
# A block's first value, past JSON's whitespace and a byte-order mark.
_FIRST_VALUE = re.compile(rb"(?:[ \t\r\n]|\xef\xbb\xbf)*(.?)")


def _read_arrow(data: bytes, schema: pa.Schema | None = None) -> pa.Table | None:
    """The block read by Arrow (``schema``: types of some columns, the others
    inferred); None where Arrow cannot read it (a malformed line, a column of
    mixed types). A block whose first value is not an object is the per-line
    path's: Arrow's reader crashes the process on a block that starts with
    ``null``, and refuses one that starts with any other value."""
    if _FIRST_VALUE.match(data).group(1) != b"{":
        return None
    try:
        return pj.read_json(io.BytesIO(data),
                            read_options=pj.ReadOptions(block_size=max(1 << 20, len(data) + 1), use_threads=False),
                            parse_options=pj.ParseOptions(explicit_schema=schema) if schema else None)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _as_written(data: bytes, columns: Columns) -> pa.Table | None:
    """The block read by Arrow with its values as written, or None where Arrow
    cannot give them so and the per-line path reads the block. Arrow infers a
    string that looks like a date as a timestamp (read again as a string), an
    integer past int64, or beside a decimal, as a double that loses digits,
    and the keys of every row in a kept object (both read line by line)."""
    table = _read_arrow(data)
    if table is None or not table.num_rows:
        return table
    used = [n for n in (*columns.text, columns.label) if n and n in table.column_names]
    kept = [n for n in columns.kept(table.column_names) if n in table.column_names] if columns.all_rows else []
    nested = [t for t in (table.schema.field(n).type for n in kept) if pa.types.is_nested(t)]
    if any(_contains(t, _rebuilt_by_arrow) for t in nested):
        return None
    for n in kept:   # Arrow writes 1.0 as "1" and 1e15 as "1e+15" beside a decimal: kept as the lines wrote them
        if pa.types.is_floating(table.schema.field(n).type) and n not in _read_as_values(columns):
            written = _written_numbers(data, table.column(n), n)
            if written is None:
                return None   # read line by line (_rows_in_order)
            table = table.set_column(table.column_names.index(n), n, written)
    used += [n for n in kept if n not in used]
    dated = {n: _dates_as_text(table.schema.field(n).type) for n in used
             if _contains(table.schema.field(n).type, _is_date)}
    if dated:
        table = _read_arrow(data, pa.schema(list(dated.items())))
        if table is None:
            return None
    return None if any(_loses_digits(table.column(n)) for n in used) else table


# A JSON number as a line writes it, after its key.
_NUMBER = r"\s*:\s*(?P<n>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*[,}]"


def _written_numbers(data: bytes, values, name: str) -> pa.Array | None:
    """The numbers of the column ``name`` (``values``, as Arrow read the block ``data``: one
    object a line) as the lines wrote them, found by pattern in each line; None where that
    cannot be trusted, and the block is read line by line: a line naming the key other than
    once, a line it names no number in, or a number that is not the value Arrow read."""
    lines = split_lines(data)
    lines = pc.filter(lines, pc.greater(pc.utf8_length(pc.utf8_trim(lines, " \t\r\ufeff")), 0))
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if len(lines) != len(values):
        return None
    key = json.dumps(name, ensure_ascii=False)
    if not pc.all(pc.equal(pc.count_substring(lines, key), 1)).as_py():
        return None
    found = pc.struct_field(pc.extract_regex(lines, re.escape(key) + _NUMBER), "n")   # null where none
    if pc.any(pc.and_(pc.is_null(found), pc.is_valid(values))).as_py():
        return None
    same = pc.equal(pc.cast(found, pa.float64()), pc.cast(values, pa.float64()))
    if not pc.all(pc.or_kleene(same, pc.is_null(values))).as_py():
        return None
    return pc.if_else(pc.is_valid(values), found, pa.scalar(None, pa.string()))


def _read_as_values(columns: Columns) -> set:
    """The columns a run reads (text, label, numbers), as against those it only keeps."""
    return {*columns.text, columns.label, columns.target, *columns.numeric}


class _Written(float):
    """A JSON number with a fraction or an exponent, and its text as the line wrote it
    (``written``): a kept value is written so (``1.0``, ``2.50``, ``1e3``), where Arrow's
    reading of a float column writes ``1``, ``2.5``, ``1000``, and of a whole number
    beside a decimal ``1e+15``, so the same id read otherwise by the block holding it."""

    def __new__(cls, text: str):
        self = super().__new__(cls, text)
        self.written = text
        return self


def _is_date(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t)


def _rebuilt_by_arrow(t: pa.DataType) -> bool:
    """A type inside a kept list or object whose JSON Arrow does not give back:
    an object gains the keys of other rows, a whole number beside a decimal becomes one."""
    return pa.types.is_struct(t) or pa.types.is_floating(t)


def _contains(t: pa.DataType, kind) -> bool:
    return kind(t) or any(_contains(t.field(i).type, kind) for i in range(t.num_fields))


def _dates_as_text(t: pa.DataType) -> pa.DataType:
    if _is_date(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_dates_as_text(f.type)) for f in t])
    if pa.types.is_large_list(t):
        return pa.large_list(_dates_as_text(t.value_type))
    return pa.list_(_dates_as_text(t.value_type)) if pa.types.is_list(t) else t


# A double holds every whole number up to 2**53; past it, one read from an
# integer literal may have lost digits (9007199254740993, 18446744073709551001).
EXACT_INTEGERS = 2.0 ** 53


def _loses_digits(arr) -> bool:
    """Whether a column (or a list in it) holds a double past :data:`EXACT_INTEGERS`."""
    t = arr.type
    if pa.types.is_floating(t):
        low, high = pc.min_max(arr).values()
        return high.is_valid and (high.as_py() >= EXACT_INTEGERS or low.as_py() <= -EXACT_INTEGERS)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _contains(t, pa.types.is_floating) and _loses_digits(pc.list_flatten(arr))
    return False


def _slow_rows(data: bytes, columns: Columns, skipped: dict[str, int], undecodable: int) -> Chunk:
    """Training's slow path, only for a block with a malformed line or mixed-type
    values: a Python loop per line."""
    names = columns.names()
    texts = set(columns.text)
    cols: dict[str, list] = {n: [] for n in names}
    not_text: list[bool] = []
    malformed = lone = 0
    for line, obj in _values(data):
        if obj is None:
            obj = {}   # a null line: Arrow, and prediction, read a row without values (empty_text)
        if obj is _NOT_JSON or not isinstance(obj, dict):
            malformed += 1
            continue
        if _not_unicode(line, obj, columns):
            lone += 1
            continue
        wrong = False
        for n in names:
            v = obj.get(n)   # a key no object of the block holds: a missing value, as in _with_missing_keys
            if n in texts and v is not None and not isinstance(v, str):
                wrong, v = True, None   # a number, boolean, list or object where text belongs
            elif isinstance(v, (dict, list)):
                v = json.dumps(_nan_as_null(v))
            elif isinstance(v, bool):
                v = str(v).lower()
            elif v is not None and not isinstance(v, float):   # floats: json_values_as_text, as Arrow writes them
                v = str(v)
            cols[n].append(v)
        not_text.append(wrong)
    n_rows = len(cols[names[0]]) if names else 0
    if malformed:
        skipped["malformed"] = skipped.get("malformed", 0) + malformed
    if lone:
        skipped["undecodable"] = skipped.get("undecodable", 0) + lone
    arrays = {n: json_values_as_text(v) for n, v in cols.items()}
    return finish(columns, arrays.__getitem__, n_rows, n_rows + malformed + undecodable + lone,
                  skipped, not_text=pa.array(not_text, pa.bool_()) if any(not_text) else None)


# JSON's escape of a lone surrogate of the range a byte that is not UTF-8 decodes to (surrogateescape).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][c-fC-F]")
def _escapable(raw: bytes) -> bool:
    """Whether a line's bytes that are not UTF-8 can be read as surrogate escapes and told from
    the values of its own: none is JSON's escape of a surrogate of their range."""
    return _SURROGATE_ESCAPE.search(raw) is None


# JSON's whitespace, which may stand between the values of a line, and a line that is not JSON.
_JSON_SPACE = re.compile(r"[ \t\r]*")
_NOT_JSON = object()


def _values(data: bytes, escape: bool = False):
    """(the line's bytes, each JSON value of it) for each line of ``data`` that is
    not blank, in order; ``_NOT_JSON`` once for a line that is not JSON. Arrow's
    reader (the fast path) takes every value of a line, one after another with
    or without whitespace between them (``{..} {..}``, or lines ended by a lone
    ``\\r``): a block read line by line reads them too, or the same line was two
    rows in one block and one malformed row in a block beside a malformed line.
    A lone ``\\r`` ends a line as ``\\n`` does, as a file is cut there too (the
    format's ``cr_ends_lines``): a line is read alike whichever block holds it.
    With ``escape``, a byte that is not UTF-8 is read as its surrogate escape
    (:func:`_value` keeps its value's bytes), not as U+FFFD; a line
    that also writes a surrogate as JSON's ``\\udcXX`` could not be told from it, and reads U+FFFD."""
    decode = json.JSONDecoder(parse_float=_Written).raw_decode
    for raw in LINE_ENDS.split(data):
        if not raw.strip():
            continue
        line = raw.decode("utf-8", errors="surrogateescape" if escape and _escapable(raw) else "replace")
        start = 1 if line.startswith("\ufeff") else 0   # a file's BOM mid-block (files joined by cat)
        values, at = [], _JSON_SPACE.match(line, start).end()
        try:
            while at < len(line):
                value, at = decode(line, at)
                values.append(value)
                at = _JSON_SPACE.match(line, at).end()
        except ValueError:
            values = [_NOT_JSON]
        for value in values or [_NOT_JSON]:
            yield raw, value


def _not_unicode(raw: bytes, obj: dict, columns: Columns) -> bool:
    """Whether a value the run reads (text, label, target, numeric) holds a lone
    surrogate (JSON's ``"\\ud800"``): no Unicode text, so the row is
    "undecodable", as one with a byte that is not UTF-8. Arrow refuses such a
    block, so only the per-line paths meet it; a kept value is kept as bytes (:func:`_value`)."""
    if b"\\u" not in raw:
        return False
    used = (*columns.text, columns.label, columns.target, *columns.numeric)
    return any(_holds_lone_surrogate(obj.get(n)) for n in used if n is not None)


def _holds_lone_surrogate(v) -> bool:
    if isinstance(v, str):
        return LONE_SURROGATE.search(v) is not None
    if isinstance(v, list):
        return any(_holds_lone_surrogate(x) for x in v)
    return isinstance(v, dict) and any(_holds_lone_surrogate(x) for x in (*v, *v.values()))


def _nan_as_null(v):
    """A list or object with JSON's NaN as null, as a NaN label or value is
    missing (json.dumps would write NaN, which no JSON reader takes)."""
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, list):
        return [_nan_as_null(x) for x in v]
    if isinstance(v, dict):
        return {k: _nan_as_null(x) for k, x in v.items()}
    return v


def _json_as_written(v) -> str:
    """A kept list or object as JSON, each number with a fraction or an exponent in it as
    the line wrote it (:class:`_Written`: json.dumps writes ``2.50`` as ``2.5`` and ``1e3``
    as ``1000.0``), NaN as null (:func:`_nan_as_null`). One call per value of it, as the
    line's decoding made one object per value."""
    if isinstance(v, _Written):
        return v.written
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_json_as_written(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(map(_json_as_written, v)) + "]"
    return json.dumps(_nan_as_null(v), ensure_ascii=False)


def _value(v, escaped: bool = False, kept: bool = False):
    """A JSON value as text; one holding lone surrogates as bytes (:func:`_surrogates_as_bytes`).
    ``kept``: a column only kept, whose number with a fraction or exponent is its text as written."""
    if kept and isinstance(v, _Written):
        return v.written
    if isinstance(v, (dict, list)):
        v = _json_as_written(v) if kept else json.dumps(_nan_as_null(v), ensure_ascii=False)
    elif isinstance(v, bool):
        v = str(v).lower()
    elif v is not None and not isinstance(v, float):   # floats: json_values_as_text, as Arrow writes them
        v = str(v)
    if isinstance(v, str) and LONE_SURROGATE.search(v):
        return _surrogates_as_bytes(v, escaped)
    return v


# A surrogate JSON's escape wrote ("\ud800"), of the range surrogateescape leaves to the bytes a line read with it held.
_WRITTEN_SURROGATES = re.compile("([\ud800-\udbff]+)")


def _surrogates_as_bytes(v: str, escaped: bool) -> bytes:
    """A kept value holding lone surrogates as bytes that tell them apart: JSON's escape of one
    (``"\\ud800"``) as its UTF-8 form (``b"\\xed\\xa0\\x80"``, as Python's ``surrogatepass``
    writes it), so ids that differ there stay distinct (as U+FFFD they merged); from a line read
    with surrogate escapes, those as the bytes they were read from (such a line writes no
    escape of their range: :func:`_escapable`)."""
    if not escaped:
        return v.encode("utf-8", "surrogatepass")
    parts = _WRITTEN_SURROGATES.split(v)
    return b"".join(p.encode("utf-8", "surrogatepass" if i % 2 else "surrogateescape") for i, p in enumerate(parts))


def _rows_in_order(data: bytes, columns: Columns, url: str = "") -> Chunk:
    """Prediction's slow path, for a block holding a malformed or undecodable
    line: every line in order, with its status."""
    objs: list[dict | None] = []
    status: list[str | None] = []
    have: list[str] = []
    escaped: list[bool] = []   # the line's bytes that are not UTF-8 were read as surrogate escapes
    for raw, obj in _values(data, escape=True):
        try:
            raw.decode("utf-8")
            why = None
        except UnicodeDecodeError:
            # the whole line, as training drops it (table.decoded); its other fields (an id) still identify it
            why = "undecodable"
        escaped.append(why is not None and _escapable(raw))
        if obj is _NOT_JSON:
            obj, why = None, why or "malformed"
        if obj is not None and not isinstance(obj, dict):
            obj, why = None, why or "malformed"
        if obj is not None and why is None and _not_unicode(raw, obj, columns):
            why = "undecodable"
        if obj is not None and why is None and any(
                obj.get(n) is not None and not isinstance(obj.get(n), str) for n in columns.text):
            why = "not_text"   # a number, boolean, list or object where text belongs
        objs.append(obj)
        status.append(why)
        if obj is not None:
            if columns.keep_all:   # each key a column: past the keys read ahead too (an output of JSON Lines)
                _check_keys(obj, url, None)
            have += [k for k in obj if k not in have]
    skipped: dict[str, int] = {}
    for why in status:
        if why:
            skipped[why] = skipped.get(why, 0) + 1
    names = columns.read_names(have)
    read = _read_as_values(columns)
    arrays = {n: _kept_whole([None if o is None else _value(o.get(n), e, n not in read) for o, e in zip(objs, escaped)])
              for n in names}
    return finish(columns, arrays.__getitem__, len(objs), len(objs), skipped,
                  status=pa.array(status, pa.string()), have=have)


def _kept_whole(values: list) -> pa.Array:
    """:func:`json_values_as_text` of a column's values, or where one is bytes that are not
    UTF-8 the column's bytes, as a Parquet binary column is read."""
    raw = [isinstance(v, bytes) for v in values]
    if not any(raw):
        return json_values_as_text(values)
    text = json_values_as_text([None if r else v for v, r in zip(values, raw)]).to_pylist()
    return pa.array([v if r else t if t is None else t.encode() for v, t, r in zip(values, text, raw)], pa.binary())


def columns_of(f, url: str, encoding: str | None = None) -> list[str] | None:
    """The keys of the first object in the open file ``f`` (text in ``encoding``;
    None: UTF-8); None for a file of blank lines."""
    obj = first_object(f, url, encoding)
    return None if obj is None else list(obj)


def first_object(f, url: str, encoding: str | None = None) -> dict | None:
    """The first object in the open file ``f`` (text in ``encoding``; None:
    UTF-8); None for a file of blank lines."""
    return next((obj for _, obj in objects_of(f, url, encoding)), None)


def objects_of(f, url: str, encoding: str | None = None):
    """``(offset, object)`` for each object of the open file ``f`` (text in
    ``encoding``; None: UTF-8), ``offset`` where its line starts. A first line
    that is no object is refused; a later one is left out (a reader counts its
    row as malformed). A key holding a lone surrogate is refused: no column is named so."""
    seen, first = 0, True
    for line in read_lines(f):
        at, seen = seen, seen + len(line)
        if not line.strip():
            continue
        if first:
            first = False
            values = [_first_line_object(line, url, encoding)]
        else:
            try:
                values = [json.loads(to_utf8(line, encoding))]
            except ValueError:
                values = [v for _, v in _values(to_utf8(line, encoding))]
        for v in values:
            if isinstance(v, dict):
                _check_keys(v, url, at)
                yield at, v


def _check_keys(obj: dict, url: str, at: int | None) -> None:
    """Refuse an object one of whose keys holds a lone surrogate (JSON's ``"\\ud800"`` escape):
    a column's name is Unicode text, and Arrow and every output file would fail on it (it was
    "cannot read ... check the URL")."""
    bad = next((k for k in obj if LONE_SURROGATE.search(k)), None)
    if bad is not None:
        where = "an object" if at is None else f"the object on the line at byte {at:,}"
        raise UserError(f"{url}: {where} has the key {json.dumps(bad)}, which holds a "
                        "lone surrogate escape: no column can be named so",
                        "rename that key in the file (a surrogate pair, such as \\ud83d\\ude00, is one character "
                        "and reads)")


def _first_line_object(line: bytes, url: str, encoding: str | None) -> dict:
    """The object on a file's first line that is not blank, or the UserError that it holds none."""
    check_not_packed(line, url)
    line = to_utf8(line[len(BOM):] if line.startswith(BOM) else line, encoding)
    try:
        obj = json.loads(line)
    except ValueError as exc:
        # a line of several values ({..} {..}) is rows, as the readers take it (_values)
        obj = next((v for _, v in _values(line)), _NOT_JSON)
        if obj is _NOT_JSON:
            raise UserError(f"{url}: the first line is not JSON ({exc})",
                            "check the format, or pass {data.format}") from exc
    if not isinstance(obj, dict):
        raise UserError(f"{url}: the first line is not a JSON object",
                        "each line must be an object like "
                        '{"text": "...", "label": "..."}')
    return obj


def sniff(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for JSON Lines: every line of the head is a
    JSON object (or the one line it cut short opens one)."""
    if not head.lines:
        return "first line opens a JSON object" if head.cut.startswith('{"') else None
    for line in head.lines:
        try:
            if not isinstance(json.loads(line), dict):
                return None
        except ValueError:
            return None
    return "lines are JSON objects"
