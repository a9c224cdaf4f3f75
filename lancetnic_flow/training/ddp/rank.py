"""One ``--ddp`` rank, running as a long task on a Dask worker.

Every rank holds a replica of the model and streams a disjoint, seeded share
of the cached shards (:func:`share`); each step is the shared training step
(:mod:`..step`) with the gradient exchange (:func:`.comm.sync_gradients`)
between the backward pass and the update, so the replicas stay equal without
broadcasting weights. A rule that averages weights instead (the linear
model's hinge step, ``TrainingRule.averages_weights``) steps on its own share
alone and the ranks average their weights (:func:`.comm.average_weights`)
at every sync: each epoch's end, and a pause; its checkpoints fall at syncs
only, where every replica holds the same weights. Ranks run out of data at different steps; a rank
without a batch contributes nothing, and the epoch ends when no rank has one.
Rank 0 evaluates on the validation shards and reports progress to the
trainer as Dask worker events (topic ``EVENT_TOPIC``).

A segment of training ends when the run ends, when a checkpoint is due, or
when the trainer asks to stop: every rank then returns where it is (a
:class:`TrainState` on rank 0; its RNG state and a weight digest on every rank).
"""
from __future__ import annotations

import contextlib
import gc
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ...allocator import on_huge_pages, trim_allocator
from ...config import CheckpointEvery, TrainingConfig
from ...dataflow.stream import prefetch
from ...models.tasks import TaskMetrics
from ..state import TrainState
from .cadence import cadence
from .comm import (DIGEST_MOD, average_weights, gather_metrics, pin_interface, rendezvous, rng_state, set_rng_state,
                   sync_gradients, to_cpu, warm_digest, weight_digest, worker_host)
from .meets import Meets
from .quiet import quiet_worker
from .shares import rank_batches, share, steps_in

EVENT_TOPIC = "lancetnic-flow-rank"
PAUSE_CHECKPOINT, PAUSE_STOP = 1, 2
# Rows of kept-row steps a rank trains in one compiled call (docs/benchmarks.md, "Steps in one call").
PICKED_RUN_ROWS = 4096


@dataclass
class RankJob:
    """What every rank needs; plain data, shipped to the workers by Dask."""

    world: int
    training: TrainingConfig  # epochs, the global batch size (each rank takes its part a step: rank_batches), lr, …
    net: str                  # model.json's "net" and "kwargs": the model every rank builds
    model_kwargs: dict
    task: dict                # Task(**task)
    train_shards: list        # ShardInfo, all of them: each rank takes its share
    val_shards: list
    cache_options: dict
    every: CheckpointEvery    # pause for a checkpoint every N steps or T seconds (rank 0's clock), and at an
                              # epoch's end if one is due then (N steps: always)
    features: Any = None      # FittedFeatures: finishes raw shards (term counts) into model rows
    fresh: Any = None         # dataflow.fresh.FreshReader with --cache none: the shards are FreshPieces,
                              # partitions each rank featurises itself every time it reads them
    address: str = ""         # rank 0's host: its rendezvous store listens there
    segment: str = ""         # names this segment's rendezvous (a Dask Variable holding the store's port)
    backend: str = "gloo"
    device: str = "cpu"                       # "cuda": each rank on a GPU of its own (nccl)
    local_ranks: list = field(default_factory=list)   # each rank's index among the ranks on its machine
    stop_event: str | None = None             # a distributed.Event the trainer sets on Ctrl-C
    rule: str = "gradient"                    # the model's training rule (registry.ModelSpec.rule)
    decay_steps: int = 0                      # registry.ModelSpec.decay_steps
    model_entry: tuple | None = None          # models.registration: a model the user's script registered
    keep_bytes: int = 0                       # finished shards a rank keeps between epochs (driver.rank_keep_bytes)
    floor: int = 0                            # validation rows below which no epoch is chosen (step.keep_best)


def rank_device(job: RankJob, rank: int) -> torch.device:
    """The device rank ``rank`` trains on: its own GPU (the ``local_ranks``-th
    one of its machine, as torchrun's LOCAL_RANK), or the CPU."""
    if job.device != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", job.local_ranks[rank] % torch.cuda.device_count())


