"""The trainer's side of ``--ddp N``: place N ranks on N distinct Dask
workers, run them in segments, write a checkpoint at each pause, restart a
segment whose worker was lost, and relay the ranks' progress as events.

Checkpoints: training runs in *segments*. When a checkpoint is due (by
``--checkpoint-every``, at an epoch end, or because the trainer was asked to
stop), every rank returns where it is and the trainer writes the usual
checkpoint file, then starts the next segment from it. The trainer stays the
only writer, so a checkpoint lands in the run folder wherever the workers
run, and ``--resume`` starts the first segment from the file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ...dataflow.cluster import memory_lines, workers_info
from ...dataflow.plan import DEFAULT_LINES, MemoryLines
from ...errors import UserError
from ...reconnect import share, worker_lost_in_transfer
from ...sizes import format_size
from ..rules import RULES
from ..state import TrainState
from .cadence import Cadence, cadence
from .comm import worker_host
from .rank import EVENT_TOPIC, RankJob, run_rank
from .shares import steps_in
from ...options import said
from ...plurals import counted

MAX_RESTARTS = 3   # segments restarted after a rank's worker left, per run
ON_DISK = "on disk"   # RankDriver.handover: the next start is the checkpoint on_pause wrote, read back if needed


def chosen_protocol(client: Any) -> str:
    """The scheduler's comm protocol: "tcp", "tls", "inproc", …"""
    return str(client.scheduler.address).split("://", 1)[0]


def choose_device(client: Any, chosen: list[str], want: str) -> tuple[str, list[int]]:
    """``--device`` for the ranks: ("cuda" or "cpu", each rank's index among
    the ranks on its machine). CUDA needs a GPU of its own for every rank
    (nccl refuses two ranks on one GPU); ``auto`` falls back to the CPU."""
    hosts = [w.split("://", 1)[-1].rsplit(":", 1)[0] for w in chosen]
    local = [hosts[:i].count(h) for i, h in enumerate(hosts)]
    if want == "cpu":
        return "cpu", local
    gpus = client.run(cuda_devices, workers=chosen)
    short = [w for w, h in zip(chosen, hosts) if gpus.get(w, 0) < hosts.count(h)]
    if not short:
        return "cuda", local
    if want == "cuda":
        worker = short[0]
        raise UserError(f"{{training.device}} cuda with {{training.ddp}} {len(chosen)}: worker {worker} sees "
                        f"{counted(gpus.get(worker, 0), 'CUDA device')} for the "
                        f"{counted(hosts.count(hosts[chosen.index(worker)]), 'rank')} on its machine",
                        "every rank needs a GPU of its own: start one worker per GPU, lower {training.ddp}, "
                        "or use {training.device} cpu")
    return "cpu", local


def cuda_devices() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class RankLost(Exception):
    """A worker holding a rank left the cluster (killed, restarted by its nanny, lost)."""


class RanksKeptFailing(RuntimeError):
    """Workers holding ranks left more than ``MAX_RESTARTS`` times in one run."""


class RankWorkersGone(RuntimeError):
    """A rank's worker left and the cluster did not get back to ``world``
    workers within ``WORKERS_BACK_S`` (a machine gone, a worker the
    scheduler dropped that no nanny restarts)."""


WORKERS_BACK_S = 120.0   # how long a lost rank's segment waits for the cluster to have enough workers again
PLACE_POLL_S = 2.0   # how often placing rank 0 checks that its chosen worker is still there


def gone_workers(client: Any, chosen: list[str]) -> list[str]:
    present = workers_info(client)
    return [w for w in chosen if w not in present]


def wait_gone(client: Any, chosen: list[str], patience: float = 5.0) -> list[str]:
    """The chosen workers that have left, waiting up to ``patience`` s for the
    scheduler to notice one that was killed a moment ago."""
    deadline = time.monotonic() + patience
    while True:
        gone = gone_workers(client, chosen)
        if gone or time.monotonic() > deadline:
            return gone
        time.sleep(0.2)


