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
from .plan import DEFAULT_LINES, THRESHOLDS, WORKER_ENV, MemoryLines, MemoryPlan, plan_for_workers
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


# How long an existing cluster gets to show a worker before a command says it has none.
WORKERS_WAIT_S = 30.0


def plan_for_existing(client, *, trainer: int, blocksize: int | None = None, wait: float = WORKERS_WAIT_S,
                      worker_model_bytes: int = 0) -> MemoryPlan:
    """A plan for someone else's cluster: read each worker's limit and threads
    (``worker_model_bytes``: what each holds for the whole run, see :func:`plan_for_workers`).

    A cluster whose workers are (re)starting gets ``wait`` seconds to show one."""
    info = workers_by_address(client, wait)
    by_address = memory_lines(client)
    return plan_for_workers(list(info.values()), trainer=trainer, blocksize=blocksize,
                            worker_model_bytes=worker_model_bytes,
                            lines=[by_address.get(a, DEFAULT_LINES) for a in info])


def _own_lines(dask_worker: Any = None) -> tuple:
    """This worker's memory lines (Dask's config as its memory manager read it at start)."""
    import dask

    manager = getattr(dask_worker, "memory_manager", None)
    read = lambda name: dask.config.get(f"distributed.worker.memory.{name}", None)  # noqa: E731
    return (getattr(manager, "memory_target_fraction", read("target")),
            getattr(manager, "memory_spill_fraction", read("spill")),
            getattr(manager, "memory_pause_fraction", read("pause")), read("terminate"))


def memory_lines(client: Any) -> dict[str, MemoryLines]:
    """Each worker's memory lines by address, as the worker itself has them: someone else's
    cluster may pause at 50 % or never, and a plan made for Dask's defaults would then hold a
    loaded run past the line where its worker takes no task. Empty where it cannot be asked
    (the in-process stand-in, a worker that does not answer): callers use the defaults."""
    if getattr(client, "scheduler", None) is None or getattr(client, "asynchronous", False):
        return {}
    try:
        answers = client.run(_own_lines, on_error="ignore")
    except Exception:   # a worker leaving mid-call: the plan falls back to the defaults
        return {}
    fraction = lambda x: float(x) if x not in (None, False) and float(x) > 0 else None  # noqa: E731
    return {addr: MemoryLines(*(fraction(x) for x in got)) for addr, got in (answers or {}).items()
            if isinstance(got, tuple) and len(got) == 4}


def some_workers(client, wait: float = WORKERS_WAIT_S) -> list[dict]:
    """The cluster's workers, given ``wait`` seconds to show one (they may be
    starting); none is a user error, not a wait forever."""
    return list(workers_by_address(client, wait).values())


def workers_by_address(client, wait: float = WORKERS_WAIT_S) -> dict[str, dict]:
    """:func:`some_workers` by address."""
    ws = workers_info(client)
    if not ws:
        try:
            client.wait_for_workers(1, timeout=wait)
        except (TimeoutError, OSError):
            pass
        ws = workers_info(client)
    if not ws:
        raise UserError(f"the Dask cluster has no workers (waited {wait:.0f} s for one)",
                        "start some with `dask worker ADDRESS`, then retry")
    return ws


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


# Dask's comm protocols an address may name (distributed.comm.registry's backends).
SCHEDULER_PROTOCOLS = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
ADDRESS_HINT = "give the scheduler's address, e.g. tcp://10.0.0.5:8786 (`dask scheduler` prints it)"


def refuse_if_nothing_listens(scheduler: str, patience: float = 2.0, answer: float = 10.0) -> None:
    """Say what is wrong with ``scheduler`` before Dask's Client tries it: an
    address Dask cannot parse; a refused TCP connection (nothing listens:
    refusals are retried ``patience`` seconds, for a scheduler still
    starting); a TCP server that is not a Dask scheduler, which writes its
    handshake as soon as it accepts: one that says nothing in ``answer``
    seconds (a web server such as the dashboard, which the Client waited on
    forever) or answers something else (an HTTP reply, which Dask read as a
    frame of exabytes: a MemoryError). Other comms, a silent host or a name
    that does not resolve are left to the Client, which reports them."""
    import socket
    import struct
    import time

    from distributed.comm import parse_address, parse_host_port

    try:
        protocol, loc = parse_address(scheduler)
        host, port = parse_host_port(loc) if protocol in ("tcp", "tls") else (loc, None)
    except (ValueError, TypeError) as exc:
        raise UserError(f"{{cluster.scheduler}} {scheduler}: not an address Dask connects to ({exc})", ADDRESS_HINT) from None
    if protocol not in SCHEDULER_PROTOCOLS:
        raise UserError(f"{{cluster.scheduler}} {scheduler}: {protocol}:// is no Dask protocol (tcp://, tls://, ws://, …)",
                        ADDRESS_HINT)
    if protocol not in ("tcp", "tls") or not port:
        return
    deadline = time.monotonic() + patience
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=patience)
            break
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                raise UserError(f"cannot reach the Dask scheduler at {scheduler}: connection refused, nothing "
                                f"listens on {host}:{port}", "check the address (tcp://HOST:8786) and that "
                                "`dask scheduler` runs there") from None
            time.sleep(0.2)
        except OSError:
            return
    with sock:
        if protocol == "tls":   # TLS speaks first from the client: nothing to read yet
            return
        head = _first_bytes(sock, 8, answer)
    size = struct.unpack("<Q", head)[0] if len(head) == 8 else None
    if size is None or not 0 < size < 2**26:
        what = "said nothing" if not head else f"answered {head[:8]!r}, not as a Dask scheduler does"
        raise UserError(f"{host}:{port} is not a Dask scheduler: it {what}"
                        + (f" in {answer:.0f} s" if not head else ""),
                        "give the scheduler's port, not the dashboard's (8786 by default, the dashboard 8787): "
                        "`dask scheduler` prints its address")


def _first_bytes(sock, n: int, seconds: float) -> bytes:
    """Up to ``n`` bytes the peer sends first, waiting at most ``seconds``."""
    import time

    data, deadline = b"", time.monotonic() + seconds
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


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
                 closer: Any = None, wait: float = RECONNECT_S, workers_wait: float = 0.0) -> Iterator["object"]:
    """Yield a ``distributed.Client``: to ``scheduler`` if given (or
    ``DASK_SCHEDULER_ADDRESS``), else to a LocalCluster sized by ``plan``.
    ``closer`` (an executor): the LocalCluster shuts down there, so the caller
    goes on at once and waits for it when the executor closes. ``wait``:
    seconds a lost ``scheduler`` is tried again before the work needing it
    stops (reconnect.SchedulerLost). ``workers_wait``: seconds an existing
    cluster gets to show a worker before it is refused as having none (0: not asked)."""
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
            if workers_wait:   # predict's and evaluate's partitions would wait forever for a worker
                try:
                    some_workers(client, workers_wait)
                except BaseException:
                    client.close()
                    raise
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
