"""One writer per cache entry at a time.

Runs with the same data and feature options share a cache entry whatever
their block size or memory plan (the key leaves the partitioning out, so an
entry is reused by any later run). Two such runs writing the entry at once
would cut the same partition numbers differently and write their shards
under the same names: each would find shards its manifest lists replaced by
the other's, read them as damaged and rebuild them, back and forth, and the
entry's manifest and fitted features could end up from different writers.

So a run that finds its entry incomplete takes the entry's lock before it
fits or featurises anything, and holds it until the manifest is written (the
end of the fit pass for hashed features, of epoch 1 for a fitted
vocabulary). Another run waits for it, then finds the entry complete and
reads it: exactly what it would have done had it started after the first
one finished.

The lock is ``flock(2)`` on ``ENTRY/.lock`` (a local folder; NFS too): the
kernel drops it when its holder exits, is killed or closes it, so a crashed
run never leaves an entry locked and there is no stale lock to break. The
file stays; its content names the holder for those waiting. On S3 the lock
is a lease object taken by a conditional write (entry_lease.py); other
remote caches (``gs://``, …) have no lock fsspec can take: there writers
are not serialised (docs/reliability.md, "Not yet promised").
"""
from __future__ import annotations

import json
import os
import socket
import time
from typing import IO, Any, Callable

import fsspec

from ..storage import writing
from .entry_lease import LEASE, take_lease

LOCK = ".lock"  # the S3 lease is entry_lease.LEASE


class EntryLock:
    """A held entry lock; :meth:`release` (or the process ending) lets the next writer in.
    ``handle``: the flocked file, or the S3 lease (entry_lease.Held); closing either drops it."""

    def __init__(self, handle: Any, path: str):
        self._handle: Any = handle
        self.path = path

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        """Drop the lock; again, it does nothing."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()   # closing the descriptor releases the flock; the lease is deleted


def lock_entry(entry: str, cache_options: dict, on_wait: Callable[[str], None] | None = None,
               poll: float = 0.2) -> EntryLock | None:
    """Hold ``entry``'s writer lock, waiting as long as another run holds it
    (``on_wait(holder)`` is called once if it must); None where the cache
    cannot be locked (a remote filesystem other than S3, or no ``fcntl`` on this OS)."""
    fs, path = fsspec.core.url_to_fs(entry, **cache_options)
    if "s3" in fs.protocol:
        with writing(entry):    # a store that refuses the write says so, as for a shard
            held = take_lease(fs, path, on_wait)
        return None if held is None else EntryLock(held, f"{entry.rstrip('/')}/{LEASE}")
    try:
        import fcntl
    except ImportError:
        return None
    if "file" not in fs.protocol:
        return None
    lock_path = os.path.join(path, LOCK)
    with writing(entry):
        os.makedirs(path, exist_ok=True)
        handle = open(lock_path, "a+", encoding="utf-8")
    try:
        told = False
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told and on_wait is not None:
                    on_wait(_holder(handle))
                    told = True
                # Polled, not a blocking flock: Ctrl-C stops the wait at once.
                time.sleep(poll)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        handle.flush()
    except BaseException:
        handle.close()
        raise
    return EntryLock(handle, lock_path)


def _holder(handle: IO[str]) -> str:
    """Who holds the lock, in words, from what the holder wrote into the file."""
    try:
        handle.seek(0)
        d = json.loads(handle.read() or "{}")
        return f"process {d['pid']} on {d['host']}"
    except (ValueError, KeyError, TypeError, OSError):
        return "another process"
