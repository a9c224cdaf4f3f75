"""CSV and TSV: a header line, then rows split by byte range.

A partition past the file's start gets the header read separately. Quoted
newlines are allowed; a quote opened and never closed is found and its
lines re-read (see :func:`_read_csv_rows`), and so are the lines a stray
quote took until a later quote with text behind it "closed" it
(:func:`~.row_ends.stray_quote_lines`), so no row vanishes uncounted.
"""
from __future__ import annotations

import csv
import io
import re

import pyarrow as pa
import pyarrow.csv as pv

from ...errors import UserError
from ...formats import Format, Head, format_named, format_names, to_utf8
from ..decompress import check_not_packed
from ..sources import Chunk, Columns
from .row_ends import with_lf_row_ends, without_stray_quote_lines
from .table import (BOM, ESCAPED, check_names, check_not_wide, drop_undecodable, empty_table, finish, has_content,
                    looks_like_data, open_head, strip_bom, utf8_ok)

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
                        f"check that the file is {fmt}, or pass --format "
                        f"with one of {', '.join(format_names())} (e.g. --format parquet); a {fmt} file in "
                        f"another encoding needs --encoding NAME (e.g. latin-1)")
    # Python's csv module for one line: Arrow's CSV reader would start its IO thread pool for it.
    try:
        names = next(csv.reader([header.rstrip(b"\r\n").decode("utf-8")], delimiter=delimiter, strict=True), [])
    except csv.Error as exc:
        raise UserError(f"{url}: cannot read the first line as a {fmt} header ({exc})",
                        "check the format, or pass --format") from exc
    return names


# A row no file holds, added after each CSV block: it comes out last and whole
# only if every quote the block opened was closed.
_END = "lancetnic-flow:end-of-block"
# Re-reads of the lines an unclosed quote took, per block (each re-reads at
# most the rest of the block); past that they are counted as malformed.
_RECOVERIES = 8
# Where a line ends, each keeping its end: "\n", "\r\n" or a lone "\r" — where Arrow's parser (training's,
# and prediction's for a clean block) and pandas end an unquoted record. Cut at "\n" alone, "a\rb,x"
# was one malformed record in prediction where training read the rows "a" and "b,x".
_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


class _Joined(io.RawIOBase):
    """Several buffers read as one stream, without joining them in memory."""

    def __init__(self, *parts) -> None:
        self._parts = [memoryview(p) for p in parts if len(p)]

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        # Fill ``b`` across parts: the parser takes each read as one block.
        done = 0
        while self._parts and done < len(b):
            head = self._parts[0]
            n = min(len(b) - done, len(head))
            b[done:done + n] = head[:n]
            done += n
            if n == len(head):
                self._parts.pop(0)
            else:
                self._parts[0] = head[n:]
        return done


_LINE_END = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.strip())


