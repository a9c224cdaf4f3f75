"""Files at any fsspec URL: joining, whole-file reads and atomic writes, and
which storage options open which URL.

Shards, manifests, run folders, checkpoints, plots and predictions all go
through these few helpers, so "where can it be written" has one answer:
anywhere fsspec reaches.
"""
from __future__ import annotations

import contextlib
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


def join(base: str, *names: str) -> str:
    """``join("s3://b/runs", "x", "model.json")`` → ``"s3://b/runs/x/model.json"``."""
    return "/".join([base.rstrip("/")] + [n.strip("/") for n in names])


def protocol(url: str) -> str:
    """``"s3"`` for ``s3://…``; ``"file"`` for a plain path."""
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def options_for(url: str, storage_options: dict | None, like: str | None = None) -> dict:
    """The storage options that open ``url``: those given (for the data at
    ``like``, when named) if ``url`` speaks the same protocol; a local path
    needs none. The one rule for caches, run folders and outputs."""
    p = protocol(str(url))
    if p == "file" or (like is not None and protocol(str(like)) != p):
        return {}
    return dict(storage_options or {})


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
                            "e.g. --storage-option client_kwargs.timeout=30")
        ck["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=float(t), sock_read=float(t))
    so["client_kwargs"] = ck
    return so


@contextlib.contextmanager
def open_atomic(url: str, storage_options: dict) -> Iterator[Any]:
    """A binary file to write ``url`` through, renamed into place only when
    the block ends without an error, so a killed or failed writer never
    leaves a half file under the real name."""
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    parent = path.rsplit("/", 1)[0]
    fs.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{time.monotonic_ns()}"
    try:
        with fs.open(tmp, "wb") as f:
            yield f
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(tmp)
        raise
    fs.mv(tmp, path)


def write_bytes(url: str, data: bytes, storage_options: dict) -> None:
    """Write atomically where the filesystem allows (temp name + rename)."""
    with open_atomic(url, storage_options) as f:
        f.write(data)


def read_bytes(url: str, storage_options: dict) -> bytes:
    """The whole file at ``url``."""
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    return fs.cat_file(path)
