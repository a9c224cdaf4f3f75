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
"""
from __future__ import annotations

import dataclasses
import socket
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .errors import UserError

EVENT_TOPIC = "lancetnic-flow-rank"


@dataclass
class RankJob:
    """What every rank needs; plain data, shipped to the workers by Dask."""

    world: int
    address: str
    port: int
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


def free_port() -> int:
    """A port free on this machine now (run on rank 0's worker)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def worker_host() -> str:
    from distributed import get_worker

    return get_worker().address.split("://", 1)[-1].rsplit(":", 1)[0]


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


def _sync_gradients(model: torch.nn.Module, has_batch: bool, dist: Any) -> int:
    """Make every replica's gradients the mean over the ranks that had a batch;
    returns how many had one (0: the epoch is over everywhere)."""
    layer = model.input
    row_wise = getattr(layer, "row_wise", False) and layer.training
    dense = [p for n, p in model.named_parameters() if not (row_wise and n == "input.weight")]
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in dense]
                     + [torch.tensor([1.0 if has_batch else 0.0])])
    dist.all_reduce(flat)
    active = int(round(flat[-1].item()))
    if active == 0:
        return 0
    flat = flat[:-1] / active
    offset = 0
    for p in dense:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
    if row_wise:
        width = layer.weight.shape[1]
        if has_batch and layer.active is not None and layer.active[1].grad is not None:
            used, grad = layer.active[0], layer.active[1].grad
        else:
            used, grad = torch.zeros(0, dtype=torch.int64), torch.zeros(0, width)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
        dist.all_gather(sizes, torch.tensor([len(used)], dtype=torch.int64))
        most = max(int(s.item()) for s in sizes)
        pad_used = torch.zeros(most, dtype=torch.int64)
        pad_grad = torch.zeros(most, width)
        pad_used[:len(used)], pad_grad[:len(used)] = used, grad
        all_used = [torch.zeros(most, dtype=torch.int64) for _ in sizes]
        all_grad = [torch.zeros(most, width) for _ in sizes]
        dist.all_gather(all_used, pad_used)
        dist.all_gather(all_grad, pad_grad)
        ids = torch.cat([u[:int(s.item())] for u, s in zip(all_used, sizes)])
        grads = torch.cat([g[:int(s.item())] for g, s in zip(all_grad, sizes)])
        union, inverse = torch.unique(ids, return_inverse=True)
        summed = torch.zeros(len(union), width).index_add_(0, inverse, grads) / active
        rows = layer.weight.detach().index_select(0, union).requires_grad_()
        rows.grad = summed
        layer.active = (union, rows)
    return active


