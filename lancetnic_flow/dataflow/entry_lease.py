"""One writer per cache entry on S3: a lease object, taken by a conditional write.

A remote store has no ``flock`` (entry_lock.py), but S3 (and the stores that
follow it: MinIO, moto, …) writes an object only if none is there when asked
with ``If-None-Match: *``, and replaces one only if it is still the version
read with ``If-Match: ETAG``. The lease is the object ``ENTRY/.lease``:

- a run takes it by creating it with ``If-None-Match: *``; of two runs
  asking at once, the store lets exactly one in;
- the holder rewrites it every ``ttl / 6`` seconds (``If-Match`` its last
  ETag; the content changes each time, so its ETag does too) and deletes it
  when the entry's manifest is written;
- a waiter reads it every ``poll`` seconds; a lease whose ETag has not
  changed for ``ttl`` seconds *of the waiter's own clock* is a dead
  holder's (no clocks are compared between machines), and the waiter takes
  it over with ``If-Match`` on that ETag, so of several waiters one wins.

Limits (docs/reliability.md): a holder cut off from the store, or stalled,
for ``ttl`` seconds loses its lease while it may still be writing; it warns
when it finds out, and the shard checksums catch what that breaks. A store
that ignores conditional writes is found by a second create that should
have failed: then the run warns and writes unserialised, as before.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable

LEASE = ".lease"
TTL = 60.0

log = logging.getLogger(__name__)


def _conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is the store refusing a conditional write (412, or 409 for a race)."""
    if isinstance(exc, FileExistsError):
        return True
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    code = (getattr(cause, "response", None) or {}).get("Error", {}).get("Code")
    return code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


class S3Lease:
    """The lease object of one entry, and the requests on it."""

    def __init__(self, fs: Any, entry_path: str):
        self.fs = fs
        self.bucket, self.key, _ = fs.split_path(f"{entry_path.rstrip('/')}/{LEASE}")
        self.token = uuid.uuid4().hex
        self.beats, self.since = 0, time.time()

    def body(self) -> bytes:
        self.beats += 1
        return json.dumps({"token": self.token, "pid": os.getpid(), "host": socket.gethostname(),
                           "beat": self.beats, "since": self.since, "at": time.time()}).encode()

    def put(self, **condition: str) -> str | None:
        """Write the lease under ``condition``: its new ETag, or None if the store refused."""
        try:
            out = self.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=self.body(), **condition)
        except Exception as exc:
            if _conflict(exc):
                return None
            raise
        return out["ETag"]

    def read(self) -> tuple[str, dict] | None:
        """(ETag, content) of the lease, or None when there is none."""
        try:
            out = self.fs.call_s3("get_object", Bucket=self.bucket, Key=self.key)
            body = _read_body(self.fs, out["Body"])
        except FileNotFoundError:
            return None
        try:
            return out["ETag"], json.loads(body)
        except ValueError:
            return out["ETag"], {}

    def delete_if(self, etag: str) -> None:
        """Delete the lease if it is still the version ``etag`` (a lease taken over stays)."""
        now = self.read()
        if now is not None and now[0] == etag:
            self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key)


def _read_body(fs: Any, body: Any) -> bytes:
    """An aiobotocore streaming body read on s3fs's loop."""
    from fsspec.asyn import sync

    async def read() -> bytes:
        async with body:
            return await body.read()

    return sync(fs.loop, read)


class Held:
    """A held lease, renewed by a daemon thread until :meth:`close`."""

    def __init__(self, lease: S3Lease, etag: str, ttl: float):
        self.lease, self.etag, self.ttl = lease, etag, ttl
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="lancetnic-flow-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 6):
            try:
                etag = self.lease.put(IfMatch=self.etag)
            except Exception as exc:    # a store that stalls for a beat: the next one may get through
                log.warning("could not renew the writer's lease %s: %s", self.lease.key, exc)
                continue
            if etag is None:
                self.lost = True
                log.warning("the cache entry's lease %s was taken over by another run (this one did not renew "
                            "it for %g s); shards it rewrites are checked by their CRC-32", self.lease.key, self.ttl)
                return
            self.etag = etag

    def close(self) -> None:
        """Stop renewing and delete the lease (unless another run has taken it over)."""
        self._stop.set()
        self._thread.join()
        if not self.lost:
            self.lease.delete_if(self.etag)


