"""Files at any fsspec URL: joining, whole-file reads and atomic writes, and
which storage options open which URL.

Shards, manifests, run folders, checkpoints, plots and predictions all go
through these few helpers, so "where can it be written" has one answer:
anywhere fsspec reaches.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any

import fsspec

from .errors import UserError

# Seconds an http(s) server may take to accept a connection, and to send each
# piece of a reply. aiohttp's own default is 5 minutes for the whole request,
# so a server that accepts and never answers would stall a run that long.
# ``--storage-option client_kwargs.timeout=SECONDS`` changes it.
HTTP_TIMEOUT_S = 30.0

# Failed writes a user can fix (free space, another place, permissions), by
# errno: they become a WriteError naming the place, not an internal error.
# Where a run and a prediction write, named as each caller names them (options.said).
WRITE_PLACES = "{output.cache}/{output.out}/--output"

WRITE_ERRORS = {
    errno.ENOSPC: ("no space left on device", f"free space there, or point {WRITE_PLACES} elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", f"free space or raise the quota, or point {WRITE_PLACES} elsewhere"),
    errno.EROFS: ("read-only file system", f"point {WRITE_PLACES} at a writable place"),
    errno.EACCES: ("permission denied", f"make it writable for this user, or point {WRITE_PLACES} elsewhere"),
    errno.EPERM: ("operation not permitted", f"make it writable for this user, or point {WRITE_PLACES} elsewhere"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose a path whose folders are folders"),
    errno.EEXIST: ("a file is in the way of a folder", "choose a path whose folders are folders"),
}


class WriteError(UserError):
    """A write failed for a reason the user can fix (full disk, read-only, no permission)."""


def join(base: str, *names: str) -> str:
    """``join("s3://b/runs", "x", "model.json")`` → ``"s3://b/runs/x/model.json"``."""
    return "/".join([base.rstrip("/")] + [n.strip("/") for n in names])


def absolute(url: str) -> str:
    """A local path made absolute (a Dask worker started in another folder reads
    and writes where this process means); URLs as given."""
    url = str(url)
    return url if "://" in url else os.path.abspath(os.path.expanduser(url))


def protocol(url: str) -> str:
    """``"s3"`` for ``s3://…``; ``"file"`` for a plain path."""
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def url_to_fs(url: str, **options: Any) -> tuple[Any, str]:
    """fsspec's ``url_to_fs``, with a local path read as that path: fsspec
    takes each ``::`` for a chain of protocols (``simplecache::s3://…``), so a
    file or folder named ``co::lon.csv`` was "no such file" or "Protocol not
    known". A URL of another protocol (a chain among them) goes to fsspec as it is."""
    url = str(url)
    if "::" not in url or protocol(url) != "file":
        return fsspec.core.url_to_fs(url, **options)
    from fsspec.implementations.local import LocalFileSystem

    path = url[len("file://"):] if url.lower().startswith("file://") else url
    return LocalFileSystem(**options), os.path.abspath(os.path.expanduser(path))


def options_for(url: str, storage_options: dict | None, like: str | None = None) -> dict:
    """The storage options that open ``url``: those given (for the data at
    ``like``, when named) if ``url`` speaks the same protocol; a local path
    needs none. The one rule for caches, run folders and outputs."""
    p = protocol(str(url))
    if p == "file" or (like is not None and protocol(str(like)) != p):
        return {}
    return dict(storage_options or {})


# Protocols of this machine's own files: fsspec's local filesystem opens them and reads no storage option.
LOCAL_PROTOCOLS = ("file", "local")


def refuse_local_storage_options(storage_options: dict | None, places: dict[str, Any],
                                 name: str = "{data.storage_options}") -> None:
    """Storage options given where every place they could open is a local path
    are refused by name: fsspec's local filesystem reads none of them, so
    ``anon=true`` or an endpoint would be recorded as used while doing nothing.
    ``places``: what each is called (``"DATA"``, ``"{output.out}"``) → its path
    or paths (None: not given); any remote one (``s3://``, ``gs://``,
    ``memory://``, a chain such as ``simplecache::s3://``) keeps them.
    ``name``: the option as the error names it."""
    if not storage_options:
        return
    named = []
    for what, where in places.items():
        for url in [where] if isinstance(where, str) else list(where or ()):
            if protocol(str(url)) not in LOCAL_PROTOCOLS:
                return
            named.append(f"{what} {url}")
    if not named:
        return
    keys = ", ".join(storage_options)
    raise UserError(f"{name} {keys} opens remote storage (s3://, gs://, http(s)://, ...), and "
                    f"every path here is local ({'; '.join(named)}): the local filesystem reads no storage option",
                    f"drop {name}, or give the remote URL it is for, e.g. s3://bucket/data.csv",
                    field="data.storage_options" if name == "{data.storage_options}" else None)


