"""Arrow IPC files (``.arrow``, ``.arrows``, ``.feather`` v2, ``.ipc``): partitions of record batches.

Feather v1 (the magic ``FEA1``) holds no record batches and is refused by
name, with the conversion to v2 (:func:`feather_v1`).

Both IPC layouts are read: the *stream* (what ``datasets.Dataset.save_to_disk``
writes, ``data-00000-of-00001.arrow``; ``pyarrow.ipc.new_stream``) and the
*file* (``pyarrow.ipc.new_file``, Feather v2: the magic ``ARROW1``, the same
messages, then a footer). Which one a file is its first bytes say.

Planning (:func:`byte_ranges`) reads where the record batches are from the
file layout's footer, or walks a stream's message headers, seeking over their
bodies: a remote file is not downloaded to be planned. It groups
consecutive record batches into byte ranges of about :data:`PIECE_BYTES`. A
partition reads its range and the schema at the start of the file: a worker
holds one range at a time, as with a block of lines. A file whose columns are
dictionary-encoded needs its dictionary messages for every batch: it is one
partition, read in order by pyarrow's own reader.
"""
from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.ipc as ipc

from ...errors import UserError
from ...formats import Format, Head
from ..decompress import FEATHER_V2
from ..sources import Chunk, Columns, Partition
from .table import check_names, finish_table, fs_path, open_seekable

FILE_MAGIC = b"ARROW1"
# Feather v1 (pyarrow.feather.write_feather(version=1), R's old feather): no IPC messages,
# no record batches, so nothing to read a piece at a time; pyarrow reads it only whole.
FEATHER_V1 = b"FEA1"
CONTINUATION = b"\xff\xff\xff\xff"
# Record batches are grouped into partitions of about this many bytes (those of
# datasets hold 1,000 rows each: one partition per batch would be thousands of tasks).
PIECE_BYTES = 64 * 2**20
# The Message flatbuffer's header kinds (format/Message.fbs: union MessageHeader).
SCHEMA, DICTIONARY_BATCH, RECORD_BATCH = 1, 2, 3


def feather_v1(url: str) -> UserError:
    """The error for a Feather v1 file: what it is, and how to convert it."""
    return UserError(f"{url}: a Feather v1 file, which is not read (no record batches to read a part at a time: "
                     "pyarrow reads it only whole, into memory)", FEATHER_V2)


def check_not_feather_v1(f, url: str) -> None:
    """Refuse the open file ``f`` when it is Feather v1 (:func:`feather_v1`)."""
    f.seek(0)
    if f.read(len(FEATHER_V1)) == FEATHER_V1:
        raise feather_v1(url)


def _file_layout(f) -> bool:
    """Whether ``f`` is in the file layout (starts with ``ARROW1``), not a stream."""
    f.seek(0)
    return f.read(6) == FILE_MAGIC


def _header(f) -> tuple[int, int, int] | None:
    """The message at ``f``'s position: (its kind, the size of its prefix and
    metadata, the size of its body); None at the end of the stream."""
    first = f.read(4)
    if len(first) < 4:
        return None
    prefix = 4
    if first == CONTINUATION:   # since Arrow 0.15; older streams start with the length
        first = f.read(4)
        prefix = 8
        if len(first) < 4:
            return None
    (size,) = struct.unpack("<i", first)
    if size <= 0:
        return None   # end-of-stream marker
    meta = f.read(size)
    if len(meta) < size:
        raise ValueError("the file ends inside a message header")
    return _message_kind(meta), prefix + size, _body_length(meta)


def _field(meta: bytes, index: int) -> int | None:
    """The position in ``meta`` of the root table's field ``index``, None when absent (its default)."""
    (table,) = struct.unpack_from("<I", meta, 0)
    (back,) = struct.unpack_from("<i", meta, table)
    vtable = table - back
    vt_size, _ = struct.unpack_from("<HH", meta, vtable)
    if 4 + 2 * index >= vt_size:
        return None
    (offset,) = struct.unpack_from("<H", meta, vtable + 4 + 2 * index)
    return table + offset if offset else None


# Message: version (field 0), header_type (1), header (2), bodyLength (3).
def _message_kind(meta: bytes) -> int:
    at = _field(meta, 1)
    return meta[at] if at is not None else 0


def _body_length(meta: bytes) -> int:
    at = _field(meta, 3)
    return struct.unpack_from("<q", meta, at)[0] if at is not None else 0


def _blocks(footer: bytes, index: int) -> list[tuple[int, int]]:
    """The Footer's vector of Blocks ``index`` (2: dictionaries, 3: record
    batches) as (offset, length): a Block is offset (int64), metadata length
    (int32, with its prefix and padding), 4 bytes of padding, body length (int64)."""
    at = _field(footer, index)
    if at is None:
        return []
    vector = at + struct.unpack_from("<I", footer, at)[0]
    (count,) = struct.unpack_from("<I", footer, vector)
    out = []
    for i in range(count):
        offset, meta, _, body = struct.unpack_from("<qiiq", footer, vector + 4 + 24 * i)
        out.append((offset, meta + body))
    return out