def _read_csv_rows(body, have: list[str], delimiter: str, names: list[str],
                   budget: list[int]) -> tuple[pa.Table, int]:
    """CSV rows of ``body`` (columns ``names``, as strings) and the count of
    malformed rows.

    A quote opened and never closed makes the parser take the lines after it
    into one field, up to the next quote or the end of the block, so whole
    rows would vanish without a count. When the row that took them comes out
    malformed, or took the end row, it counts as one malformed row and the
    lines it took are read again on their own (``budget`` times per block;
    past that, each line counts as malformed)."""
    if len(have) == 1:
        body = without_space_lines(body, delimiter)
    end_row = (delimiter.join([_END] * len(have)) + "\n").encode()
    lead = b"" if memoryview(body)[-1:] == b"\n" else b"\n"  # the end row starts a line
    bad = 0
    taken: list[str] = []  # raw text of malformed rows that span lines

    def on_invalid(row) -> str:
        nonlocal bad
        if _blank((row.text or "").encode(), delimiter):
            return "skip"   # spaces alone on a line: blank, as pandas skips it, no row and no count
        bad += 1
        if _LINE_END.search(row.text or ""):
            taken.append(row.text)
        return "skip"

    def read(include: list[str], block_size: int) -> pa.Table:
        return pv.read_csv(
            _Joined(body, lead, end_row),
            read_options=pv.ReadOptions(column_names=have, block_size=block_size, use_threads=False),
            parse_options=pv.ParseOptions(delimiter=delimiter, newlines_in_values=True,
                                          invalid_row_handler=on_invalid),
            convert_options=pv.ConvertOptions(
                include_columns=include,
                column_types={n: pa.string() for n in include},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )

    def read_all(include: list[str]) -> pa.Table:
        nonlocal bad
        bad, taken[:] = 0, []
        try:
            return read(include, 1 << 20)
        except pa.ArrowInvalid as exc:
            if "straddl" not in str(exc):
                raise
        # One row longer than a parser block (a very long line, or a quote
        # that took most of the block): parse the block as one piece.
        bad, taken[:] = 0, []
        return read(include, body.size + len(lead) + len(end_row) + 1)

    table = read_all(names)
    n = table.num_rows
    if n and table.column(names[0])[n - 1].as_py() == _END:
        table = table.slice(0, n - 1)
    elif n and not any(_END in t for t in taken):
        # A well-formed row took the end row: its quote never closed.
        if not any(_END in (table.column(c)[n - 1].as_py() or "") for c in names):
            wide = read_all(list(have))  # the quote is in a column not read: rare
            row = [wide.column(c)[wide.num_rows - 1].as_py() or "" for c in wide.column_names]
        else:
            row = [table.column(c)[n - 1].as_py() or "" for c in names]
        taken.append(next((v for v in row if _END in v), ""))
        bad += 1
        table = table.slice(0, n - 1)
    lost = [t[: t.find(_END)] if _END in t else t for t in taken]
    # The lines after the first, at any line end: inside the open quote a lone "\r" was not made "\n".
    rest = "".join(_LINE_END.split(t, 1)[1].rstrip("\r\n") + "\n" for t in lost if _LINE_END.search(t))
    rest = with_lf_row_ends(rest.encode(), delimiter).decode()
    if not rest.strip():
        return table, bad
    if budget[0] <= 0:
        return table, bad + _lines(rest)
    budget[0] -= 1
    more, more_bad = _read_csv_rows(pa.py_buffer(rest.encode()), have, delimiter, names, budget)
    return pa.concat_tables([table, more]), bad + more_bad


def parse_csv(data: bytes, header: bytes | None, fmt: str, columns: Columns,
               url: str) -> Chunk:
    skipped: dict[str, int] = {}
    delimiter = format_named(fmt).delimiter or ","
    # One line end from here on: a lone "\r" ends a row as "\n" does (row_ends.py).
    data = with_lf_row_ends(data, delimiter)
    if header is None:   # the block starts the file: its header is its first line not blank
        data = strip_bom(data)
        header, end = split_header(data, delimiter)
        data = data[end:]
    first = strip_bom(header) if header is not None else None
    if not first or not first.strip():
        raise no_header(url, blank=not first)
    raw = data
    escaped = not utf8_ok(data)
    marked = False
    if escaped:
        text = data.decode("utf-8", errors="surrogateescape")
        if _MARK in text:   # the mark is taken: whole lines go instead
            data = drop_undecodable(data, skipped)
        else:
            data, marked = ESCAPED.sub(_MARK, text).encode("utf-8"), True
        del text
    body = pa.py_buffer(data)
    have = header_names(first, delimiter, url)
    check_names(url, have, columns, fmt)
    undecodable = skipped.get("undecodable", 0)
    if not has_content(body):
        return Chunk(empty_table(columns, fmt), undecodable, skipped)
    names = columns.read_names(have)
    if columns.all_rows and escaped:
        return _rows_in_order(raw, have, delimiter, names, columns)
    # A quote that opened a field, took the lines after it and "closed" with text behind it: its line
    # is malformed, the lines it took are rows (row_ends.stray_quote_lines).
    kept, strays = without_stray_quote_lines(body, delimiter, '"')
    if strays:
        if columns.all_rows:
            return _rows_in_order(raw, have, delimiter, names, columns)
        body = pa.py_buffer(with_lf_row_ends(kept, delimiter))   # the lines it took kept their lone "\r"
        skipped["malformed"] = skipped.get("malformed", 0) + strays
    table, bad = _read_csv_rows(body, have, delimiter, names, [_RECOVERIES])
    if columns.all_rows and bad:
        return _rows_in_order(raw, have, delimiter, names, columns)
    if bad:
        skipped["malformed"] = skipped.get("malformed", 0) + bad
    if marked:
        table, undecodable = _without_marks(table)
        if undecodable:
            skipped["undecodable"] = undecodable
    rows_read = table.num_rows + bad + undecodable + strays
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


def _stray(taken: list[str], delimiter: str) -> bool:
    """Whether a record of several lines is a stray quote's (row_ends.stray_quote_lines)."""
    text = "".join(taken).encode("utf-8", errors="surrogateescape")
    return without_stray_quote_lines(text, delimiter, '"')[1] > 0


def _rows_in_order(raw: bytes, have: list[str], delimiter: str, names: list[str],
                   columns: Columns) -> Chunk:
    """Prediction's slow path, for a block holding a malformed or undecodable
    row: every record in order, with its status (a Python loop per row, for
    such blocks only)."""
    text = strip_bom(raw).decode("utf-8", errors="surrogateescape")
    lines = [line for line in _LINE_ENDS.split(text) if line]
    where = [have.index(n) for n in names]
    cols: dict[str, list] = {n: [] for n in names}
    status: list[str | None] = []
    for fields, why in _records(lines, delimiter, len(have)):
        status.append(why)
        for n, i in zip(names, where):
            cols[n].append(None if fields is None else fields[i])
    skipped: dict[str, int] = {}
    for why in status:
        if why:
            skipped[why] = skipped.get(why, 0) + 1
    arrays = {n: pa.array(v, pa.string()) for n, v in cols.items()}
    return finish(columns, arrays.__getitem__, len(status), len(status), skipped,
                  status=pa.array(status, pa.string()), have=have)


def _records(lines: list[str], delimiter: str, width: int):
    """(fields, None) or (None, reason) per CSV record of ``lines``. A quote
    never closed takes every line after it: that record is malformed and the
    lines it took are read again on their own, as :func:`_read_csv_rows` does."""
    start, recoveries = 0, _RECOVERIES
    while start < len(lines):
        reader = csv.reader(lines[start:], delimiter=delimiter, strict=False)
        restart = None
        while True:
            before = reader.line_num
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error:
                row = None
            taken = lines[start + before:start + reader.line_num]
            if row == [] or (row is not None and len(taken) == 1
                             and _blank(taken[0].encode("utf-8", "surrogateescape"), delimiter)):
                continue   # a blank line (or one of spaces alone, as pandas reads it) is not a row
            if row is not None and len(taken) > 1 and (sum(t.count('"') for t in taken) % 2 or _stray(taken, delimiter)):
                row = None                       # an unclosed (or stray) quote took the lines after it
                restart = start + before + 1
            if row is None or len(row) != width:
                yield None, "malformed"
            elif any(ESCAPED.search(f) for f in row):
                # kept columns (an id) still identify the row
                yield [ESCAPED.sub("\ufffd", f) for f in row], "undecodable"
            else:
                yield row, None
            if restart is not None:
                break
        if restart is None:
            return
        if recoveries <= 0:
            for line in lines[restart:]:
                if line.strip():
                    yield None, "malformed"
            return
        recoveries -= 1
        start = restart


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


def columns_of(f, url: str, fmt: str, encoding: str | None = None) -> list[str] | None:
    """The column names in the header of the open file ``f`` (text in ``encoding``; None: UTF-8);
    None for a file with no byte at all (a compressed empty file: its size on disk is not 0)."""
    delimiter = format_named(fmt).delimiter or ","
    raw, end = find_header(f, delimiter)
    check_not_packed(raw, url)
    if not end:   # nothing to read, as an empty plain file (data/checks.file_columns)
        return None
    if not raw:
        raise no_header(url, blank=True)
    return header_names(to_utf8(raw, encoding), delimiter, url)


def head_columns(fi, storage_options: dict | None, encoding: str | None = None) -> list[str] | None:
    """The registry's ``head`` for CSV and TSV: the columns the file ``fi``'s header names."""
    with open_head(fi, storage_options) as f:
        return columns_of(f, fi.url, fi.format, encoding)


# Rows after a header that must have its number of fields before a head
# without the run's column names reads as CSV/TSV: one such row is any text.
SNIFF_ROWS = 2
_SPLIT_BY = {",": "commas", "\t": "tabs"}
_WORD = re.compile(r"[\w.\-]+")


def sniff_header(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for CSV and TSV: a first line of column names
    split by the format's delimiter, naming a column the run reads, or with
    :data:`SNIFF_ROWS` rows or more after it of as many fields."""
    try:
        rows = list(csv.reader(head.lines, delimiter=fmt.delimiter or ","))
    except csv.Error:
        return None
    names = [n.strip() for n in rows[0]] if rows else []
    if len(names) < 2 or not all(_name_like(n) for n in names):
        return None
    split = _SPLIT_BY.get(fmt.delimiter or ",", repr(fmt.delimiter))
    asked = [n for n in names if n in head.names]
    if asked:
        return f"first line names the column{'s' * (len(asked) > 1)} {', '.join(asked)}, split by {split}"
    # Without the run's names, prose with a comma a line would pass the count: only words without spaces name columns.
    body = rows[1:]
    if len(body) >= SNIFF_ROWS and all(map(_WORD.fullmatch, names)) and all(len(r) == len(names) for r in body):
        return f"first line names {len(names)} columns ({', '.join(names)}) and the rows after it have as many, " \
               f"split by {split}"
    return None


def _name_like(name: str) -> bool:
    # A JSON object or a fastText line split at its commas is no header, nor are binary bytes.
    return bool(name) and not looks_like_data(name) and name.isprintable() \
        and not name.startswith(("{", "[", "__label__"))
