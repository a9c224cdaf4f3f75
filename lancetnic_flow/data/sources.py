"""Input files: from URLs and globs to a plan of byte-range partitions.

Any fsspec protocol works (local paths, ``file://``, ``memory://``, ``s3://``,
``gs://``, ``http(s)://``).  Memory is the product here:

* an uncompressed line-oriented file (CSV, TSV, JSON Lines, text, fastText) is
  split into byte ranges of ``blocksize``; one partition reads exactly one
  range (plus the rest of its last line), so a worker holds one block at a time;
* a compressed file cannot be split by byte range: it is one partition, read
  as a decompressing stream in pieces of about ``chunk_bytes``;
* a Parquet file gives one partition per row group;
* an Arrow IPC file (``.arrow``, a ``datasets`` folder's data files) gives
  byte ranges of whole record batches.

Which of these a file is follows its format's record in the format registry
(:mod:`lancetnic_flow.formats`: ``splits_by_bytes``, ``pieces``). A file's
format is ``--format``'s, else its extension's; a name that does not settle
it (``train.txt``, no extension) gets the format the start of its files shows
(:func:`sniff_formats`), one for all the files of a path or glob.

Reading a partition into Arrow tables is :mod:`lancetnic_flow.data.readers`.
"""
from __future__ import annotations

import difflib

import errno
import hashlib
import json
import os
import posixpath
import re
import shlex
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa
from fsspec.utils import infer_compression

from ..column_roles import WHY_TWICE, named_twice
from ..errors import UserError, close_matches
from ..options import hinted
from ..formats import (COMPRESSIONS, Format, Head, extension_of, extensions, file_name, format_for_path, format_named,
                       format_names, sniff, sniffed_from, split_compression)
from ..storage import NOT_REGULAR_HINT, NotRegularFile, open_options, special_kind, url_to_fs
from .decompress import check_not_packed, open_decompressed
from .local_walk import FollowingFileSystem
from ..plurals import counted, verb

# ---------------------------------------------------------------- data types


@dataclass(frozen=True)
class Columns:
    """Which columns to read.  Several text columns are joined with " ".

    ``multilabel``: the label column is read as a set of labels per row
    (see ``data/readers/labels.py``). ``all_rows`` (prediction): no row is dropped; each gets a ``status``
    ("ok" or why it cannot be used) and the columns in ``keep`` (or every
    column, ``keep_all``) are carried along as ``keep:NAME``."""

    text: tuple[str, ...]
    label: str | None = None
    target: str | None = None
    numeric: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    keep_all: bool = False
    all_rows: bool = False
    # --task multilabel: the label column holds a set of labels per row (a
    # list, a JSON list, fastText tags, or a string split by ``label_sep``).
    multilabel: bool = False
    label_sep: str | None = None
    # --encoding: the files' text encoding as a codec name (formats.text_encoding);
    # None is UTF-8. The readers decode each block to UTF-8 before parsing.
    encoding: str | None = None
    # --delimiter: a CSV file's field separator (None: the format's own, ","); a TSV file's is a tab.
    delimiter: str | None = None
    # Which texts the features read a term from (data/usable.py: "word", "chars N",
    # "visible", with the normalisation): the others are "empty_text".
    text_rule: str = "word"

    def named_twice(self) -> tuple[str, str, str] | None:
        """The first column read in two roles (or twice in one), as
        :func:`~lancetnic_flow.column_roles.named_twice` gives it; None when none is."""
        return named_twice([("text", self.text), ("label", [self.label]), ("target", [self.target]),
                            ("numeric", self.numeric)])

    def refuse_named_twice(self, say: dict[str, str]) -> None:
        """A column read in two roles (or twice in one), or kept twice, is a :class:`UserError`
        naming each role as ``say`` spells it for its reader (``{"text": "--text-column"}``)."""
        kept = next((c for i, c in enumerate(self.keep) if c in self.keep[:i]), None)
        if kept is not None:   # two output columns of one name: the output could not be written
            raise UserError(f"{say.get('keep', '--keep')} names the column {kept!r} twice", "name each column once")
        twice = self.named_twice()
        if twice:
            col, first, again = twice
            roles = f"{say[first]} twice" if first == again else f"both {say[first]} and {say[again]}"
            raise UserError(f"the column {col!r} is {roles}: {WHY_TWICE[first, again]}",
                            "name each column once, in one role")

    def names(self) -> list[str]:
        out: list[str] = []
        for n in (*self.text, self.label, self.target, *self.numeric, *self.keep):
            if n is not None and n not in out:
                out.append(n)
        return out

    def read_names(self, have: list[str]) -> list[str]:
        """The columns to read from a file whose columns are ``have``."""
        return self.names() + [n for n in have if n not in self.names()] if self.keep_all else self.names()

    def kept(self, have: list[str]) -> list[str]:
        """The input columns carried into the output, in order."""
        return list(have) if self.keep_all else list(self.keep)


@dataclass(frozen=True)
class FileInfo:
    url: str
    size: int
    version: str
    format: str
    compression: str | None


@dataclass(frozen=True)
class Partition:
    index: int
    file: FileInfo
    start: int  # byte offset; for parquet: row-group index
    length: int  # bytes; -1 = whole file (compressed file, parquet row group, dictionary-encoded Arrow IPC)


@dataclass(frozen=True)
class Sniffed:
    """The format the files of one input were given by their start, their names
    not settling it: ``file``'s ``reason`` ("lines start with __label__")
    decided for the ``files`` files of ``input`` (a path, glob or folder as
    given). ``named``: the format the extension alone names (text for
    ``.txt``), None for a file without one."""

    input: str
    file: str
    files: int
    format: str
    reason: str
    named: str | None

    @property
    def news(self) -> bool:
        """Whether the files are read otherwise than their names alone would have it (worth a line)."""
        return self.format != self.named

    def message(self) -> str:
        """``format fasttext: data/train.txt's lines start with __label__ (--format text reads it as plain text)``"""
        it = "it" if self.files == 1 else "them"
        who = f"{self.input}'s" if self.files == 1 and _same_file(self.input, self.file) else \
            f"{self.input} ({self.files} file{'s' * (self.files > 1)}): {file_name(self.file)}'s"
        other = (f"--format {self.named} reads {it} as {format_named(self.named).shown}" if self.named
                 else f"--format NAME reads {it} as another format")
        return f"format {self.format}: {who} {self.reason} ({other})"


