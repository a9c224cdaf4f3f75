"""The format registry: every file format is one registered :class:`Format`
record (its name, extensions, whether a byte range of it is whole rows, its
reader, the columns it holds and its writer), and compressions by suffix.

Reading (``data.sources`` plans by it, ``data.readers`` and ``data.checks``
call its reader), prediction outputs (``runs.outputs``), ``make-data``
(``data.synth``) and the configuration (``config``) all take their formats
from here; one :func:`register_format` call adds one. Like fsspec's
``known_implementations``, a record names its reader and writer as
``"module:attribute"`` strings, imported when first used, so this core
module stays free of pyarrow and of the layers above it.
"""
from __future__ import annotations

import importlib
import posixpath
import re
import dataclasses
from dataclasses import dataclass

# suffix -> fsspec compression name
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
COMPRESSIONS = tuple(COMPRESSION_SUFFIXES.values())


@dataclass(frozen=True)
class Format:
    """One file format.

    ``reader``: for a format that ``splits_by_bytes`` (its rows are lines, so a
    byte range cut at b"\\n" is whole rows), a ``parse(data, header, fmt,
    columns, url) -> Chunk`` of one block of bytes; for any other, a
    ``read(part, columns, storage_options) -> Chunk`` of one piece (a Parquet
    row group), the file having ``pieces(fs, path)`` of them: a count (piece
    ``i`` is ``Partition.start == i``) or a list of ``(start, length)``, one
    per piece (Arrow IPC: byte ranges of record batches).
    ``columns``: None for a table (any named columns), else the only columns
    it holds (text lines hold ``text``; fastText ``text`` and ``label``).
    ``head``: ``(fi, storage_options, encoding) -> column names`` of a table
    file, for the up-front check. ``writer``: a class ``(sink, schema, fmt)``
    with ``write(table)`` and ``close()``; None when it cannot be written.
    ``header``: the first line names the columns (a range past the start is
    read with it). ``compressible``: may end in a compression suffix (Parquet
    compresses its pages itself). ``holds_line_ends``: a text may hold a line
    end (a quoted CSV field, a JSON string), not so in a line format.
    ``quote``: the quote character of a format whose quoted fields may hold
    raw line ends (CSV, TSV), so that a newline ends a row only outside
    quotes (data/readers/row_ends.py); None where every newline ends one.
    ``cr_ends_lines``: in a format where every newline ends a row, a lone
    ``\\r`` (a classic Mac file's line end) ends one too, and a file is cut
    there as at ``\\n`` (plain text, JSON Lines; fastText reads it as a space).
    ``revision``: raised when the format's reader changes the rows it gives
    for the same bytes, so shard caches made before are not reused.
    ``sniff``: ``(head: Head, fmt) -> str | None``, why the start of a file
    reads as this format ("lines start with __label__"), None when it does
    not; asked for a file whose name does not settle its format.
    ``vague``: its extensions do not settle a file's format (fastText's
    tutorials name their files ``train.txt``), so such a file, and one with
    no extension, is read as the format its start shows, this one when none
    claims it (:func:`sniffed_from`)."""

    name: str
    extensions: tuple[str, ...]
    splits_by_bytes: bool
    reader: str
    columns: tuple[str, ...] | None = None
    writer: str | None = None
    head: str | None = None
    pieces: str | None = None
    header: bool = False
    delimiter: str | None = None
    compressible: bool = True
    holds_line_ends: bool = True
    quote: str | None = None
    cr_ends_lines: bool = False
    revision: int = 0
    title: str = ""
    sniff: str | None = None
    vague: bool = False

    @property
    def shown(self) -> str:
        """The name in messages ("CSV", "Parquet")."""
        return self.title or self.name

    def holds(self, names) -> bool:
        """Whether a file of this format can hold columns ``names``."""
        return self.columns is None or set(names) <= set(self.columns)

    def parse(self):
        return _load(self.reader)

    def pieces_of(self):
        return _load(self.pieces) if self.pieces else None

    def head_columns(self):
        return _load(self.head) if self.head else None

    def sniffer(self):
        return _load(self.sniff) if self.sniff else None

    def open_writer(self, sink, schema):
        """A writer of tables with ``schema`` to the open binary file ``sink``."""
        if self.writer is None:
            from .errors import UserError

            raise UserError(f"the {self.shown} format cannot be written",
                            f"write one of {', '.join(f.extensions[0] for f in writable())}")
        return _load(self.writer)(sink, schema, self)


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, Format] = {}