def run_rank(rank: int, job: RankJob, start: TrainState | None = None) -> dict:
    """One rank of one segment: join the group, train on this rank's share
    from ``start`` until the run ends, a checkpoint is due or the trainer asks
    to stop; return where it is."""
    import torch.distributed as dist

    device = rank_device(job, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_num_threads(job.training.threads or 1)
    if job.world > 1:   # only ranks that average compare digests at every sync
        threading.Thread(target=warm_digest, name="lancetnic-digest", daemon=True).start()
    pin_interface(worker_host())
    dist.init_process_group(job.backend, store=rendezvous(job.segment, job.address, job.world, rank), rank=rank,
                            world_size=job.world)
    from distributed import get_worker

    try:
        # the rank holds this worker's thread for the segment: its housekeeping waits (quiet.py)
        with quiet_worker(get_worker()) as slowed:
            out = RankRun(rank, job, start or TrainState(), device, dist).run()
        out["quieted"] = sorted(slowed)
        return out
    finally:
        dist.destroy_process_group()
        # the worker lives on after its rank: hand the model, moments and
        # buffers back to the OS, or the next job's tasks start near the
        # nanny's kill line
        gc.collect()
        trim_allocator()


class RankRun:
    """The state of one rank in one segment, and its epochs."""

    def __init__(self, rank: int, job: RankJob, start: TrainState, device: torch.device, dist: Any):
        from distributed import Event, get_worker

        self.rank, self.job, self.tc, self.start, self.device, self.dist = rank, job, job.training, start, device, dist
        self.worker = get_worker()
        self._build(start)
        # Each rank shuffles with its own seed; one trainer task with the run's, so that it draws the batches
        # (and dropout) a run in the trainer's process draws from the cache: the same seed, the same model.
        self.stream_seed = self.tc.seed if job.world == 1 else self.tc.seed * 1000 + rank
        from ..step import lr_schedule

        total = sum(steps_in(job.train_shards, job.world, self.tc.seed, e, self.tc.batch_size, self.averaging)
                    for e in range(self.tc.epochs))
        # Averaging N replicas divides each row's step by N: a rule that averages steps at N × the
        # rate, so a row moves the averaged weights as far as in one process (measured in
        # docs/benchmarks.md: at the plain rate 2 ranks lost 0.7 points, 4 ranks 1.8).
        rate = self.tc.lr * (job.world if not self.rule.exchanges_gradients else 1)
        self.schedule = lr_schedule(self.tc.lr_schedule, rate, max(1, total), self.job.decay_steps)
        self.state = TrainState(step=start.step, stale=start.stale, best=start.best, history=list(start.history),
                                confusions=list(start.confusions))
        self.stop_event = Event(job.stop_event) if job.stop_event and rank == 0 else None
        # Where a rank's time goes: reading batches, its own forward/backward/step, the gradient exchange.
        self.clock = {"data": 0.0, "compute": 0.0, "exchange": 0.0}
        self.sent_bytes = 0               # weights this rank sent averaging them (rules that average)
        self.counted: dict = {}           # --cache none: the row accounting of each partition it featurised
        self.kept: dict = {}              # finished shards kept between epochs, by URL, up to job.keep_bytes
        self.kept_bytes = 0
        self.picked: Any = None           # this epoch's KeptEpoch, when it trains on kept rows in place
        self.picked_epochs = 0            # epochs trained on kept rows in place
        self.reads: dict = {}             # shards read from the cache by split ("train", "val"); with
                                          # --cache none, "featurised": the partitions featurised
        self.tokens = 0                   # tokens trained since the last progress report
        self.polled, self.sent = 0.0, 0   # events this rank sent in this segment: the trainer waits for all
        self.t0 = time.monotonic()        # the segment's start: the last checkpoint
        self._last_val: dict = {}

    def _build(self, start: TrainState) -> None:
        from ...models import build_model, register
        from ...models.tasks import Task
        from ..rules import RULES

        if self.job.model_entry is not None:   # this worker may not have the user's model registered
            register(self.job.model_entry)

        self.rule = RULES[self.job.rule](self.tc)
        self.rule.decay_steps = self.job.decay_steps
        self.rule.warm()   # the margin kernel compiles while the first shards load
        if hasattr(self.rule, "train_picked") and self.job.keep_bytes and self.job.fresh is None:
            from ...models.margin import warm_picks   # the step over kept rows, used from epoch 2 on

            threading.Thread(target=warm_picks, name="lancetnic-picks", daemon=True).start()
        if not (self.rule.exchanges_gradients or self.rule.averages_weights):
            raise RuntimeError(f"the {self.job.rule} rule neither exchanges gradients nor averages weights: its "
                               "spec refuses --ddp")
        self.averaging = not self.rule.exchanges_gradients
        torch.manual_seed(self.tc.seed)   # the same initial weights on every rank
        self.model = build_model(self.job.net, **self.job.model_kwargs)
        self.rule.prepare(self.model)   # LinearSVM's twin with --learn-val (a world of one only: resolve.py)
        self.model.to(self.device)
        on_huge_pages(self.model)   # the hinge step reads weight rows at random: TLB misses
        self.opts = self.rule.optimizers(self.model)
        # With --sync-rows touched, the sparse rows this rank's steps changed since the last sync: a
        # sync averages only the rows some rank touched; the others are equal on every rank already.
        layer = getattr(self.model, "input", None)
        self.touched = (np.zeros(layer.weight.shape[0], np.bool_)
                        if self.averaging and self.job.world > 1 and self.tc.sync_rows == "touched"
                        and getattr(layer, "weight", None) is not None else None)
        if self.job.world > 1:
            torch.manual_seed(self.tc.seed * 1000 + self.rank)   # but each rank its own dropout
        if start.model is None and start.step:
            # Never train on from fresh weights in the middle of a run.
            raise RuntimeError(f"rank {self.rank} was given the state of step {start.step} without its weights")
        if start.model is not None:
            self.model.load_state_dict(start.model)
            for o, st in zip(self.opts, start.optimizers or []):
                o.load_state_dict(st)
            set_rng_state(start.ddp["rng"][self.rank], self.device)
            # The shipped copy is this worker's data for as long as the task runs: drop its
            # tensors now, so the worker holds one model and one set of moments, not two.
            start.model = start.optimizers = None
        weights = self.job.task.get("class_weights")
        self.task = Task(**{**self.job.task, "class_weights": None if weights is None else weights.to(self.device)},
                         device=self.device)

    def blocks(self, info: Any):
        """A cached shard as model rows (a raw shard of the counting fit pass is
        finished here); without a cache, the piece's partition featurised here."""
        from ...dataflow.shards import load_shard

        if self.job.fresh is not None:
            self.reads["featurised"] = self.reads.get("featurised", 0) + 1   # a partition, featurised here
            yield from self.job.fresh.blocks(info, self.job.features, self.counted)
            return
        kept = self.kept.get(info.url)
        if kept is None:
            self.reads[info.split] = self.reads.get(info.split, 0) + 1
            block = load_shard(info, self.job.cache_options)
            kept = self.job.features.finish(block) if info.raw else block
            # A rank that averages owns its share: each shard it reads comes back every epoch. Shares
            # of a gradient rule are dealt again each epoch: one read once may come back later.
            if self.kept_bytes + kept.nbytes <= self.job.keep_bytes:
                self.kept[info.url] = kept
                self.kept_bytes += kept.nbytes
        yield kept

    def read(self, shards: list):
        """The rows of ``shards``, in order."""
        return (block for info in shards for block in self.blocks(info))

    # ---- talking to the trainer
    def stop_asked(self) -> bool:
        """Rank 0 asks the scheduler at most twice a second whether the trainer wants to stop.
        Once read, the event is cleared (and so gone from the scheduler): a trainer that
        left, or a lost segment's, would otherwise leave it there for the cluster's life."""
        if self.stop_event is None or time.monotonic() - self.polled < 0.5:
            return False
        self.polled = time.monotonic()
        if not self.stop_event.is_set():
            return False
        with contextlib.suppress(Exception):
            self.stop_event.clear()
        self.stop_event = None   # this rank stops now; it asks no more
        return True

    def report(self, kind: str, **data: Any) -> None:
        self.sent += 1
        self.worker.log_event(EVENT_TOPIC, {"kind": kind, "rank": self.rank, "world": self.job.world,
                                            "segment": self.job.segment, "worker": self.worker.address, **data})

    def digest(self) -> int:
        # The replicas must have stayed equal: the trainer compares these.
        return weight_digest(self.model)

    def pause(self, reason: str, epoch: int, batches: int, clock: Any, train_m: TaskMetrics | None) -> dict:
        """Where this rank is: enough for the next segment (or a resumed run) to go on exactly;
        ``clock`` (an epoch's rows and seconds so far) is None at an epoch's end."""
        s = self.state
        out = {"reason": reason, "rng": to_cpu(rng_state(self.device)), "step": s.step, "digest": self.digest(),
               "clock": self.clock, "events": self.sent, "sent_bytes": self.sent_bytes, "counted": self.counted,
               "kept_bytes": self.kept_bytes, "reads": self.reads,
               "picked_epochs": self.picked_epochs}
        if self.rank == 0:
            out["state"] = TrainState(
                epoch=epoch, batches=batches, rows=clock.rows if clock else 0, seconds=clock.seconds if clock else 0.0,
                step=s.step, stale=s.stale, history=s.history,
                confusions=s.confusions, best=to_cpu(s.best),
                train_metrics=train_m.state() if train_m is not None else None,
                model=to_cpu(self.model.state_dict()), optimizers=to_cpu([o.state_dict() for o in self.opts]))
        return out

    # ---- training
    def run(self) -> dict:
        for epoch in range(self.start.epoch, self.tc.epochs):
            paused = self._epoch(epoch)
            if paused is not None:
                return paused
            early, asked, due = self._end_epoch(epoch)
            if early:
                break
            if epoch + 1 < self.tc.epochs and (asked or due):
                return self.pause("interrupt" if asked else "epoch", epoch + 1, 0, None, None)
        out = {"reason": "done", "digest": self.digest(), "steps": self.state.step, "rng": None,
               "clock": self.clock, "events": self.sent, "sent_bytes": self.sent_bytes, "counted": self.counted,
               "kept_bytes": self.kept_bytes, "reads": self.reads,
               "picked_epochs": self.picked_epochs}
        if self.rank == 0:
            s = self.state
            # The best epoch's copy, or the last epoch's weights (a rule that keeps the last keeps no copy).
            kept = s.best.pop("state", None) if s.best is not None else None
            if kept is not None:
                self.model.load_state_dict(kept)
                del kept
            calibration, seconds = self._calibrate()
            out.update(weights=to_cpu(self.model.state_dict()), history=s.history, confusions=s.confusions,
                       best=to_cpu(s.best), last_val=self._last_val, calibration=calibration,
                       calibrate_seconds=seconds, top_rows=self._top_rows())
        return out

    def _calibrate(self) -> tuple[Any, float]:
        """Rank 0, after the last epoch, on the kept weights: the probability scale
        of a margin model's scores and a multilabel run's thresholds, fitted on
        the validation shards here, so the trainer reads none (models/calibrate.py)."""
        from ...models.calibrate import Calibration, calibrate

        if not self.job.val_shards or not (self.rule.scales_logits or self.task.multilabel):
            return Calibration(), 0.0
        self.report("stage", stage="calibrating")
        tick = time.monotonic()
        out = calibrate(self.model, prefetch(self.read(self.job.val_shards)), scale=self.rule.scales_logits,
                        again=lambda: prefetch(self.read(self.job.val_shards)))
        return out, time.monotonic() - tick

    def _top_rows(self) -> Any:
        """Rank 0, on the weights it sends (calibrated): each class's strongest
        terms as weights and feature ids (runs/explain.top_rows), computed here,
        where the compiled kernels are loaded; the trainer only names them. None
        where the trainer computes them itself: a twin it will adopt, or a
        network that is not a sum over terms."""
        from ...models.margin import has_twin
        from ...runs.explain import exact_decomposition, top_rows

        if self.job.features is None or has_twin(self.model):
            return None
        dec = exact_decomposition(self.model, {"net": self.job.net, "kwargs": self.job.model_kwargs},
                                  self.job.features.target)
        return top_rows(dec) if dec is not None else None

    def rank_batch(self, epoch: int) -> int:
        """This rank's rows a step in ``epoch``: its part of the global batch, --batch-size as in a
        single-process run, so the same learning rate and schedule apply (:func:`.shares.rank_batches`)."""
        job = self.job
        return rank_batches(job.train_shards, job.world, self.tc.seed, epoch, self.tc.batch_size,
                            self.averaging)[self.rank]

    def _stream(self, epoch: int):
        from ...dataflow.stream import BatchStream

        job, tc = self.job, self.tc
        mine = share(job.train_shards, self.rank, job.world, tc.seed, epoch, self.averaging)
        self.picked = self._kept_epoch(mine, epoch)
        if self.picked is not None:
            self.picked_epochs += 1
            return iter(self.picked)
        return iter(BatchStream(lambda: self.read(mine), batch_size=self.rank_batch(epoch),
                                shuffle_buffer=tc.shuffle_buffer, seed=self.stream_seed, epoch=epoch,
                                by_length=getattr(self.model, "batches_by_length", False)))

    def _kept_epoch(self, mine: list, epoch: int) -> Any:
        """The epoch as batches named in the kept shards (:mod:`~...dataflow.kept`),
        when every shard of this rank's share is kept and the rule can train on
        rows in place; else None (the epoch streams its batches)."""
        from ...dataflow.kept import KeptEpoch
        from ...models.margin import has_twin

        if not (self.averaging and hasattr(self.rule, "train_picked") and self.job.fresh is None
                and self.touched is None and not getattr(self.model, "batches_by_length", False)
                and not has_twin(self.model)):
            return None
        blocks = [self.kept.get(s.url) for s in mine]
        if not any(b is not None and len(b) for b in blocks) or any(b is None for b in blocks) \
                or not KeptEpoch.fits(blocks):
            return None
        return KeptEpoch(blocks, batch_size=self.rank_batch(epoch), shuffle_buffer=self.tc.shuffle_buffer,
                         seed=self.stream_seed, epoch=epoch)

    def _flag(self, done: int, since_batches: int, since_t: float) -> int:
        """Rank 0's word to every rank this step: go on, pause for a checkpoint, or stop."""
        if self.rank != 0:
            return 0
        if self.stop_asked():
            return PAUSE_STOP
        if self.averaging:   # replicas differ between syncs: checkpoints wait for the epoch's end
            return 0
        return PAUSE_CHECKPOINT if self.job.every.due(done + 1 - since_batches, time.monotonic() - since_t) else 0

    def _epoch(self, epoch: int) -> dict | None:
        """Train one epoch of steps; a pause's result if a checkpoint is due or a stop was asked."""
        from .. import optim
        from .. import step as steps

        stream = self._stream(epoch)
        job = self.job
        planned = steps_in(job.train_shards, job.world, self.tc.seed, epoch, self.tc.batch_size, self.averaging)
        cad = cadence(job.world, planned, self.tc.sync_every)
        if self.rank == 0:   # the dashboard's stage, as a run in the trainer's process shows it
            self.report("stage", stage="training", epoch=epoch + 1, epochs=self.tc.epochs,
                        total_rows=sum(s.rows for s in self.job.train_shards), source="cluster",
                        ranks=self.job.world, monitor=self.tc.monitor)
        train_m = self.task.new_metrics()
        done = self.start.batches if epoch == self.start.epoch else 0   # steps of this epoch already trained
        # An epoch continued (a resume, or the next segment after a periodic checkpoint) goes on from
        # the seconds it had trained and each rank's own rows: its record and progress are the epoch's.
        clock = steps.EpochClock(seconds=self.start.seconds if done else 0.0)
        for _ in range(done):
            replayed = next(stream, None)   # the stream is a pure function of seed and epoch: replay, don't retrain
            clock.rows += len(replayed) if replayed is not None else 0
        if done and self.rank == 0:
            train_m.load_state(self.start.train_metrics)
        since_batches, since_t, last = done, time.monotonic(), 0.0
        self._synced_at = done   # an epoch starts, and a segment goes on, from a sync
        self._meets = Meets(self.dist, self.device, self.rank, done)   # rules that average: the ranks' meets
        while True:
            tick = time.perf_counter()
            group = self._picked_run(next(stream, None), stream, done, planned, cad)   # this step's batch, or more
            self.clock["data"] += time.perf_counter() - tick
            tick = time.perf_counter()
            if self.averaging:
                outs, active, flag = self._averaging_steps(
                    group, tick, done, planned, lambda: self._flag(done, since_batches, since_t))
                if not active:
                    break
            else:
                batch, out, loss = group[0], None, None
                if batch is not None:
                    out, loss = self.rule.backward(self.model, self.task, self.opts, batch, self.device)
                else:
                    optim.zero_grad(self.opts)
                    self.model.input.active = None
                flag = self._flag(done, since_batches, since_t)
                self.clock["compute"] += time.perf_counter() - tick
                tick = time.perf_counter()
                active, flag = sync_gradients(self.model, len(batch) if batch is not None else 0, self.dist, flag)
                self.clock["exchange"] += time.perf_counter() - tick
                if not active:
                    break
                optim.mean_over(self.opts, active)   # the step's rows on every rank
                tick = time.perf_counter()
                self.rule.update(self.opts, self.model, self.schedule(self.state.step))
                self.clock["compute"] += time.perf_counter() - tick
                outs = [(out, loss)]
            for batch, (out, loss) in zip(group, outs):
                self.state.step += 1
                done += 1
                if self.averaging and cad.due(done):
                    self._average(done)   # every rank is at the same step: the steps go in lockstep
                if batch is not None:
                    clock.rows += len(batch)
                    self.tokens += batch.nnz if self.picked is not None else int(batch.offsets[-1])
                    steps.count(train_m, out, batch, loss)
                    if time.monotonic() - last >= 0.5:
                        self._progress(epoch, clock, loss=loss.item())
                        last = time.monotonic()
            if flag:
                self._progress(epoch, clock, loss=train_m.result().get("loss"))
                self._average(done)   # a pause is a sync: the checkpoint holds the replicas' one set of weights
                train_m = gather_metrics(train_m, self.dist, self.task.new_metrics)   # rank 0 continues them
                return self.pause("interrupt" if flag == PAUSE_STOP else "periodic", epoch, done, clock, train_m)
        self._average(done)
        clock.stop()
        self._progress(epoch, clock, loss=train_m.result().get("loss"), done=True)
        # The epoch's record (history.csv: rows, rows_per_s) counts every rank's rows, not this one's share.
        clock.rows = sum(s.rows for s in job.train_shards)
        # ... and its train figures every rank's batches, not rank 0's share of them.
        self._train_m, self._epoch_clock = gather_metrics(train_m, self.dist, self.task.new_metrics), clock
        return None

    def _picked_run(self, batch: Any, stream: Any, done: int, planned: int, cad: Any) -> list:
        """``batch`` (this step's), and on kept rows the batches of the steps after it up to
        the next meet, the next sync or the planned last step, :data:`PICKED_RUN_ROWS` rows
        at most: one compiled call trains them (:func:`~...models.margin.picked_steps`),
        with the results of a call a step. Between calls the loop's Python pushes the
        step's hot weight rows out of the core's cache (docs/benchmarks.md)."""
        if batch is None or self.picked is None:
            return [batch]
        end = min(self._meets.next, planned)   # a meet follows the step that brings the epoch to ``end``
        if cad.every:
            end = min(end, (done // cad.every + 1) * cad.every)
        group = [batch]
        while len(group) < min(end - done, PICKED_RUN_ROWS // len(batch)):
            more = next(stream, None)
            if more is None:   # this rank's share is done: the steps after have no batch
                break
            group.append(more)
        return group

    def _averaging_steps(self, group: list, tick: float, done: int, planned: int, flag: Callable[[], int]) -> tuple:
        """The steps of ``group`` (a step's batch, or None; on kept rows, several steps'
        batches up to a meet: :meth:`_picked_run`) of a rule that averages weights
        (``tick``: when they began): this rank's own updates, then a meet of the ranks
        when one is due after the last (:mod:`.meets`), where ``flag()`` (rank 0's word:
        asked at meets only, so a stop it reads is never dropped) is posted. Returns each
        step's outputs and loss, and what the ranks agreed at the meet read here: whether
        any rank had a batch, the flag."""
        batch, outs = group[0], [(None, None)]
        if batch is not None and self.picked is not None:   # kept rows, named in place
            outs = self.rule.train_picked_steps(self.model, self.picked, group,
                                                [self.schedule(self.state.step + i) for i in range(len(group))])
        elif batch is not None:
            outs = [self.rule.train_batch(self.model, self.task, self.opts, batch, self.device,
                                          self.schedule(self.state.step))]
            if self.touched is not None:
                self.touched[batch.indices] = True
        done += len(group) - 1   # the meet's step: the group's last
        self.clock["compute"] += time.perf_counter() - tick
        if not self._meets.due(done + 1, planned):
            return outs, 1, 0
        tick = time.perf_counter()
        active, word = self._meets.meet(done + 1, planned, group[-1] is not None, flag())
        if not active or word:   # the epoch ends or pauses: every rank reads the meet still in flight
            self._meets.drain()
        self.clock["exchange"] += time.perf_counter() - tick
        return outs, active, word

    def _average(self, done: int) -> None:
        """A rule that averages weights: the replicas become their mean (a no-op for gradient rules),
        unless they did at step ``done`` of the epoch already: a cadence step that was the epoch's
        last (or a pause's) was averaged, then the epoch's end sent every weight again for nothing
        (``ddp.rank_sent_bytes`` counted 9 syncs an epoch where ``ddp.sync`` said 8)."""
        if done == self._synced_at:
            return
        self._synced_at = done
        if self.averaging and self.job.world > 1:   # one trainer task has nothing to average with
            tick = time.perf_counter()
            self.sent_bytes += average_weights(self.model, self.dist, self.touched)
            if self.touched is not None:
                self.touched[:] = False
            # Averaged replicas are equal bit for bit; one that is not (a bug) is not trained on. The
            # digest travels as int64 bits, its complement beside it: the most of both is the least.
            d = self.digest()
            signed = d - DIGEST_MOD if d >= DIGEST_MOD // 2 else d
            spread = torch.tensor([signed, ~signed], dtype=torch.int64, device=self.device)
            self.dist.all_reduce(spread, op=self.dist.ReduceOp.MAX)
            most, least = spread[0].item() % DIGEST_MOD, ~spread[1].item() % DIGEST_MOD
            if most != least:
                raise RuntimeError(f"the --ddp replicas differ after averaging their weights (weight digests "
                                   f"{least} and {most})")
            self.clock["exchange"] += time.perf_counter() - tick

    def _progress(self, epoch: int, clock: Any, **data: Any) -> None:
        self.report("progress", epoch=epoch + 1, epochs=self.tc.epochs, rows=clock.rows, rows_per_s=clock.rate(),
                    tokens=self.tokens, **data)
        self.tokens = 0   # tokens since the last report

    def _end_epoch(self, epoch: int) -> tuple[bool, bool, bool]:
        """Rank 0 evaluates and keeps the best weights; every rank learns
        whether to stop early, whether the trainer asked to stop, and whether
        an epoch-end checkpoint is due."""
        from .. import step as steps

        stop = torch.zeros(3, device=self.device)   # [early stop, the trainer asked to stop, checkpoint due]
        if self.rank == 0:
            s, job = self.state, self.job
            self.report("stage", stage="evaluating", epoch=epoch + 1, epochs=self.tc.epochs)
            # With --learn-val (one rank only) the twin learns the validation rows as they are scored.
            then = self.rule.while_validating(self.model, self.schedule(s.step), self.tc.seed, epoch)
            val_m = (steps.evaluate_blocks(self.model, prefetch(self.read(job.val_shards)), self.task, self.device,
                                           then=then)
                     if job.val_shards else None)
            val = val_m.result() if val_m is not None else {}
            if val.get("rows") == 0:   # --cache none reads the pieces to learn they hold no validation row
                val_m, val = None, {}
            record = steps.epoch_record(epoch + 1, self._train_m, val, self._epoch_clock,
                                        self.rule.rate(self.schedule(s.step)), steps.decided_at(self.task))
            s.history.append(record)
            s.confusions.append(val.get("confusion"))
            self._last_val = val
            self.report("epoch", record=record)
            s.best, s.stale = steps.keep_best(s.best, s.stale, val, val_m, self.model, epoch + 1, self.tc.monitor,
                                              copy=not self.rule.keeps_last_epoch(), floor=self.job.floor)
            if self.tc.early_stopping and s.stale >= self.tc.early_stopping:
                stop[0] = 1.0
            self.polled = 0.0
            stop[1] = 1.0 if self.stop_asked() else 0.0
            every = job.every
            stop[2] = 1.0 if every.batches or (every.seconds and time.monotonic() - self.t0 >= every.seconds) else 0.0
        self.dist.broadcast(stop, 0)   # every rank stops together
        return bool(stop[0].item()), bool(stop[1].item()), bool(stop[2].item())
