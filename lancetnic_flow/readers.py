"""From one partition to Arrow tables: one small parser per format.

Runs on Dask workers. Rows that cannot be used are dropped and counted by
reason in :attr:`Chunk.skipped` ("malformed", "undecodable", "empty_text",
"missing_label", "missing_target"). The well-formed path is vectorised with
``pyarrow.compute``: no Python loop per row. A compressed file is read as a
decompressing stream in pieces of about ``chunk_bytes``.
"""
from __future__ import annotations

import io
import json
from typing import Iterator

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.json as pj
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from fsspec.utils import read_block

from .errors import UserError
from .sources import (FORMATS, LINE_FORMATS, Chunk, Columns, Partition, SourcePlan, _missing_column_error, _open_error,
                      open_options)

_HEADER_BYTES = 2**20
_BOM = b"\xef\xbb\xbf"
_NUMBER_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_FASTTEXT_RE = r"^(?:__label__(?P<label>\S*)\s*)?(?:__label__\S*\s*)*(?P<text>.*)$"


# ---------------------------------------------------------------- helpers


def _fs_path(url: str, storage_options: dict | None):
    fs, path = url_to_fs(url, **open_options(url, storage_options))
    return fs, path


def _to_float(arr) -> pa.ChunkedArray | pa.Array:
    """Any column -> float64; values that are not numbers become null."""
    t = arr.type
    if pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t) \
            or pa.types.is_decimal(t) or pa.types.is_null(t):
        out = pc.cast(arr, pa.float64())
    else:
        s = pc.utf8_trim_whitespace(pc.cast(arr, pa.string()))
        ok = pc.match_substring_regex(s, _NUMBER_RE)
        out = pc.cast(pc.if_else(ok, s, pa.scalar(None, pa.string())), pa.float64())
    # inf / nan are not usable numbers
    return pc.if_else(pc.is_finite(out), out, pa.scalar(None, pa.float64()))