def open_options(url: str, storage_options: dict | None) -> dict:
    """The storage options to open ``url`` with.

    For http(s), a connect and read timeout (``HTTP_TIMEOUT_S``, or a number
    given as ``client_kwargs.timeout``) so a silent server is an error, not a
    hang. Built here, at the call, so configs keep plain JSON values."""
    so = dict(storage_options or {})
    if protocol(url) not in ("http", "https"):
        return so
    import aiohttp

    ck = dict(so.get("client_kwargs") or {})
    t = ck.get("timeout", HTTP_TIMEOUT_S)
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        if t <= 0:
            raise UserError(f"client_kwargs.timeout must be a positive number of seconds, got {t}",
                            "e.g. {data.storage_options} client_kwargs.timeout=30")
        ck["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=float(t), sock_read=float(t))
    so["client_kwargs"] = ck
    return so


# What a full disk says while a file is written; other errors in that block
# may come from the caller's own work (reading an input), not from this file.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_reason(exc: BaseException) -> tuple[str, str] | None:
    """(what went wrong, what would work) for a failed write, or None when the user cannot fix it."""
    if not isinstance(exc, OSError):
        return None
    code = errno.EACCES if exc.errno is None and isinstance(exc, PermissionError) else exc.errno
    return WRITE_ERRORS.get(code)


@contextlib.contextmanager
def writing(url: str, only: tuple[int, ...] | None = None) -> Iterator[None]:
    """Writes to ``url`` in this block: a failure the user can fix (of the
    errnos ``only``, when given) becomes a :class:`WriteError` naming ``url``."""
    try:
        yield
    except OSError as exc:
        why = write_reason(exc)
        if why is None or (only is not None and exc.errno not in only):
            raise
        raise WriteError(f"{why[0]} at {url}", why[1]) from None


@contextlib.contextmanager
def reader_kept_reading(url: str) -> Iterator[None]:
    """Writes into the pipe ``url`` in this block: its reader closing it before the
    end (``head`` stops early) is a :class:`WriteError` saying that the rest was not
    written, where it was an internal error."""
    try:
        yield
    except BrokenPipeError:
        raise WriteError(f"{url}: the pipe's reader closed it before everything was written; the rest was not",
                         "let the reader take it to the end (head stops early), or name a file") from None


@contextlib.contextmanager
def open_atomic(url: str, storage_options: dict, sync: bool = False) -> Iterator[Any]:
    """A binary file to write ``url`` through, renamed into place only when
    the block ends without an error, so a killed or failed writer never
    leaves a half file under the real name (and a failed one no temporary
    file). ``sync``: a local file reaches the disk before the rename."""
    fs, path = url_to_fs(url, **storage_options)
    if "file" in fs.protocol and os.path.isdir(path):   # the rename would move the file into the folder
        raise _folder_in_the_way(url)
    if "file" in fs.protocol and special_kind(path) is not None:
        # A pipe a reader holds, or /dev/null: written in place. A rename would put a file
        # where the pipe was, its reader waiting for bytes that never come.
        with writing(url):
            f = open_special(url)
        with reader_kept_reading(url), writing(url, only=DISK_FULL), f:
            yield f
        return
    parent = path.rsplit("/", 1)[0]
    with writing(url):
        fs.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    try:
        with writing(url):
            f = fs.open(tmp, "wb")
        with writing(url, only=DISK_FULL), f:
            yield f
            if sync and "file" in fs.protocol:
                f.flush()
                os.fsync(f.fileno())   # the rename must not land before the data does
        with writing(url):
            fs.mv(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(tmp)
        raise


def _folder_in_the_way(url: str, flag: str = "") -> "WriteError":
    return WriteError(f"{flag + ' ' if flag else ''}{url}: a folder is there, and a file is to be written",
                      "name a file (in that folder, or elsewhere), or remove the folder")


def check_writable(url: str, storage_options: dict, flag: str, folder: bool = True) -> None:
    """Refuse, before any work, a place that cannot be written: write and
    remove a probe file in the folder (``url``, or its parent when ``folder``
    is false). A local folder that does not exist yet is not made: the probe
    goes to its nearest existing ancestor, where the missing folders would be
    created, so a refused command leaves no trace and two commands checking
    the same new folder at once cannot remove it under each other."""
    where = url if folder else (url.rsplit("/", 1)[0] if "/" in url.split("://", 1)[-1] else ".")
    local = protocol(url) == "file"
    try:
        fs, path = url_to_fs(where, **open_options(where, storage_options))
        if local:
            path = _nearest_existing(path)
        probe = f"{path.rstrip('/')}/.lancetnic-write-check-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
        with fs.open(probe, "wb") as f:
            f.write(b"ok")
        fs.rm(probe)
        if not folder:
            file_fs, file_path = url_to_fs(url, **open_options(url, storage_options))
            if file_fs.isdir(file_path):   # "wrote X" would have put the file inside it, under a temporary name
                raise _folder_in_the_way(url, flag)
    except WriteError:
        raise
    except Exception as exc:
        why = write_reason(exc)
        if why is not None:
            raise WriteError(f"{flag} {url}: cannot write there ({why[0]})", why[1]) from None
        if local and not isinstance(exc, OSError):
            raise
        raise WriteError(f"{flag} {url}: cannot write there ({type(exc).__name__}: {exc})",
                         "check the path, the credentials and that they may write there") from None


def _nearest_existing(path: str) -> str:
    """``path`` or its nearest ancestor that exists (a file there makes the
    probe fail as "a file is in the way")."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


# What a local path that is neither a regular file nor a folder is, by its mode.
SPECIAL_KINDS = ((stat.S_ISFIFO, "a pipe (a named pipe, a shell's <(...), or a /dev/stdin fed by |)"),
                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
# Why such a file cannot be read: every reader here asks a file its size, and seeks.
NOT_REGULAR_HINT = ("write what it gives to a file first (e.g. `cmd > data.csv`) and pass that file; "
                    "compressed files are read as they are (data.csv.gz), with no need for a pipe")


class NotRegularFile(UserError):
    """A local path names a pipe, a device or a socket where a file is to be read."""


def special_kind(url: str) -> str | None:
    """What the local file at ``url`` is when it is neither a regular file nor a
    folder (a pipe, a device, a socket), following symbolic links; None for a
    regular file, a folder, a missing path and any URL of a store."""
    if protocol(str(url)) != "file":
        return None
    path = str(url).split("://", 1)[-1]
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for test, what in SPECIAL_KINDS if test(mode)), "not a regular file")


def open_special(url: str) -> Any:
    """The local pipe or device ``url`` opened to write (binary). A named pipe that
    no process reads is a :class:`WriteError` at once: opening it would wait for one."""
    path = str(url).split("://", 1)[-1]
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        raise WriteError(f"{url}: a named pipe that no process reads, so nothing would take what is written",
                         f"start its reader first (e.g. `cat {path} > out &`), or name a file") from None
    os.set_blocking(fd, True)   # the reader is there: writes wait for it as a pipe's do
    return os.fdopen(fd, "wb")


def check_regular(url: str, why: str = "it is read whole, by its size, which a pipe or device does not give",
                  hint: str = "put the regular file itself there (restore it from a copy, or write it again)") -> None:
    """Refuse a local pipe, device or socket where a regular file is to be read:
    opening a pipe waits for a writer, and what it gives cannot be read again or
    by its size (fsspec seeks to learn it)."""
    kind = special_kind(url)
    if kind is not None:
        raise NotRegularFile(f"{url} is {kind}, not a regular file: {why}", hint)


def refuse_existing_file(url: str, storage_options: dict, named: str, command: str,
                         hint: str = "pass --force to replace it, or give another path") -> None:
    """Refuse to replace a file ``url`` names (``named``: how the caller gave it,
    ``--output p.csv``): it may be the user's own data or an earlier result, and the
    command's output would take its place without a word; ``--force`` replaces it
    (``hint`` says how the caller asks for that: a Python function's keyword). A
    named pipe is not a file here: writing into one is how a reader is fed. Any
    fsspec URL is asked through its filesystem."""
    fs, path = url_to_fs(url, **open_options(url, storage_options))
    try:
        exists = fs.isfile(path)
    except Exception:   # a store that cannot say: check_writable has already shown the place is writable
        return
    if exists:
        raise UserError(f"{named}: the file already exists; {command} does not replace a file unless asked", hint)


def write_bytes(url: str, data: bytes, storage_options: dict) -> None:
    """Write atomically where the filesystem allows (temp name + rename)."""
    with open_atomic(url, storage_options) as f:
        f.write(data)


def read_bytes(url: str, storage_options: dict) -> bytes:
    """The whole file at ``url`` (a local pipe or device is refused: :func:`check_regular`)."""
    check_regular(url)
    fs, path = url_to_fs(url, **storage_options)
    return fs.cat_file(path)