def wait_for_ranks(client: Any, futures: list, chosen: list[str], stop: Any, stop_event: Any) -> list:
    """Every rank's result. Meanwhile: a Ctrl-C in the trainer (``stop``)
    becomes the ranks' stop event; a rank that fails, or a worker that leaves,
    ends the wait at once instead of leaving the others blocked."""
    asked, checked = False, time.monotonic()
    while True:
        # Polled, not ``distributed.wait(timeout=...)``: each timeout it raised was a reference cycle (the
        # error, its traceback, Dask's sync frames) holding the frames above this one, so the segment's
        # start and results stayed alive until the cyclic collector ran: a state more at each pause.
        deadline = time.monotonic() + 0.25
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            time.sleep(0.02)
        failed = [f for f in futures if f.status in ("error", "cancelled")]
        if failed:
            # A rank whose peer died fails in a collective; the scheduler may
            # take a moment to notice the dead worker itself.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not gone_workers(client, chosen):
                time.sleep(0.25)
            gone = gone_workers(client, chosen)
            if gone:
                client.cancel(futures)
                raise RankLost(gone[0])
            if any(f.status == "cancelled" for f in failed):
                # Cancelled by the scheduler, not by us: a worker was dropped (a missed heartbeat under
                # load, its memory limit) and took the scattered start state with it, even when it
                # came back at the same address. The segment is lost, not the run.
                client.cancel(futures)
                raise RankLost("holding a rank's start state")
            # A rank that ends the run in words (a UserError: its loss diverged, …) makes its peers fail
            # in a collective a moment before or after: its words are the run's, not their broken pipe.
            errors = [f.exception() for f in futures if f.status == "error"]
            said = next((e for e in errors if isinstance(e, UserError)), None)
            if said is not None:
                client.cancel(futures)
                raise said
            return client.gather(failed)   # raises the rank's own error
        if all(f.status == "finished" for f in futures):
            return gather_results(client, futures, chosen)
        if stop is not None and stop.requested and not asked:
            stop_event.set()
            asked = True
        if time.monotonic() - checked < 2.0:
            continue
        checked = time.monotonic()
        gone = gone_workers(client, chosen)
        if gone:
            client.cancel(futures)
            raise RankLost(gone[0])


# How long fetching a finished rank's result may take before the trainer checks that its worker
# is still there; doubled at each check, so a large state on a slow network is fetched all the same.
GATHER_CHECK_S = 10.0


def gather_results(client: Any, futures: list, chosen: list[str]) -> list:
    """The finished ranks' results, each fetched from its worker. A worker the
    scheduler drops after its rank finished (a missed heartbeat) takes the
    result with it, and the rank's task, bound to that worker, can never run
    again: a plain gather waited for it forever. Here that is a lost rank
    (:class:`RankLost`): the segment runs again."""
    results = []
    for future in futures:
        wait = GATHER_CHECK_S
        while True:
            try:
                results.append(future.result(timeout=wait))
                break
            except TimeoutError:
                gone = gone_workers(client, chosen)
                if gone:
                    client.cancel(futures)
                    raise RankLost(gone[0]) from None
                wait *= 2
    return results


def forget_segment(client: Any, segment: str) -> None:
    """Drop a finished segment's rendezvous Variable from the scheduler."""
    from distributed import Variable

    with contextlib.suppress(Exception):
        Variable(segment, client=client).delete()


# How long a LocalCluster this run started gets to bring back workers its
# nannies are restarting (a worker process starts in seconds, slower under load).
OWN_WORKERS_BACK_S = 60.0


# What a rank on a GPU adds to its worker's own memory: the CUDA context, the cuDNN and cuBLAS
# libraries and the kernels torch loads as the step first uses them (measured on a worker's peak in
# docs/benchmarks.md, "The GPU path"). Without it a rank that fit on paper was killed by its nanny,
# again and again, until the run gave up.
CUDA_HOST_BYTES = 2 * 2**30


