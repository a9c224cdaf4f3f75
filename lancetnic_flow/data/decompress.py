"""Compressed input read as a stream that tells a whole file from a cut one.

gzip, bz2 and xz (Python's own readers) raise ``EOFError`` when the data
stops before the end-of-stream marker. fsspec reads zstd through
``zstandard``'s ``stream_reader``, which instead ends quietly: a ``.zst``
file cut short (an interrupted upload or copy) read as fewer rows, or as
none, with nothing said. :class:`ZstdFrames` decodes frame by frame and
raises as the others do when the last frame has not ended; frames written
one after another (``cat a.zst b.zst``, pzstd) are read in turn, as
``zstd -d`` reads them.
"""
from __future__ import annotations

import contextlib
import io

from ..errors import UserError
from ..formats import file_name
from ..storage import open_options, url_to_fs

# Compressed bytes decoded at a time: a zstd block of four bytes may stand
# for 128 KiB, so a small input bounds what one step can hand back (at most
# 64 MiB, a default read's size, from 2 KiB); larger steps were no faster.
INPUT_BYTES = 2 * 1024


class ZstdFrames(io.RawIOBase):
    """The decompressed bytes of the zstd frames of the binary stream ``raw``."""

    def __init__(self, raw):
        super().__init__()
        self._raw = raw
        self._frame = None   # the decoder of a frame begun and not yet ended
        self._out = bytearray()
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._out and not self._done:
            self._decode(self._raw.read(INPUT_BYTES))
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        del self._out[:n]
        return n

    def _decode(self, data: bytes) -> None:
        import zstandard

        if not data:
            self._done = True
            if self._frame is not None:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            return
        while data:
            if self._frame is None:
                self._frame = zstandard.ZstdDecompressor().decompressobj()
            try:
                self._out += self._frame.decompress(data)
            except zstandard.ZstdError as exc:
                raise ValueError(f"not a zstd stream ({exc})") from None
            if not self._frame.eof:
                return
            data, self._frame = self._frame.unused_data, None

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def decompressed(raw, compression: str | None):
    """The open binary stream ``raw`` read through ``compression`` (an fsspec
    name, or None for none); reading past a cut-off end raises ``EOFError``."""
    if compression is None:
        return raw
    if compression == "zstd":
        return io.BufferedReader(ZstdFrames(raw))
    from fsspec.compression import compr

    return compr[compression](raw, mode="rb")


@contextlib.contextmanager
def open_decompressed(url: str, compression: str | None, storage_options: dict | None, **open_kw):
    """The file ``url`` opened for reading and decompressed (:func:`decompressed`);
    ``open_kw`` go to the filesystem's ``open`` (``block_size``)."""

    fs, path = url_to_fs(url, **open_options(url, storage_options))
    raw = fs.open(path, "rb", **open_kw)
    stream = raw
    try:
        stream = decompressed(raw, compression)
        yield stream
    finally:
        stream.close()
        raw.close()   # gzip's reader leaves the file it was given open


# The first bytes of compressed data and of binary table files, which no text starts with.
_PACKED = ((b"\x1f\x8b", "gzip", ".gz"), (b"\x28\xb5\x2f\xfd", "zstd", ".zst"), (b"\xfd7zXZ\x00", "xz", ".xz"),
           (b"PK\x03\x04", "zip", None))
_TABLES = ((b"PAR1", "Parquet", "parquet"), (b"ARROW1\x00\x00", "Arrow IPC", "arrow"), (b"FEA1", "Feather v1", None))
# Feather v1 is read by no format here (readers/arrow.py): the way to one that is.
FEATHER_V2 = "convert it to Feather v2, which is Arrow IPC: python -c \"import pyarrow.feather as f; " \
             "f.write_feather(f.read_table('IN.feather'), 'OUT.feather', version=2)\""


def _bz2(head: bytes) -> bool:
    return head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] == b"1AY&SY"


def check_not_packed(head: bytes, url: str, tables: bool = True) -> None:
    """Refuse a file read as text whose start ``head`` is compressed data or
    (``tables``) a Parquet or Arrow file: read as lines it gives binary rows,
    and the encoding advice that would follow (``--encoding latin-1``) trains
    on them."""
    packed = next(((kind, suffix) for magic, kind, suffix in _PACKED if head.startswith(magic)),
                  ("bz2", ".bz2") if _bz2(head) else None)
    if packed is not None:
        kind, suffix = packed
        fix = f"rename it to {file_name(url)}{suffix}, or decompress it" if suffix else "unzip it (.zip is not read)"
        raise UserError(f"{url}: the file holds {kind}-compressed data, not text", fix)
    for magic, kind, fmt in _TABLES if tables else ():
        after = head[len(magic):len(magic) + 1]
        if head.startswith(magic) and after and not (32 <= after[0] < 127 or after in (b"\t", b"\n", b"\r")):
            raise UserError(f"{url}: the file is {kind} data, not text",
                            f"pass {{data.format}} {fmt}, or name it .{fmt}" if fmt else FEATHER_V2)
