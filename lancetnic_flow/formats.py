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