def register_format(fmt: Format, *, replace: bool = False) -> Format:
    """Add ``fmt`` to the registry: reading, writing and make-data know it from
    then on. Its name and extensions may not be another format's (unless
    ``replace``, for the same name)."""
    exts = tuple(e.lower() for e in fmt.extensions)
    if not fmt.name or not exts or any(not e.startswith(".") or e in COMPRESSION_SUFFIXES for e in exts):
        raise ValueError(f"format {fmt.name!r}: a name and extensions like '.csv' (not a compression suffix)")
    if fmt.name in _REGISTRY and not replace:
        raise ValueError(f"format {fmt.name!r} is registered already")
    for other in _REGISTRY.values():
        taken = set(exts) & set(other.extensions)
        if other.name != fmt.name and taken:
            raise ValueError(f"format {fmt.name!r}: {', '.join(sorted(taken))} belongs to {other.name!r}")
    fmt = dataclasses.replace(fmt, extensions=exts)
    _REGISTRY[fmt.name] = fmt
    return fmt


def unregister_format(name: str) -> None:
    """Remove a format (for tests that register one of their own)."""
    _REGISTRY.pop(name, None)


def registered() -> tuple[Format, ...]:
    """Every registered format, in registration order."""
    return tuple(_REGISTRY.values())


def format_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def writable() -> tuple[Format, ...]:
    return tuple(f for f in _REGISTRY.values() if f.writer is not None)


def extensions() -> dict[str, str]:
    """extension -> format name, for every registered format."""
    return {e: f.name for f in _REGISTRY.values() for e in f.extensions}


def format_named(name: str) -> Format:
    """The registered format ``name``; a UserError naming the known ones."""
    fmt = _REGISTRY.get(name)
    if fmt is None:
        from .errors import UserError, close_matches

        raise UserError(f"unknown format {name!r}{close_matches(str(name), list(_REGISTRY))}",
                        f"use one of: auto, {', '.join(_REGISTRY)}")
    return fmt


