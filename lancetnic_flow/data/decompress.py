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

from ..storage import open_options

# Compressed bytes decoded at a time: a zstd block of a few bytes may stand
# for 128 KiB, so a small input bounds what one step can hand back.
INPUT_BYTES = 8 * 1024


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
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(url, **open_options(url, storage_options))
    raw = fs.open(path, "rb", **open_kw)
    stream = raw
    try:
        stream = decompressed(raw, compression)
        yield stream
    finally:
        stream.close()
        raw.close()   # gzip's reader leaves the file it was given open
