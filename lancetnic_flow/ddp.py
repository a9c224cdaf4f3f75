"""Data-parallel training on Dask workers (``--ddp N``).

N ranks run as long tasks on N distinct Dask workers and join one
``torch.distributed`` group (gloo on CPU, nccl on CUDA). Every rank holds a
replica of the model, streams a disjoint, seeded share of the cached
shards, and after each backward pass the replicas agree on one gradient:

* dense parameters: gradients summed with ``all_reduce`` and divided by the
  number of ranks that had a batch in this step;
* the sparse first layer: each rank's gradient covers only the rows its
  batch used (see ``models.sparse_input``), so ranks ``all_gather`` their
  (row ids, row gradients) pairs and add them by id — the traffic is the rows
  used, never the vocabulary.

Every rank then takes the same optimiser step, so the replicas stay equal
without broadcasting weights. Ranks run out of data at different steps; a
rank without a batch contributes nothing, and the epoch ends when no rank
has one. Rank 0 evaluates on the validation shards and returns the weights.
Progress goes to the trainer as Dask worker events (topic ``EVENT_TOPIC``),
which the dashboard shows per rank.

Checkpoints: training runs in *segments*. When a checkpoint is due (by
``--checkpoint-every``, at an epoch end, or because the trainer was asked to
stop), every rank returns where it is — rank 0 its weights, optimiser state
and history, every rank its RNG state — and the trainer writes the usual
checkpoint file, then starts the next segment from it. The trainer stays the
only writer, so a checkpoint lands in the run folder wherever the workers
run, and ``--resume`` starts the first segment from the file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .errors import UserError

EVENT_TOPIC = "lancetnic-flow-rank"


@dataclass
class RankJob:
    """What every rank needs; plain data, shipped to the workers by Dask."""

    world: int
    address: str              # rank 0's host: its rendezvous store listens there
    segment: str              # names this segment's rendezvous (a Dask Variable holding the store's port)
    backend: str
    net: str                  # model.json's "net" and "kwargs": the model every rank builds
    model_kwargs: dict
    task: dict
    optimizer: str
    lr: float
    lr_schedule: str
    epochs: int
    batch_size: int           # the global batch: each rank takes batch_size / world rows a step
    shuffle_buffer: int
    seed: int
    clip_grad: float | None
    early_stopping: int | None
    monitor: str
    train_shards: list        # ShardInfo, all of them: each rank takes its share
    val_shards: list
    cache_options: dict
    total_rows: int
    threads: int
    device: str = "cpu"                       # "cuda": each rank on a GPU of its own (nccl)
    local_ranks: list = field(default_factory=list)   # each rank's index among the ranks on its machine
    checkpoint_batches: int | None = None     # pause for a checkpoint every N steps …
    checkpoint_seconds: float | None = None   # … or every T seconds (rank 0's clock) …
    checkpoint_epochs: bool = False           # … and at each epoch end but the last
    stop_event: str | None = None             # a distributed.Event the trainer sets on Ctrl-C


@dataclass
class RankStart:
    """Where a segment of training starts: a checkpoint's content, plain data.
    The default is the start of the run."""

    epoch: int = 0            # 0-based
    batches: int = 0          # steps of that epoch already trained
    step: int = 0             # optimiser steps in the run so far (the learning-rate schedule)
    stale: int = 0            # epochs since --monitor improved
    rows: int = 0             # rank 0's rows so far in the epoch
    history: list = field(default_factory=list)
    best: dict | None = None
    train_metrics: dict | None = None   # rank 0's, mid-epoch
    model: dict | None = None
    optimizers: list | None = None
    rng: list | None = None   # every rank's [CPU, CUDA] RNG state (its dropout)


RENDEZVOUS_SECONDS = 300   # how long ranks wait for each other to join


def rendezvous(job: RankJob, rank: int) -> Any:
    """The ranks' ``torch.distributed`` store. Rank 0's store takes a port the
    kernel picks (no window in which another process can take it, as a port
    found free and then bound later has) and tells the others through a Dask
    Variable named after the segment."""
    from datetime import timedelta

    import torch.distributed as dist
    from distributed import Variable

    wait = timedelta(seconds=RENDEZVOUS_SECONDS)
    where = Variable(job.segment)
    if rank == 0:
        store = dist.TCPStore(job.address, 0, job.world, True, timeout=wait, wait_for_workers=False)
        where.set(store.port)
        return store
    port = int(where.get(timeout=RENDEZVOUS_SECONDS))
    return dist.TCPStore(job.address, port, job.world, False, timeout=wait)


def worker_host() -> str:
    from distributed import get_worker

    return get_worker().address.split("://", 1)[-1].rsplit(":", 1)[0]


def pin_interface(host: str) -> str | None:
    """Make gloo and nccl use the network interface that carries ``host``
    (this worker's Dask address); returns its name. Both otherwise pick their
    own address by resolving the machine's hostname, which on many machines and
    containers is 127.0.0.1 — and a rank on another machine cannot reach that.
    ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` set by the user win."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == host for a in addrs):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", name)
            return name
    return None


def share(shards: list, rank: int, world: int, seed: int, epoch: int) -> list:
    """Rank ``rank``'s shards in ``epoch``: partitions dealt in the epoch's
    seeded order, each to the rank with the fewest rows so far, so shares are
    disjoint, cover everything, and hold nearly equal rows."""
    from .stream import epoch_order

    by_part: dict[int, list] = {}
    for s in shards:
        by_part.setdefault(s.partition, []).append(s)
    keys = sorted(by_part)
    load = [0] * world
    mine: list = []
    for i in epoch_order(len(keys), seed, epoch):
        part = sorted(by_part[keys[i]], key=lambda s: s.chunk)
        r = min(range(world), key=lambda j: (load[j], j))
        load[r] += sum(s.rows for s in part)
        if r == rank:
            mine += part
    return mine


def steps_in(shards: list, world: int, seed: int, epoch: int, batch_size: int) -> int:
    """Optimiser steps in ``epoch``: the largest share's batches (every rank steps together)."""
    return max(-(-sum(s.rows for s in share(shards, r, world, seed, epoch)) // batch_size) for r in range(world))


def _sync_gradients(model: torch.nn.Module, has_batch: bool, dist: Any, flag: float = 0.0) -> tuple[int, int]:
    """Make every replica's gradients the mean over the ranks that had a batch.

    Returns (how many ranks had a batch — 0: the epoch is over everywhere —,
    rank 0's ``flag``). Two collectives a step, whatever the model:

    1. one ``all_reduce`` of the dense gradients with a tail of ``2 + world``
       numbers: had-a-batch, rank 0's flag (pause for a checkpoint, or stop),
       and in slot ``2 + r`` rank r's count of sparse rows used (the others
       add zero), so agreeing on all of them costs no extra round trip;
    2. one ``all_gather`` of each rank's used rows, padded to the largest
       count: the row ids' bits and the row gradients' bits side by side in
       one int32 matrix (a bit copy: nothing is rounded).
    """
    layer = model.input
    device = layer.weight.device
    world, rank = dist.get_world_size(), dist.get_rank()
    row_wise = getattr(layer, "row_wise", False) and layer.training
    used = grad = None
    if row_wise and has_batch and layer.active is not None and layer.active[1].grad is not None:
        used, grad = layer.active[0], layer.active[1].grad
    tail = torch.zeros(2 + world, device=device)
    tail[0], tail[1] = (1.0 if has_batch else 0.0), flag
    tail[2 + rank] = 0 if used is None else len(used)
    dense = [p for n, p in model.named_parameters() if not (row_wise and n == "input.weight")]
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in dense] + [tail])
    dist.all_reduce(flat)
    head = flat[-(2 + world):].tolist()
    active, flag = int(round(head[0])), int(round(head[1]))
    if active == 0:
        return 0, flag
    counts = [int(round(c)) for c in head[2:]]
    flat = flat[:-(2 + world)] / active
    offset = 0
    for p in dense:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
    if row_wise:
        width = layer.weight.shape[1]
        most = max(counts)
        if most == 0:   # batches without a single token anywhere
            layer.active = None
            return active, flag
        packed = torch.zeros(most, width + 2, dtype=torch.int32, device=device)
        if used is not None and len(used):
            packed[:len(used), :width] = grad.contiguous().view(torch.int32)
            packed[:len(used), width:] = used.contiguous().view(torch.int32).view(len(used), 2)
        gathered = [torch.empty_like(packed) for _ in range(world)]
        dist.all_gather(gathered, packed)
        rows_of = [g[:c] for g, c in zip(gathered, counts)]
        grads = torch.cat([r[:, :width] for r in rows_of]).contiguous().view(torch.float32)
        ids = torch.cat([r[:, width:] for r in rows_of]).contiguous().view(torch.int64).view(-1)
        union, inverse = torch.unique(ids, return_inverse=True)
        summed = torch.zeros(len(union), width, device=device).index_add_(0, inverse, grads) / active
        rows = layer.weight.detach().index_select(0, union).requires_grad_()
        rows.grad = summed
        layer.active = (union, rows)
    return active, flag


def _to_cpu(obj: Any) -> Any:
    """A state (nested dicts/lists of tensors) with every tensor copied to the CPU, for shipping."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()   # a copy off a GPU; on the CPU the task has ended, nothing changes it
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def rank_device(job: RankJob, rank: int) -> torch.device:
    """The device rank ``rank`` trains on: its own GPU (the ``local_ranks``-th
    one of its machine, as torchrun's LOCAL_RANK), or the CPU."""
    if job.device != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", job.local_ranks[rank] % torch.cuda.device_count())


def _rng_state(device: torch.device) -> list:
    return [torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None]


def _set_rng_state(state: list, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if device.type == "cuda" and state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


PAUSE_CHECKPOINT, PAUSE_STOP = 1, 2
MAX_RESTARTS = 3   # segments restarted after a rank's worker left, per run


def run_rank(rank: int, job: RankJob, start: RankStart | None = None) -> dict:
    """One rank of one segment: join the group, train on this rank's share
    from ``start`` until the run ends, a checkpoint is due or the trainer asks
    to stop; return where it is (every rank: its RNG state and a weight
    digest; rank 0 also the weights, optimiser state and history)."""
    import torch.distributed as dist
    from distributed import Event, get_worker

    from . import optim
    from .models import build_model
    from .shards import load_shard
    from .stream import BatchStream, prefetch
    from .tasks import Task
    from .trainer import answers, evaluate_blocks, keep_best, model_inputs

    worker = get_worker()
    start = start or RankStart()
    device = rank_device(job, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_num_threads(job.threads)
    pin_interface(worker_host())
    dist.init_process_group(job.backend, store=rendezvous(job, rank), rank=rank, world_size=job.world)
    try:
        torch.manual_seed(job.seed)   # the same initial weights on every rank
        model = build_model(job.net, **job.model_kwargs).to(device)
        opts = optim.make_optimizers(model, job.optimizer, job.lr)
        torch.manual_seed(job.seed * 1000 + rank)   # but each rank its own dropout
        if start.model is None and start.step:
            # Never train on from fresh weights in the middle of a run.
            raise RuntimeError(f"rank {rank} was given the state of step {start.step} without its weights")
        if start.model is not None:
            model.load_state_dict(start.model)
            for o, st in zip(opts, start.optimizers or []):
                o.load_state_dict(st)
            _set_rng_state(start.rng[rank], device)
            # The shipped copy is this worker's data for as long as the task runs: drop its
            # tensors now, so the worker holds one model and one set of moments, not two.
            start.model = start.optimizers = None
        weights = job.task.get("class_weights")
        task = Task(**{**job.task, "class_weights": None if weights is None else weights.to(device)},
                    device=device)
        load = lambda info: load_shard(info, job.cache_options)  # noqa: E731
        # The global batch is --batch-size, as in a single-process run, so the
        # same learning rate and schedule apply; each rank takes its part.
        rank_batch = max(1, job.batch_size // job.world)
        total_steps = max(1, sum(steps_in(job.train_shards, job.world, job.seed, e, rank_batch)
                                 for e in range(job.epochs)))
        schedule = (lambda t: job.lr) if job.lr_schedule == "constant" else (
            lambda t: job.lr * max(0.05, 1.0 - t / total_steps))
        history: list[dict] = list(start.history)
        best, stale, step = start.best, start.stale, start.step
        stop_event = Event(job.stop_event) if job.stop_event and rank == 0 else None
        # Where a rank's time goes: reading batches, its own forward/backward/step, the gradient exchange.
        clock = {"data": 0.0, "compute": 0.0, "exchange": 0.0}
        polled = 0.0

        def stop_asked() -> bool:
            """Rank 0 asks the scheduler at most twice a second whether the trainer wants to stop."""
            nonlocal polled
            if stop_event is None or time.monotonic() - polled < 0.5:
                return False
            polled = time.monotonic()
            return stop_event.is_set()

        sent = [0]   # events this rank sent in this segment: the trainer waits for all of them

        def report(kind: str, **data: Any) -> None:
            sent[0] += 1
            worker.log_event(EVENT_TOPIC, {"kind": kind, "rank": rank, "world": job.world, "segment": job.segment,
                                           "worker": worker.address, **data})

        def pause(reason: str, epoch: int, batches: int, rows: int, train_m: Any) -> dict:
            """Where this rank is: enough for the next segment (or a resumed run) to go on exactly."""
            out = {"reason": reason, "rng": _to_cpu(_rng_state(device)), "step": step, "digest": digest(),
                   "clock": clock, "events": sent[0]}
            if rank == 0:
                out.update(epoch=epoch, batches=batches, rows=rows, stale=stale, history=history,
                           best=_to_cpu(best), train_metrics=train_m.state() if train_m is not None else None,
                           model=_to_cpu(model.state_dict()), optimizers=_to_cpu([o.state_dict() for o in opts]))
            return out

        def digest() -> float:
            # The replicas must have stayed equal: the trainer compares these.
            return float(sum(p.detach().double().abs().sum().item() for p in model.parameters()))

        for epoch in range(start.epoch, job.epochs):
            mine = share(job.train_shards, rank, job.world, job.seed, epoch)
            stream = iter(BatchStream(lambda mine=mine: (load(s) for s in mine), batch_size=rank_batch,
                                      shuffle_buffer=job.shuffle_buffer, seed=job.seed * 1000 + rank,
                                      epoch=epoch))
            train_m = task.new_metrics()
            rows, t0, last = 0, time.monotonic(), 0.0
            done = start.batches if epoch == start.epoch else 0   # steps of this epoch already trained
            for _ in range(done):
                next(stream, None)   # the stream is a pure function of seed and epoch: replay, don't retrain
            if done and rank == 0:
                rows = start.rows
                train_m.load_state(start.train_metrics)
            since_batches, since_t = done, time.monotonic()
            while True:
                tick = time.perf_counter()
                batch = next(stream, None)
                clock["data"] += time.perf_counter() - tick
                tick = time.perf_counter()
                if batch is not None:
                    labels, targets = answers(batch, device)
                    out = model(**model_inputs(batch, device))
                    loss = task.loss(out, labels, targets)
                    optim.zero_grad(opts)
                    loss.backward()
                else:
                    optim.zero_grad(opts)
                    model.input.active = None
                flag = 0.0
                if rank == 0:
                    if stop_asked():
                        flag = PAUSE_STOP
                    elif ((job.checkpoint_batches and done + 1 - since_batches >= job.checkpoint_batches) or
                          (job.checkpoint_seconds and time.monotonic() - since_t >= job.checkpoint_seconds)):
                        flag = PAUSE_CHECKPOINT
                clock["compute"] += time.perf_counter() - tick
                tick = time.perf_counter()
                active, flag = _sync_gradients(model, batch is not None, dist, flag)
                clock["exchange"] += time.perf_counter() - tick
                if not active:
                    break
                tick = time.perf_counter()
                optim.set_lr(opts, schedule(step))
                optim.step(opts, model, job.clip_grad)
                clock["compute"] += time.perf_counter() - tick
                step += 1
                done += 1
                if batch is not None:
                    rows += len(batch)
                    train_m.update(out, batch.labels, batch.targets, loss.item() * len(batch))
                    now = time.monotonic()
                    if now - last >= 0.5:
                        report("progress", epoch=epoch + 1, epochs=job.epochs, rows=rows, loss=loss.item(),
                                rows_per_s=rows / max(now - t0, 1e-9))
                        last = now
                if flag:
                    report("progress", epoch=epoch + 1, epochs=job.epochs, rows=rows,
                           rows_per_s=rows / max(time.monotonic() - t0, 1e-9), loss=train_m.result().get("loss"))
                    return pause("interrupt" if flag == PAUSE_STOP else "periodic", epoch, done, rows, train_m)
            seconds = time.monotonic() - t0
            report("progress", epoch=epoch + 1, epochs=job.epochs, rows=rows, rows_per_s=rows / max(seconds, 1e-9),
                   loss=train_m.result().get("loss"), done=True)
            stop = torch.zeros(2, device=device)   # [early stop, the trainer asked to stop]
            if rank == 0:
                val_m = (evaluate_blocks(model, prefetch(load(s) for s in job.val_shards), task, device)
                         if job.val_shards else None)
                val = val_m.result() if val_m is not None else {}
                tr = train_m.result()
                record = {"epoch": epoch + 1, "train_loss": tr.get("loss"), "train_accuracy": tr.get("accuracy"),
                          "val": val,
                          "rows": rows, "seconds": seconds, "lr": schedule(step),
                          "rows_per_s": rows / seconds if seconds > 0 else None}
                history.append(record)
                report("epoch", record={k: v for k, v in record.items() if k != "val"},
                       val={k: v for k, v in val.items() if k not in ("confusion", "per_class")})
                best, stale = keep_best(best, stale, val, val_m, model, epoch + 1, job.monitor)
                if job.early_stopping and stale >= job.early_stopping:
                    stop[0] = 1.0
                polled = 0.0
                stop[1] = 1.0 if stop_asked() else 0.0
            dist.broadcast(stop, 0)   # every rank stops together
            if stop[0].item():
                break
            if epoch + 1 < job.epochs and (stop[1].item() or job.checkpoint_epochs):
                return pause("interrupt" if stop[1].item() else "epoch", epoch + 1, 0, 0, None)
        out = {"reason": "done", "digest": digest(), "steps": step, "rng": None, "clock": clock, "events": sent[0]}
        if rank == 0:
            state = best.pop("state") if best is not None else model.state_dict()
            out.update(state=_to_cpu(state), history=history, best=_to_cpu(best),
                       last_val=history[-1]["val"] if history else {})
        return out
    finally:
        dist.destroy_process_group()


def chosen_protocol(client: Any) -> str:
    """The scheduler's comm protocol: "tcp", "tls", "inproc", …"""
    return str(client.scheduler.address).split("://", 1)[0]


def _choose_device(client: Any, chosen: list[str], want: str) -> tuple[str, list[int]]:
    """``--device`` for the ranks: ("cuda" or "cpu", each rank's index among
    the ranks on its machine). CUDA needs a GPU of its own for every rank
    (nccl refuses two ranks on one GPU); ``auto`` falls back to the CPU."""
    hosts = [w.split("://", 1)[-1].rsplit(":", 1)[0] for w in chosen]
    local = [hosts[:i].count(h) for i, h in enumerate(hosts)]
    if want == "cpu":
        return "cpu", local
    gpus = client.run(_cuda_devices, workers=chosen)
    short = [w for w, h in zip(chosen, hosts) if gpus.get(w, 0) < hosts.count(h)]
    if not short:
        return "cuda", local
    if want == "cuda":
        worker = short[0]
        raise UserError(f"--device cuda with --ddp {len(chosen)}: worker {worker} sees {gpus.get(worker, 0)} CUDA "
                        f"device(s) for the {hosts.count(hosts[chosen.index(worker)])} rank(s) on its machine",
                        "every rank needs a GPU of its own: start one worker per GPU, lower --ddp, "
                        "or use --device cpu")
    return "cpu", local


def _cuda_devices() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class RankLost(Exception):
    """A worker holding a rank left the cluster (killed, restarted by its nanny, lost)."""


class RanksKeptFailing(RuntimeError):
    """Workers holding ranks left more than ``MAX_RESTARTS`` times in one run."""


def _gone(client: Any, chosen: list[str]) -> list[str]:
    present = client.scheduler_info()["workers"]
    return [w for w in chosen if w not in present]


def _wait(client: Any, futures: list, chosen: list[str], stop: Any, stop_event: Any) -> list:
    """Every rank's result. Meanwhile: a Ctrl-C in the trainer (``stop``)
    becomes the ranks' stop event; a rank that fails, or a worker that leaves,
    ends the wait at once instead of leaving the others blocked."""
    from distributed import wait

    asked, checked = False, time.monotonic()
    while True:
        try:
            wait(futures, timeout=0.25)
        except TimeoutError:
            pass
        failed = [f for f in futures if f.status in ("error", "cancelled")]
        if failed:
            # A rank whose peer died fails in a collective; the scheduler may
            # take a moment to notice the dead worker itself.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not _gone(client, chosen):
                time.sleep(0.25)
            gone = _gone(client, chosen)
            if gone:
                client.cancel(futures)
                raise RankLost(gone[0])
            return client.gather(failed)   # raises the rank's own error
        if all(f.status == "finished" for f in futures):
            return client.gather(futures)
        if stop is not None and stop.requested and not asked:
            stop_event.set()
            asked = True
        if time.monotonic() - checked < 2.0:
            continue
        checked = time.monotonic()
        gone = _gone(client, chosen)
        if gone:
            client.cancel(futures)
            raise RankLost(gone[0])


def _forget(client: Any, segment: str) -> None:
    """Drop a finished segment's rendezvous Variable from the scheduler."""
    from distributed import Variable

    with contextlib.suppress(Exception):
        Variable(segment, client=client).delete()


def preflight(client: Any, world: int, rank_bytes: int) -> list[str]:
    """The workers the ranks go to (the first ``world`` by address); refuses,
    before anything runs, too few workers or one whose memory limit cannot
    hold a rank (its nanny would kill it over and over)."""
    from .cluster import THRESHOLDS
    from .sizes import format_size

    info = client.scheduler_info()["workers"]
    if len(info) < world:
        raise UserError(f"--ddp {world} needs {world} Dask workers, the cluster has {len(info)}",
                        f"use --workers {world} (local), start more `dask worker` processes, or lower --ddp")
    chosen = sorted(info)[:world]
    for w in chosen:
        limit = info.get(w, {}).get("memory_limit") or 0
        if limit and rank_bytes > limit * THRESHOLDS["terminate"]:
            raise UserError(f"--ddp: a rank needs about {format_size(rank_bytes)} (a worker process with torch, "
                            f"the model, its optimiser moments and the shuffle buffer); worker {w} has a "
                            f"{format_size(limit)} memory limit",
                            "give the workers more memory (--memory-budget with fewer --workers, or "
                            "`dask worker --memory-limit`), or lower --max-features, --hidden or --shuffle-buffer")
    return chosen


def train_ranks(client: Any, world: int, job: RankJob, events: Any, start: RankStart | None = None,
                on_pause: Callable[[str, RankStart], None] | None = None, stop: Any = None,
                device: str = "cpu", rank_bytes: int = 0) -> dict:
    """Run ``world`` ranks on distinct workers, in segments: ranks pause when
    a checkpoint is due (``on_pause`` writes it; it may raise to end the run)
    and go on from there. Returns rank 0's result with every rank's weight
    digest (equal, or this raises) and the workers used."""
    from distributed import Event

    stop_name = f"lancetnic-flow-stop-{uuid.uuid4().hex}"
    stop_event = Event(stop_name, client=client)

    def place() -> tuple[list[str], RankJob]:
        """Ranks to workers (the first ``world`` by address), the device, and rank 0's host."""
        chosen = preflight(client, world, rank_bytes)
        kind, local = _choose_device(client, chosen, device)
        host = client.submit(worker_host, workers=[chosen[0]], pure=False).result()
        placed = dataclasses.replace(job, address=host, device=kind, backend="nccl" if kind == "cuda" else "gloo",
                                     local_ranks=local, stop_event=stop_name)
        events.emit("ddp", ranks=world, workers=chosen, backend=placed.backend, device=kind)
        return chosen, placed

    if chosen_protocol(client) == "tls":
        events.emit("warning", message="--ddp on a TLS cluster: Dask's messages are encrypted, the ranks' "
                                       "torch.distributed gradient exchange is not (gloo and nccl speak plain "
                                       "TCP); use --ddp where the network between the workers is trusted")
    chosen, job = place()
    restarts = 0
    clocks: list[dict] = [{} for _ in range(world)]   # per rank, summed over segments

    received: dict[tuple[str, int], int] = {}   # (segment, rank) -> events relayed

    def relay(event: tuple) -> None:
        _, msg = event
        key = (msg.pop("segment"), msg["rank"])
        received[key] = received.get(key, 0) + 1
        kind = msg.pop("kind")
        if kind == "epoch":
            from .trainer import _VAL_KEYS

            events.emit("epoch", **msg["record"], **{f"val_{k}": msg["val"].get(v) for k, v in _VAL_KEYS.items()})
        else:
            events.emit("rank", **msg)

    client.subscribe_topic(EVENT_TOPIC, relay)
    finished = False
    try:
        while True:
            segment = f"lancetnic-flow-ddp-{uuid.uuid4().hex}"   # a fresh rendezvous each segment
            seg = dataclasses.replace(job, segment=segment)
            # The start state (weights, optimiser moments) goes to the ranks' workers once, not through the scheduler.
            shipped = client.scatter(start, workers=chosen, broadcast=True, hash=False) if start else None
            futures = [client.submit(run_rank, r, seg, shipped, workers=[w], allow_other_workers=False, pure=False,
                                     key=f"{segment}-rank-{r}")
                       for r, w in enumerate(chosen)]
            try:
                results = _wait(client, futures, chosen, stop, stop_event)
            except RankLost as lost:
                # The segment is lost, not the run: start it again from where it
                # began (the last checkpoint, or the run's start) on the workers there are now.
                restarts += 1
                if restarts > MAX_RESTARTS:
                    raise RanksKeptFailing(f"worker {lost} left the cluster during --ddp training, the "
                                           f"{MAX_RESTARTS + 1}th time a rank's worker was lost in this run") from None
                where = (f"epoch {start.epoch + 1}, step {start.batches}" if start is not None
                         else "the start of training")
                events.emit("warning", message=f"worker {lost} left during --ddp training; "
                                               f"restarting the ranks from {where}")
                client.wait_for_workers(world, timeout=120)
                chosen, job = place()
                continue
            finally:
                del futures, shipped
                _forget(client, segment)
            # A rank's events travel through the scheduler, its result straight
            # back: let the last progress and epoch events arrive before going on.
            deadline = time.monotonic() + 10
            while (any(received.get((segment, r), 0) < res["events"] for r, res in enumerate(results))
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            digests = [r["digest"] for r in results]
            for r, c in zip(results, clocks):
                for k, v in r["clock"].items():
                    c[k] = c.get(k, 0.0) + v
            if len(set(digests)) != 1:
                raise RuntimeError(f"the --ddp replicas diverged (weight digests {digests})")
            head = results[0]
            reason = head["reason"]
            if reason == "done":
                break
            start = RankStart(epoch=head["epoch"], batches=head["batches"], step=head["step"], stale=head["stale"],
                              rows=head["rows"], history=head["history"], best=head["best"],
                              train_metrics=head["train_metrics"], model=head["model"],
                              optimizers=head["optimizers"], rng=[r["rng"] for r in results])
            del results, head
            if on_pause is not None:
                on_pause(reason, start)   # writes the checkpoint; raises when the trainer was asked to stop
        finished = True
    finally:
        client.unsubscribe_topic(EVENT_TOPIC)
        if finished:
            stop_event.clear()
        else:
            # The trainer is leaving (an error, a second Ctrl-C): ranks still
            # running on a cluster that outlives it stop at their next step.
            with contextlib.suppress(Exception):   # the scheduler may be what failed
                stop_event.set()
    head["digests"] = digests
    head["rank_seconds"] = [{k: round(v, 3) for k, v in c.items()} for c in clocks]
    head["workers"] = chosen
    head["device"], head["backend"] = job.device, job.backend
    return head
