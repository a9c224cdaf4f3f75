"""CSV and TSV: a header line, then rows split by byte range.

A partition past the file's start gets the header read separately. Quoted
newlines are allowed. Rows are the quote automaton's records, the ones a
partition cut starts (:func:`~.row_ends.records`), each read on its own: a
record that is malformed (more fields than the header, a quote never closed,
a stray quote "closed" by one with text behind it) is one malformed row, and
the lines it took after its first are read again as rows of their own
(:func:`_records`), so no row vanishes uncounted and none depends on
where the file is cut. A record of fewer fields than the header is a row
whose missing fields are empty, as pandas reads them missing. A block is
read by Arrow's parser (:func:`_read_csv_rows`); one holding a malformed
record reads that record alone in Python and the runs of records around it
by Arrow (:func:`_by_regions`).
"""
from __future__ import annotations

import csv
import io
import re

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv

from ...errors import UserError
from ...formats import Format, Head, delimited, format_named, format_names, to_utf8
from ..decompress import check_not_packed
from ..sources import Chunk, Columns
from .row_ends import WHOLE, misfit_records, padded_short_records, records, row_starts_with, with_lf_row_ends
from .table import (BOM, ESCAPED, check_names, check_not_wide, empty_table, escaped_values, finish, has_content,
                    looks_like_data, open_head, strip_bom, utf8_ok)
from ...plurals import counted

_HEADER_BYTES = 2**20
# What an undecodable byte becomes while a block is parsed (a noncharacter,
# which text does not hold): the record holding it is known once parsed,
# across the line ends of a quoted field, and counted as undecodable.
_MARK = "\uffff"


def header_names(header: bytes, delimiter: str, url: str = "") -> list[str]:
    fmt = "TSV" if delimiter == "\t" else "CSV"
    check_not_packed(header, url)
    if not utf8_ok(header):
        check_not_wide(header, url)
        raise UserError(f"{url}: the first line is not UTF-8 text, so it is no {fmt} header",
                        f"check that the file is {fmt}, or pass {{data.format}} "
                        f"with one of {', '.join(format_names())} (e.g. {{data.format}} parquet); a {fmt} file in "
                        f"another encoding needs {{data.encoding}} NAME (e.g. latin-1)")
    # Python's csv module for one line: Arrow's CSV reader would start its IO thread pool for it.
    try:
        names = next(csv.reader([header.rstrip(b"\r\n").decode("utf-8")], delimiter=delimiter, strict=True), [])
    except csv.Error as exc:
        raise UserError(f"{url}: cannot read the first line as a {fmt} header ({exc})",
                        "check the format, or pass {data.format}") from exc
    return names


# How deep the lines a malformed record took are read again on their own
# (each time without the record's first line); past that each is counted as
# malformed. Per record, so it is the same however the file is cut.
_RECOVERIES = 8
_LINE_END = re.compile(rb"\r\n|\r|\n")


def _holds_rows(body, delimiter: str) -> bool:
    """Whether ``body`` holds a line that is not blank (:func:`_blank`): in TSV a
    line of tabs is a row of empty fields, though whitespace."""
    return has_content(body) or (delimiter == "\t" and b"\t" in body.to_pybytes())


def _lines(text: bytes, delimiter: str) -> int:
    return sum(1 for line in text.split(b"\n") if not _blank(line, delimiter))


def _after_first_line(record: bytes, delimiter: str) -> bytes:
    """The lines of a malformed ``record`` after its first (at any line end: inside
    its quote a lone "\\r" was not made "\\n"), to be read as rows of their own."""
    parts = _LINE_END.split(record, 1)
    if len(parts) < 2 or _blank(parts[1], delimiter):   # in TSV a line of tabs is a row
        return b""
    return with_lf_row_ends(parts[1].rstrip(b"\r\n") + b"\n", delimiter)