def preflight(client: Any, world: int, rank_bytes: int, *, own_workers: int = 0, events: Any = None,
              cuda: bool = False, resuming: bool = False) -> list[str]:
    """The workers the ranks go to (the first ``world`` by address of those
    whose memory limit holds a rank); refuses, before anything runs, too few
    workers or too few that hold a rank (a nanny would kill it over and over).

    ``own_workers``: the workers of the LocalCluster this run started. Fewer
    than that can only be workers its nannies are restarting (a worker killed
    by the OS or for memory a moment ago): they get
    :data:`OWN_WORKERS_BACK_S` to come back, with a warning, before the run is
    refused. An existing cluster's count is taken as it is. ``resuming``: a
    ``--resume``, which keeps the run's --ddp, so the refusal offers only more workers."""
    info = workers_info(client)
    if len(info) < world <= own_workers:
        if events is not None:
            events.emit("warning", message=f"{{training.ddp}} {world}: {len(info)} of this run's {own_workers} local workers "
                                           "are up (the others are restarting); waiting for them")
        with contextlib.suppress(TimeoutError):
            client.wait_for_workers(world, timeout=OWN_WORKERS_BACK_S)
        info = workers_info(client)
    if len(info) < world:
        raise UserError(f"{{training.ddp}} {world} needs {world} Dask workers, the cluster has {len(info)}",
                        _more_workers(world, resuming))
    # The first ``world`` by address of the workers that hold a rank: a cluster of workers with
    # different limits was refused for a small one among the first, beside larger ones left idle.
    limit = {w: info.get(w, {}).get("memory_limit") or 0 for w in sorted(info)}
    lines = memory_lines(client)
    holds = [w for w, lim in limit.items() if not too_small(rank_bytes, lim, lines.get(w, DEFAULT_LINES))]
    if len(holds) >= world:
        return holds[:world]
    w = next(w for w in limit if w not in holds)
    torch_words = "torch and its CUDA context" if cuda else "torch"
    room = f"; {len(holds)} of the {counted(len(limit), 'worker')} can hold one, {{training.ddp}} {world} needs {world}" if holds else ""
    raise UserError(f"{{training.ddp}}: a rank needs about {format_size(rank_bytes)} (a worker process with "
                    f"{torch_words}, the model, its optimiser moments and the shuffle buffer); worker {w} has a "
                    f"{format_size(limit[w])} memory limit{room}",
                    "give the workers more memory ({cluster.memory_budget} with fewer {cluster.workers}, or "
                    "`dask worker --memory-limit`), or lower {features.max_features}, {model.hidden} or "
                    "{training.shuffle_buffer}")


def too_small(rank_bytes: int, limit: int, lines: MemoryLines = DEFAULT_LINES) -> bool:
    """Whether a worker with memory limit ``limit`` (0: none) cannot hold a rank:
    up to its pause line (``lines``), not the kill line, as the estimate leaves out
    allocator slack and the events a rank sends (a rank measured at 95 % of
    its worker was killed under load)."""
    return bool(limit) and rank_bytes > limit * lines.stops()[1]


def _more_workers(world: int, resuming: bool) -> str:
    """What gives --ddp ``world`` its workers; a resumed run cannot lower --ddp (its
    checkpoint holds that many ranks' state), so it is offered to new runs only."""
    if resuming:
        return (f"resume with {{cluster.workers}} {world} (local), start more `dask worker` processes, or give "
                f"{{cluster.scheduler}} ADDRESS of a cluster with {counted(world, 'worker')} (the run keeps its "
                f"{{training.ddp}} {world})")
    return f"use {{cluster.workers}} {world} (local), start more `dask worker` processes, or lower {{training.ddp}}"