def scan(f, size: int) -> tuple[list[tuple[int, int]], bool]:
    """The record batches of the open IPC file ``f`` of ``size`` bytes as
    (offset, length), and whether any column is dictionary-encoded. The file
    layout lists them in its footer; a stream's message headers are walked."""
    if _file_layout(f):
        f.seek(size - 10)
        tail = f.read(10)
        if tail[4:] != FILE_MAGIC:
            raise ValueError("the file starts with ARROW1 but does not end with it: truncated?")
        (length,) = struct.unpack("<i", tail[:4])
        f.seek(size - 10 - length)
        footer = f.read(length)
        return _blocks(footer, 3), bool(_blocks(footer, 2))
    pos, batches, dictionaries = 0, [], False
    while pos < size:
        f.seek(pos)
        found = _header(f)
        if found is None:
            break
        kind, meta, body = found
        if pos + meta + body > size:
            raise ValueError(f"the file ends inside a message ({size:,} bytes, the message ends at "
                             f"{pos + meta + body:,}): truncated?")
        if kind == RECORD_BATCH:
            batches.append((pos, meta + body))
        elif kind == DICTIONARY_BATCH:
            dictionaries = True
        pos += meta + body
    return batches, dictionaries


def byte_ranges(fs, path: str) -> list[tuple[int, int]]:
    """The registry's ``pieces``: (offset, length) of each partition, consecutive
    record batches of about :data:`PIECE_BYTES` together; ``[(0, -1)]``, the
    whole file, when its columns are dictionary-encoded."""
    with fs.open(path, "rb", block_size=2**16) as f:   # headers only: small reads, the bodies skipped
        check_not_feather_v1(f, fs.unstrip_protocol(path))
        try:
            batches, dictionaries = scan(f, fs.size(path))
        except (ValueError, struct.error) as exc:   # the planner reports ArrowInvalid as an invalid file
            raise pa.ArrowInvalid(f"not an Arrow IPC file or stream: {exc}") from exc
    if dictionaries:
        return [(0, -1)]
    ranges: list[tuple[int, int]] = []
    for offset, length in batches:
        last = ranges[-1] if ranges else None
        if last and last[0] + last[1] == offset and last[1] + length <= PIECE_BYTES:
            ranges[-1] = (ranges[-1][0], ranges[-1][1] + length)
        else:
            ranges.append((offset, length))
    return ranges


def _native(f) -> pa.PythonFile:
    """``f`` for pyarrow's readers, which take a Python file's mode from its
    ``mode`` attribute (fsspec's memory:// files say "wb" however opened)."""
    return pa.PythonFile(f, mode="r")


def _schema(f) -> pa.Schema:
    """The file layout's schema is in its footer; a stream's is its first message."""
    if _file_layout(f):
        return ipc.open_file(_native(f)).schema
    f.seek(0)
    return ipc.read_schema(ipc.read_message(_native(f)))


def _batches(f, part: Partition) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """The record batches of partition ``part`` of the open file ``f``."""
    if part.length < 0:   # dictionary-encoded: the whole file, in order
        if _file_layout(f):
            reader = ipc.open_file(_native(f))
            return reader.schema, [reader.get_batch(i) for i in range(reader.num_record_batches)]
        f.seek(0)
        stream = ipc.open_stream(_native(f))
        return stream.schema, list(stream)
    schema = _schema(f)
    f.seek(part.start)
    messages = ipc.MessageReader.open_stream(pa.py_buffer(f.read(part.length)))
    return schema, [ipc.read_record_batch(m, schema) for m in messages]


def read_arrow(part: Partition, columns: Columns, storage_options: dict | None) -> Chunk:
    """The registry's ``read``: one partition's record batches as a Chunk."""
    url = part.file.url
    with open_seekable(url, storage_options) as f:
        check_not_feather_v1(f, url)
        try:
            schema, batches = _batches(f, part)
        except (pa.ArrowInvalid, OSError, ValueError, struct.error) as exc:   # a file changed since planned
            raise UserError(f"{url}: not a valid Arrow IPC file ({exc})", "check the file, or pass {data.format}") from exc
    have = schema.names
    check_names(url, have, columns)
    table = pa.Table.from_batches(batches, schema).select(columns.read_names(have))
    return finish_table(url, columns, table, have)


def head_columns(fi, storage_options: dict | None, encoding: str | None = None) -> list[str]:
    """The registry's ``head``: the columns of the file's schema (its first message)."""
    return schema_of(fi, storage_options).names


def schema_of(fi, storage_options: dict | None) -> pa.Schema:
    """The schema of the Arrow IPC file ``fi`` (the file layout's footer, or a stream's first message)."""
    fs, path = fs_path(fi.url, storage_options)
    with fs.open(path, "rb", block_size=2**16) as f:
        check_not_feather_v1(f, fi.url)
        return _schema(f)


def sniff(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff``: ARROW1 (the file layout), or a stream's first
    message, a schema (the continuation marker, then its length)."""
    if head.data.startswith(FILE_MAGIC):
        return "first bytes are ARROW1, the Arrow IPC file's mark"
    if head.data.startswith(FEATHER_V1 + b"\x00"):   # refused by name where it is read, not read as text
        return "first bytes are FEA1, Feather v1's mark"
    if head.data.startswith(CONTINUATION) and len(head.data) >= 8:
        try:
            (size,) = struct.unpack_from("<i", head.data, 4)
            if 0 < size <= len(head.data) - 8 and _message_kind(head.data[8:8 + size]) == SCHEMA:
                return "starts with an Arrow IPC stream's schema message"
        except struct.error:
            return None
    return None
