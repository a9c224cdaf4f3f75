"""A file's content as its change token, where its store gives none.

A cache entry is keyed by each input file's size and change token (mtime,
ETag, generation: ``sources._version``). A store that sends neither (an
HTTP server without ``ETag`` or ``Last-Modified``) leaves the size alone to
tell a rewritten file from the one an entry was made of, so a file rewritten
at the same size reused the old entry's shards, labels and all. Such a file
is read once more, whole, to hash it: the run costs one more read of it,
never another file's features.
"""
from __future__ import annotations

import hashlib

from ..storage import url_to_fs

# Bytes read at a time: a large file is hashed without holding it.
BLOCK = 8 * 2**20


def content_digest(url: str, storage_options: dict) -> str:
    """``sha256=HEX`` of the bytes at ``url`` (as stored: a compressed file's compressed bytes)."""
    fs, path = url_to_fs(url, **storage_options)
    h = hashlib.sha256()
    with fs.open(path, "rb") as f:
        while True:
            block = f.read(BLOCK)
            if not block:
                break
            h.update(block)
    return f"sha256={h.hexdigest()}"