def run_rank(rank: int, job: RankJob) -> dict | None:
    """One rank: join the group, train on this rank's share, return the result (rank 0)."""
    import torch.distributed as dist
    from distributed import get_worker

    from . import optim
    from .models import build_model
    from .shards import load_shard
    from .stream import BatchStream, prefetch
    from .tasks import Task
    from .trainer import answers, evaluate_blocks, keep_best, model_inputs

    worker = get_worker()
    torch.set_num_threads(job.threads)
    dist.init_process_group(job.backend, init_method=f"tcp://{job.address}:{job.port}", rank=rank,
                            world_size=job.world)
    try:
        torch.manual_seed(job.seed)   # the same initial weights on every rank
        model = build_model(job.net, **job.model_kwargs)
        opts = optim.make_optimizers(model, job.optimizer, job.lr)
        torch.manual_seed(job.seed * 1000 + rank)   # but each rank its own dropout
        task = Task(**job.task)
        load = lambda info: load_shard(info, job.cache_options)  # noqa: E731
        # The global batch is --batch-size, as in a single-process run, so the
        # same learning rate and schedule apply; each rank takes its part.
        rank_batch = max(1, job.batch_size // job.world)
        total_steps = max(1, sum(steps_in(job.train_shards, job.world, job.seed, e, rank_batch)
                                 for e in range(job.epochs)))
        schedule = (lambda t: job.lr) if job.lr_schedule == "constant" else (
            lambda t: job.lr * max(0.05, 1.0 - t / total_steps))
        history: list[dict] = []
        best: dict | None = None
        stale, step = 0, 0

        def report(kind: str, **data: Any) -> None:
            worker.log_event(EVENT_TOPIC, {"kind": kind, "rank": rank, "world": job.world,
                                           "worker": worker.address, **data})

        for epoch in range(job.epochs):
            mine = share(job.train_shards, rank, job.world, job.seed, epoch)
            stream = iter(BatchStream(lambda mine=mine: (load(s) for s in mine), batch_size=rank_batch,
                                      shuffle_buffer=job.shuffle_buffer, seed=job.seed * 1000 + rank,
                                      epoch=epoch))
            train_m = task.new_metrics()
            rows, t0, last = 0, time.monotonic(), 0.0
            while True:
                batch = next(stream, None)
                if batch is not None:
                    labels, targets = answers(batch, torch.device("cpu"))
                    out = model(**model_inputs(batch, torch.device("cpu")))
                    loss = task.loss(out, labels, targets)
                    optim.zero_grad(opts)
                    loss.backward()
                else:
                    optim.zero_grad(opts)
                    model.input.active = None
                if not _sync_gradients(model, batch is not None, dist):
                    break
                optim.set_lr(opts, schedule(step))
                optim.step(opts, model, job.clip_grad)
                step += 1
                if batch is not None:
                    rows += len(batch)
                    train_m.update(out, batch.labels, batch.targets, loss.item() * len(batch))
                    now = time.monotonic()
                    if now - last >= 0.5:
                        report("progress", epoch=epoch + 1, epochs=job.epochs, rows=rows, loss=loss.item(),
                                rows_per_s=rows / max(now - t0, 1e-9))
                        last = now
            seconds = time.monotonic() - t0
            report("progress", epoch=epoch + 1, epochs=job.epochs, rows=rows, rows_per_s=rows / max(seconds, 1e-9),
                   loss=train_m.result().get("loss"), done=True)
            stop = torch.zeros(1)
            if rank == 0:
                val_m = (evaluate_blocks(model, prefetch(load(s) for s in job.val_shards), task,
                                         torch.device("cpu")) if job.val_shards else None)
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
            dist.broadcast(stop, 0)   # every rank stops together
            if stop.item():
                break
        # A digest of the final weights: the replicas must have stayed equal.
        digest = float(sum(p.detach().double().abs().sum().item() for p in model.parameters()))
        if rank != 0:
            return {"digest": digest, "steps": step}
        state = best.pop("state") if best is not None else model.state_dict()
        return {"state": {k: v.numpy() for k, v in state.items()}, "history": history, "best": best,
                "last_val": history[-1]["val"] if history else {}, "digest": digest, "steps": step}
    finally:
        dist.destroy_process_group()


def train_ranks(client: Any, world: int, job: RankJob, events: Any) -> dict:
    """Run ``world`` ranks on distinct workers; rank 0's result, with every
    rank's weight digest (equal, or this raises) and the workers used."""
    workers = sorted(client.scheduler_info()["workers"])
    if len(workers) < world:
        raise UserError(f"--ddp {world} needs {world} Dask workers, the cluster has {len(workers)}",
                        f"use --workers {world} (local), start more `dask worker` processes, or lower --ddp")
    chosen = workers[:world]
    host = client.submit(worker_host, workers=[chosen[0]], pure=False).result()
    port = client.submit(free_port, workers=[chosen[0]], pure=False).result()
    job = dataclasses.replace(job, address=host, port=port)
    events.emit("ddp", ranks=world, workers=chosen, backend=job.backend, address=f"{host}:{port}")

    def relay(event: tuple) -> None:
        _, msg = event
        kind = msg.pop("kind")
        if kind == "epoch":
            from .trainer import _VAL_KEYS

            events.emit("epoch", **msg["record"], **{f"val_{k}": msg["val"].get(v) for k, v in _VAL_KEYS.items()})
        else:
            events.emit("rank", **msg)

    client.subscribe_topic(EVENT_TOPIC, relay)
    try:
        futures = [client.submit(run_rank, r, job, workers=[w], allow_other_workers=False, pure=False,
                                 key=f"lancetnic-flow-rank-{r}-{port}")
                   for r, w in enumerate(chosen)]
        results = client.gather(futures)
    finally:
        client.unsubscribe_topic(EVENT_TOPIC)
    out = results[0]
    out["digests"] = [r["digest"] for r in results]
    if len(set(out["digests"])) != 1:
        raise RuntimeError(f"the --ddp replicas diverged (weight digests {out['digests']})")
    out["state"] = {k: torch.from_numpy(np.asarray(v)) for k, v in out["state"].items()}
    out["workers"] = chosen
    return out