def rank_keep_bytes(client: Any, chosen: list[str], rank_bytes: int, most: int) -> int:
    """How many bytes of finished shards each rank may keep between epochs:
    half of what the smallest of the ``chosen`` workers' limits leaves a rank
    below Dask's target line (where a worker starts acting on its memory), at
    most ``most``; none on a worker without a limit, whose room is unknown."""
    info, lines = workers_info(client), memory_lines(client)
    limits = [info.get(w, {}).get("memory_limit") or 0 for w in chosen]
    if not limits or not all(limits):
        return 0
    room = min(x * lines.get(w, DEFAULT_LINES).acts() for w, x in zip(chosen, limits))
    return int(min(most, max(0, room - rank_bytes) // 2))


@dataclass
class RanksDone:
    """What the ranks trained: rank 0's final weights (the best epoch's), its
    history and best epoch, and how the run went on the workers."""

    weights: dict
    history: list
    confusions: list
    best: dict | None
    last_val: dict
    calibration: Any   # models.calibrate.Calibration: fitted on rank 0, on the validation shards
    calibrate_seconds: float
    info: dict       # ranks, backend, device, workers, steps, replica_digests, rank_seconds
    counted: dict = dataclasses.field(default_factory=dict)   # --cache none: the ranks' row accounting
    top_rows: Any = None   # runs/explain.top_rows of the weights sent, computed on rank 0 (None: the trainer's to do)


class RankDriver:
    """Runs ``job.world`` ranks in segments until the run is done."""

    def __init__(self, client: Any, job: RankJob, events: Any, *, rank_bytes: int = 0, device: str = "cpu",
                 stop: Any = None, own_workers: int = 0):
        from distributed import Event

        self.client, self.job, self.events, self.rank_bytes, self.device, self.stop = (
            client, job, events, rank_bytes, device, stop)
        self.own_workers = own_workers   # a LocalCluster this run started: see preflight
        self.stop_name = f"lancetnic-flow-stop-{uuid.uuid4().hex}"
        self.stop_event = Event(self.stop_name, client=client)
        self.clocks: list[dict] = [{} for _ in range(job.world)]   # per rank, summed over segments
        self.sent: list[int] = [0] * job.world                        # weight bytes each rank sent averaging
        self.kept: list[int] = [0] * job.world                        # finished shard bytes each rank kept
        self.reads: list[dict] = [{} for _ in range(job.world)]       # shards each rank read, by split
        self.picked: list[int] = [0] * job.world                      # epochs each rank trained on kept rows in place
        self.quieted: list[list] = [[] for _ in range(job.world)]       # the worker callbacks each rank slowed (quiet.py)
        self.sync: Cadence | None = None                               # the placed ranks' cadence (place)
        self.counted: dict = {}   # (source, partition) -> PartitionResult: what the ranks read, without a cache
        self.received: dict[tuple[str, int], int] = {}             # (segment, rank) -> events relayed
        self.restarts = 0
        self.ranks_running = False   # a segment's ranks were submitted and have not all returned
        self.total_rows = sum(s.rows for s in job.train_shards)
        self.segments: set[str] = set()   # this run's segments: the only ones whose events are relayed
        # The next segment's start (see take_start), whether a pause wrote it, and how to read it back.
        self.handover: Any = None
        self.written = False
        self.reload: Callable[[], TrainState] | None = None

    def place(self) -> None:
        """Ranks to workers (:func:`preflight`), the device, and rank 0's host."""
        world = self.job.world
        deadline = time.monotonic() + WORKERS_BACK_S
        while True:
            self.chosen = preflight(self.client, world, self.rank_bytes, own_workers=self.own_workers,
                                    events=self.events)
            kind, local = choose_device(self.client, self.chosen, self.device)
            host = self._rank0_host(deadline)
            if host is not None:
                break
            if time.monotonic() >= deadline:
                raise RankWorkersGone(f"the workers chosen for the ranks kept leaving the cluster for "
                                      f"{WORKERS_BACK_S:.0f} s")
        self.job = dataclasses.replace(self.job, address=host, device=kind, local_ranks=local,
                                       backend="nccl" if kind == "cuda" else "gloo", stop_event=self.stop_name)
        self.sync = sync = self.cadence()
        self.events.emit("ddp", ranks=world, workers=self.chosen, backend=self.job.backend, device=kind,
                         **({"sync": sync.describe(world)} if sync is not None else {}))

    def _rank0_host(self, deadline: float) -> str | None:
        """Rank 0's host, from a task on its worker: a task, so it runs once the
        worker's thread is free (a restarted segment's ranks must not start
        beside the abandoned segment's, which _lost asked to stop). None when
        that worker left the cluster meanwhile (the ranks are placed again):
        a task bound to a worker that is gone would wait for it forever."""
        future = self.client.submit(worker_host, workers=[self.chosen[0]], pure=False)
        while True:
            try:
                return future.result(timeout=PLACE_POLL_S)
            except TimeoutError:
                if gone_workers(self.client, self.chosen[:1]):
                    future.cancel()
                    return None
                if time.monotonic() >= deadline:
                    raise RankWorkersGone(f"worker {self.chosen[0]} was still busy {WORKERS_BACK_S:.0f} s after the "
                                          "ranks were asked to stop (a rank of the lost segment that did not end)"
                                          ) from None

    def cadence(self) -> Cadence | None:
        """How often the first epoch's ranks average their weights (a rule that
        averages, on more than one rank), as every rank computes it."""
        job = self.job
        if job.world < 2 or not RULES[job.rule].averages_weights:
            return None
        return cadence(job.world, steps_in(job.train_shards, job.world, job.training.seed, 0, job.training.batch_size,
                                           True),
                       job.training.sync_every)

    def relay(self, event: tuple) -> None:
        """A rank's event, re-emitted here as a run in the trainer's process
        would emit it: epoch records as ``epoch``, rank 0's stages as
        ``stage``; progress as ``batch`` from a single trainer task (a world of
        one), else as ``rank`` (the dashboard's box of ranks)."""
        _, msg = event
        if msg.get("segment") not in self.segments:
            return   # the topic is the cluster's: another run's ranks (or an earlier run's) report there too
        key = (msg.pop("segment"), msg["rank"])
        self.received[key] = self.received.get(key, 0) + 1
        kind = msg.pop("kind")
        if kind == "epoch":
            self.events.emit("epoch", **msg["record"])
        elif kind == "stage":
            for k in ("rank", "world", "worker"):
                msg.pop(k, None)
            self.events.emit("stage", **msg)
        elif self.job.world == 1:
            self.events.emit("batch", epoch=msg["epoch"], rows=msg["rows"], total_rows=self.total_rows,
                             loss=msg.get("loss"), tokens=msg.get("tokens", 0))
        else:
            self.events.emit("rank", **msg)

    def segment(self, start: TrainState | None) -> list[dict] | None:
        """Run one segment from ``start``; every rank's result, or None when a
        rank's worker was lost (the segment must run again)."""
        client, job = self.client, self.job
        segment = f"lancetnic-flow-ddp-{uuid.uuid4().hex}"   # a fresh rendezvous each segment
        where = f"epoch {start.epoch + 1}, step {start.batches}" if start is not None else "the start of training"
        self.segments.add(segment)
        seg = dataclasses.replace(job, segment=segment)
        # The start state (weights, optimiser moments) goes to one rank's worker once, not with each
        # task; the other ranks fetch it from there. Should that worker die, the scheduler cancels
        # the ranks ("lost dependencies") and the segment runs again like one with a killed rank.
        try:
            shipped = share(client, start, workers=self.chosen, hash=False, attempts=1) if start else None
        except Exception as exc:
            # a worker that has just left, or one killed while the state went to it
            if not (worker_lost_in_transfer(exc) or isinstance(exc, TimeoutError)):
                raise
            gone = wait_gone(client, self.chosen)
            if not gone:
                raise
            self._lost(RankLost(gone[0]), where)
            return None
        # Sent: a restart reads the start back (take_start), so this frame holds no second state while the
        # ranks' results come in. Kept, each segment's start stayed until the next one's arrived beside it.
        start = None
        futures = [client.submit(run_rank, r, seg, shipped, workers=[w], allow_other_workers=False, pure=False,
                                 key=f"{segment}-rank-{r}") for r, w in enumerate(self.chosen)]
        self.ranks_running = True
        try:
            results = wait_for_ranks(client, futures, self.chosen, self.stop, self.stop_event)
            self.ranks_running = False
        except RankLost as lost:
            self._lost(lost, where)
            return None
        finally:
            del futures, shipped
            forget_segment(client, segment)
        # A rank's events travel through the scheduler, its result straight
        # back: let the last progress and epoch events arrive before going on.
        deadline = time.monotonic() + 10
        while (any(self.received.get((segment, r), 0) < res["events"] for r, res in enumerate(results))
               and time.monotonic() < deadline):
            time.sleep(0.05)
        for r, c in zip(results, self.clocks):
            for k, v in r["clock"].items():
                c[k] = c.get(k, 0.0) + v
        self.sent = [a + r.get("sent_bytes", 0) for a, r in zip(self.sent, results)]
        self.kept = [r.get("kept_bytes", 0) for r in results]   # the last segment's: each starts with none kept
        self.picked = [a + r.get("picked_epochs", 0) for a, r in zip(self.picked, results)]
        self.quieted = [r.get("quieted", []) for r in results]
        for have, r in zip(self.reads, results):
            for split, n in (r.get("reads") or {}).items():
                have[split] = have.get(split, 0) + n
        self.digests = [r["digest"] for r in results]
        for r in results:   # --cache none: the row accounting of every partition some rank featurised
            for key, res in (r.get("counted") or {}).items():
                self.counted.setdefault(key, res)
        if len(set(self.digests)) != 1:
            raise RuntimeError(f"the --ddp replicas diverged (weight digests {self.digests})")
        return results

    def take_start(self) -> TrainState | None:
        """The next segment's start, handed over: a state a pause has written
        is then the checkpoint's (``reload`` reads it back should the segment
        be lost), so the driver keeps no copy of it while the ranks train and
        send the next one; the run's own start (None, or a resumed run's) is
        kept for a restart."""
        start = self.handover
        if start is ON_DISK:
            return self.reload()
        if start is not None and self.written and self.reload is not None:
            self.handover = ON_DISK
        return start

    def _lost(self, lost: "RankLost", where: str) -> None:
        """The segment is lost, not the run: it starts again from ``where`` it began
        (the last checkpoint, or the run's start) on the workers there are now."""
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise RanksKeptFailing(f"worker {lost} left the cluster during --ddp training, the "
                                   f"{MAX_RESTARTS + 1}th time a rank's worker was lost in this run") from None
        # One rank is the trainer task of a run without --ddp (--train-on cluster, --scheduler).
        what, who = (("{training.ddp} training", "the ranks") if self.job.world > 1 else
                     ("training on the cluster", "the trainer task"))
        self.events.emit("warning", message=f"worker {lost} left during {what}; restarting {who} from {where}")
        self._retire_stop_event()
        try:
            self.client.wait_for_workers(self.job.world, timeout=WORKERS_BACK_S)
        except TimeoutError:
            have = len(workers_info(self.client))
            # an exception is not an event: its words are said here, as the caller names --ddp
            raise RankWorkersGone(said(f"worker {lost} left during {what} and the cluster has {have} of the "
                                       f"{counted(self.job.world, 'worker')} it needs after {WORKERS_BACK_S:.0f} s",
                                       getattr(self.events, "words", "python"))) from None
        self.place()

    def _retire_stop_event(self) -> None:
        """Stop what is left of a lost segment, and give the next its own stop event.
        A worker the scheduler dropped is often alive, its rank and the others still
        stepping to the epoch's end (minutes, on a loaded machine) while holding the
        threads the next segment's ranks need: set, the event stops them at their
        next step (their results are not waited for)."""
        from distributed import Event

        with contextlib.suppress(Exception):   # the scheduler may be what failed
            self.stop_event.set()
        self.stop_name = f"lancetnic-flow-stop-{uuid.uuid4().hex}"
        self.stop_event = Event(self.stop_name, client=self.client)

    def run(self, start: TrainState | None, on_pause: Callable[[str, TrainState], None] | None,
            reload: Callable[[], TrainState] | None = None) -> RanksDone:
        """Segments until the ranks are done; ``on_pause`` writes each pause's
        checkpoint (it may raise to end the run); ``reload`` reads the last one
        back, for a segment lost after it (without it each start stays in memory)."""
        if chosen_protocol(self.client) == "tls":
            self.events.emit("warning", message="{training.ddp} on a TLS cluster: Dask's messages are encrypted, "
                                                "the ranks' torch.distributed gradient exchange is not (gloo and nccl "
                                                "speak plain TCP); use {training.ddp} where the network between the "
                                                "workers is trusted")
        self.place()
        self.client.subscribe_topic(EVENT_TOPIC, self.relay)
        self.handover, self.reload = start, reload
        del start
        finished = False
        try:
            while True:
                results = self.segment(self.take_start())
                if results is None:
                    continue
                head, reason = results[0], results[0]["reason"]
                if reason == "done":
                    break
                self.handover = dataclasses.replace(head["state"], ddp={"ranks": self.job.world,
                                                                        "rng": [r["rng"] for r in results]})
                del results, head
                if reason != "interrupt" and self.stop is not None and self.stop.requested:
                    # A Ctrl-C between segments (while the last one paused, or before the next began) is
                    # the ranks' stop all the same: this pause, at a sync, is where they would have stopped.
                    reason = "interrupt"
                if on_pause is not None:
                    on_pause(reason, self.handover)   # writes the checkpoint; raises when the trainer was asked to stop
                    self.written = True
            finished = True
        finally:
            with contextlib.suppress(Exception):   # a lost scheduler: the error that ended the run is the one to say
                self.client.unsubscribe_topic(EVENT_TOPIC)
            with contextlib.suppress(Exception):   # the scheduler may be what failed
                if finished or not self.ranks_running:
                    # no rank is left to read it: a cleared event leaves nothing on a long-lived scheduler
                    self.stop_event.clear()
                else:
                    # The trainer is leaving (an error, a second Ctrl-C): ranks still
                    # running on a cluster that outlives it stop at their next step
                    # (rank 0 clears the event once it has read it).
                    self.stop_event.set()
        return RanksDone(head["weights"], head["history"], head["confusions"], head["best"], head["last_val"],
                         head["calibration"], head["calibrate_seconds"], counted=self.counted,
                         top_rows=head.get("top_rows"),
                         info={"rank_bytes": self.rank_bytes, "ranks": self.job.world, "backend": self.job.backend, "device": self.job.device,
                               "workers": self.chosen, "steps": head["steps"], "replica_digests": self.digests,
                               "rank_seconds": [{k: round(v, 3) for k, v in c.items()} for c in self.clocks],
                               "rank_sent_bytes": self.sent, "averaged": RULES[self.job.rule].averages_weights,
                               "rank_kept_bytes": self.kept, "keep_limit": self.job.keep_bytes,
                               "rank_shard_reads": self.reads, "train_shards": len(self.job.train_shards),
                               "rank_picked_epochs": self.picked, "rank_quieted": self.quieted,
                               **({"sync": dataclasses.asdict(self.sync)} if self.sync else {})})
