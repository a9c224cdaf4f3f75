"""What every reader shares: the output table, column checks, UTF-8 handling.

A reader parses its format into columns; :func:`finish` turns them into the
table the features read (``text``, ``label``, ``target``, numeric columns),
dropping and counting rows that cannot be used by reason ("empty_text",
"missing_label", "missing_target"). Everything is vectorised with
``pyarrow.compute``: no Python loop per row.
"""
from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import UserError
from ...storage import open_options, url_to_fs
from ..decompress import check_not_packed, open_decompressed
from ..sources import Chunk, Columns, missing_column_error, open_error
from ..usable import usable_tokens
from .labels import check_single, empty_lists, is_list_type, label_sets, nan_as_null, repeated_rows
from ...plurals import counted
from .times import is_time_type, iso_text
from .utf8_shapes import Utf8Shapes, utf8_shapes

BOM = b"\xef\xbb\xbf"
_NUMBER_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# A block stops the run when more of its rows than both of these are not
# text in the expected encoding: the file is in another encoding, and
# skipping would silently lose that share of it. Fewer are counted skips.
UNDECODABLE_ROWS = 10
UNDECODABLE_SHARE = 0.01
# How many UTF-8 characters of the shapes single-byte text makes by chance (data/readers/utf8_shapes.py:
# cp1252's "CAFÉ…" is UTF-8's "CAFߥ") show a block read in another encoding is UTF-8; one of the
# other shapes does ("café"). In a multi-byte encoding (shift_jis: half-width "ﾃｩ" is é's bytes) every
# shape comes by chance, so only so many of them do.
UTF8_EVIDENCE = 3
MULTIBYTE_EVIDENCE = 8


def open_head(fi, storage_options: dict | None):
    """The file ``fi`` (a ``FileInfo``) opened for reading from its start, decompressed."""
    return open_decompressed(fi.url, fi.compression, storage_options)


# A line's end: b"\\n", or a lone b"\\r" (classic Mac line ends); one that ends the bytes read so far
# waits for the next byte, which may make it a b"\\r\\n".
LINE_ENDS = re.compile(rb"\n|\r(?!\n)")
_LINE_ENDS_READ = re.compile(rb"\n|\r(?=[^\n])")