@dataclass
class SourcePlan:
    files: list[FileInfo]
    partitions: list[Partition]
    warnings: list[str] = field(default_factory=list)
    # The inputs whose format their files' start decided (their names did not).
    sniffed: list[Sniffed] = field(default_factory=list)
    # What opens the files, for a file whose store gives no change token (its content is hashed).
    storage_options: dict = field(default_factory=dict, repr=False, compare=False)
    digests: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # What each file's head says its columns hold (URL → schema, None for a line format or an
    # empty file), as the column check read it (data/heads.py), for the checks that judge from it.
    heads: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def fingerprint(self) -> str:
        """Identity of the input data (not of its partitioning): each file's URL, size,
        change token, format and compression; a file whose store gives no change token
        counts by a hash of its content (data/content_digest.py), computed once."""
        return hashlib.sha256(json.dumps(self.file_rows()).encode()).hexdigest()

    def file_rows(self) -> list[list]:
        """What the fingerprint hashes, file by file and sorted: URL, size, change token (or
        content digest), format and compression. A checkpoint keeps them, so that a resume
        refused for changed data names the file that changed."""
        return sorted([f.url, f.size, f.version or self._digest(f), f.format, f.compression or ""]
                      for f in self.files)

    def _digest(self, f: FileInfo) -> str:
        if f.url not in self.digests:
            from .content_digest import content_digest

            try:
                self.digests[f.url] = content_digest(f.url, self.storage_options) if f.size else ""
            except Exception as exc:  # noqa: BLE001 - the store's errors, said as reading it says them
                raise open_error(f.url, exc) from exc
        return self.digests[f.url]


@dataclass
class Chunk:
    table: pa.Table
    rows_read: int
    skipped: dict[str, int]
    # Rows kept but read differently from what the file holds, by reason
    # ("repeated_label": a label set naming a label twice, kept once).
    noted: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- errors


