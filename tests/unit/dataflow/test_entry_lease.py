"""The S3 lease of a cache entry (dataflow/entry_lease.py) against an in-memory
store that answers put/get/delete as S3 does, with or without honouring
conditional writes: a store that ignores them is found at once and the run
is not told it holds a lease it does not; a lease taken over by another run
is left to it, never deleted by the run that lost it."""
from __future__ import annotations

import hashlib
import json
import os
import time

from fsspec.asyn import get_loop

from lancetnic_flow.dataflow.entry_lease import Busy, Held, lease_holder, take_lease


class Body:
    def __init__(self, data: bytes):
        self.data = data

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def read(self) -> bytes:
        return self.data


class Refused(Exception):
    def __init__(self):
        super().__init__("precondition failed")
        self.response = {"Error": {"Code": "PreconditionFailed"}}


class Store:
    """put_object, get_object and delete_object of one bucket, in memory."""

    def __init__(self, honours: bool = True):
        self.honours, self.objects, self.loop = honours, {}, get_loop()

    @staticmethod
    def split_path(path: str) -> tuple[str, str, None]:
        bucket, _, key = path.partition("/")
        return bucket, key, None

    def call_s3(self, method: str, Bucket: str, Key: str, **kw):   # noqa: N803 - boto's names
        if method == "put_object":
            etag = f'"{hashlib.md5(kw["Body"]).hexdigest()}"'
            if self.honours and ((kw.get("IfNoneMatch") == "*" and Key in self.objects)
                                 or ("IfMatch" in kw and self.objects.get(Key, (None,))[0] != kw["IfMatch"])):
                raise Refused
            self.objects[Key] = (etag, kw["Body"])
            return {"ETag": etag}
        if Key not in self.objects:
            raise FileNotFoundError(Key)
        if method == "get_object":
            etag, data = self.objects[Key]
            return {"ETag": etag, "Body": Body(data)}
        del self.objects[Key]
        return {}


def test_a_store_that_ignores_conditional_writes_gives_no_lease_and_leaves_none(caplog):
    store = Store(honours=False)
    assert take_lease(store, "bkt/cache/e", ttl=60) is None
    assert not store.objects
    assert "ignores conditional writes" in caplog.text


def test_a_lease_taken_over_by_another_run_is_not_deleted_by_the_run_that_lost_it():
    store = Store()
    held = take_lease(store, "bkt/cache/e", ttl=60)
    assert held is not None and list(store.objects) == ["cache/e/.lease"]
    # Another run took it over (its holder stalled past the TTL): its version stays.
    store.objects["cache/e/.lease"] = ('"other"', b'{"pid": 1, "host": "h"}')
    held.close()
    assert store.objects["cache/e/.lease"][0] == '"other"'


def test_a_released_lease_is_deleted_and_the_next_run_takes_it_at_once():
    store = Store()
    take_lease(store, "bkt/cache/e", ttl=60).close()
    assert not store.objects
    waited = []
    take_lease(store, "bkt/cache/e", waited.append, ttl=60).close()
    assert not waited


def test_not_waiting_a_live_lease_is_busy_naming_its_holder_and_a_dead_ones_is_taken_over(caplog):
    store = Store()
    live = take_lease(store, "bkt/runs/r", ttl=60)
    busy = take_lease(store, "bkt/runs/r", ttl=60, wait=False)
    assert isinstance(busy, Busy) and busy.holder.startswith(f"process {os.getpid()} on ")
    assert lease_holder(store, "bkt/runs/r").startswith(f"process {os.getpid()} on ")
    live.close()
    assert lease_holder(store, "bkt/runs/r") is None
    # A holder that died: its lease stays, last renewed long ago by its own stamp.
    store.objects["runs/r/.lease"] = ('"dead"', json.dumps({"pid": 1, "host": "h", "at": time.time() - 120}).encode())
    assert lease_holder(store, "bkt/runs/r", ttl=60) is None
    took = take_lease(store, "bkt/runs/r", ttl=60, wait=False)
    assert isinstance(took, Held) and "took over" in caplog.text
    took.close()
    assert not store.objects
