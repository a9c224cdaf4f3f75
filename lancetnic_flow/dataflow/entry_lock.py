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

from ..storage import url_to_fs, writing
from .entry_lease import LEASE, Busy, holder_of, lease_holder, take_lease

LOCK = ".lock"  # the S3 lease is entry_lease.LEASE


class EntryLock:
    """A held entry lock; :meth:`release` (or the process ending) lets the next writer in.
    ``handle``: the flocked file, or the S3 lease (entry_lease.Held); closing either drops it.
    One :func:`try_lock_entry` found held by another process has no handle: ``held`` is
    False and ``holder`` names that process."""

    def __init__(self, handle: Any, path: str, holder: str | None = None):
        self._handle: Any = handle
        self.path, self.holder = path, holder

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        """Drop the lock; again, it does nothing."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        if hasattr(handle, "fileno"):
            # Unlocked before the close: a child forked meanwhile (a chart drawer) shares the
            # descriptor, and the kernel keeps the flock while any copy of it is open.
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()   # closing the descriptor releases the flock; the lease is deleted


def lock_entry(entry: str, cache_options: dict, on_wait: Callable[[str], None] | None = None,
               poll: float = 0.2) -> EntryLock | None:
    """Hold ``entry``'s writer lock, waiting as long as another run holds it
    (``on_wait(holder)`` is called once if it must); None where the cache
    cannot be locked (a remote filesystem other than S3, or no ``fcntl`` on this OS)."""
    return _lock(entry, cache_options, on_wait, poll, wait=True)


def try_lock_entry(entry: str, options: dict) -> EntryLock | None:
    """``entry``'s writer lock if no other process holds it, without waiting: an
    :class:`EntryLock` that is ``held``, or not held with its ``holder`` named; None
    where the folder cannot be locked (as :func:`lock_entry`). On S3 a lease its
    holder stopped renewing ``TTL`` seconds ago by its own stamp is taken over."""
    return _lock(entry, options, None, 0.0, wait=False)


def _lock(entry: str, options: dict, on_wait: Callable[[str], None] | None, poll: float,
          wait: bool) -> EntryLock | None:
    fs, path = url_to_fs(entry, **options)
    if "s3" in fs.protocol:
        with writing(entry):    # a store that refuses the write says so, as for a shard
            held = take_lease(fs, path, on_wait, wait=wait)
        if isinstance(held, Busy):
            return EntryLock(None, f"{entry.rstrip('/')}/{LEASE}", held.holder)
        return None if held is None else EntryLock(held, f"{entry.rstrip('/')}/{LEASE}")
    if _fcntl() is None or "file" not in fs.protocol:
        return None
    lock_path = os.path.join(path, LOCK)
    with writing(entry):
        os.makedirs(path, exist_ok=True)
        handle = open(lock_path, "a+", encoding="utf-8")
    try:
        holder = _flock(handle, on_wait, poll, wait)
        if holder is not None:
            handle.close()
            return EntryLock(None, lock_path, holder)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        handle.flush()
    except BaseException:
        handle.close()
        raise
    return EntryLock(handle, lock_path)


def _fcntl() -> Any:
    """The fcntl module, or None on an OS without it."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


def _flock(handle: IO[str], on_wait: Callable[[str], None] | None, poll: float, wait: bool) -> str | None:
    """Take the flock on ``handle``: None once taken, or (``wait`` False) the holder's name at once."""
    fcntl, told = _fcntl(), False
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            if not wait:
                return _holder(handle)
            if not told and on_wait is not None:
                on_wait(_holder(handle))
                told = True
            # Polled, not a blocking flock: Ctrl-C stops the wait at once.
            time.sleep(poll)


def entry_holder(entry: str, options: dict) -> str | None:
    """Who holds ``entry``'s writer lock now, in words; None when nobody does, or
    when it cannot be told (a remote filesystem other than S3). Writes nothing."""
    fs, path = url_to_fs(entry, **options)
    if "s3" in fs.protocol:
        return lease_holder(fs, path)
    if _fcntl() is None or "file" not in fs.protocol:
        return None
    fcntl = _fcntl()
    try:
        handle = open(os.path.join(path, LOCK), encoding="utf-8")
    except OSError:   # no lock file: never locked
        return None
    with handle:
        try:
            # Shared: two lookers do not see each other as a holder.
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(handle)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


def _holder(handle: IO[str]) -> str:
    """Who holds the lock, in words, from what the holder wrote into the file."""
    try:
        handle.seek(0)
        return holder_of(json.loads(handle.read() or "{}"))
    except (ValueError, OSError):
        return "another process"