def _read_csv_rows(body, have: list[str], delimiter: str, names: list[str],
                   checked: bool = False) -> tuple[pa.Table, int] | None:
    """CSV rows of ``body`` (columns ``names``, as strings) and the count of
    malformed rows, by Arrow's parser; None when a malformed record took the
    lines after its first (a quote opened in it), which :func:`_records` reads.
    ``checked``: ``body`` is known to hold no stray or unclosed quote.

    Rows are the quote automaton's records, where a partition cut starts one
    (:func:`~.row_ends.records`); Arrow's parser reads the same records."""
    if len(have) == 1:
        body = without_space_lines(body, delimiter)
    if not checked and len(records(np.frombuffer(body, np.uint8), ord(delimiter), ord('"'), False)[0]):
        return None   # a stray or unclosed quote
    taken: list[bytes] = []  # raw text of the malformed rows Arrow found
    short: list[tuple[int, bytes, int]] = []   # the first rows of fewer fields: (number, text, fields)
    numbers: list[int] = []   # every row Arrow left out, by its number among the block's records

    def on_invalid(row) -> str:
        text = (row.text or "").encode("utf-8", "surrogateescape")
        numbers.append(row.number)
        if _blank(text, delimiter):   # spaces alone on a line: blank, as pandas skips it, no row and no count
            return "skip"
        if row.actual_columns >= row.expected_columns:
            taken.append(text)
        elif len(short) <= _SPLICED:   # one past the bound says the block is read again: no more kept
            short.append((row.number, text, row.actual_columns))
        return "skip"

    if not _holds_rows(body, delimiter):
        return pa.table({n: pa.array([], pa.string()) for n in names}), 0
    table = _arrow_rows(body, have, delimiter, names, on_invalid, (taken, short, numbers))
    if short:   # pandas reads a short row's missing fields as missing values: empty, as an empty field reads
        table = _with_short_rows(table, short, numbers, have, delimiter, names)
    if table is None:   # many short rows: the block read again with the delimiters they lack
        body = pa.py_buffer(padded_short_records(np.frombuffer(body, np.uint8), ord(delimiter), ord('"'), len(have)))
        for got in (taken, short, numbers):
            got.clear()
        table = _arrow_rows(body, have, delimiter, names, on_invalid, (taken, short, numbers))
    if any(_LINE_END.search(t.rstrip(b"\r\n")) for t in taken):
        return None
    return table, len(taken)


# Up to this many short rows in a block are parsed alone and put in their places
# (:func:`_with_short_rows`); past it the block is read again padded, once.
_SPLICED = 256


def _with_short_rows(table: pa.Table, short: list, numbers: list[int], have: list[str], delimiter: str,
                     names: list[str]) -> pa.Table | None:
    """``table`` (Arrow's rows of a block) with its ``short`` rows, parsed on their
    own with the delimiters they lack, each where its record stands (``numbers``:
    the records Arrow left out). None where that cannot be done: more rows than
    :data:`_SPLICED`, or a record whose number Arrow does not know."""
    if len(short) > _SPLICED or min(numbers) < 1:
        return None
    d = delimiter.encode()
    padded = b"".join(text.rstrip(b"\r\n") + d * (len(have) - fields) + b"\n" for _, text, fields in short)
    try:
        rows = _arrow_rows(pa.py_buffer(padded), have, delimiter, names, lambda row: "error", ())
    except pa.ArrowInvalid:
        return None
    if rows.num_rows != len(short):
        return None
    gone = np.sort(np.asarray(numbers, np.int64))
    pieces, at = [], 0
    for i, (number, _, _) in enumerate(short):
        place = number - 1 - int(np.searchsorted(gone, number))   # the rows Arrow kept before this record
        pieces += [table.slice(at, place - at), rows.slice(i, 1)]
        at = place
    pieces.append(table.slice(at))
    return pa.concat_tables(pieces)


