"""Input formats and compressions: their names and file extensions, in one place.

The readers (``data.readers``), the planner (``data.sources``), the corpus
writer (``data.synth``), the prediction writer (``runs.predict``) and the
configuration (``config``) all take their lists from here.
"""
from __future__ import annotations

import posixpath

FORMATS = ("csv", "tsv", "jsonl", "parquet", "text", "fasttext")
# Formats read line by line: a byte range of them is a whole number of rows.
LINE_FORMATS = ("csv", "tsv", "jsonl", "text", "fasttext")

# extension -> format
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "text",
    ".ft": "fasttext",
    ".fasttext": "fasttext",
}

# suffix -> fsspec compression name
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
COMPRESSIONS = tuple(COMPRESSION_SUFFIXES.values())


def file_name(url: str) -> str:
    """The last part of a path or URL, without a query string."""
    return posixpath.basename(str(url).split("?", 1)[0].rstrip("/"))


def split_compression(name: str) -> tuple[str, str | None]:
    """``"a.csv.gz"`` → ``("a.csv", "gzip")``; ``("a.csv", None)`` when not compressed."""
    base, ext = posixpath.splitext(name)
    comp = COMPRESSION_SUFFIXES.get(ext.lower())
    return (base, comp) if comp else (name, None)


def format_of(name: str) -> str | None:
    """The format a file name's extension (after any compression suffix) names, or None."""
    base, _ = split_compression(file_name(name))
    return EXTENSIONS.get(posixpath.splitext(base)[1].lower())


# Text encodings (--encoding). A byte range is cut at b"\n" and a CSV/JSON
# parser looks for ASCII quotes and commas, so only encodings that write ASCII
# as ASCII and never use the byte 0x0A inside a character can be read in
# ranges; the others (UTF-16/32, UTF-7, the stateful ISO-2022 and HZ) are
# refused with advice to convert, rather than read whole on one worker.
_STATEFUL = ("utf_7", "iso2022", "hz")
_ASCII_PROBE = "".join(map(chr, range(0x20, 0x7F))) + "\t\r\n"


def text_encoding(name: str | None) -> str | None:
    """``--encoding NAME`` as Python's codec name, or None for UTF-8 (the default,
    also when NAME is a UTF-8 spelling); a UserError for an unknown codec or one
    that cannot be read in byte ranges."""
    import codecs

    from .errors import UserError

    if name is None or not str(name).strip():
        return None
    try:
        info = codecs.lookup(str(name).strip())
    except LookupError:
        raise UserError(f"--encoding {name!r}: no such text encoding",
                        "e.g. --encoding latin-1, cp1252, shift_jis (Python's codec names)") from None
    codec = info.name.replace("-", "_")
    if codec in ("utf_8", "utf_8_sig"):
        return None
    wide = codec.startswith(("utf_16", "utf_32"))
    try:
        ascii_safe = _ASCII_PROBE.encode(info.name) == _ASCII_PROBE.encode("ascii")
    except (UnicodeError, LookupError):
        ascii_safe = False
    if wide or codec.startswith(_STATEFUL) or not ascii_safe:
        raise UserError(f"--encoding {name!r}: files in {info.name} cannot be split into partitions at line ends",
                        f"convert them to UTF-8 first, e.g. iconv -f {info.name} -t UTF-8 IN > OUT")
    return info.name


def to_utf8(data: bytes, encoding: str | None) -> bytes:
    """A block of ``encoding`` text as UTF-8, decoded with Python's codecs in one
    call. Bytes that are not valid in ``encoding`` stay as they were (so they are
    not UTF-8 either, and their lines count as undecodable, as in a UTF-8 file)."""
    if encoding is None or not data or data.isascii():
        return data
    return data.decode(encoding, errors="surrogateescape").encode("utf-8", errors="surrogateescape")
