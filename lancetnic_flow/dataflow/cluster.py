"""The Dask cluster the memory plan shapes: a LocalCluster sized by the
plan, or an existing scheduler (``--scheduler``, ``DASK_SCHEDULER_ADDRESS``),
and what the scheduler says about its workers."""
from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterator

from ..errors import UserError
from ..reconnect import RECONNECT_S, retrying
from .main_guard import refuse_unguarded_script
from .plan import THRESHOLDS, WORKER_ENV, MemoryPlan, plan_for_workers
from .worker_setup import quiet_distributed_logs, quiet_workers, restore_logs


def workers_info(client, *, wait: bool = True) -> dict[str, dict]:
    """Every worker the scheduler knows, by address, asked of the scheduler now.

    Not ``client.scheduler_info()``: while the connection to the scheduler is
    down that answers from the client's cache without a word, and the cache
    its periodic refresh keeps lists no worker at all, so a dropped connection
    read as a cluster that had lost every worker. Asked here, a lost
    connection waits for the client to reconnect and asks again
    (:func:`~lancetnic_flow.reconnect.retrying`), or ends in
    :class:`~lancetnic_flow.reconnect.SchedulerLost`. ``wait=False`` (a
    display's periodic sample) raises the lost connection at once instead."""
    if getattr(client, "scheduler", None) is None or getattr(client, "asynchronous", False):   # the in-process stand-in
        return dict(client.scheduler_info().get("workers", {}))
    import inspect

    # releases whose identity takes n_workers list only five workers unless asked for all
    takes_n = "n_workers" in inspect.signature(client.scheduler_info).parameters
    def ask() -> dict:
        return client.sync(client.scheduler.identity, **({"n_workers": -1} if takes_n else {}))

    info = retrying(client, ask) if wait else ask()
    return dict(info.get("workers", {}))


def plan_for_existing(client, *, trainer: int, blocksize: int | None = None, wait: float = 30.0) -> MemoryPlan:
    """A plan for someone else's cluster: read each worker's limit and threads.

    A cluster whose workers are (re)starting gets ``wait`` seconds to show one."""
    ws = list(workers_info(client).values())
    if not ws:
        try:
            client.wait_for_workers(1, timeout=wait)
        except (TimeoutError, OSError):
            pass
        ws = list(workers_info(client).values())
    if not ws:
        raise UserError(f"the Dask cluster has no workers (waited {wait:.0f} s for one)",
                        "start some with `dask worker ADDRESS`, then retry")
    return plan_for_workers(ws, trainer=trainer, blocksize=blocksize)