def read_lines(f, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The lines of the binary stream ``f``, each with its line end (the last
    may have none; a lone ``\\r`` ends one, so a file of them is not read whole
    as one line), read ``chunk`` bytes at a time: decompressing streams
    (zstandard's) have no ``readline``, so ``for line in f`` fails on them."""
    rest = b""
    while True:
        data = f.read(chunk)
        if not data:
            break
        rest += data
        start = 0
        for m in _LINE_ENDS_READ.finditer(rest):
            yield rest[start:m.end()]
            start = m.end()
        rest = rest[start:]
    if rest:
        yield rest


def fs_path(url: str, storage_options: dict | None):
    """``(filesystem, path)`` of ``url``, for a reader that seeks in the file (Parquet, Arrow IPC)."""
    return url_to_fs(url, **open_options(url, storage_options))


def open_seekable(url: str, storage_options: dict | None):
    """``url`` opened for reading as it is stored (seekable, not decompressed);
    a failure to open it is a UserError naming it."""
    try:
        fs, path = fs_path(url, storage_options)
        return fs.open(path, "rb")
    except Exception as exc:  # noqa: BLE001
        raise open_error(url, exc) from exc


def strip_bom(data: bytes) -> bytes:
    return data[len(BOM):] if data.startswith(BOM) else data


FLOAT32_MAX = float(np.finfo(np.float32).max)


# A duration's unit per second: a duration column reads in seconds whatever unit the file stores it in
# (pandas' timedelta64 writes nanoseconds, Arrow's default is microseconds).
PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def number_column(arr, name: str, flag: str) -> pa.ChunkedArray | pa.Array:
    """The ``flag`` (``--numeric``, ``--target``) column ``name`` as float64
    (:func:`to_float`): a duration in seconds; a column of dates, times or
    timestamps, whose number is in no unit the run could state (days since
    1970? nanoseconds?), is a :class:`UserError` naming it."""
    t = arr.type
    if pa.types.is_temporal(t) and not pa.types.is_duration(t):
        kind = "dates" if pa.types.is_date(t) else "times of day" if pa.types.is_time(t) else \
            "intervals" if pa.types.is_interval(t) else "timestamps"
        raise UserError(f"{flag} {name}: a column of {kind} ({t}) holds no number in a unit the model could "
                        "be told", f"write the number you mean into a column of numbers (seconds or days since an "
                        f"event, a year), or leave {name} out of {flag}")
    return to_float(arr)


def to_float(arr) -> pa.ChunkedArray | pa.Array:
    """Any column -> float64; values that are not numbers (or lie past
    ±:data:`FLOAT32_MAX`) become null; a duration in seconds."""
    t = arr.type
    if pa.types.is_duration(t):
        out = pc.divide(pc.cast(pc.cast(arr, pa.int64()), pa.float64()), PER_SECOND[t.unit])
    elif pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t) \
            or pa.types.is_decimal(t) or pa.types.is_null(t):
        # unchecked: a checked cast refuses an integer past 2^53 (float64's exact range) where the
        # same number written as text reads as its nearest float64
        out = pc.cast(arr, pa.float64(), safe=False)
    elif pa.types.is_nested(t):   # lists, objects (a JSON field of them): no value is one number
        out = pa.nulls(len(arr), pa.float64())
    else:
        s = pc.utf8_trim_whitespace(pc.cast(arr, pa.string()))
        # true/false as a boolean column reads them (Parquet's, a JSON field of booleans alone, pandas'
        # CSV): a JSON true beside numbers, text here, was no number where the same value alone was 1
        low = pc.utf8_lower(s)
        s = pc.if_else(pc.equal(low, "true"), "1", pc.if_else(pc.equal(low, "false"), "0", s))
        ok = pc.match_substring_regex(s, _NUMBER_RE)
        out = pc.cast(pc.if_else(ok, s, pa.scalar(None, pa.string())), pa.float64())
    # inf / nan are not usable numbers, nor those past float32's range, in which the models compute
    # (1e200 would train every prediction to infinity: its square overflows the fit's moments)
    usable = pc.and_(pc.is_finite(out), pc.less_equal(pc.abs(out), FLOAT32_MAX))
    return pc.if_else(usable, out, pa.scalar(None, pa.float64()))


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def holds_bytes(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` holds bytes (a dictionary of them too): what
    ``--encoding`` decodes in a Parquet or Arrow IPC file."""
    return _is_bytes(t.value_type if pa.types.is_dictionary(t) else t)


def _undictionary(arr):
    """A dictionary-encoded column as its values' type: a Parquet or Arrow IPC
    file written from a dictionary (pandas' categoricals) keeps that type, and
    its values may be bytes that need the UTF-8 check plain bytes get."""
    return pc.cast(arr, arr.type.value_type) if pa.types.is_dictionary(arr.type) else arr


def to_string(arr, encoding: str | None = None):
    """Any column of text, numbers, dates or a dictionary of them as strings; bytes
    decoded in ``encoding`` (None: UTF-8), a value that is not as U+FFFD; dates and
    timestamps in ISO 8601, as pandas writes them to a CSV (:mod:`.times`)."""
    arr = _undictionary(arr)
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if _is_bytes(t):
        return utf8_values(arr, "replace", encoding)[0]   # a kept value; text and labels were checked (utf8_columns)
    if pa.types.is_large_string(t) or pa.types.is_null(t) or pa.types.is_integer(t) \
            or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t) \
            or pa.types.is_string_view(t):
        return pc.cast(nan_as_null(arr), pa.string())
    if is_time_type(t):   # as the CSV pandas writes from the same frame reads
        return iso_text(arr)
    raise UserError(f"a column of type {t} cannot be read as text",
                    "choose a column holding strings, numbers or dates")


def utf8_values(arr, errors: str = "strict", encoding: str | None = None) -> tuple:
    """A column of bytes as text, and which values are not UTF-8 (None: all
    are). Those are null, or with ``errors="replace"`` hold U+FFFD. Parquet
    and Arrow IPC binary columns (a BYTE_ARRAY without the UTF8 annotation,
    as Hive and Spark write) are UTF-8 unchecked by their writer; with
    ``encoding`` (``--encoding``) the bytes are decoded in it instead."""
    if encoding is None:
        try:
            return pc.cast(arr, pa.string()), None
        except pa.ArrowInvalid:
            pass   # a value is not UTF-8: find which, value by value (a broken column only)
    codec = encoding or "utf-8"
    out, bad = [], []
    for v in arr.to_pylist():
        try:
            out.append(None if v is None else v.decode(codec))
            bad.append(False)
        except UnicodeDecodeError:
            out.append(v.decode(codec, errors=errors) if errors != "strict" else None)
            bad.append(True)
    return pa.array(out, pa.string()), (pa.array(bad, pa.bool_()) if any(bad) else None)


def invalid_strings_as_bytes(table: pa.Table) -> pa.Table:
    """``table`` with each string column that holds bytes that are not UTF-8 as
    the bytes column it is. Parquet's UTF8 annotation and Arrow IPC's string type
    are not checked by their readers, and a writer may put any bytes there: such
    a value stopped the run in the first kernel that read it (ArrowInvalid).
    As bytes, its row is "undecodable" and a kept value holds U+FFFD (:func:`utf8_columns`)."""
    for i, field in enumerate(table.schema):
        wide = pa.types.is_large_string(field.type)
        if not (pa.types.is_string(field.type) or wide):
            continue
        try:
            for chunk in table.column(i).chunks:
                chunk.validate(full=True)   # UTF-8 included
        except pa.ArrowInvalid:
            kind = pa.large_binary() if wide else pa.binary()
            column = pa.chunked_array([c.view(kind) for c in table.column(i).chunks], kind)
            table = table.set_column(i, field.with_type(kind), column)
    return table


def utf8_columns(columns: Columns, get, encoding: str | None = None) -> tuple:
    """``get`` with the text and label columns of bytes read as text (in
    ``encoding``; None: UTF-8), and per row whether one of them is not
    (None: no row): such a row is "undecodable", as a line of text that is
    not, never a stopped run."""
    fixed, bad = {}, None
    for c in (*columns.text, columns.label):
        if c is None or c in fixed or not _is_bytes(_undictionary(get(c)).type):
            continue
        fixed[c], wrong = utf8_values(_undictionary(get(c)), encoding=encoding)
        if wrong is not None:
            bad = wrong if bad is None else pc.or_(bad, wrong)
    if not fixed:
        return get, None
    return (lambda name: fixed[name] if name in fixed else get(name)), bad


def bytes_sample(table: pa.Table, columns: Columns, limit: int = 1 << 16) -> bytes:
    """Up to ``limit`` bytes of the table's text and label columns of bytes: what
    :func:`check_decodable` guesses another encoding from."""
    out, size = [], 0
    for c in dict.fromkeys((*columns.text, columns.label)):
        if c is None or c not in table.column_names or not _is_bytes(_undictionary(table.column(c)).type):
            continue
        column = _undictionary(table.column(c))
        start = 0
        while size < limit and start < len(column):   # a slice at a time: never the whole column as Python objects
            for v in column.slice(start, 256).to_pylist():
                if v is not None and size < limit:
                    out.append(v)
                    size += len(v)
            start += 256
    return b"\n".join(out)


def bytes_values(table: pa.Table, columns: Columns) -> list[pa.Buffer]:
    """The values of the table's text and label columns of bytes, and in prediction its kept
    ones (decoded in ``--encoding`` as the text is), each chunk's as one buffer (a
    dictionary's values once), without copying: what :func:`check_not_utf8` judges, every
    row of them, as a text file's every byte is."""
    out = []
    kept = columns.kept(table.column_names) if columns.all_rows else []
    for c in dict.fromkeys((*columns.text, columns.label, *kept)):
        if c is None or c not in table.column_names or not holds_bytes(table.column(c).type):
            continue
        for chunk in table.column(c).chunks:
            chunk = chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk
            out.append(_value_buffer(chunk))
    return out


def _value_buffer(arr: pa.Array) -> pa.Buffer:
    """The bytes of a binary array's values, end to end (a view's copied into one first)."""
    if pa.types.is_binary_view(arr.type):
        arr = pc.cast(arr, pa.large_binary())
    validity, offsets, data = arr.buffers()[:3]
    if data is None or not len(arr):
        return pa.py_buffer(b"")
    ends = np.frombuffer(offsets, np.int64 if pa.types.is_large_binary(arr.type) else np.int32)
    first, last = int(ends[arr.offset]), int(ends[arr.offset + len(arr)])
    return data.slice(first, last - first)


def _undecodable_status(status, bad, n: int, skipped: dict[str, int]):
    """Prediction's ``status`` with the rows of ``bad`` "undecodable" (counted),
    unless a parser gave them a reason already."""
    if bad is None:
        return status
    fresh = bad if status is None else pc.and_(bad, pc.is_null(status))
    count = pc.sum(fresh).as_py() or 0
    if count:
        skipped["undecodable"] = skipped.get("undecodable", 0) + count
    base = pa.nulls(n, pa.string()) if status is None else status
    return pc.if_else(fresh, pa.scalar("undecodable"), base)


def empty_table(columns: Columns | None, fmt: str) -> pa.Table:
    fields = [pa.field("text", pa.string(), nullable=False)]
    if columns is not None:
        if columns.label:
            fields.append(pa.field("label", pa.list_(pa.string()) if columns.multilabel else pa.string()))
        if columns.target:
            fields.append(pa.field("target", pa.float64()))
        for n in columns.numeric:
            fields.append(pa.field(n, pa.float64()))
    return pa.schema(fields).empty_table()


def finish(columns: Columns, get, n: int, rows_read: int, skipped: dict[str, int],
           status: pa.Array | None = None, have: list[str] | None = None,
           not_text: pa.Array | None = None, bytes_encoding: str | None = None) -> Chunk:
    """Build the output table from parsed columns; ``get(name)`` -> array.

    A row whose text holds nothing the run's analyzer reads (``columns.text_rule``,
    :mod:`..usable`: for words, no token) is "empty_text"; ``not_text`` marks rows a parser found with a
    text field of another kind (a JSON number, boolean, list or object):
    "not_text". With ``columns.all_rows`` no row is dropped (:func:`all_rows`):
    ``status`` holds the reasons a parser already found (null: none) and
    ``have`` the file's columns, for ``keep_all``. ``bytes_encoding``: that of
    a typed file's columns of bytes (:func:`finish_table`; None: UTF-8)."""
    if n == 0:
        return Chunk(empty_table(columns, ""), rows_read, skipped)
    get, undecodable = utf8_columns(columns, get, bytes_encoding)
    if len(columns.text) == 1:
        text = pc.fill_null(to_string(get(columns.text[0])), "")
    else:
        texts = [to_string(get(c)) for c in columns.text]
        joined = pc.binary_join_element_wise(*texts, " ", null_handling="replace", null_replacement="")
        text = pc.utf8_trim_whitespace(joined)
    keep, *tokens = usable_tokens(text, columns.text_rule)   # holds what the analyzer reads; no copy of the strings
    if columns.all_rows:
        status = _undecodable_status(status, undecodable, n, skipped)
        return all_rows(columns, get, text, keep, rows_read, skipped, status, have or [], not_text,
                        bytes_encoding, tokens)
    reasons = [("empty_text", keep)]
    if not_text is not None:
        reasons.insert(0, ("not_text", pc.invert(not_text)))
    if undecodable is not None:
        reasons.insert(0, ("undecodable", pc.invert(undecodable)))
    label = target = None
    noted: dict[str, int] = {}
    if columns.label:
        label, ok = label_column(columns, get(columns.label), noted)
        reasons.append(("missing_label", ok))
    if columns.target:
        raw_target = get(columns.target)
        target = number_column(raw_target, columns.target, "--target")
        unreadable_target = _unreadable_where(raw_target, target, [ok for _, ok in reasons])
        if unreadable_target:
            noted[UNREADABLE_TARGET] = unreadable_target
        reasons.append(("missing_target", pc.is_valid(target)))
    mask, dropped = _usable_rows(reasons, skipped)
    kept = (lambda a: pc.filter(a, mask)) if dropped else (lambda a: a)   # no copy when every row is kept

    arrays = [kept(text)]
    names = ["text"]
    if label is not None:
        arrays.append(kept(label))
        names.append("label")
    if target is not None:
        arrays.append(kept(target))
        names.append("target")
    unreadable = 0
    for c in columns.numeric:
        raw = get(c)
        value = number_column(raw, c, "--numeric")
        arrays.append(kept(value))
        names.append(c)
        unreadable += _unreadable_numbers(kept(raw), kept(value))
    schema = empty_table(columns, "").schema
    table = pa.Table.from_arrays(
        [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
        names=names)
    if unreadable:
        noted["unreadable_numeric"] = unreadable
    if columns.multilabel and label is not None:
        repeated = repeated_rows(table.column("label").combine_chunks())
        if repeated:
            noted["repeated_label"] = repeated
    return Chunk(_with_tokens(table.cast(schema), *tokens, kept), rows_read, skipped, noted)


def _with_tokens(table: pa.Table, field: pa.Field | None, tokens: pa.Array | None, kept) -> pa.Table:
    # A tokenizer of the user's gave the empty_text check its tokens: they travel with the rows
    # kept, so the features read them rather than run it again (features/tokenize.py: texts_of).
    return table if tokens is None else table.append_column(field, kept(tokens))


def _usable_rows(reasons: list, skipped: dict[str, int]) -> tuple:
    """The rows that pass every ``(reason, ok)`` check, in order, and how many fail one; each
    failing row is counted in ``skipped`` under the first reason it fails."""
    mask = None
    dropped = 0
    for reason, ok in reasons:
        ok = pc.fill_null(ok, False)
        if mask is None:
            bad = pc.invert(ok)
            mask = ok
        else:
            bad = pc.and_(mask, pc.invert(ok))
            mask = pc.and_(mask, ok)
        count = pc.sum(bad).as_py() or 0
        if count:
            skipped[reason] = skipped.get(reason, 0) + count
            dropped += count
    return mask, dropped


def finish_table(url: str, columns: Columns, table: pa.Table, have: list[str]) -> Chunk:
    """:func:`finish` for a typed file's rows (a Parquet row group, Arrow IPC
    batches): its columns of bytes decoded in ``--encoding`` (UTF-8 unless
    given), and a file whose bytes are mostly in another encoding stopped as a
    text file in one is (:func:`check_decodable`), never lost row by row."""
    table = invalid_strings_as_bytes(table)
    if columns.encoding:   # a column of UTF-8 bytes decoded in latin-1 would be garbled, as a text file would
        check_not_utf8(b"", url, columns.encoding, *bytes_values(table, columns))
    chunk = finish(columns, table.column, table.num_rows, table.num_rows, {}, have=have,
                   bytes_encoding=columns.encoding)
    if chunk.skipped.get("undecodable", 0) > UNDECODABLE_ROWS:
        check_decodable(chunk, bytes_sample(table, columns), url, columns.encoding)
    return chunk


def _unreadable_numbers(raw, value) -> int:
    """Values of a ``--numeric`` column given but not read as a number (``0,5``,
    ``n/a``, ``inf``): the row stays, the value counts as the training mean,
    and the run says how many (``rows.noted.unreadable_numeric``)."""
    return _unreadable_where(raw, value, [])


#: Rows skipped as ``missing_target`` whose target was given, but is no usable number
#: (``1,5`` with a decimal comma, ``n/a``, ``inf``): noted, so the run says why.
UNREADABLE_TARGET = "unreadable_target"


def _unreadable_where(raw, value, oks: list) -> int:
    """How many rows of ``raw`` hold a value (not null, not blank) that ``value``,
    its numbers, holds none for, among the rows every one of ``oks`` passes."""
    if pa.types.is_floating(raw.type) or pa.types.is_integer(raw.type) or pa.types.is_null(raw.type) \
            or pa.types.is_duration(raw.type):
        given = pc.is_valid(raw)   # nan, inf
    elif pa.types.is_boolean(raw.type) or pa.types.is_decimal(raw.type) or pa.types.is_nested(raw.type):
        given = pc.is_valid(raw)
    else:
        given = pc.fill_null(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(pc.cast(raw, pa.string()))), 0),
                             False)
    bad = pc.and_(given, pc.is_null(value))
    for ok in oks:
        bad = pc.and_(bad, pc.fill_null(ok, False))
    return int(pc.sum(bad).as_py() or 0)


def label_column(columns: Columns, raw, noted: dict[str, int] | None = None) -> tuple:
    """The label column and which rows have one: a string per row, or with
    ``columns.multilabel`` a set of labels per row (an empty list ``[]`` is an empty
    set, a row no label applies to; any other row without a label has none; what
    ``columns.label_sep`` split and left whole counted in ``noted``).
    A single-label task refuses lists of labels (:class:`~.labels.LabelListError`)."""
    if columns.multilabel:
        sets = label_sets(raw, columns.label_sep, noted)
        return sets, pc.or_(pc.greater(pc.list_value_length(sets), 0), empty_lists(raw))
    if is_list_type(raw.type):
        check_single(raw)   # raises: to_string cannot read a list
    label = pc.utf8_trim_whitespace(to_string(raw))
    check_single(label)
    return label, pc.fill_null(pc.greater(pc.utf8_length(label), 0), False)


def all_rows(columns: Columns, get, text, usable, rows_read: int, skipped: dict[str, int],
             status: pa.Array | None, have: list[str], not_text: pa.Array | None = None,
             bytes_encoding: str | None = None, tokens: tuple = (None, None)) -> Chunk:
    """Every row, in order, with a ``status`` column ("ok", or the reason it
    cannot be used) and the kept input columns as ``keep:NAME`` strings; ``tokens``:
    the field and token lists of a tokenizer of the user's (:func:`_with_tokens`)."""
    mine = pc.if_else(usable, pa.scalar("ok"), pa.scalar("empty_text"))
    if not_text is not None:
        mine = pc.if_else(pc.fill_null(not_text, False), pa.scalar("not_text"), mine)
    fresh = mine if status is None else pc.if_else(pc.is_null(status), mine, pa.scalar("ok"))
    for reason in ("not_text", "empty_text"):   # the parser counted the reasons it found
        count = pc.sum(pc.equal(fresh, reason)).as_py() or 0
        if count:
            skipped[reason] = skipped.get(reason, 0) + count
    final = mine if status is None else pc.coalesce(status, mine)
    arrays, names = [text], ["text"]
    if columns.label:
        arrays.append(to_string(get(columns.label)))
        names.append("label")
    if columns.target:
        arrays.append(number_column(get(columns.target), columns.target, "--target"))
        names.append("target")
    ok, unreadable = None, 0
    for c in columns.numeric:
        raw = get(c)
        value = number_column(raw, c, "--numeric")
        arrays.append(value)
        names.append(c)
        ok = pc.equal(final, "ok") if ok is None else ok   # rows that are predicted or scored
        unreadable += _unreadable_numbers(pc.filter(raw, ok), pc.filter(value, ok))
    for c in columns.kept(have):
        arrays.append(kept_values(get(c), bytes_encoding))
        names.append(f"keep:{c}")
    arrays.append(final)
    names.append("status")
    table = pa.Table.from_arrays(
        [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays], names=names)
    table = _with_tokens(table, *tokens, lambda a: a)
    return Chunk(table, rows_read, skipped, {"unreadable_numeric": unreadable} if unreadable else {})


def kept_values(arr, encoding: str | None = None) -> pa.Array:
    """An input column carried into predictions, as text (lists and objects as
    JSON, bytes decoded in ``encoding``); without ``encoding`` a column of bytes
    stays bytes, whole: as text a value that is not UTF-8 held U+FFFD, and two ids
    could read back as one (the output writes them, or refuses: runs/outputs.py)."""
    t = arr.type
    if encoding is None and holds_bytes(t):
        arr = _undictionary(arr)
        return arr if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) else \
            pc.cast(arr, pa.binary())
    if pa.types.is_nested(t):
        import json

        return pa.array([None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                         for v in arr.to_pylist()], pa.string())
    if is_time_type(t):   # as a label of them reads, and a CSV pandas writes holds them
        return iso_text(arr)
    if pa.types.is_time(t):
        return pc.cast(pc.cast(arr, pa.string()), pa.string())
    return to_string(arr, encoding)


def utf8_ok(data: bytes) -> bool:
    """Validate UTF-8 without making a Python str copy."""
    if data.isascii():
        return True
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    arr = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        arr.validate(full=True)
        return True
    except pa.ArrowInvalid:
        return False


def split_lines(data: bytes) -> pa.Array:
    """Block -> one string per line, '\\r' stripped, no trailing empty line."""
    if not data:
        return pa.array([], pa.string())
    if data.endswith(b"\n"):   # a block of one blank line ("\n") is that line: prediction writes it a row
        data = data[:-1]
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    whole = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    lines = pc.split_pattern(whole, "\n").flatten()
    lines = pc.utf8_rtrim(lines, "\r")
    return pc.cast(lines, pa.string())


# Bytes that were not UTF-8, as decoding with "surrogateescape" gives them:
# lone surrogates, which no valid UTF-8 decodes to (U+FFFD does, from text
# that holds it).
ESCAPED = re.compile("[\udc80-\udcff]")


def escaped_values(values: list) -> pa.Array:
    """Values a per-row reader decoded with ``surrogateescape`` (str, or None) as a string
    array; where one holds a byte that is not UTF-8 (:data:`ESCAPED`), the column's
    values as the bytes they were read from instead, as a Parquet binary column is
    read: a kept id stays whole (the output keeps it or refuses it: runs/outputs.py),
    where as U+FFFD two ids were written as one, and a text or label of bytes makes
    its row "undecodable" (:func:`utf8_columns`)."""
    if not any(isinstance(v, str) and ESCAPED.search(v) for v in values):
        return pa.array(values, pa.string())
    return pa.array([v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v for v in values],
                    pa.binary())


def drop_undecodable(data: bytes, skipped: dict[str, int]) -> bytes:
    """Remove lines that are not valid UTF-8, counting them (slow path only).
    A line that holds U+FFFD as text is valid and stays."""
    if utf8_ok(data):
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    keep, at, bad = [], 0, 0
    for m in ESCAPED.finditer(text):
        if m.start() < at:
            continue   # a line already dropped
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.start())
        end = len(text) if end < 0 else end + 1
        keep.append(text[at:start])
        at, bad = end, bad + 1
    keep.append(text[at:])
    skipped["undecodable"] = skipped.get("undecodable", 0) + bad
    return "".join(keep).encode("utf-8")


def decoded(data: bytes) -> tuple[bytes, dict[str, int]]:
    """A block without its undecodable lines (counted as skipped) and without a leading BOM."""
    skipped: dict[str, int] = {}
    return strip_bom(drop_undecodable(data, skipped)), skipped


def has_content(buf: pa.Buffer) -> bool:
    """True when ``buf`` holds anything but whitespace (checks a prefix cheaply)."""
    if buf.size == 0:
        return False
    head = buf.slice(0, min(buf.size, 4096)).to_pybytes()
    return bool(head.strip()) or bool(buf.to_pybytes().strip()) if buf.size > 4096 \
        else bool(head.strip())


def format_hint(fmt: str, have: list[str]) -> str | None:
    """When a CSV/TSV header looks like another format, which one."""
    if fmt not in ("csv", "tsv") or not have:
        return None
    if have[0].lstrip().startswith("{"):
        return "the first line looks like JSON: pass {data.format} jsonl"
    other, name = ("\t", "tsv") if fmt == "csv" else (",", "csv")
    if len(have) == 1 and other in have[0]:
        return f"the header line is split by {other!r}, not by the {fmt} delimiter: pass {{data.format}} {name}"
    # one field holding a separator: the file is split by it (a run's own --delimiter, or none given)
    split = next((d for d in (";", "|", ",") if len(have) == 1 and d in have[0]), None)
    if split is not None and fmt == "csv":
        return f"the header line is split by {split!r}: pass {{data.delimiter}} '{split}'"
    if split is not None:   # a .tsv file is split by tabs whatever --delimiter says
        return f"the header line is split by {split!r}, not by tabs: pass {{data.format}} csv {{data.delimiter}} '{split}'"
    if any(looks_like_data(h) for h in have):
        return ("the first line looks like a row of data, not column names: the file needs a header line "
                "naming its columns, e.g. text,label")
    return None


def _named_as_lines(url: str) -> bool:
    """Whether the file's name says plain lines (.txt), whatever its start made of it."""
    from ...formats import format_for_path

    fmt, _ = format_for_path(url)
    return fmt is not None and fmt.name == "text"


def looks_like_data(name: str) -> bool:
    """A header cell that reads as a value: a number, or a sentence rather than a name."""
    name = name.strip()
    try:
        float(name)
        return True
    except ValueError:
        return len(name) > 40 or len(name.split()) > 4


def check_names(url: str, have: list[str], columns: Columns, fmt: str = "") -> None:
    """Every column the run reads is in ``have``, once: a header that names a
    used column twice is refused, since either choice could be the wrong one."""
    for name in columns.names():
        if name not in have:
            if fmt in ("csv", "tsv") and _named_as_lines(url):   # sniffed: its first lines hold the delimiter
                raise missing_column_error(url, name, have, columns, hint=lambda say: "if each line is one text, "
                                           f"pass {say.setting('data.format', 'text')}", note=f" (read as {fmt.upper()}: its first lines "
                                           "look like delimited fields)")
            raise missing_column_error(url, name, have, columns, hint=format_hint(fmt, have))
    for name in (have if columns.keep_all else columns.names()):
        fields = [i + 1 for i, h in enumerate(have) if h == name]
        if len(fields) > 1:
            raise UserError(f"{url}: the header names the column {name!r} {len(fields)} times "
                            f"(fields {', '.join(map(str, fields))}), so which one to read is not known",
                            "rename the columns so that each name occurs once")




def text_kinds(columns: Columns, column) -> tuple:
    """Text columns of a typed (Arrow-parsed) table checked for kind: (``get``
    for :func:`finish`, and per row whether a text field holds a number,
    boolean, list or object, or None when none can). Such a field reads as
    missing when training, and as its JSON text in prediction's echo."""
    wrong = None
    fixed = {}
    for c in columns.text:
        arr = column(c)
        t = arr.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t) \
                or pa.types.is_string_view(t):
            continue
        bad = pc.is_valid(arr)
        wrong = bad if wrong is None else pc.or_(wrong, bad)
        fixed[c] = kept_values(arr) if columns.all_rows else pa.nulls(len(arr), pa.string())
    if wrong is None:
        return column, None
    return (lambda name: fixed[name] if name in fixed else column(name)), wrong


_NUL_PADDING = re.compile(rb"\x00{4,}")


def check_not_wide(head: bytes, url: str) -> None:
    """Refuse a file that starts like UTF-16 or UTF-32 text (a byte-order mark,
    or NUL bytes in much of its start): its lines cannot be split at b"\\n";
    or like compressed data or a binary table (:func:`check_not_packed`)."""
    check_not_packed(head, url)
    sample = head[:4096]
    bom = sample.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff"))
    # UTF-16 and UTF-32 put one to three NULs beside each ASCII letter; a run of more is padding
    # (a file filled up with NULs past its last line), which says nothing of the encoding.
    sample = _NUL_PADDING.sub(b"", sample)
    if bom or (len(sample) >= 64 and sample.count(b"\x00") > len(sample) * 0.3):
        raise UserError(f"{url}: the file looks like UTF-16 or UTF-32 text, which cannot be read in partitions",
                        "convert it to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8 IN > OUT")


def check_decodable(chunk: Chunk, data: bytes, url: str, encoding: str | None) -> None:
    """Stop (UserError) when more than ``UNDECODABLE_ROWS`` rows and more than
    ``UNDECODABLE_SHARE`` of a block are not text in the expected encoding:
    the file is in another one. ``data``: the block as the parser read it."""
    bad = chunk.skipped.get("undecodable", 0)
    rows = max(chunk.rows_read, 1)
    if bad <= UNDECODABLE_ROWS or bad <= UNDECODABLE_SHARE * rows:
        return
    share = f"{bad:,} of {counted(chunk.rows_read, 'row')} read ({100 * bad / rows:.1f} %)"
    if encoding is not None:
        raise UserError(f"{url}: {share} are not valid {encoding} text",
                        "pass the file's own encoding ({data.encoding} NAME), or convert it to UTF-8")
    guess = likely_encoding(data)
    raise UserError(f"{url}: {share} are not UTF-8 text: the file is probably in another encoding ({guess}?)",
                    f"pass {{data.encoding}} {guess} (or the file's own encoding), or convert the file to UTF-8")


def check_not_utf8(data, url: str, encoding: str | None, *more) -> None:
    """Stop (UserError) where the block ``data`` (bytes or a buffer; with
    ``more``, all of them together) is UTF-8 text past ASCII and ``encoding``
    (``--encoding``) is another: read in a single-byte one (latin-1, cp1252),
    each such letter would be two others (``café`` as ``cafÃ©``), in texts and
    labels alike, and no row would be skipped to say so. The block is UTF-8
    when its UTF-8 characters outnumber its other bytes past ASCII (a stray
    byte of another encoding does not hide a UTF-8 file), and one of them has
    a shape text in a single-byte encoding does not make (:mod:`.utf8_shapes`),
    or, with no stray byte, :data:`UTF8_EVIDENCE` have the shapes it makes by
    chance; in a multi-byte encoding such as shift_jis, :data:`MULTIBYTE_EVIDENCE`
    of any shape."""
    if encoding is None:
        return
    parts = [p for p in (data, *more) if memoryview(p).nbytes]
    shapes = sum((utf8_shapes(p) for p in parts), Utf8Shapes())
    if shapes.characters <= shapes.strays:
        return
    if single_byte(encoding):
        if not shapes.strong and (shapes.weak < UTF8_EVIDENCE or shapes.strays):
            return
    elif shapes.characters < MULTIBYTE_EVIDENCE:
        return
    part = next(p for p in parts if utf8_shapes(p).characters)
    at = _first_utf8_character(part)
    near = bytes(memoryview(part)[max(at - 40, 0):at + 40])
    word = _word_at(near, min(at, 40)).decode("utf-8", "ignore")
    raise UserError(f"{url}: the file is UTF-8 text, and read in {encoding} its letters past ASCII would be "
                    f"others ({word!r} would read as {word.encode('utf-8').decode(encoding, 'replace')!r})",
                    "read it as UTF-8: drop {data.encoding}, or pass {data.encoding} utf-8 where the run was "
                    "trained with another")


def _first_utf8_character(data) -> int:
    """Where the first multi-byte UTF-8 character of ``data`` starts (its first byte past ASCII if none)."""
    found = _UTF8_CHARACTER.search(data) or re.search(rb"[\x80-\xff]", data)
    return found.start() if found else 0


_UTF8_CHARACTER = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def single_byte(encoding: str) -> bool:
    """Whether ``encoding`` writes each character in one byte (latin-1, cp1252, koi8-r; not shift_jis, gbk)."""
    high = bytes(range(0x80, 0x100))
    return len(high.decode(encoding, errors="replace")) == len(high)


def _word_at(data: bytes, at: int, reach: int = 40) -> bytes:
    """The word of ``data`` around byte ``at``: up to ``reach`` bytes each side, to a space, line end or delimiter."""
    lo, hi = max(at - reach, 0), at + reach
    start = max([lo] + [data.rfind(c, lo, at) + 1 for c in b' \t\r\n,;"'])
    end = min([min(hi, len(data))] + [i for i in (data.find(c, at, hi) for c in b' \t\r\n,;"') if i >= 0])
    return data[start:end]


def likely_encoding(data: bytes) -> str:
    """A guess for a block that is not UTF-8: cp1252 (Windows) when it holds the
    bytes 0x80-0x9F that cp1252 uses for letters and quotes, else latin-1."""
    import numpy as np

    raw = np.frombuffer(data, np.uint8)
    windows = bool(((raw >= 0x80) & (raw < 0xA0)).any())
    if windows:
        try:
            data.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:
            pass
    return "latin-1"
