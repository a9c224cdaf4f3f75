"""data/content_digest.py: a file's bytes hashed as read, in blocks."""
from __future__ import annotations

import hashlib

import fsspec

from lancetnic_flow.data import content_digest as module
from lancetnic_flow.data.content_digest import content_digest


def test_the_digest_is_the_sha256_of_the_stored_bytes_read_in_blocks(monkeypatch):
    data = bytes(range(256)) * 100
    fsspec.filesystem("memory").pipe("/digest/a.csv.gz", data)
    monkeypatch.setattr(module, "BLOCK", 1000)   # several blocks
    assert content_digest("memory://digest/a.csv.gz", {}) == f"sha256={hashlib.sha256(data).hexdigest()}"