def local_worker_threads(client) -> int:
    """Threads of the cluster's workers that run on this machine (they compete
    with the trainer for its cores)."""
    import socket

    try:
        workers = workers_info(client)
    except Exception:
        return 0
    here = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        here |= {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    total = 0
    for addr, w in workers.items():
        host = addr.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host in here:
            total += w.get("nthreads", 1)
    return total


def scheduler_address(given: str | None) -> str | None:
    """The existing cluster to use: ``--scheduler``, else ``DASK_SCHEDULER_ADDRESS``; None: a LocalCluster."""
    return given or os.environ.get("DASK_SCHEDULER_ADDRESS") or None


def refuse_if_nothing_listens(scheduler: str, patience: float = 2.0) -> None:
    """A refused TCP connection means no scheduler listens there: say so in
    about ``patience`` seconds instead of letting Dask retry for its whole
    timeout. Refusals are retried that long for a scheduler still starting;
    anything else (a silent host, a name that does not resolve, a non-TCP
    comm) is left to the Client, which reports it in its own words."""
    import socket
    import time

    from distributed.comm import parse_address, parse_host_port

    try:
        protocol, loc = parse_address(scheduler)
        host, port = parse_host_port(loc)
    except (ValueError, TypeError):
        return
    if protocol not in ("tcp", "tls") or not port:
        return
    deadline = time.monotonic() + patience
    while True:
        try:
            socket.create_connection((host, port), timeout=patience).close()
            return
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        except OSError:
            return
    raise UserError(f"cannot reach the Dask scheduler at {scheduler}: connection refused, nothing listens on "
                    f"{host}:{port}", "check the address (tcp://HOST:8786) and that `dask scheduler` runs there")


class LostSchedulerNoise(logging.Filter):
    """Dask's client logs a scheduler it cannot reach again as an error, and
    the reconnect attempt its close cancels as a traceback. The run says it
    once, in words (reconnect.SchedulerLost); while the client is not
    connected, the client's own records of it are dropped."""

    def __init__(self, client: Any):
        super().__init__()
        self.client = client

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(self.client, "status", "running") == "running" and \
            not record.getMessage().startswith("Failed to reconnect to scheduler")


class ClosedCommNoise(logging.Filter):
    """Dask's batched stream to the scheduler logs, with a traceback, each
    message it could not send on a connection that closed ("Batched Comm
    Closed"): a lost scheduler, which the run says once, in words."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Batched Comm Closed")


@contextlib.contextmanager
def open_cluster(plan: MemoryPlan, *, scheduler: str | None = None, dashboard: bool = False,
                 closer: Any = None, wait: float = RECONNECT_S) -> Iterator["object"]:
    """Yield a ``distributed.Client``: to ``scheduler`` if given (or
    ``DASK_SCHEDULER_ADDRESS``), else to a LocalCluster sized by ``plan``.
    ``closer`` (an executor): the LocalCluster shuts down there, so the caller
    goes on at once and waits for it when the executor closes. ``wait``:
    seconds a lost ``scheduler`` is tried again before the work needing it
    stops (reconnect.SchedulerLost)."""
    import dask
    from distributed import Client, LocalCluster

    scheduler = scheduler_address(scheduler)
    memory = {f"distributed.worker.memory.{k}": v for k, v in THRESHOLDS.items()}
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENV}
    with dask.config.set({**memory, "distributed.nanny.pre-spawn-environ": environ,
                          "distributed.scheduler.worker-ttl": "5 minutes",
                          "distributed.admin.tick.limit": "30s"}):
        if scheduler:
            refuse_if_nothing_listens(scheduler)
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {exc}",
                                "check the address (tcp://HOST:8786) and that `dask scheduler` runs there") from None
            except TypeError as exc:
                if "ssl_context" not in str(exc):
                    raise
                # Dask's TLS comm, given a tls:// address and no certificates in its config.
                raise UserError(f"the Dask scheduler at {scheduler} speaks TLS and this machine has no TLS "
                                "configuration for Dask",
                                "set distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key in "
                                "Dask's config, or the DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
                                "…__CLIENT__CERT and …__CLIENT__KEY variables (docs/cluster.md §6)") from None
            # Reconnecting after a dropped link may take longer than the 10 s first connect.
            client._timeout = wait
            filters = [(logging.getLogger("distributed.client"), LostSchedulerNoise(client)),
                       (logging.getLogger("distributed.batched"), ClosedCommNoise())]
            for log, noise in filters:
                log.addFilter(noise)
            try:
                with client:
                    yield client
            finally:
                for log, noise in filters:
                    log.removeFilter(noise)
            return
        refuse_unguarded_script()
        cluster = LocalCluster(n_workers=plan.workers, threads_per_worker=plan.threads,
                               memory_limit=plan.worker_limit, processes=True,
                               dashboard_address=":0",  # None still binds :8787 for /metrics
                               silence_logs=logging.ERROR, preload=["lancetnic_flow.dataflow.worker_setup"])
        try:
            with Client(cluster) as client:
                try:
                    yield client
                except KeyboardInterrupt:
                    # The cluster is torn down on purpose: its loggers' "lost the
                    # connection" errors and tracebacks are noise, not news.
                    quiet_distributed_logs()
                    raise
                except BaseException:
                    quiet_workers(client)
                    raise
                quiet_workers(client)
        except BaseException:
            close_quietly(cluster)
            raise
        if closer is None:
            close_quietly(cluster)
        else:
            closer.submit(close_quietly, cluster)


def close_quietly(cluster: Any) -> None:
    """Close a LocalCluster this process started, its scheduler's and nannies'
    loggers silenced meanwhile (they live here): the teardown is on purpose."""
    levels = quiet_distributed_logs()
    try:
        cluster.close()
    finally:
        restore_logs(levels)