def holder_of(doc: Any) -> str:
    """Who holds a lock or lease, in words, from what the holder wrote into it."""
    if not isinstance(doc, dict) or not {"pid", "host"} <= set(doc):
        return "another process"
    since = doc.get("since")
    when = (time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(since))
            if isinstance(since, (int, float)) and not isinstance(since, bool) else "")
    return f"process {doc['pid']} on {doc['host']}{when}"


class Busy:
    """A lease a live run holds, found by :func:`take_lease` told not to wait."""

    def __init__(self, holder: str):
        self.holder = holder


def _renewed_within(doc: Any, ttl: float) -> bool:
    """Whether the lease ``doc`` was renewed less than ``ttl`` seconds ago by its holder's
    stamp, read on this clock: what a look that cannot wait a TTL has to go on."""
    at = doc.get("at") if isinstance(doc, dict) else None
    return isinstance(at, (int, float)) and time.time() - at < ttl


def lease_holder(fs: Any, entry_path: str, ttl: float = TTL) -> str | None:
    """Who holds ``entry_path``'s lease, in words; None when there is none or its
    holder stopped renewing it ``ttl`` seconds ago. Writes nothing."""
    now = S3Lease(fs, entry_path).read()
    return holder_of(now[1]) if now is not None and _renewed_within(now[1], ttl) else None


def take_lease(fs: Any, entry_path: str, on_wait: Callable[[str], None] | None = None, poll: float = 0.5,
               ttl: float = TTL, wait: bool = True) -> Held | Busy | None:
    """Hold ``entry_path``'s lease, waiting while a live run holds it (``on_wait(holder)``
    once if it must); None where the store ignores conditional writes. ``wait`` False:
    :class:`Busy` at once while a live run holds it (one not renewed for ``ttl`` seconds by
    its own stamp is taken over, as no TTL can be waited out)."""
    lease, told, seen = S3Lease(fs, entry_path), False, None
    while True:
        etag = lease.put(IfNoneMatch="*")
        if etag is not None:
            if lease.put(IfNoneMatch="*") is not None:       # a store that ignores the condition
                log.warning("the store of %s ignores conditional writes: runs sharing this cache entry are not "
                            "serialised (give each its own --cache)", entry_path)
                now = lease.read()
                if now is not None and now[1].get("token") == lease.token:
                    lease.delete_if(now[0])
                return None
            return Held(lease, etag, ttl)
        now = lease.read()
        if now is None:
            continue                                        # released meanwhile: ask again at once
        if not wait and _renewed_within(now[1], ttl):
            return Busy(holder_of(now[1]))
        if seen is None or seen[0] != now[0]:
            # Not waiting: a lease its holder stopped renewing is taken over at once, below.
            seen = (now[0], time.monotonic() - (0.0 if wait else ttl))
        if time.monotonic() - seen[1] >= ttl:
            # Not renewed for ttl seconds of this clock: its holder is gone. Take it over
            # from that version only, so of several waiters one wins.
            etag = lease.put(IfMatch=now[0])
            if etag is not None:
                log.warning("took over the writer's lease %s from %s, which stopped renewing it %g s ago",
                            lease.key, holder_of(now[1]), ttl)
                return Held(lease, etag, ttl)
            seen = None
            continue
        if not told and on_wait is not None:
            on_wait(holder_of(now[1]))
            told = True
        time.sleep(poll)


__all__ = ["take_lease", "lease_holder", "holder_of", "Busy", "Held", "S3Lease", "LEASE", "TTL"]
