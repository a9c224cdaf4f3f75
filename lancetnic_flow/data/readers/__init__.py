"""From one partition to Arrow tables: one small parser per format family.

Runs on Dask workers. Rows that cannot be used are dropped and counted by
reason in :attr:`Chunk.skipped` ("malformed", "undecodable", "not_text",
"empty_text", "missing_label", "missing_target"). A compressed file is read
as a decompressing stream in pieces of about ``chunk_bytes``.

Text in another encoding (``Columns.encoding``, ``--encoding``) is decoded
to UTF-8 a block at a time before parsing. A block where many rows are not
text in the expected encoding (:func:`check_decodable`) stops the run with
the file's name and the fix, instead of losing those rows as skips.

Arrow reads run with ``use_threads=False``: a worker is planned as one core
per Dask thread, and in the trainer (input checks, prediction) an Arrow
thread pool still alive at interpreter exit can abort a process that has
finished its work ("terminate called without an active exception", exit 134).

Which parser reads a format is its record in the format registry
(:mod:`lancetnic_flow.formats`): one ``register_format`` call adds a format.

* :mod:`.csv` — CSV and TSV; :mod:`.jsonl` — JSON Lines; :mod:`.lines` —
  plain text and fastText lines; :mod:`.parquet` — Parquet row groups;
  :mod:`.arrow` — Arrow IPC record batches (``.arrow``, ``datasets`` folders);
  :mod:`.table` — what they share.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from fsspec.utils import read_block

from ...errors import UserError
from ...formats import Format, delimited, format_named, to_utf8
from ...storage import open_options, url_to_fs
from ..decompress import open_decompressed
from ..sources import Chunk, Columns, Partition, open_error
from .csv import find_header, no_header, split_header
from .labels import LabelListError
from .lines import check_fasttext_line_ends, check_line_columns
from .long_texts import check_text_lengths
from .row_ends import LOOKBACK_MAX, PIECE, line_start, row_start, stream_cut
from .table import BOM, check_decodable, check_not_utf8, check_not_wide


def _parse_block(data: bytes, header: bytes | None, fmt: Format, columns: Columns,
                 url: str) -> Chunk:
    # Decoded per block, not per row: one codec call, then the UTF-8 parsers.
    check_not_utf8(header or b"", url, columns.encoding)
    check_not_utf8(data, url, columns.encoding)
    data = to_utf8(data, columns.encoding)
    header = to_utf8(header, columns.encoding) if header else header
    chunk = fmt.parse()(data, header, fmt.name, columns, url)
    check_decodable(chunk, data, url, columns.encoding)
    return chunk


def read_partition(part: Partition, columns: Columns, *,
                   storage_options: dict | None = None,
                   chunk_bytes: int = 64 * 2**20) -> Iterator[Chunk]:
    """Read one partition as Chunks (one for a byte range or row group; one per
    ~``chunk_bytes`` of decompressed data for a compressed file)."""
    try:
        for chunk in _read_partition(part, columns, storage_options, chunk_bytes):
            check_text_lengths(chunk.table, part.file.url)
            yield chunk
    except LabelListError as exc:   # found where the rows are parsed, which does not know the file
        raise exc.at(part.file.url) from None


def _read_partition(part: Partition, columns: Columns, storage_options: dict | None,
                    chunk_bytes: int) -> Iterator[Chunk]:
    fi = part.file
    url = fi.url
    if not columns.text:
        raise UserError("no text column given", "name at least one text column")
    fmt = delimited(format_named(fi.format), columns.delimiter)
    if not fmt.splits_by_bytes:
        yield fmt.parse()(part, columns, storage_options)
        return
    if fmt.columns is not None:
        check_line_columns(url, fi.format, columns)
    if fi.compression is not None:
        yield from _read_stream(part, columns, storage_options, chunk_bytes)
        return
    try:
        fs, path = url_to_fs(url, **open_options(url, storage_options))
        f = fs.open(path, "rb")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise open_error(url, exc) from exc
    with f:
        try:
            header, rows_at = None, 0
            if fmt.header:   # every partition finds it alike, past any blank lines before it
                f.seek(0)
                header, rows_at = find_header(f, fmt.delimiter or ",")
            data = _read_rows(f, part, fmt, rows_at)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise open_error(url, exc) from exc
    if part.start == 0:
        check_not_wide((header or b"") + data[:4096], url)
        if data.startswith(BOM):
            data = data[len(BOM):]
    yield _parse_block(data, header, fmt, columns, url)


def _read_rows(f, part: Partition, fmt: Format, rows_at: int = 0) -> bytes:
    """The whole rows that start in the partition's byte range: from the first
    row start at or after its offset to the first at or after its end (a
    newline inside a quoted field ends no row: :mod:`.row_ends`), none before
    ``rows_at`` (where the rows after a header start)."""
    if fmt.cr_ends_lines:   # a lone "\r" ends a line too: a classic Mac file is cut into blocks as others are
        first, last = line_start(f, part.start, part.file.size), line_start(f, part.start + part.length, part.file.size)
        f.seek(first)
        return f.read(last - first) if last > first else b""
    if fmt.quote is None:   # every newline ends a row: a row is the range's whose newline before it it holds
        start, end = max(part.start, rows_at - 1), part.start + part.length
        if fmt.name == "fasttext":   # before reading on to a "\n" a file of lone "\r" line ends lacks
            f.seek(start)
            check_fasttext_line_ends(f.read(PIECE), part.file.url, whole=False)
        return read_block(f, start, end - start, delimiter=b"\n") if end > start else b""
    size, end = part.file.size, part.start + part.length
    first = row_start(f, part.start, size, fmt.delimiter or ",", fmt.quote)
    last = row_start(f, end, size, fmt.delimiter or ",", fmt.quote)
    if last < first:   # the cuts crossed: the rows between them would be read twice
        raise UserError(f"{part.file.url}: a quoted field longer than {LOOKBACK_MAX // 2**20} MiB holds line ends "
                        f"near byte {part.start:,}, so the file cannot be split there",
                        f"read it in one piece: {{cluster.blocksize}} {max(part.file.size, 1) // 2**20 + 1}MiB or more")
    first = max(first, rows_at)
    if last <= first:
        return b""
    f.seek(first)
    return f.read(last - first)


def _read_stream(part: Partition, columns: Columns, storage_options: dict | None,
                 chunk_bytes: int) -> Iterator[Chunk]:
    fi = part.file
    url = fi.url
    fmt = delimited(format_named(fi.format), columns.delimiter)
    chunk_bytes = max(1, int(chunk_bytes))
    opened = contextlib.ExitStack()
    try:
        f = opened.enter_context(open_decompressed(url, fi.compression, storage_options))
    except Exception as exc:  # noqa: BLE001
        raise open_error(url, exc) from exc
    header: bytes | None = None
    first, blank = True, False   # blank: blank lines came before any header
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
                cut = stream_cut(new, fmt.delimiter, fmt.quote, fmt.cr_ends_lines)
                if cut < 0:  # one long row: keep reading until it ends
                    if fmt.name == "fasttext":   # unless its lines end in a lone "\r": it would never end
                        check_fasttext_line_ends(new, url, whole=False)
                    carry, new = new, b""
                    continue
                if cut < len(new):
                    carry = new[cut:]
                    new = new[:cut]
            # only ``buf`` (one piece) and ``carry`` stay alive while parsing
            buf, new = new, b""
            if first:
                check_not_wide(buf, url)
                if buf.startswith(BOM):
                    buf = buf[len(BOM):]
                first = False
            if fmt.header and header is None:   # past any blank lines before it, which may fill a piece
                header, end = split_header(buf, fmt.delimiter or ",")
                blank = blank or end > 0
                buf = buf[end:]
                if header is None and eof and blank:
                    raise no_header(url, blank=True)
            if buf:
                chunk = _parse_block(buf, header, fmt, columns, url)
                buf = b""  # not held while the caller uses the chunk
                yield chunk
                del chunk
            if eof:
                break
    finally:
        opened.close()


__all__ = ["read_partition"]
