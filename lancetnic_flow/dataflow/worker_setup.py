"""Run in every local worker process as it starts (a Dask preload).

Ctrl-C in a terminal signals the whole foreground process group: the
trainer and the LocalCluster's worker processes alike. The trainer owns the
shutdown (it finishes the batch, writes a checkpoint, then closes the
cluster), so its workers do not stop on SIGINT instead of dying mid-task with
a traceback each; they only silence Dask's loggers, as the scheduler they
talk to is about to go away on purpose ("failed to communicate with
scheduler during heartbeat" and its traceback would read as a failure).

A task that raises a UserError (a corrupt file, a missing column, a full
disk) is the user's to fix, and the trainer prints it as one message: the
worker does not also log it as "Compute Failed" with a traceback. Any other
task failure is still logged in full.

A worker also imports the featurisation code as it starts, and loads its
compiled kernels in the background, while the trainer is still importing
torch and planning: the first task does not wait for them.
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from ..errors import UserError


def _import_task_modules() -> None:
    """Import what tasks run (readers, fsspec, features), in the thread that
    starts the worker. Not in the background: a task unpickled meanwhile in
    another thread imports the same modules, and two threads importing one
    import cycle (fsspec.core ↔ fsspec.compression) can hand one of them a
    partly initialised module (an ImportError inside the task)."""
    try:
        from . import shards  # noqa: F401  (the tasks' modules: readers, features, kernels)
    except Exception:  # only a head start: the first task imports them anyway
        pass


def _warm() -> None:
    try:
        from ..features import kernels

        kernels.warm()
    except Exception:  # only a head start: the first task loads them anyway
        pass


def user_error_names() -> set[str]:
    """Names of UserError and every subclass this process has imported."""
    names, todo = set(), [UserError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return names


class QuietUserErrors(logging.Filter):
    """Drops the worker's "Compute Failed" record of a task that raised a
    UserError. The record carries the exception's repr, ``Name('message')``,
    not the exception, so its class is told by name."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed"):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        text = str(args[3]) if len(args) > 3 else ""
        return text.split("(", 1)[0] not in user_error_names()


def quiet_distributed_logs() -> dict[str, int]:
    """Silence Dask's loggers in this process, for a teardown on purpose (the
    end of a run, Ctrl-C); return their levels before, for :func:`restore_logs`."""
    levels = {}
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name == "distributed" or name.startswith("distributed."):
            log = logging.getLogger(name)
            levels[name] = log.level
            log.setLevel(logging.CRITICAL + 1)
    return levels


def restore_logs(levels: dict[str, int]) -> None:
    """Put back the levels :func:`quiet_distributed_logs` returned."""
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def quiet_workers(client: Any) -> None:
    """Silence the loggers of a LocalCluster's workers before it closes: a
    heartbeat in flight as the scheduler goes would print "Failed to
    communicate with scheduler" and a traceback at the end of a good run."""
    try:
        client.run(quiet_distributed_logs, on_error="ignore")
    except Exception:   # a worker already gone, a client closing: nothing left to quiet
        pass


def _interrupted(signum: int, frame: Any) -> None:
    quiet_distributed_logs()


def dask_setup(worker: Any) -> None:
    """The preload's hook, run once as each local worker starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _interrupted)
    log = logging.getLogger("distributed.worker")
    if not any(isinstance(f, QuietUserErrors) for f in log.filters):
        log.addFilter(QuietUserErrors())
    _import_task_modules()
    threading.Thread(target=_warm, name="lancetnic-warm", daemon=True).start()