def _arrow_rows(body, have: list[str], delimiter: str, names: list[str], on_invalid,
                found: tuple[list, ...]) -> pa.Table:
    """Arrow's read of ``body`` (no record in it stray or unclosed); ``found``: the
    lists ``on_invalid`` fills, emptied for a read started again."""
    def read(block_size: int) -> pa.Table:
        return pv.read_csv(
            pa.BufferReader(body),
            read_options=pv.ReadOptions(column_names=have, block_size=block_size, use_threads=False),
            parse_options=pv.ParseOptions(delimiter=delimiter, newlines_in_values=True,
                                          invalid_row_handler=on_invalid),
            convert_options=pv.ConvertOptions(
                include_columns=names,
                column_types={n: pa.string() for n in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )

    try:
        return read(1 << 20)
    except pa.ArrowInvalid as exc:
        if "straddl" not in str(exc):
            raise
    # One row longer than a parser block: parse the block as one piece (the rows counted afresh).
    for got in found:
        got.clear()
    return read(body.size + 1)


def without_row_boms(data: bytes, delimiter: str) -> bytes:
    """A block (its row ends ``\\n``) without the byte-order marks at its rows' starts, which
    files joined by ``cat`` leave there: Arrow's parser drops one that starts the block it
    reads and keeps any other as text, so a row's first value (a label ``\\ufeffsports``, a
    class of its own) depended on where the file was cut. Read as the JSON Lines and line
    readers read it, as no text. One after a line end inside a quoted field is the field's
    text, as Python's csv module and Arrow's parser read it, and stays."""
    if BOM not in data:
        return data
    data = strip_bom(data)
    starts = row_starts_with(np.frombuffer(data, np.uint8), np.frombuffer(BOM, np.uint8), ord(delimiter), ord('"'))
    if not len(starts):
        return data
    bounds = [0, *starts, len(data)]
    return b"".join(data[a + (len(BOM) if k else 0):b] for k, (a, b) in enumerate(zip(bounds, bounds[1:])))


def parse_csv(data: bytes, header: bytes | None, fmt: str, columns: Columns,
               url: str) -> Chunk:
    skipped: dict[str, int] = {}
    delimiter = delimited(format_named(fmt), columns.delimiter).delimiter or ","
    # One line end from here on: a lone "\r" ends a row as "\n" does (row_ends.py).
    data = without_row_boms(with_lf_row_ends(data, delimiter), delimiter)
    if header is None:   # the block starts the file: its header is its first line not blank
        data = strip_bom(data)
        header, end = split_header(data, delimiter)
        data = data[end:]
    first = strip_bom(header) if header is not None else None
    if not first or not first.strip():
        raise no_header(url, blank=not first)
    raw = data
    escaped = not utf8_ok(data)
    marked = taken = False
    if escaped:
        text = data.decode("utf-8", errors="surrogateescape")
        # The mark is taken: the records in order find the undecodable ones (lines dropped whole broke quoted records).
        taken = _MARK in text
        if not taken:
            data, marked = ESCAPED.sub(_MARK, text).encode("utf-8"), True
        del text
    body = pa.py_buffer(data)
    have = header_names(first, delimiter, url)
    check_names(url, have, columns, fmt)
    undecodable = skipped.get("undecodable", 0)
    if not _holds_rows(body, delimiter):
        return Chunk(empty_table(columns, fmt), undecodable, skipped)
    names = columns.read_names(have)
    if (columns.all_rows and escaped) or taken:
        return _rows_in_order(raw, have, delimiter, names, columns)
    # The block's stray and unclosed quotes, found once: the fast read needs none, the slow one starts from them.
    # A one-column block is scanned once its lines of spaces are out (_read_csv_rows), which moves its offsets.
    strays = _stray_records(data, delimiter) if len(have) > 1 else None
    read = None if strays is not None and len(strays[0]) else \
        _read_csv_rows(body, have, delimiter, names, checked=strays is not None)
    if read is None or (columns.all_rows and read[1]):
        return _by_regions(data, have, delimiter, names, columns, marked, strays)
    table, bad = read
    if bad:
        skipped["malformed"] = skipped.get("malformed", 0) + bad
    if marked:
        table, undecodable = _without_marks(table)
        if undecodable:
            skipped["undecodable"] = undecodable
    rows_read = table.num_rows + bad + undecodable
    return finish(columns, table.column, table.num_rows, rows_read, skipped, have=have)


def _without_marks(table: pa.Table) -> tuple[pa.Table, int]:
    """The rows holding no undecodable byte in a column read, and how many did."""
    import pyarrow.compute as pc

    hit = None
    for col in table.columns:
        found = pc.fill_null(pc.match_substring(col, _MARK), False)
        hit = found if hit is None else pc.or_(hit, found)
    n = 0 if hit is None else (pc.sum(hit).as_py() or 0)
    return (table.filter(pc.invert(hit)), n) if n else (table, 0)


def _stray_records(data: bytes, delimiter: str) -> tuple[list, list]:
    """The starts and ends of the records of ``data`` that a stray or unclosed quote
    made take the lines after their first (:func:`~.row_ends.records`)."""
    starts, ends, _ = records(np.frombuffer(data, np.uint8), ord(delimiter), ord('"'), False)
    return starts, ends


def _by_regions(data: bytes, have: list[str], delimiter: str, names: list[str], columns: Columns,
                marked: bool, strays: tuple[list, list] | None = None) -> Chunk:
    """A block the fast read could not take whole (a record a quote made take the
    lines after it or, in prediction, a malformed row): the records of each stray
    or unclosed quote read in order (:func:`_records`, a Python loop per row),
    the runs of records between them by Arrow's parser as a clean block is, and
    a run Arrow cannot take either (a malformed row over several lines; in
    prediction, any malformed row) record by record too. Each record is read on
    its own either way, so the rows are those of :func:`_rows_in_order` in the
    same order, at the cost of the clean block for all but the few records
    around a bad quote. ``marked``: undecodable bytes are :data:`_MARK` in
    ``data``, and the rows holding one are counted after the read. ``strays``:
    :func:`_stray_records` of ``data`` where the caller found them already."""
    where = [have.index(n) for n in names]
    tables, statuses, skipped, read = [], [], {}, 0
    bounds = _bad_records(data, delimiter, len(have), columns.all_rows, strays) + [(len(data), len(data))]
    view, at = memoryview(data), 0   # the runs between bad quotes as views: no copy of the block
    for start, end in bounds:
        for region, clean in ((view[at:start], True), (view[start:end], False)):
            got = _clean_run(region, have, delimiter, names, columns) if clean and len(region) else None
            if got is None and len(region):
                got = _record_rows(bytes(region), have, delimiter, names, where, columns)
            if got is not None:
                table, status, bad, n = got
                tables.append(table)
                statuses.append(status)
                read += n
                for why, k in bad.items():
                    skipped[why] = skipped.get(why, 0) + k
        at = end
    table = pa.concat_tables(tables) if tables else pa.table({n: pa.array([], pa.string()) for n in names})
    undecodable = 0
    if marked:
        table, undecodable = _without_marks(table)
        if undecodable:
            skipped["undecodable"] = undecodable
    status = pa.concat_arrays(statuses) if statuses else pa.array([], pa.string())
    return _finished(columns, table, status, read, skipped, have)


def _bad_records(data: bytes, delimiter: str, width: int, every: bool,
                 strays: tuple[list, list] | None = None) -> list[tuple[int, int]]:
    """Where the records that take the lines after their first are, in order: a
    stray or unclosed quote's (:func:`~.row_ends.records`), and a quoted field's
    over several lines in a record of too many fields
    (:func:`~.row_ends.misfit_records`); with ``every`` (prediction, which lists a
    malformed row in place) every record of too many. Both split the block at
    the same record ends, so a record named by both is one record. ``strays``: the
    first of them (:func:`_stray_records`), where already found."""
    starts, ends = strays if strays is not None else _stray_records(data, delimiter)
    more = misfit_records(np.frombuffer(data, np.uint8), ord(delimiter), ord('"'), width, not every)
    return sorted({(int(s), int(e)) for s, e in zip(list(starts) + list(more[0]), list(ends) + list(more[1]))})


def _clean_run(region: memoryview, have: list[str], delimiter: str, names: list[str], columns: Columns):
    """Arrow's read of a run of records holding no stray or unclosed quote, as
    (table, statuses, skipped, rows read); None where it must be read record by
    record (:func:`_read_csv_rows`'s None, or a malformed row in prediction)."""
    # Found free of stray and unclosed quotes in its block; a one-column file's is checked again
    # once its lines of spaces are out.
    got = _read_csv_rows(pa.py_buffer(region), have, delimiter, names, checked=len(have) > 1)
    if got is None or (columns.all_rows and got[1]):
        return None
    table, bad = got
    return table, pa.nulls(table.num_rows, pa.string()), {"malformed": bad} if bad else {}, table.num_rows + bad


def _record_rows(region: bytes, have: list[str], delimiter: str, names: list[str], where: list[int],
                 columns: Columns):
    """The rows of ``region`` record by record (:func:`_records`), as (table,
    statuses, skipped, rows read): in training the rows fit to use, in
    prediction every row with its status."""
    cols: dict[str, list] = {n: [] for n in names}
    status: list[str | None] = []
    skipped: dict[str, int] = {}
    read = 0
    # A byte that is not UTF-8 in a column the run reads makes its row "undecodable"; in a kept one
    # (an id) it does not: the row is predicted, the value kept whole (escaped_values), as in Parquet.
    used = (*columns.text, columns.label, columns.target, *columns.numeric)
    check = [i for n, i in zip(names, where) if n in used] if columns.all_rows else where
    for fields, why in _records(region, delimiter, len(have), 0, check):
        read += 1
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            if not columns.all_rows:
                continue
        status.append(why)
        for n, i in zip(names, where):
            cols[n].append(None if fields is None else fields[i])
    numbers = {columns.target, *columns.numeric}   # read as numbers: a byte that is not UTF-8 makes none
    table = pa.table({n: pa.array([None if x is None else ESCAPED.sub("\ufffd", x) for x in v], pa.string())
                      if n in numbers else escaped_values(v) for n, v in cols.items()})
    return table, pa.array(status, pa.string()), skipped, read


def _rows_in_order(raw: bytes, have: list[str], delimiter: str, names: list[str],
                   columns: Columns) -> Chunk:
    """The slow path, for a block whose undecodable bytes cannot be marked or
    (prediction) that holds one: every record in order (:func:`_record_rows`,
    a Python loop per row)."""
    table, status, skipped, read = _record_rows(strip_bom(raw), have, delimiter, names,
                                                [have.index(n) for n in names], columns)
    return _finished(columns, table, status, read, skipped, have)


def _finished(columns: Columns, table: pa.Table, status: pa.Array, read: int, skipped: dict,
              have: list[str]) -> Chunk:
    """:func:`~.table.finish` of rows read in order: in training those fit to use,
    in prediction every row with its status."""
    if not columns.all_rows:
        return finish(columns, table.column, table.num_rows, read, skipped, have=have)
    return finish(columns, table.column, table.num_rows, table.num_rows, skipped, status=status, have=have)


def _records(data: bytes, delimiter: str, width: int, depth: int, check: list[int] | None = None):
    """(fields, None) or (None, reason) per CSV record of ``data``, the records the
    quote automaton reads (:func:`~.row_ends.records`, where a partition cut
    starts one), in order; a short one's missing fields empty. A malformed
    record (more fields than ``width``, a quote never closed, a stray quote)
    is one malformed row, followed by the rows of
    the lines it took after its first, read on their own: a quote never takes
    rows past its record, so the rows do not depend on the cuts. ``check``: the
    fields an undecodable byte makes a row "undecodable" in (None: any)."""
    starts, ends, kinds = records(np.frombuffer(data, np.uint8), ord(delimiter), ord('"'), True)
    for start, end, kind in zip(starts, ends, kinds):
        record = data[start:end]
        if _blank(record, delimiter):
            continue   # a blank line (or one of spaces alone, as pandas reads it) is not a row
        row = _one_row(record, delimiter) if kind == WHOLE else None
        if row is not None and len(row) < width:   # missing fields read empty, as Arrow reads them padded
            row += [""] * (width - len(row))
        if row is None or len(row) != width:
            yield None, "malformed"
            rest = _after_first_line(record, delimiter)
            if rest and depth >= _RECOVERIES:
                yield from ((None, "malformed") for _ in range(_lines(rest, delimiter)))
            elif rest:
                yield from _records(rest, delimiter, width, depth + 1, check)
        elif any(ESCAPED.search(row[i]) for i in (range(width) if check is None else check)):
            # kept columns (an id) still identify the row: their bytes are kept whole (escaped_values)
            yield row, "undecodable"
        else:
            yield row, None


def _one_row(record: bytes, delimiter: str) -> list[str] | None:
    """The fields of one record (None: it does not read as one row)."""
    text = record.decode("utf-8", errors="surrogateescape")
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


# Blank lines, as pandas' reader skips them (skip_blank_lines): nothing but
# spaces and tabs before the line end; in TSV a tab is a delimiter, so a line
# of tabs holds fields.
_BLANK_LINES = {False: re.compile(rb"(?:[ \t\r]*\n)+"), True: re.compile(rb"(?:[ \r]*\n)+")}


# A line of spaces (and, in CSV, tabs) alone, with its line end; an empty line Arrow skips itself.
_SPACES = {False: rb"^[ \t]+(?:\r?\n|\Z)", True: rb"^ +(?:\r?\n|\Z)"}
_SPACE_LINES = {tsv: re.compile(p, re.M) for tsv, p in _SPACES.items()}
# The same, or a quoted field from a line's start to its closing quote (its lines of spaces are its text).
_SPACE_LINES_OR_QUOTED = {tsv: re.compile(rb'^"[^"]*(?:""[^"]*)*"|' + p, re.M) for tsv, p in _SPACES.items()}


def without_space_lines(body, delimiter: str):
    """The block ``body`` of a one-column file without its lines of spaces outside
    quotes: pandas skips them as blank, where Arrow reads each as a row of one
    field (a text of spaces: ``empty_text``). With two columns or more such a
    line is short of fields and skipped as it is read (:func:`_read_csv_rows`)."""
    tsv = delimiter == "\t"
    if _SPACE_LINES[tsv].search(body) is None:
        return body
    data, keep, pos = bytes(body), [], 0
    for m in _SPACE_LINES_OR_QUOTED[tsv].finditer(data):
        if not m.group().startswith(b'"'):
            keep.append(data[pos:m.start()])
            pos = m.end()
    keep.append(data[pos:])
    return pa.py_buffer(b"".join(keep))


def _blank(line: bytes, delimiter: str) -> bool:
    return not line.strip(b" \r\n" if delimiter == "\t" else b" \t\r\n")


def split_header(data: bytes, delimiter: str) -> tuple[bytes | None, int]:
    """The header line of ``data`` (a file's start, its byte-order mark taken
    off) and where the rows after it start: the first line that is not blank
    (:data:`_BLANK_LINES`), as pandas reads a header. (None, len) when
    ``data`` holds only blank lines. A lone "\\r" ends a line as "\\n" does."""
    data = with_lf_row_ends(data, delimiter)
    at = _BLANK_LINES[delimiter == "\t"].match(data)
    at = at.end() if at else 0
    nl = data.find(b"\n", at)
    end = len(data) if nl < 0 else nl + 1
    if _blank(data[at:end], delimiter):
        return None, len(data)
    return data[at:end], end


def find_header(f, delimiter: str) -> tuple[bytes, int]:
    """The header line of the open file ``f`` (read from its start; no
    byte-order mark) and the offset where its rows start. Blank lines before
    the header are skipped as pandas skips them; b"" when the file holds no
    line but blank ones. Every partition of a file finds the same header."""
    piece, at, eof = b"", 0, False   # ``piece``: the bytes from offset ``at`` on, not yet known blank
    while True:
        if b"\n" not in piece and not eof:
            more = f.read(_HEADER_BYTES)
            eof = not more
            if at == 0 and not piece and more.startswith(BOM):
                more, at = more[len(BOM):], len(BOM)
            piece += more
            if b"\n" not in piece and len(piece) >= _HEADER_BYTES:
                raise UserError("the header line is longer than 1 MiB",
                                "check the format and the delimiter")
            continue
        header, end = split_header(piece, delimiter)
        if header is not None:
            return header, at + end
        if eof:
            return b"", at + len(piece)
        nl = piece.rfind(b"\n") + 1   # blank lines so far; the part after the last may hold the header
        piece, at = piece[nl:], at + nl


def no_header(url: str, blank: bool) -> UserError:
    """The error for a CSV/TSV file with no header line (``blank``: it holds blank lines only)."""
    what = "holds only blank lines" if blank else "has no header line"
    return UserError(f"{url}: the file {what}",
                     "a CSV/TSV file needs a line with the column names before its rows")


def columns_of(f, url: str, fmt: str, encoding: str | None = None, delimiter: str | None = None) -> list[str] | None:
    """The column names in the header of the open file ``f`` (text in ``encoding``; None: UTF-8;
    fields split by ``delimiter``, :func:`~lancetnic_flow.formats.delimited`); None for a file
    with no byte at all (a compressed empty file: its size on disk is not 0)."""
    delimiter = delimited(format_named(fmt), delimiter).delimiter or ","
    raw, end = find_header(f, delimiter)
    check_not_packed(raw, url)
    if not end:   # nothing to read, as an empty plain file (data/checks.file_columns)
        return None
    if not raw:
        raise no_header(url, blank=True)
    return header_names(to_utf8(raw, encoding), delimiter, url)


def head_columns(fi, storage_options: dict | None, encoding: str | None = None,
                 delimiter: str | None = None) -> list[str] | None:
    """The registry's ``head`` for CSV and TSV: the columns the file ``fi``'s header names."""
    with open_head(fi, storage_options) as f:
        return columns_of(f, fi.url, fi.format, encoding, delimiter)


# Rows after a header that must have its number of fields before a head
# without the run's column names reads as CSV/TSV: one such row is any text.
SNIFF_ROWS = 2
_SPLIT_BY = {",": "commas", "\t": "tabs"}
_WORD = re.compile(r"[\w.\-]+")


def sniff_header(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for CSV and TSV: a first line of column names
    split by the format's delimiter (CSV's: the run's ``--delimiter``), naming
    a column the run reads, or with :data:`SNIFF_ROWS` rows or more after it
    of as many fields."""
    return header_split_by(head, (head.delimiter if fmt.name == "csv" else None) or fmt.delimiter or ",")


# The delimiters a header of a file read as plain text is looked for with (data/readers/lines.py).
DELIMITERS = (",", "\t", ";", "|")


def delimited_header(head: Head) -> tuple[str, str] | None:
    """The first of :data:`DELIMITERS` that splits ``head`` as :func:`sniff_header`
    reads a header, and why; None when none does."""
    for delimiter in DELIMITERS:
        why = header_split_by(head, delimiter)
        if why:
            return delimiter, why
    return None


def header_split_by(head: Head, delimiter: str) -> str | None:
    """Why ``head``'s first line is a header of fields split by ``delimiter``
    (:func:`sniff_header`); None when it is not."""
    try:
        rows = list(csv.reader(head.lines, delimiter=delimiter))
    except csv.Error:
        return None
    names = [n.strip() for n in rows[0]] if rows else []
    if len(names) < 2 or not all(_name_like(n) for n in names):
        return None
    split = _SPLIT_BY.get(delimiter, repr(delimiter))
    asked = [n for n in names if n in head.names]
    if asked:
        return f"first line names the column{'s' * (len(asked) > 1)} {', '.join(asked)}, split by {split}"
    # Without the run's names, prose with a comma a line would pass the count: only words without spaces name columns.
    body = rows[1:]
    if len(body) >= SNIFF_ROWS and all(map(_WORD.fullmatch, names)) and all(len(r) == len(names) for r in body):
        return f"first line names {counted(len(names), 'column')} ({', '.join(names)}) and the rows after it have as many, " \
               f"split by {split}"
    return None


def _name_like(name: str) -> bool:
    # A JSON object or a fastText line split at its commas is no header, nor are binary bytes.
    return bool(name) and not looks_like_data(name) and name.isprintable() \
        and not name.startswith(("{", "[", "__label__"))