# An address in a message (a URL, a host:port, an IP) is not evidence of what
# went wrong: port 40329 holds "403", a bucket may be named "timeout-logs".
_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://\S*|\S+:\d{2,5}\b|\b\d{1,3}(?:\.\d{1,3}){3}\b", re.I)
_UNREACHABLE = {errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNABORTED}


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status a failure carries (aiohttp's ``status``, botocore's
    response metadata), or None."""
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return status
    meta = (getattr(exc, "response", None) or {})
    if isinstance(meta, dict):
        code = meta.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(code, int):
            return code
    return None


def open_error(url: str, exc: BaseException) -> UserError:
    """Translate an fsspec / botocore / aiohttp failure into a UserError.

    The exception's type, errno and HTTP status decide first; words of its
    message (with every address in it removed) only where those say nothing."""
    name = type(exc).__name__
    text = str(exc) or name
    low = _ADDRESS.sub(" ", f"{name} {text}").lower()
    status = _http_status(exc)
    code = exc.errno if isinstance(exc, OSError) else None
    said = re.compile(r"\b(403|404)\b").findall(low)

    def not_found() -> UserError:
        return UserError(f"{url}: not found ({text})", "check the path, the bucket name and the spelling")

    def denied() -> UserError:
        return UserError(f"{url}: access denied ({text})",
                         "check the credentials and that they may read this location")

    def late() -> UserError:
        slow = ("; a slow server may need a longer {data.storage_options} client_kwargs.timeout=SECONDS"
                if url.lower().startswith(("http://", "https://")) else "")
        return UserError(f"{url}: the server did not answer in time ({text})",
                         f"check the URL and the network{slow}")

    def unreachable() -> UserError:
        return UserError(f"{url}: cannot reach the server ({text})",
                         "check the URL, the network and the endpoint in storage options")

    if isinstance(exc, NotADirectoryError):
        return UserError(f"{url}: not found: a part of the path is a file, not a folder ({text})",
                         "check the path")
    if isinstance(exc, IsADirectoryError):
        return UserError(f"{url}: is a folder, not a file ({text})",
                         "point at the files in it, or at the folder itself to read every file in it")
    if code == errno.ELOOP:
        return UserError(f"{url}: a symbolic link loop ({text})",
                         "check where the link points")
    if isinstance(exc, FileNotFoundError) or status == 404:
        return not_found()
    if "credential" in low or "signature" in low or "invalidaccesskeyid" in low:
        return UserError(f"{url}: no usable credentials ({text})",
                         "set the credentials (e.g. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
                         "or a profile) or pass them in storage options")
    if isinstance(exc, PermissionError) or status == 403:
        return denied()
    if isinstance(exc, TimeoutError) or code == errno.ETIMEDOUT:
        return late()
    if isinstance(exc, ConnectionError) or code in _UNREACHABLE:
        return unreachable()
    if "nosuchbucket" in low or "nosuchkey" in low or "404" in said or "not found" in low:
        return not_found()
    if "accessdenied" in low or "403" in said or "forbidden" in low:
        return denied()
    if "timeout" in low or "timed out" in low:
        return late()
    if "connect" in low or "resolve" in low or "unreachable" in low:
        return unreachable()
    return UserError(f"{url}: cannot read ({name}: {text})",
                     "check the URL, its access rights and the storage options")


def missing_column_error(url: str, missing: str, have: list[str], columns: Columns | None = None, *,
                         note: str = "", hint: Any = None) -> UserError:
    """A file without a column the run reads; with ``columns``, the hint names the option that
    reads it and a column of the file to give it (where the user left the default `text`), as
    each reader names it. ``note``: what the message adds; ``hint``: another hint (options as
    ``{section.field}``, or a function of options.Words), where the file's form says more than its columns.
    A column named only by a folder of the path (``label=sports/``, a Hive partition) is said to be there."""
    folder = re.search(rf"/{re.escape(missing)}=([^/]*)/", url)
    if folder and not note and not hint:   # pandas and pyarrow.dataset read it as a column; the readers here do not
        note = (f" ({missing}={folder.group(1)} is a folder of its path: a Hive partition, which is read as no "
                "column)")
        hint = (f"write {missing} into the files as a column (pyarrow.dataset.dataset(FOLDER, partitioning='hive') "
                "reads it so), then read those files")
    return hinted(f"{url}: no column {missing!r}{close_matches(missing, have)}; "
                  f"the file has columns: {', '.join(repr(h) for h in have) or '(none)'}{note}",
                  hint or (column_hint(missing, have, columns) if columns is not None
                           else "pass column names that exist in the file"))


def column_hint(missing: str, have: list[str], columns: Columns) -> Any:
    """``pass --text review``: the option naming ``missing``, and the file's closest column
    (else its first one no other option reads); a training option's as a function of
    :class:`~lancetnic_flow.options.Words` (``text='review'`` in Python)."""
    if columns.all_rows and missing in columns.numeric:   # prediction: the run's own, no option names it
        return f"the run was trained with --numeric {missing}: predict reads that column from each input"
    # A training option in the caller's words; prediction's own flags as they are.
    field = (("--text-column" if columns.all_rows else "data.text") if missing in columns.text else
             "data.label" if missing == columns.label else "data.target" if missing == columns.target else
             "data.numeric" if missing in columns.numeric else "--keep")
    near = difflib.get_close_matches(missing, have, n=1, cutoff=0.5)
    free = near or likely_columns([h for h in have if h not in columns.names()], field)
    if field.startswith("--"):
        return f"pass {field} the name of the file's column that holds it" + (f", e.g. {field} {shlex.quote(free[0])}" if free else "")
    return lambda say: (f"pass {say(field)} the name of the file's column that holds it"
                        + (f", e.g. {say.setting(field, free[0])}" if free else ""))


# Words in a column's name that say what it holds, by the option a hint offers it to.
ROLE_WORDS = {
    "text": ("text", "review", "body", "content", "comment", "sentence", "message", "title", "description",
             "tweet", "document", "abstract", "summary", "question", "query", "utterance", "headline"),
    "label": ("label", "sentiment", "category", "class", "topic", "tag", "intent", "genre", "rating", "stars"),
    "target": ("target", "score", "rating", "price", "value", "stars", "amount"),
}
# A row's identifier: never what a hint offers as text, label or target.
ID_NAME = re.compile(r"(?i)(.*[_\s-])?(u?id|idx|index|key|row|unnamed:?\s*\d*)")


def likely_columns(free: list[str], field: str) -> list[str]:
    """``free`` (the file's columns no option reads) ordered for the hint of ``field``: a name
    that says the role first (``review`` for text, ``sentiment`` for a label), a row's
    identifier (``id``, ``user_id``, ``Unnamed: 0``) never, as its values would train as text
    or as a class a row; ``--keep`` carries any column, an identifier most of all."""
    if field == "--keep":
        return free
    words = ROLE_WORDS.get(field.rsplit(".", 1)[-1].removeprefix("--").removesuffix("-column"), ())
    fitting = [h for h in free if not ID_NAME.fullmatch(h.strip())]
    return sorted(fitting, key=lambda h: not any(w in h.lower() for w in words))


# ---------------------------------------------------------------- planning


def _compression_of(name: str) -> tuple[str, str | None]:
    base, comp = split_compression(name)
    other = infer_compression(name) if comp is None else None
    if other is not None:
        raise UserError(
            f"{name}: compression {other!r} is not supported",
            f"use one of {', '.join(COMPRESSIONS)} (.gz .bz2 .xz .zst) or uncompressed files",
        )
    return base, comp


def _data_files(urls: Sequence[str], so: dict, format: str, once: bool = False
                ) -> tuple[dict[str, tuple[dict, object, str]], list[str], list[str]]:
    """Every file ``urls`` name (its info, filesystem and the input that named
    it), in the order they are named; those left out of a folder or glob
    because their extension names no format (a README in a data folder); and
    what was said of the links among them (:class:`_Links`).
    ``once``: a file two inputs name is refused (prediction writes a row per
    input row), not read once."""
    seen: dict[str, tuple[dict, object, str]] = {}
    named: set[str] = set()
    by_input: dict[str, list[str]] = {}
    links = _Links()
    for url in map(_own_path, urls):
        for full, info, fs in _expand(url, so, links.unfollowed):
            if links.left_out(full, info, url, seen, once):
                continue
            if full in seen and once:
                raise UserError(f"{full} is named twice (by {seen[full][2]} and {url}), and prediction writes one "
                                "row for each input row", "name each file once")
            if full not in seen:
                seen[full] = (info, fs, url)
                by_input.setdefault(url, []).append(full)
            if not any(c in url for c in "*?[") and _same_file(url, full):
                named.add(full)
    # A folder of part-00000 files (Spark, Hadoop) has no name with a data extension:
    # their starts say what they are. Beside data files, a file without one is a README.
    keep = named | {f for files in by_input.values() if not any(map(_known, files)) for f in files if sniffed_from(f)}
    unknown = [f for f in sorted(seen) if format == "auto" and f not in keep and not _known(f)]
    for f in unknown:
        del seen[f]
    _refuse_special(seen)
    if not seen:
        shown = ", ".join(posixpath.basename(f) for f in unknown[:5])
        raise UserError(f"no data files in {', '.join(urls)}: none of {shown} has a data extension",
                        f"name files with one of {', '.join(sorted(extensions()))}, or pass {{data.format}}")
    return seen, unknown, links.notes()


def _local(full: str) -> str:
    return full.split("file://", 1)[-1]


class _Links:
    """Symbolic links among the files found: one to a file already found is the same rows by
    another name (``latest.csv`` beside the file it points at, a linked folder's files beside
    the folder's own), read once and said; a link back to a folder it lies in is not followed
    (data/local_walk.py), and said."""

    def __init__(self) -> None:
        self.files: dict[tuple[int, int], str] = {}
        self.again: list[tuple[str, str]] = []   # (a file's other name, the name it is read by)
        self.unfollowed: list[str] = []   # what a local listing did not go into: a link cycle, a folder it may not list

    def notes(self) -> list[str]:
        """What was said: the folders not gone into, then the files read once, by folder when they are several."""
        by_folder: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for full, first in self.again:
            by_folder.setdefault((posixpath.dirname(full), posixpath.dirname(first)), []).append((full, first))
        out = list(self.unfollowed)
        for (folder, other), pairs in by_folder.items():
            if len(pairs) == 1 or folder == other:   # a link beside its target, hard links: each named
                out += [f"Read once: {_local(full)} is {_local(first)} by another name (a symbolic or hard link)."
                        for full, first in pairs]
                continue
            out.append(f"Read once: the {len(pairs)} files found in {_local(folder)} are those of "
                       f"{_local(other)} by other names (a symbolic link to a folder, or hard links).")
        return out

    def left_out(self, full: str, info: dict, url: str, seen: dict, once: bool) -> bool:
        """Whether ``full`` (found by ``url``) is left out: a file found before by another name."""
        if not full.startswith("file://") or info.get("type", "file") != "file":
            return False
        try:
            st = os.stat(full[len("file://"):])
        except OSError:
            return False
        first = self.files.setdefault((st.st_dev, st.st_ino), full)
        if first == full:
            return False
        if once and seen[first][2] != url:
            raise UserError(f"{full} is {first} by another name (named by {seen[first][2]} and {url}), and "
                            "prediction writes one row for each input row", "name each file once")
        self.again.append((full, first))
        return True


# Paths that name a file by this process's open descriptors (/dev/stdin, bash's <(...)): a
# Dask worker opening one opens its own stdin or descriptor, not this process's file.
PROCESS_PATHS = re.compile(r"/dev/(stdin|fd/\d+)|/proc/(self|\d+)/fd/\d+")


def _own_path(url: str) -> str:
    """``url``, or for a local path naming a regular file by this process's descriptors
    (``train /dev/stdin < data.csv``) that file's own path, which every worker opens alike."""
    path = url[len("file://"):] if url.startswith("file://") else url
    if "://" in path or not PROCESS_PATHS.fullmatch(os.path.abspath(path)):
        return url
    real = os.path.realpath(path)
    try:
        here, there = os.stat(path), os.stat(real)
    except OSError:   # a pipe's target ("pipe:[123]") or a deleted file: said as what it is, later
        return url
    return real if stat.S_ISREG(here.st_mode) and os.path.samestat(here, there) else url


def _followed(fs: Any, p: str, info: dict) -> dict:
    """A local folder's or glob's entry that is a symbolic link (fsspec lists it as
    "other", and it was left out unseen: a linked CSV's rows were not read) as what it
    points at, with the target's size and time; a link to nothing stays "other"."""
    try:
        return fs.info(p)
    except OSError:
        return {**info, "broken_link": True}


def _refuse_special(seen: dict[str, tuple[dict, object, str]]) -> None:
    """Refuse a data file that is no regular file (a pipe, a device, a socket, a link
    to nothing): it was left out unseen, or said to match no file."""
    for full, (info, _, url) in seen.items():
        if info.get("type", "file") == "file":
            continue
        named = "" if _same_file(url, full) else f" (found in {url})"
        shown = (url if not named else full.split("file://", 1)[-1]) + named
        if info.get("broken_link"):
            raise UserError(f"{shown} is a symbolic link to a missing file ({info.get('destination')})",
                            "point the link at the file, or move it out of the data")
        kind = special_kind(full) or "not a regular file"
        raise NotRegularFile(f"{shown} is {kind}, not a regular file: the data is read more than once (its "
                             "start to learn its format, then its rows, in training each epoch) and by several "
                             "worker processes, each from a byte offset, which a pipe or device cannot give",
                             NOT_REGULAR_HINT + ("; or move it out of the folder" if named else ""))


def _same_file(url: str, full: str) -> bool:
    """Whether ``full`` is the file ``url`` names itself (not one found in a folder)."""
    return full.rstrip("/").endswith(url.rstrip("/").split("://", 1)[-1].lstrip("./"))


def _known(full: str) -> bool:
    return format_for_path(full)[0] is not None


# How much of a file's start (decompressed) shows its format when its name does not.
SNIFF_BYTES = 8 * 1024
# Starts read at once while sniffing many files (remote stores answer in parallel).
SNIFF_THREADS = 16


def sniff_formats(seen: dict[str, tuple], storage_options: dict, names: Sequence[str] = (),
                  delimiter: str | None = None) -> tuple[dict[str, Format], list[Sniffed]]:
    """The format of every file of ``seen`` (url → (info, fs, input)) whose name
    does not settle it (:func:`~lancetnic_flow.formats.sniffed_from`), from
    the first :data:`SNIFF_BYTES` of each; ``names``: the columns the run reads
    (a first line naming one is a header); ``delimiter``: the run's ``--delimiter``
    (a CSV header is split by it). One format for all such files of an
    input: a UserError naming two files when their starts disagree."""
    groups: dict[str, list[str]] = {}
    for full, (_, _, url) in sorted(seen.items()):
        if sniffed_from(full) is not None:
            groups.setdefault(url, []).append(full)
    todo = [f for files in groups.values() for f in files if int(seen[f][0].get("size") or 0)]
    found: dict[str, tuple[Format, str]] = {}
    if todo:
        with ThreadPoolExecutor(min(SNIFF_THREADS, len(todo)), thread_name_prefix="lancetnic-sniff") as pool:
            found = dict(zip(todo, pool.map(lambda f: _sniff_file(f, storage_options, tuple(names), delimiter), todo)))
    out: dict[str, Format] = {}
    decided: list[Sniffed] = []
    for url, files in groups.items():
        read = [f for f in files if f in found]
        if not read:   # empty files: nothing to read, whatever their format
            out.update({f: sniffed_from(f) for f in files})
            continue
        fmt, why = found[read[0]]
        other = next((f for f in read if found[f][0] is not fmt), None)
        if other is not None:
            raise UserError(f"{url}: its files hold different formats: {read[0]} reads as {fmt.name} (its {why}), "
                            f"{other} as {found[other][0].name} (its {found[other][1]})",
                            "pass {data.format} NAME to read them all as one format, or give the files of each "
                            "format as a path or glob of their own")
        out.update(dict.fromkeys(files, fmt))
        ext = format_for_path(read[0])[0]
        decided.append(Sniffed(url, read[0], len(files), fmt.name, why, ext.name if ext else None))
    return out, decided


def _sniff_file(full: str, so: dict, names: tuple[str, ...], delimiter: str | None) -> tuple[Format, str]:
    _, comp = _compression_of(file_name(full))
    try:
        # A small block: a remote store sends the start, not its default read-ahead of megabytes.
        with open_decompressed(full, comp, so, block_size=SNIFF_BYTES) as f:
            data = f.read(SNIFF_BYTES + 1)
        if comp is None:   # a compressed file without its suffix is no text to sniff
            check_not_packed(data, full, tables=False)
    except (EOFError, ValueError) as exc:   # a start shorter than its header, or not compressed
        raise UserError(f"{full}: the {comp} stream is corrupt, truncated or unreadable ({exc})",
                        "check the file, or recompress it") from exc
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated for the user
        raise open_error(full, exc) from exc
    return sniff(Head.of(data[:SNIFF_BYTES], len(data) <= SNIFF_BYTES, names, delimiter, full), sniffed_from(full))


def _infer_format(url: str) -> Format:
    fmt, _ = format_for_path(url)
    if fmt is not None:
        return fmt
    raise UserError(
        f"{url}: cannot tell the format from the extension {extension_of(url) or '(none)'!r}",
        f"pass {{data.format}} with one of {', '.join(format_names())}",
    )


def _pieces(fmt: Format, fs, full: str) -> list[tuple[int, int]]:
    """The partitions of a file of a format that is not split by bytes, as
    (start, length): a Parquet file's row groups (index, -1), an Arrow IPC
    file's byte ranges of record batches."""
    try:
        pieces = fmt.pieces_of()(fs, fs._strip_protocol(full))
        return [(g, -1) for g in range(pieces)] if isinstance(pieces, int) else list(pieces)
    except UserError:
        raise
    except pa.ArrowInvalid as exc:
        raise UserError(f"{full}: not a valid {fmt.shown} file ({exc})",
                        "check the file, or pass {data.format}") from exc
    except Exception as exc:  # noqa: BLE001
        raise open_error(full, exc) from exc


def _version(info: dict) -> str:
    parts = []
    for key in ("ETag", "etag", "LastModified", "Last-Modified", "last_modified",
                "mtime", "created", "generation", "md5Hash", "updated", "VersionId"):
        v = info.get(key)
        if v not in (None, ""):
            parts.append(f"{key}={v}")
    return ";".join(parts)


def hint_for_missing(fs, path: str) -> str:
    """'check the path' plus what the nearest existing parent folder holds."""
    target = path.rstrip("/")
    parent = posixpath.dirname(target)
    missing_parent = None
    for _ in range(4):  # walk up a few levels to a folder that can be listed
        try:
            names = sorted(posixpath.basename(p.rstrip("/"))
                           for p in fs.ls(parent, detail=False))
            break
        except Exception:  # noqa: BLE001 - only a hint
            missing_parent = parent
            if parent in ("", "/") or posixpath.dirname(parent) == parent:
                return f"check the path; {parent or 'the root'} could not be listed"
            target, parent = parent, posixpath.dirname(parent)
    else:
        return "check the path and the bucket/folder names"
    where = parent or "the root"
    gone = f"{missing_parent} does not exist; " if missing_parent else ""
    base = posixpath.basename(target)
    if not missing_parent and base in names:  # listed, yet it cannot be opened
        return f"{target} is listed in {where} but cannot be opened (a symbolic link to a missing file?)"
    # Hidden entries (.cache, _SUCCESS) are what a folder's reading passes over: not what a typo meant.
    names = [n for n in names if not n.startswith((".", "_")) or base.startswith((".", "_"))] or names
    if not names:
        return f"check the path; {gone}{where} is empty"
    shown = ", ".join(names[:10]) + (f", ... ({len(names)} entries)" if len(names) > 10 else "")
    return f"check the path{close_matches(base, names)}; {gone}{where} contains: {shown}"


def _expand(url: str, storage_options: dict, unfollowed: list[str] | None = None) -> list[tuple[str, dict, object]]:
    """One URL or glob -> [(full url, info, fs)] of files, sorted; ``unfollowed`` gets what is said
    of the folders a local folder or glob found and did not go into (a link cycle, no permission)."""
    try:
        fs, path = url_to_fs(url, **open_options(url, storage_options))
    except UserError:
        raise
    except (ValueError, ImportError) as exc:
        raise UserError(f"{url}: cannot open this kind of URL ({exc})",
                        "check the protocol and install its fsspec package "
                        "(s3fs, gcsfs, aiohttp)") from exc
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    # A store's client keeps the listings this process made (s3fs, gcsfs): planned again, the
    # files would be as they were then, an object rewritten since with its old ETag (the old
    # cache entry reused) and one added since not at all. A plan lists afresh.
    fs.invalidate_cache()
    if protocol == "file":   # through links to folders, as Python's glob and pandas go (data/local_walk.py)
        fs = FollowingFileSystem(**fs.storage_options)
    explicit = globbed = False
    folders: list[str] = []   # folders a glob matched beside files, not read
    try:
        if protocol not in ("http", "https") and any(c in path for c in "*?[") and not _names_a_file(fs, path):
            (found, folders), globbed = _glob(fs, path), True
            if not found and not _unfollowed(fs):
                raise UserError(f"no files match {url}", hint_for_missing(fs, path))
        else:
            try:
                info = fs.info(path)
            except FileNotFoundError as exc:
                cause = exc.__cause__ or exc.__context__
                if protocol in ("http", "https") and cause is not None \
                        and not isinstance(cause, FileNotFoundError) \
                        and "404" not in str(cause):
                    raise open_error(url, cause) from exc
                if protocol in ("http", "https"):
                    raise UserError(f"{url}: not found on the server (HTTP 404)",
                                    "check the URL") from exc
                raise UserError(f"{url}: no such file or folder", hint_for_missing(fs, path))
            if info.get("type") == "directory":
                found = fs.find(path, detail=True)
                if not found and not _unfollowed(fs):
                    raise UserError(f"{url}: the folder is empty",
                                    "point at a folder with data files, or at the files")
            else:
                found = {path: info}
                explicit = True
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated for the user
        raise open_error(url, exc) from exc
    if not explicit:
        _refuse_table_logs(url, found, fs if globbed else None)
    out = []
    own = _own_outputs(found, fs, globbed) if not explicit else set()
    metadata = _datasets_metadata(url, found) if not explicit else set()
    unlisted = _datasets_unlisted(fs, metadata) if metadata else set()
    root = path.rstrip("/")
    for p, info in found.items():
        if info.get("type") == "other" and protocol == "file":
            info = _followed(fs, p, info)
        if info.get("type") == "directory" or p.endswith("/"):
            continue   # a folder; a key ending in "/" is an object store's folder marker (a console's "Create folder")
        if not explicit and _hidden(p, root):
            continue  # hidden files and folders, _SUCCESS, .crc, .cache/ and friends
        if any(p.startswith(d + "/") for d in own):
            continue  # lancetnic_flow's own run folders and shard caches are never data
        if p in metadata:
            continue  # a datasets folder's state.json and dataset_info.json describe its .arrow files
        if p in unlisted:
            continue  # a cache file datasets wrote beside the data (map, filter): a copy, or row indices
        out.append((p if protocol in ("http", "https") else fs.unstrip_protocol(p), info, fs))
    said = _not_gone_into(fs, url, folders, lambda p: explicit or not _hidden(p, root))
    if not out:
        raise UserError(f"no files match {url}" + "".join(f"; {s}" for s in said),
                        "name the files, or a folder that holds them" if said else hint_for_missing(fs, path))
    if unfollowed is not None:
        unfollowed += said
    return sorted(out, key=lambda t: t[0])


def _not_gone_into(fs: Any, url: str, folders: list[str], shown) -> list[str]:
    """What is said of the folders the listing of ``url`` found and did not go into, those ``shown``
    passes (not hidden): a link cycle, one it may not list, ``folders`` a glob matched beside files."""
    said = _cycles_said(getattr(fs, "cycles", ()), shown)
    said += [f"Not read: {folder} cannot be listed (permission denied); its files are left out."
             for folder in getattr(fs, "unreadable", ()) if shown(folder)]
    folders = [_local(fs.unstrip_protocol(d)) for d in folders if shown(d)]
    if folders:
        said.append(f"Not read: the folder{'s' * (len(folders) > 1)} {', '.join(folders[:5])}"
                    f"{f' and {len(folders) - 5} more' if len(folders) > 5 else ''} that {url} matches beside files: "
                    f"a glob reads the files it matches (name the folders, or add /** to read their files).")
    return said


def _glob(fs: Any, path: str) -> tuple[dict, list[str]]:
    """What the glob ``path`` matches, read as the shell's expansion of it would be: folders
    alone (``data/date=2024-*``, Hive partitions) are read as folders, where a glob matching no
    file said "no files match"; and the folders it matches beside files, which are not read."""
    found = fs.glob(path, detail=True)
    folders = sorted(p for p, info in found.items() if info.get("type") == "directory")
    if not folders:
        return found, []
    if len(folders) == len(found):
        return {**found, **fs.glob(path.rstrip("/") + "/**", detail=True)}, []
    if "**" in path.split("/"):   # it matched what the folders hold, an empty one aside
        return found, []
    held = {d for p, info in found.items() if info.get("type") != "directory" for d in _parents(p)}
    return found, [d for d in folders if d.rstrip("/") not in held]


def _parents(p: str) -> list[str]:
    parts = p.rstrip("/").split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _unfollowed(fs: Any) -> bool:
    """Whether a local listing (data/local_walk.py) left a folder it found unlisted."""
    return bool(getattr(fs, "cycles", None) or getattr(fs, "unreadable", None))


def _cycles_said(cycles, shown) -> list[str]:
    """The links to folders a local listing did not follow (data/local_walk.py), those ``shown`` passes;
    one link reached by two names (``data/real/up`` and ``data/sub/up``) said once."""
    out, links = [], set()
    for link, above in cycles:
        try:
            st = os.lstat(link)
        except OSError:
            continue
        if shown(link) and (st.st_dev, st.st_ino) not in links:
            links.add((st.st_dev, st.st_ino))
            out.append(f"Not followed: {link} is {above} again, a folder it lies in (a symbolic link makes a cycle).")
    return out


# Table formats whose folder keeps the data files of every version beside a log naming the current
# ones: every file read is rows the table may have deleted or rewritten since.
TABLE_LOGS = {"_delta_log": "a Delta Lake table", ".hoodie": "an Apache Hudi table"}
# A glob's folders looked into for a table's log; past this many, only the folder holding them all.
TABLE_LOG_LOOKS = 32


def _refuse_table_logs(url: str, found: dict, fs: Any = None) -> None:
    """Refuse a folder or glob that lists a Delta Lake or Hudi table's log;
    ``fs``, for a glob (``table/*.parquet`` lists no log): the folders of the
    files it found are looked into."""
    paths = list(found)
    if fs is not None:
        folders = sorted({posixpath.dirname(p.rstrip("/")) for p in found})
        # the folder holding them all (a partitioned table's log is above its partitions), and each
        # one unless they are many: a look each would cost minutes on an object store
        folders = sorted({posixpath.commonpath(folders), *(folders if len(folders) <= TABLE_LOG_LOOKS else ())})
        for folder in folders:
            paths += [f"{folder}/{log}/" for log in TABLE_LOGS if fs.exists(f"{folder}/{log}")]
    for p in paths:
        for part in p.split("/"):
            if part in TABLE_LOGS:
                raise UserError(f"{url}: {TABLE_LOGS[part]} ({part}/ in {p.split('/' + part)[0]}): its folder "
                                f"holds the files of every version, rows deleted or rewritten since included",
                                "write the version to train on as files of their own (e.g. deltalake's "
                                "DeltaTable(path).to_pyarrow_table() saved with pyarrow.parquet.write_table) "
                                "and point at those")


def _hidden(p: str, path: str) -> bool:
    """Whether ``p``, found under the folder or glob ``path``, is a hidden file
    or lies in a hidden folder (a name starting with ``.`` or ``_``) that no
    part of ``path`` names as such. A glob's wildcards pass over them as
    Python's ``glob`` does: ``data/**/*.csv`` never reads the copies in
    ``data/.ipynb_checkpoints/`` or Spark's ``_temporary/``, while
    ``data/_staging/*.csv`` and ``data/.x*`` read what they name."""
    parts = path.split("/")
    cut = next((i for i, c in enumerate(parts) if any(ch in c for ch in "*?[")), len(parts))
    root, pattern = "/".join(parts[:cut]), parts[cut:]
    rel = p[len(root) + 1:].split("/") if p.startswith(root + "/") else [posixpath.basename(p.rstrip("/"))]
    if "**" not in pattern and len(pattern) == len(rel):
        return any(part.startswith((".", "_")) and not pat.startswith(part[0]) for part, pat in zip(rel, pattern))
    return any(part.startswith((".", "_")) and not any(pat.startswith(part[0]) for pat in pattern) for part in rel)


def _names_a_file(fs, path: str) -> bool:
    """Whether ``path`` is the name of a file or folder as written: one whose name
    holds glob characters (``scores[1].csv``, a folder ``data[1]``) is that file
    or folder, as pandas and pyarrow read it, never what the pattern matches
    (``scores1.csv``, or none)."""
    try:
        return fs.info(path).get("type") in ("file", "directory")
    except Exception:  # noqa: BLE001 - not a file by that name: a pattern
        return False


# The files that mark a folder as lancetnic_flow's own output: a run folder, a shard-cache entry.
# A cache entry before its manifest is written holds features.json beside its lock (.lock, or .lease on S3).
OWN_MARKERS = ({"model.json", "config.json"}, {"config.json", "checkpoint.safetensors"}, {"manifest.json", "features.json"},
               {"features.json", ".lock"}, {"features.json", ".lease"})
# A run folder before its first checkpoint holds config.json alone: empty while the run claims the
# folder, then stamped (runs/folder.py's write_config). Its JSON was read as the data's JSON Lines.
RUN_STAMP = b'"written_by": "lancetnic_flow'


# A trainer's writer lock in its run folder (runs/run_lock.py): there from the claim, beside config.json.
RUN_LOCK_FILES = {".lock", ".lease"}
# Files of a run folder or a cache entry that a glob for data files may match (`**/*.csv`, `*/*.json`).
OWN_FILES = {"history.csv", "per_class.csv", "per_label.csv", "top_terms.csv", "metrics.json", "config.json",
             "model.json", "features.json", "manifest.json", "bucket_names.json"}


def _own_outputs(found: dict, fs: Any = None, globbed: bool = False) -> set[str]:
    """Folders among ``found`` that are run folders (finished or not) or shard-cache
    entries. For a glob (``globbed``), what it found may be a run's tables without
    the files that mark the run (``**/*.csv`` finds no ``model.json``), so a folder
    holding one of :data:`OWN_FILES` is listed to see whether it is a run."""
    names: dict[str, set[str]] = {}
    for p in found:
        parent, base = posixpath.split(p.rstrip("/"))
        names.setdefault(parent, set()).add(base)
    own = {d for d, have in names.items() if any(m <= have for m in OWN_MARKERS)}
    for d in sorted(d for d, have in names.items() if globbed and d not in own and have & OWN_FILES):
        try:
            have = {posixpath.basename(x.rstrip("/")) for x in fs.ls(d, detail=False)}
        except Exception:  # noqa: BLE001 - cannot be listed: not known to be a run
            continue
        if any(m <= have for m in OWN_MARKERS):
            own.add(d)
    return own | {d for d, have in names.items()
                  if d not in own and "config.json" in have and _a_runs_config(fs, f"{d}/config.json", found, have)}


def _a_runs_config(fs: Any, path: str, found: dict, beside: set[str]) -> bool:
    """Whether ``path`` is the config.json of a run folder: stamped, or a claim's
    empty one in a folder holding nothing else but a run's files (``beside``:
    the names found there). An empty config.json beside data is no run, and
    taking it for one would leave that data out unseen."""
    size = (found.get(path) or {}).get("size")
    if size == 0:
        return all(n in OWN_FILES or n in RUN_LOCK_FILES or n.startswith(("checkpoint", "weights")) for n in beside)
    if fs is None or size is None or size > 2**20:
        return False
    try:
        with fs.open(path, "rb") as f:
            return RUN_STAMP in f.read()
    except OSError:
        return False


# A folder written by datasets.Dataset.save_to_disk: its rows are in data-0000N-of-0000M.arrow
# (Arrow IPC streams) beside these two; DatasetDict.save_to_disk writes one such folder per split
# and DICT_MARKER above them.
DATASET_MARKERS = ("state.json", "dataset_info.json")
DICT_MARKER = "dataset_dict.json"


def _datasets_metadata(url: str, found: dict) -> set[str]:
    """The metadata files of ``datasets`` folders among ``found`` (not data); a
    folder of several splits (a saved DatasetDict) is refused: one is read at a time."""
    names: dict[str, set[str]] = {}
    for p in found:
        parent, base = posixpath.split(p.rstrip("/"))
        names.setdefault(parent, set()).add(base)
    splits = sorted(posixpath.basename(d) for d, have in names.items() if set(DATASET_MARKERS) <= have)
    if any(DICT_MARKER in have for have in names.values()) and len(splits) > 1:
        raise UserError(f"{url}: a saved DatasetDict of splits {', '.join(splits)}: reading them all would mix them",
                        f"point at one split's folder, e.g. {url.rstrip('/')}/{'train' if 'train' in splits else splits[0]}")
    if not splits:
        return set()
    return {posixpath.join(d, m) for d, have in names.items() for m in (*DATASET_MARKERS, DICT_MARKER)
            if m in have and (m == DICT_MARKER or set(DATASET_MARKERS) <= have)}


def _datasets_unlisted(fs: Any, metadata: set[str]) -> set[str]:
    """The files of ``datasets`` folders that their ``state.json`` does not list as data:
    the ``cache-*.arrow`` files ``Dataset.map`` or ``filter`` writes into a loaded
    folder hold a transformed copy of its rows, or row indices, never the saved rows
    (read with them, every row came twice). A state.json that cannot be read lists
    nothing to leave out."""
    out: set[str] = set()
    for state in (m for m in metadata if posixpath.basename(m) == "state.json"):
        folder = posixpath.dirname(state)
        try:
            with fs.open(state, "rb") as f:
                listed = {d["filename"] for d in json.loads(f.read().decode("utf-8"))["_data_files"]}
            names = fs.ls(folder, detail=False)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out |= {p for p in (n.rstrip("/") for n in names)
                if posixpath.dirname(p) == folder and p.endswith(".arrow") and posixpath.basename(p) not in listed}
    return out


def plan_source(urls: Sequence[str], *, format: str = "auto",
                storage_options: dict | None = None,
                blocksize: int = 64 * 2**20, names: Sequence[str] = (), in_order: bool = False,
                delimiter: str | None = None) -> SourcePlan:
    """Expand ``urls`` into files and partitions. ``names``: the columns the
    run reads, and ``delimiter`` its ``--delimiter``, for a file whose format its start
    decides (:func:`sniff_formats`).
    The files are in sorted order (a run reads the same rows however its inputs
    are listed), or with ``in_order`` in the order ``urls`` name them, each named
    once (prediction's rows follow its inputs': a folder's or glob's files sorted)."""
    if isinstance(urls, str):
        urls = [urls]
    if not urls:
        raise UserError("no input files given", "pass one or more paths, URLs or globs")
    named = format_named(format) if format != "auto" else None
    if blocksize <= 0:
        raise UserError(f"blocksize must be positive, got {blocksize}")
    so = dict(storage_options or {})

    seen, unknown, link_notes = _data_files(urls, so, format, once=in_order)
    sniffed, decided = sniff_formats(seen, so, names, delimiter) if named is None else ({}, [])

    files: list[FileInfo] = []
    partitions: list[Partition] = []
    compressed: list[str] = []
    for full in (list(seen) if in_order else sorted(seen)):
        info, fs, _ = seen[full]
        name = file_name(full)
        _, comp = _compression_of(name)
        fmt = named or sniffed.get(full) or _infer_format(full)
        size = int(info.get("size") or 0)
        fi = FileInfo(url=full, size=size, version=_version(info), format=fmt.name,
                      compression=comp)
        files.append(fi)
        if comp is not None and not fmt.compressible:
            raise UserError(f"{full}: a {fmt.shown} file cannot be compressed on the outside",
                            f"{fmt.shown} compresses its pages itself; decompress the file")
        if not fmt.splits_by_bytes:
            if size == 0:
                continue
            for start, length in _pieces(fmt, fs, full):
                partitions.append(Partition(len(partitions), fi, start, length))
        elif comp is not None:
            if size == 0:
                continue
            compressed.append(full)
            partitions.append(Partition(len(partitions), fi, 0, -1))
        else:
            for start in range(0, size, blocksize):
                partitions.append(
                    Partition(len(partitions), fi, start, min(blocksize, size - start)))

    warnings: list[str] = list(link_notes)
    if unknown:
        shown = ", ".join(posixpath.basename(f) for f in unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        warnings.append(f"Skipped {counted(len(unknown), 'file')} that {verb(len(unknown), 'is', 'are')} not data by "
                        f"{verb(len(unknown), 'its', 'their')} extension: {shown}.")
    if compressed:
        shown = ", ".join(compressed[:5]) + (f" and {len(compressed) - 5} more"
                                             if len(compressed) > 5 else "")
        warnings.append(
            f"Compressed input ({shown}): a compressed file cannot be split by byte range, "
            f"so each one is read by one worker at a time as a stream; split it into "
            f"several files for parallelism.")
    return SourcePlan(files=files, partitions=partitions, warnings=warnings, sniffed=decided, storage_options=so)