def file_name(url: str) -> str:
    """The last part of a path or URL, without a query string. An http(s) URL
    has one after its first ``?``; an object store's only a version
    (``s3://b/a.csv?versionId=…``, as s3fs reads it); elsewhere (a local
    path, a bucket's key ``what?.csv.gz``) a ``?`` is part of the name, and
    its extensions come after it."""
    url = str(url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("http", "https"):
        url = url.split("?", 1)[0]
    elif scheme not in ("", "file", "local"):
        url = _VERSION_QUERY.split(url, 1)[0]
    return posixpath.basename(url.rstrip("/"))


_VERSION_QUERY = re.compile(r"\?(?:versionId|generation)=")


def split_compression(name: str) -> tuple[str, str | None]:
    """``"a.csv.gz"`` → ``("a.csv", "gzip")``; ``("a.csv", None)`` when not compressed."""
    base, ext = posixpath.splitext(name)
    comp = COMPRESSION_SUFFIXES.get(ext.lower())
    return (base, comp) if comp else (name, None)


def extension_of(url: str) -> str:
    """The extension of ``url``'s file name after any compression suffix, lower case ("" for none)."""
    base, _ = split_compression(file_name(url))
    return posixpath.splitext(base)[1].lower()


def format_for_path(url: str) -> tuple[Format | None, str | None]:
    """``(format, compression)`` by the file name's extensions: ``"s3://b/a.CSV.gz"``
    → (the csv format, "gzip"); the format is None for an extension no format has."""
    _, comp = split_compression(file_name(url))
    ext = extension_of(url)
    name = extensions().get(ext)
    return (_REGISTRY[name] if name else None), comp


_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Head:
    """The start of a file as the sniffers read it: ``data``, its first bytes
    (decompressed, no UTF-8 byte-order mark); ``lines``, the non-blank lines
    that end in it, decoded as UTF-8 and stripped; ``cut``, the line the head
    cut short ("" when the file ended); ``names``, the columns the run reads;
    ``delimiter``, the run's ``--delimiter`` (None: CSV's comma); ``url``, the
    file, for a sniffer's refusal."""

    data: bytes
    lines: tuple[str, ...]
    cut: str = ""
    names: tuple[str, ...] = ()
    delimiter: str | None = None
    url: str = ""

    @classmethod
    def of(cls, data: bytes, ended: bool, names=(), delimiter: str | None = None, url: str = "") -> "Head":
        """The head of a file whose first bytes are ``data`` (all of it when ``ended``)."""
        data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        # Replaced, not refused: a file in latin-1 still shows its commas and braces.
        text = data.decode("utf-8", errors="replace")
        # A line ends at \n, \r\n or a lone \r (a classic Mac file), as the CSV readers end a row.
        parts = _LINE_END.split(text)
        whole, cut = (parts[:-1], parts[-1]) if not ended else (parts, "")
        lines = tuple(s for s in (line.strip() for line in whole) if s)
        return cls(data, lines, cut.strip(), tuple(names), delimiter, url)


def sniffed_from(url: str) -> Format | None:
    """The format a file is read as when its start shows no other, for a name
    that does not settle its format: an extension of a ``vague`` format
    (``train.txt``, ``train.txt.gz``) or none (``part-00000``, ``data.gz``).
    None when the extension settles it or names no format (``notes.md``)."""
    ext = extension_of(url)
    if not ext:
        return next((f for f in _REGISTRY.values() if f.vague), None)
    fmt = _REGISTRY.get(extensions().get(ext, ""))
    return fmt if fmt is not None and fmt.vague else None


def sniff(head: Head, fallback: Format) -> tuple[Format, str]:
    """The format ``head`` shows and why: the first registered format whose
    ``sniff`` claims it, else ``fallback`` (a ``vague`` format). A vague
    format's own ``sniff`` is asked last, once no other claims the head: it
    may raise a UserError for a head that it would read wrongly (plain text
    whose lines are delimited fields under a header)."""
    claims = [f for f in _REGISTRY.values() if f.sniff and not f.vague]
    for fmt in claims:
        why = fmt.sniffer()(head, fmt)
        if why:
            return fmt, why
    why = fallback.sniffer()(head, fallback) if fallback.sniff else None
    if why:
        return fallback, why
    if not head.lines and not head.cut:
        return fallback, "start holds no line"
    return fallback, f"start fits none of {', '.join(f.shown for f in claims)}"


def __getattr__(name: str):
    # Derived from the registry when read, so a format registered later is in them.
    if name == "FORMATS":
        return format_names()
    if name == "LINE_FORMATS":
        return tuple(f.name for f in _REGISTRY.values() if f.splits_by_bytes)
    if name == "EXTENSIONS":
        return extensions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_R = "lancetnic_flow.data.readers."
_W = "lancetnic_flow.data.writers:"
for _f in (
    Format("csv", (".csv",), True, _R + "csv:parse_csv", writer=_W + "DelimitedWriter", head=_R + "csv:head_columns",
           header=True, delimiter=",", quote='"', revision=8, title="CSV", sniff=_R + "csv:sniff_header"),
    Format("tsv", (".tsv", ".tab"), True, _R + "csv:parse_csv", writer=_W + "DelimitedWriter",
           head=_R + "csv:head_columns", header=True, delimiter="\t", quote='"', revision=8, title="TSV",
           sniff=_R + "csv:sniff_header"),
    Format("jsonl", (".jsonl", ".ndjson", ".json"), True, _R + "jsonl:parse", writer=_W + "JsonLinesWriter",
           head=_R + "jsonl:head_columns", cr_ends_lines=True, revision=7, title="JSON Lines",
           sniff=_R + "jsonl:sniff"),
    Format("parquet", (".parquet", ".pq"), False, _R + "parquet:read_parquet", writer=_W + "ParquetTableWriter",
           head=_R + "parquet:head_columns", pieces=_R + "parquet:row_groups", compressible=False, revision=2,
           title="Parquet",
           sniff=_R + "parquet:sniff"),
    Format("arrow", (".arrow", ".arrows", ".feather", ".ipc"), False, _R + "arrow:read_arrow", writer=_W + "ArrowFileWriter",
           head=_R + "arrow:head_columns",
           pieces=_R + "arrow:byte_ranges", compressible=False, revision=2, title="Arrow IPC", sniff=_R + "arrow:sniff"),
    Format("text", (".txt",), True, _R + "lines:parse", columns=("text",), writer=_W + "TextLinesWriter",
           holds_line_ends=False, cr_ends_lines=True, revision=3, title="plain text", vague=True,
           sniff=_R + "lines:sniff_text"),
    Format("fasttext", (".ft", ".fasttext"), True, _R + "lines:parse", columns=("text", "label"),
           writer=_W + "FastTextWriter", holds_line_ends=False, revision=4, title="fastText",
           sniff=_R + "lines:sniff_fasttext"),
):
    register_format(_f)
del _f


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
        raise UserError(f"{{data.encoding}} {name!r}: no such text encoding",
                        "e.g. {data.encoding} latin-1, cp1252, shift_jis (Python's codec names)") from None
    codec = info.name.replace("-", "_")
    if codec in ("utf_8", "utf_8_sig"):
        return None
    wide = codec.startswith(("utf_16", "utf_32"))
    try:
        ascii_safe = _ASCII_PROBE.encode(info.name) == _ASCII_PROBE.encode("ascii")
    except (UnicodeError, LookupError):
        ascii_safe = False
    if wide or codec.startswith(_STATEFUL) or not ascii_safe:
        raise UserError(f"{{data.encoding}} {name!r}: files in {info.name} cannot be split into partitions at line ends",
                        f"convert them to UTF-8 first, e.g. iconv -f {info.name} -t UTF-8 IN > OUT")
    return info.name


def csv_delimiter(value: str | None) -> str | None:
    """``--delimiter CHAR`` checked: one character that is no quote, line end or space
    (None, and ``,``, the default, are None: the cache keys of comma files stay theirs)."""
    if value is None or value == ",":
        return None
    named = {"tab": "\t", "\\t": "\t", "semicolon": ";", "pipe": "|"}.get(value, value)
    if len(named) != 1 or named in '"\r\n ' or not named.isprintable() and named != "\t":
        from .errors import UserError

        raise UserError(f"{{data.delimiter}} {value!r}: the separator of a CSV file's fields is one character "
                        "(not a quote, a line end or a space)",
                        "e.g. {data.delimiter} ';' or {data.delimiter} '|' (tab: {data.delimiter} tab, or a .tsv file)")
    return named


def delimited(fmt: Format, delimiter: str | None) -> Format:
    """``fmt`` read with ``--delimiter`` (:func:`csv_delimiter`): a CSV file's fields split
    by it; any other format (TSV's tabs included) as it is."""
    return dataclasses.replace(fmt, delimiter=delimiter) if delimiter and fmt.name == "csv" else fmt


def to_utf8(data: bytes, encoding: str | None) -> bytes:
    """A block of ``encoding`` text as UTF-8, decoded with Python's codecs in one
    call. Bytes that are not valid in ``encoding`` stay as they were (so they are
    not UTF-8 either, and their lines count as undecodable, as in a UTF-8 file)."""
    if encoding is None or not data or data.isascii():
        return data
    return data.decode(encoding, errors="surrogateescape").encode("utf-8", errors="surrogateescape")
