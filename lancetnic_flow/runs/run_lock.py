"""One trainer per run folder at a time.

A run folder is written by the training that claimed it, and by ``train
--resume RUN`` later. Two of them at once (a second terminal, a scheduler
restarting a job whose first process still lives) wrote the same
checkpoint, history and model.json: a silent mix of two runs. And a run
without model.json could not be told still training from stopped.

So the trainer holds the folder's writer lock from the claim until the run
is saved (or the process ends): the cache entry's lock
(dataflow/entry_lock.py), ``flock(2)`` on ``RUN/.lock`` that the kernel drops
when its holder dies, or an S3 lease ``RUN/.lease``. A second trainer does not
wait for it: it is refused, naming the holder. ``predict`` and the other
readers look at it, without taking it, to say "still being trained".
The ``.lock`` file stays once the run is saved, as the cache's does
(removing it would race a second trainer opening it); nothing copies it.
Remote folders other than S3 have no lock: there neither is promised.
"""
from __future__ import annotations

from typing import Any

from ..dataflow.entry_lock import EntryLock, entry_holder, try_lock_entry
from ..errors import UserError
from ..storage import url_to_fs


def lock_run(run: str, storage_options: dict | None = None) -> EntryLock | None:
    """Hold ``run``'s writer lock (None where its store has none); a UserError
    naming the holder when another process trains into it now."""
    so = _options(run, storage_options)
    fs, path = url_to_fs(run, **so)
    if not fs.isdir(path):   # no folder (a typo, a file): the lock would create one; its reader says what is wrong
        return None
    got = try_lock_entry(run, so)
    if got is None or got.held:
        return got
    raise UserError(f"{run} is being trained by {got.holder}: two trainers would write the same checkpoint, "
                    "history and model.json",
                    f"wait for that training to end, or stop it, then `lancetnic-flow train --resume {run}`")


def run_holder(run: str, storage_options: dict | None = None) -> str | None:
    """Who trains into ``run`` now ("process N on HOST since …"); None when nobody
    does or it cannot be told. Takes nothing and writes nothing."""
    try:
        return entry_holder(run, _options(run, storage_options))
    except Exception:  # noqa: BLE001 - a store that cannot be asked tells no more than a missing lock
        return None


def _options(run: Any, given: dict | None) -> dict:
    """The storage options that open ``run``: those given, else those its RunFolder carries."""
    return dict(given) if given else dict(getattr(run, "storage_options", None) or {})