def _to_string(arr):
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_large_string(t) or pa.types.is_null(t) or pa.types.is_integer(t) \
            or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t) \
            or pa.types.is_dictionary(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_string_view(t):
        if pa.types.is_dictionary(t):
            arr = pc.cast(arr, t.value_type)
        return pc.cast(arr, pa.string())
    raise UserError(f"a column of type {t} cannot be read as text",
                    "choose a column holding strings or numbers")


def _empty(columns: Columns | None, fmt: str) -> pa.Table:
    fields = [pa.field("text", pa.string(), nullable=False)]
    if columns is not None:
        if columns.label:
            fields.append(pa.field("label", pa.string()))
        if columns.target:
            fields.append(pa.field("target", pa.float64()))
        for n in columns.numeric:
            fields.append(pa.field(n, pa.float64()))
    return pa.schema(fields).empty_table()


def _finish(columns: Columns, get, n: int, rows_read: int,
            skipped: dict[str, int]) -> Chunk:
    """Build the output table from parsed columns; ``get(name)`` -> array."""
    if n == 0:
        return Chunk(_empty(columns, ""), rows_read, skipped)
    if len(columns.text) == 1:
        text = pc.fill_null(_to_string(get(columns.text[0])), "")
    else:
        texts = [_to_string(get(c)) for c in columns.text]
        joined = pc.binary_join_element_wise(*texts, " ", null_handling="replace",
                                             null_replacement="")
        text = pc.utf8_trim_whitespace(joined)
    # non-empty and not only whitespace; no copy of the strings
    keep = pc.and_(pc.greater(pc.utf8_length(text), 0), pc.invert(pc.utf8_is_space(text)))
    reasons = [("empty_text", keep)]
    label = target = None
    if columns.label:
        label = pc.utf8_trim_whitespace(_to_string(get(columns.label)))
        ok = pc.fill_null(pc.greater(pc.utf8_length(label), 0), False)
        reasons.append(("missing_label", ok))
    if columns.target:
        target = _to_float(get(columns.target))
        reasons.append(("missing_target", pc.is_valid(target)))
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

    def kept(a):  # no copy when every row is kept (the common case)
        return pc.filter(a, mask) if dropped else a

    arrays = [kept(text)]
    names = ["text"]
    if label is not None:
        arrays.append(kept(label))
        names.append("label")
    if target is not None:
        arrays.append(kept(target))
        names.append("target")
    for c in columns.numeric:
        arrays.append(kept(_to_float(get(c))))
        names.append(c)
    schema = _empty(columns, "").schema
    table = pa.Table.from_arrays(
        [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
        names=names)
    return Chunk(table.cast(schema), rows_read, skipped)


def _utf8_ok(data: bytes) -> bool:
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


def _split_lines(data: bytes) -> pa.Array:
    """Block -> one string per line, '\\r' stripped, no trailing empty line."""
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        return pa.array([], pa.string())
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    whole = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    lines = pc.split_pattern(whole, "\n").flatten()
    lines = pc.utf8_rtrim(lines, "\r")
    return pc.cast(lines, pa.string())


def _drop_undecodable(data: bytes, skipped: dict[str, int]) -> bytes:
    """Remove lines that are not valid UTF-8, counting them (slow path only)."""
    if _utf8_ok(data):
        return data
    text = data.decode("utf-8", errors="replace")
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    bad = pc.match_substring(lines, "\ufffd")
    skipped["undecodable"] = skipped.get("undecodable", 0) + (pc.sum(bad).as_py() or 0)
    good = pc.filter(lines, pc.invert(bad))
    if isinstance(good, pa.ChunkedArray):
        good = good.combine_chunks()
    listed = pa.LargeListArray.from_arrays(pa.array([0, len(good)], pa.int64()), good)
    joined = pc.binary_join(listed, pa.scalar("\n", pa.large_string()))
    return joined[0].as_buffer().to_pybytes() if joined[0].is_valid else b""


def _has_content(buf: pa.Buffer) -> bool:
    """True when ``buf`` holds anything but whitespace (checks a prefix cheaply)."""
    if buf.size == 0:
        return False
    head = buf.slice(0, min(buf.size, 4096)).to_pybytes()
    return bool(head.strip()) or bool(buf.to_pybytes().strip()) if buf.size > 4096 \
        else bool(head.strip())


def _header_names(header: bytes, delimiter: str, url: str = "") -> list[str]:
    fmt = "TSV" if delimiter == "\t" else "CSV"
    if not _utf8_ok(header):
        raise UserError(f"{url}: the first line is not UTF-8 text, so it is no {fmt} header",
                        f"check that the file is {fmt}, or pass --format "
                        f"with one of {', '.join(FORMATS)} (e.g. --format parquet)")
    try:
        t = pv.read_csv(io.BytesIO(header.rstrip(b"\r\n") + b"\n"),
                        parse_options=pv.ParseOptions(delimiter=delimiter))
    except pa.ArrowInvalid as exc:
        raise UserError(f"{url}: cannot read the first line as a {fmt} header ({exc})",
                        "check the format, or pass --format") from exc
    return t.column_names


def _format_hint(fmt: str, have: list[str]) -> str | None:
    """When a CSV/TSV header looks like another format, which one."""
    if fmt not in ("csv", "tsv") or not have:
        return None
    if have[0].lstrip().startswith("{"):
        return "the first line looks like JSON: pass --format jsonl"
    other, name = ("\t", "tsv") if fmt == "csv" else (",", "csv")
    if len(have) == 1 and other in have[0]:
        return f"the header line is split by {other!r}, not by the {fmt} delimiter: pass --format {name}"
    return None


def _check_names(url: str, have: list[str], columns: Columns, fmt: str = "") -> None:
    for name in columns.names():
        if name not in have:
            err = _missing_column_error(url, name, have)
            err.hint = _format_hint(fmt, have) or err.hint
            raise err


def _check_lineformat_columns(url: str, fmt: str, columns: Columns) -> None:
    if columns.target or columns.numeric:
        raise UserError(f"{url}: the {fmt} format has no numeric columns",
                        "use csv, tsv, jsonl or parquet for target and numeric columns")
    if fmt == "text" and columns.label:
        raise UserError(f"{url}: the text format has no labels",
                        "use the fasttext format (__label__x text) or a table format for labels")


# ---------------------------------------------------------------- parsers

# A row no file holds, added after each CSV block: it comes out last and whole
# only if every quote the block opened was closed.
_END = "lancetnic-flow:end-of-block"
# Re-reads of the lines an unclosed quote took, per block (each re-reads at
# most the rest of the block); past that they are counted as malformed.
_RECOVERIES = 8


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
    end_row = (delimiter.join([_END] * len(have)) + "\n").encode()
    lead = b"" if memoryview(body)[-1:] == b"\n" else b"\n"  # the end row starts a line
    bad = 0
    taken: list[str] = []  # raw text of malformed rows that span lines

    def on_invalid(row) -> str:
        nonlocal bad
        bad += 1
        if "\n" in (row.text or ""):
            taken.append(row.text)
        return "skip"

    def read(include: list[str], block_size: int) -> pa.Table:
        return pv.read_csv(
            _Joined(body, lead, end_row),
            read_options=pv.ReadOptions(column_names=have, block_size=block_size),
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
    rest = "".join(t.split("\n", 1)[1].rstrip("\n") + "\n" for t in lost if "\n" in t)
    if not rest.strip():
        return table, bad
    if budget[0] <= 0:
        return table, bad + _lines(rest)
    budget[0] -= 1
    more, more_bad = _read_csv_rows(pa.py_buffer(rest.encode()), have, delimiter, names, budget)
    return pa.concat_tables([table, more]), bad + more_bad


def _parse_csv(data: bytes, header: bytes | None, fmt: str, columns: Columns,
               url: str) -> Chunk:
    skipped: dict[str, int] = {}
    delimiter = "\t" if fmt == "tsv" else ","
    data = _drop_undecodable(data, skipped)
    buf = pa.py_buffer(data)
    if header is not None:
        first = header
        body = buf
    else:
        nl = data.find(b"\n")
        first = data if nl < 0 else data[: nl + 1]
        body = buf.slice(len(data)) if nl < 0 else buf.slice(nl + 1)  # zero-copy
    if first.startswith(_BOM):
        first = first[len(_BOM):]
    if not first.strip():
        raise UserError(f"{url}: the file has no header line",
                        "a CSV/TSV file needs a first line with the column names")
    have = _header_names(first, delimiter, url)
    _check_names(url, have, columns, fmt)
    undecodable = skipped.get("undecodable", 0)
    if not _has_content(body):
        return Chunk(_empty(columns, fmt), undecodable, skipped)
    names = columns.names()
    table, bad = _read_csv_rows(body, have, delimiter, names, [_RECOVERIES])
    if bad:
        skipped["malformed"] = skipped.get("malformed", 0) + bad
    rows_read = table.num_rows + bad + undecodable
    return _finish(columns, table.column, table.num_rows, rows_read, skipped)


def _parse_jsonl(data: bytes, columns: Columns, url: str) -> Chunk:
    skipped: dict[str, int] = {}
    data = _drop_undecodable(data, skipped)
    undecodable = skipped.get("undecodable", 0)
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if not data.strip():
        return Chunk(_empty(columns, "jsonl"), undecodable, skipped)
    names = columns.names()
    table = None
    try:
        table = pj.read_json(io.BytesIO(data),
                             read_options=pj.ReadOptions(block_size=max(1 << 20, len(data) + 1)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = None
    if table is not None:
        missing = [n for n in names if n not in table.column_names]
        if missing and table.num_rows:
            raise _missing_column_error(url, missing[0], table.column_names)
        return _finish(columns, table.column, table.num_rows,
                       table.num_rows + undecodable, skipped)
    # Slow path, only for a block with a malformed line or mixed-type values.
    cols: dict[str, list] = {n: [] for n in names}
    malformed = 0
    seen_keys: set[str] = set()
    found: set[str] = set()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            malformed += 1
            continue
        if not isinstance(obj, dict):
            malformed += 1
            continue
        seen_keys.update(obj)
        for n in names:
            v = obj.get(n)
            if n in obj:
                found.add(n)
            if isinstance(v, (dict, list)):
                v = json.dumps(v)
            elif isinstance(v, bool):
                v = str(v).lower()
            elif v is not None:
                v = str(v)
            cols[n].append(v)
    n_rows = len(cols[names[0]]) if names else 0
    if n_rows:
        for n in names:
            if n not in found:
                raise _missing_column_error(url, n, sorted(seen_keys))
    if malformed:
        skipped["malformed"] = skipped.get("malformed", 0) + malformed
    arrays = {n: pa.array(v, pa.string()) for n, v in cols.items()}
    return _finish(columns, arrays.__getitem__, n_rows, n_rows + malformed + undecodable,
                   skipped)


def _parse_text(data: bytes, fmt: str, columns: Columns, url: str) -> Chunk:
    _check_lineformat_columns(url, fmt, columns)
    skipped: dict[str, int] = {}
    data = _drop_undecodable(data, skipped)
    undecodable = skipped.get("undecodable", 0)
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    lines = _split_lines(data)
    lines = pc.utf8_trim_whitespace(lines)
    lines = pc.filter(lines, pc.greater(pc.utf8_length(lines), 0))  # blank lines are not rows
    n = len(lines)
    if fmt == "text":
        get = {columns.text[0]: lines}
        cols = Columns(text=(columns.text[0],))
    else:
        parts = pc.extract_regex(lines, _FASTTEXT_RE)
        get = {"text": parts.field("text"), "label": parts.field("label")}
        cols = Columns(text=("text",), label="label" if columns.label else None)
    chunk = _finish(cols, get.__getitem__, n, n + undecodable, skipped)
    return chunk


def _parse_block(data: bytes, header: bytes | None, fmt: str, columns: Columns,
                 url: str) -> Chunk:
    if fmt in ("csv", "tsv"):
        return _parse_csv(data, header, fmt, columns, url)
    if fmt == "jsonl":
        return _parse_jsonl(data, columns, url)
    return _parse_text(data, fmt, columns, url)


def _read_csv_header(f) -> bytes:
    head = f.read(_HEADER_BYTES)
    nl = head.find(b"\n")
    if nl < 0:
        if len(head) >= _HEADER_BYTES:
            raise UserError("the header line is longer than 1 MiB",
                            "check the format and the delimiter")
        return head
    return head[: nl + 1]


# ---------------------------------------------------------------- reading


def read_partition(part: Partition, columns: Columns, *,
                   storage_options: dict | None = None,
                   chunk_bytes: int = 64 * 2**20) -> Iterator[Chunk]:
    """Read one partition as Chunks (one for a byte range or row group; one per
    ~``chunk_bytes`` of decompressed data for a compressed file)."""
    fi = part.file
    url = fi.url
    if not columns.text:
        raise UserError("no text column given", "name at least one text column")
    if fi.format == "parquet":
        yield _read_parquet(part, columns, storage_options)
        return
    if fi.format not in LINE_FORMATS:
        raise UserError(f"unknown format {fi.format!r}", f"use one of {', '.join(FORMATS)}")
    if fi.format in ("text", "fasttext"):
        _check_lineformat_columns(url, fi.format, columns)
    if fi.compression is not None:
        yield from _read_stream(part, columns, storage_options, chunk_bytes)
        return
    try:
        fs, path = _fs_path(url, storage_options)
        f = fs.open(path, "rb")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _open_error(url, exc) from exc
    with f:
        try:
            header = None
            if fi.format in ("csv", "tsv") and part.start > 0:
                f.seek(0)
                header = _read_csv_header(f)
            data = read_block(f, part.start, part.length, delimiter=b"\n")
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _open_error(url, exc) from exc
    if part.start == 0 and data.startswith(_BOM):
        data = data[len(_BOM):]
    yield _parse_block(data, header, fi.format, columns, url)


def _read_stream(part: Partition, columns: Columns, storage_options: dict | None,
                 chunk_bytes: int) -> Iterator[Chunk]:
    fi = part.file
    url = fi.url
    chunk_bytes = max(1, int(chunk_bytes))
    try:
        of = fsspec.open(url, "rb", compression=fi.compression,
                         **open_options(url, storage_options))
        f = of.open()
    except Exception as exc:  # noqa: BLE001
        raise _open_error(url, exc) from exc
    header: bytes | None = None
    first = True
    carry = b""
    try:
        while True:
            try:
                new = f.read(chunk_bytes)
            except (EOFError, OSError, ValueError) as exc:
                raise UserError(f"{url}: the {fi.compression} stream is corrupt, truncated "
                                f"or unreadable ({exc})",
                                "check the file and the connection, or recompress it") from exc
            eof = not new
            if carry:
                new = carry + new
                carry = b""
            if not eof:
                cut = new.rfind(b"\n")
                if cut < 0:  # one long line: keep reading until it ends
                    carry, new = new, b""
                    continue
                if cut + 1 < len(new):
                    carry = new[cut + 1:]
                    new = new[: cut + 1]
            # only ``buf`` (one piece) and ``carry`` stay alive while parsing
            buf, new = new, b""
            if first:
                if buf.startswith(_BOM):
                    buf = buf[len(_BOM):]
                if fi.format in ("csv", "tsv"):
                    nl = buf.find(b"\n")
                    header = buf if nl < 0 else buf[: nl + 1]
                    buf = b"" if nl < 0 else buf[nl + 1:]
                first = False
            if buf:
                chunk = _parse_block(buf, header, fi.format, columns, url)
                buf = b""  # not held while the caller uses the chunk
                yield chunk
                del chunk
            if eof:
                break
    finally:
        f.close()


def _read_parquet(part: Partition, columns: Columns,
                  storage_options: dict | None) -> Chunk:
    url = part.file.url
    try:
        fs, path = _fs_path(url, storage_options)
        f = fs.open(path, "rb")
    except Exception as exc:  # noqa: BLE001
        raise _open_error(url, exc) from exc
    with f:
        pf = pq.ParquetFile(f)
        have = pf.schema_arrow.names
        _check_names(url, have, columns)
        table = pf.read_row_group(part.start, columns=columns.names())
    return _finish(columns, table.column, table.num_rows, table.num_rows, {})


# ---------------------------------------------------------------- checks


def check_columns(plan: SourcePlan, columns: Columns, *, storage_options=None) -> None:
    """Read the head of the first file and raise UserError for missing columns."""
    if not columns.text:
        raise UserError("no text column given", "name at least one text column")
    if not plan.files:
        return
    if not plan.partitions:
        shown = ", ".join(f.url for f in plan.files[:5]) + (
            f" and {len(plan.files) - 5} more" if len(plan.files) > 5 else "")
        raise UserError(f"nothing to read: {shown} "
                        f"{'is' if len(plan.files) == 1 else 'are'} empty",
                        "point at files that hold rows")
    fi = plan.files[0]
    url = fi.url
    if fi.format in ("text", "fasttext"):
        _check_lineformat_columns(url, fi.format, columns)
        return
    if fi.size == 0:
        return
    try:
        if fi.format == "parquet":
            fs, path = _fs_path(url, storage_options)
            with fs.open(path, "rb") as f:
                have = pq.ParquetFile(f).schema_arrow.names
        else:
            with fsspec.open(url, "rb", compression=fi.compression,
                             **open_options(url, storage_options)) as f:
                if fi.format in ("csv", "tsv"):
                    first = _read_csv_header(f)
                    if first.startswith(_BOM):
                        first = first[len(_BOM):]
                    if not first.strip():
                        raise UserError(f"{url}: the file has no header line",
                                        "a CSV/TSV file needs a first line with the column names")
                    have = _header_names(first, "\t" if fi.format == "tsv" else ",", url)
                else:
                    have = None
                    for line in f:  # first non-empty line
                        if line.strip():
                            line = line[len(_BOM):] if line.startswith(_BOM) else line
                            try:
                                obj = json.loads(line)
                            except ValueError as exc:
                                raise UserError(f"{url}: the first line is not JSON ({exc})",
                                                "check the format, or pass --format") from exc
                            if not isinstance(obj, dict):
                                raise UserError(f"{url}: the first line is not a JSON object",
                                                "each line must be an object like "
                                                '{"text": "...", "label": "..."}')
                            have = list(obj)
                            break
                    if have is None:
                        return
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _open_error(url, exc) from exc
    _check_names(url, have, columns, fi.format)
