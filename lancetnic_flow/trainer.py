"""The training run, top to bottom: plan → fit → stream → train → save.

``train(config)`` is the whole story; each step is a call into the module
that owns it. Epoch 1 overlaps featurisation with training (shards are
consumed as the workers write them); later epochs, and later runs on the
same data and options, read the shards from the cache.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import torch

from . import optim
from .checkpoints import load_checkpoint, remove_checkpoint, save_checkpoint
from .cluster import (TRAINER_BASE, MemoryPlan, local_worker_threads, open_cluster, plan_for_existing,
                      plan_memory, scheduler_address)
from .config import CheckpointEvery, TrainConfig
from .errors import UserError
from .events import NULL_EVENTS, Events
from .features.vectorize import FittedFeatures
from .fit import fit_features
from .inputs import plan_training_sources, training_columns
from .models import MODELS, create_model
from .monitor import MemoryMonitor, trim_allocator
from .rows import RowBlock
from .plots import write_plots
from .runs import RunFolder, new_run_dir, save_run, write_json
from .shards import (CACHE_VERSION, Manifest, PartitionResult, ShardInfo, cache_key, featurize_partition, join,
                     load_or_repair, read_features, read_manifest, write_features, write_manifest)
from .sizes import format_size
from .sources import SourcePlan
from .stream import BatchStream, Featurizer, cached_blocks, epoch_order, live_blocks, prefetch
from .tasks import Task, TaskMetrics

ROW_BYTES_ESTIMATE = 2048  # a buffered row: ~200 non-zeros × (4 + 4) bytes + slack
# Scores where larger is better; the rest (loss, mae, rmse) are minimised.
_HIGHER_IS_BETTER = ("accuracy", "macro_f1", "r2")
# metrics.json name ← TaskMetrics key
_VAL_KEYS = {"loss": "loss", "accuracy": "accuracy", "macro_f1": "macro_f1", "precision": "macro_precision",
             "recall": "macro_recall", "mae": "mae", "rmse": "rmse", "r2": "r2", "baseline_rmse": "baseline_rmse"}


@dataclass
class TrainResult:
    run: str
    metrics: dict


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training: a checkpoint was written; ``str()`` says how to resume."""

    def __init__(self, run: str, epoch: int, batches: int):
        super().__init__(f"stopped in epoch {epoch}, after batch {batches}; checkpoint saved in {run}\n"
                         f"  resume with: lancetnic-flow train --resume {run}")
        self.run, self.epoch, self.batches = run, epoch, batches


class StopRequest:
    """The first Ctrl-C asks training to stop at the next batch boundary (a
    checkpoint is written there); a second one stops at once, as usual."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def estimate_model_bytes(cfg: TrainConfig, dim: int | None = None, classes: int = 2) -> int:
    """Weights, optimiser moments, the best epoch's copy and gradients, in bytes."""
    f = cfg.features
    if dim is None:
        dim = f.buckets if f.mode == "hashing" else (f.max_features or 1_000_000) + 2
    seq = MODELS[cfg.model.name].net == "SequenceNet"
    width = cfg.model.embed if seq else (cfg.model.hidden if cfg.model.layers > 0 else classes + 1)
    h = cfg.model.hidden
    params = dim * width + max(cfg.model.layers, 1) * (8 * h * h if seq else h * h) + h * (classes + 1)
    return int(params * 4 * 4.2)


def model_inputs(batch: RowBlock, device: torch.device) -> dict[str, torch.Tensor | None]:
    """A row block as the keyword arguments every model's ``forward`` takes."""
    return {
        "indices": torch.from_numpy(batch.indices.astype(np.int64)).to(device),
        "offsets": torch.from_numpy(batch.offsets[:-1]).to(device),
        "weights": torch.from_numpy(batch.values).to(device) if batch.values is not None else None,
        "numeric": torch.from_numpy(batch.numeric).to(device) if batch.numeric is not None else None,
    }


def answers(batch: RowBlock, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    labels = torch.from_numpy(batch.labels.astype(np.int64)).to(device) if batch.labels is not None else None
    targets = torch.from_numpy(batch.targets).to(device) if batch.targets is not None else None
    return labels, targets


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: this machine has no CUDA device torch can use",
                        "use --device cpu, or --device auto to take CUDA when present")
    return torch.device(name)


def evaluate_blocks(model: torch.nn.Module, blocks: Iterable[RowBlock], task: Task, device: torch.device,
                    batch_size: int = 2048) -> TaskMetrics:
    """Streaming evaluation: blocks in order, no shuffling, no gradients."""
    m = task.new_metrics()
    model.eval()
    with torch.no_grad():
        for block in blocks:
            for start in range(0, len(block), batch_size):
                b = block.slice(start, start + batch_size)
                labels, targets = answers(b, device)
                out = model(**model_inputs(b, device))
                m.update(out, b.labels, b.targets, task.loss(out, labels, targets, reduction="sum").item())
    model.train()
    return m


def monitored(val: dict, monitor: str) -> float | None:
    """The monitored validation score as 'lower is better'."""
    key = monitor.removeprefix("val_")
    v = val.get(key)
    return None if v is None else (-v if key in _HIGHER_IS_BETTER else v)


def keep_best(best: dict | None, stale: int, val: dict, val_m: TaskMetrics | None, model: torch.nn.Module,
              epoch: int, monitor: str) -> tuple[dict | None, int]:
    """After an epoch's validation: the best epoch so far (its score, metrics,
    regression sample and a copy of its weights: later epochs may overfit)
    and how many epochs since it improved."""
    score = monitored(val, monitor)
    if score is None:
        return best, stale
    if best is None or score < best["score"]:
        return {"score": score, "epoch": epoch, "val": val,
                "sample": (val_m.reg.true, val_m.reg.pred) if val_m.reg is not None else None,
                "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}, 0
    return best, stale + 1


def make_task(cfg: TrainConfig, features: FittedFeatures, device: torch.device) -> Task:
    tc = cfg.training
    task = Task(tc.task, classes=len(features.labels), class_loss=tc.class_loss, value_loss=tc.value_loss,
                loss_weights=tuple(tc.loss_weights), target=features.target or (0.0, 1.0), seed=tc.seed,
                device=device)
    if task.classifies:
        if task.classes < 2:
            raise UserError(f"found {task.classes} label value(s) ({', '.join(features.labels)}); "
                            "classification needs at least 2", "check --label, or use --task regress")
        if tc.class_loss == "bce" and task.classes != 2:
            raise UserError(f"--class-loss bce needs exactly 2 classes, the data has {task.classes}",
                            "use --class-loss cross_entropy")
        if tc.class_weights == "balanced":
            counts = np.asarray(features.label_counts, np.float64)
            task.class_weights = torch.tensor(counts.sum() / (len(counts) * counts), dtype=torch.float32,
                                              device=device)
    return task


def _plan_sources(cfg: TrainConfig, plan: MemoryPlan, events: Events) -> tuple:
    """Partitions of the training (and validation) data, columns checked; the planner's warnings emitted."""
    train_src, val_src = plan_training_sources(cfg, plan.partition, threads=plan.workers * plan.threads)
    for w in train_src.warnings + (val_src.warnings if val_src else []):
        events.emit("warning", message=w)
    return train_src, val_src


def _manifest(key: str, fc: Any, train_src: SourcePlan, val_src: SourcePlan | None,
              results: list[PartitionResult]) -> Manifest:
    """What the cache entry holds, with the partitions its shards came from (for repairs)."""
    results = sorted(results, key=lambda r: r.partition)
    return Manifest(key, train_src.fingerprint(), {"features": dataclasses.asdict(fc)}, results,
                    partitions={"train": [dataclasses.asdict(p) for p in train_src.partitions],
                                "val": [dataclasses.asdict(p) for p in (val_src.partitions if val_src else [])]})


def _ddp_epochs(client: Any, cfg: TrainConfig, model: torch.nn.Module, model_meta: dict, task: Task,
                manifest: Manifest, total_rows: int, cache_so: dict, events: Events, ddp_info: dict,
                start: Any, on_pause: Any, stop: StopRequest, every: CheckpointEvery, rank_bytes: int) -> tuple:
    """``--ddp N``: train on N workers; load rank 0's weights into ``model``.
    Returns what the single-process loop would have: history, confusions, best, last val."""
    from .ddp import RankJob, train_ranks

    tc = cfg.training
    weights = task.class_weights.cpu() if task.class_weights is not None else None
    job = RankJob(world=tc.ddp, address="", segment="", backend="", net=model_meta["net"],
                  model_kwargs=dict(model_meta["kwargs"]), task=dict(kind=task.kind, classes=task.classes,
                  class_loss=task.class_loss, value_loss=task.value_loss, loss_weights=task.loss_weights,
                  class_weights=weights, target=task.target, seed=task.seed),
                  optimizer=tc.optimizer, lr=tc.lr, lr_schedule=tc.lr_schedule, epochs=tc.epochs,
                  batch_size=tc.batch_size, shuffle_buffer=tc.shuffle_buffer, seed=tc.seed, clip_grad=tc.clip_grad,
                  early_stopping=tc.early_stopping, monitor=tc.monitor, train_shards=manifest.shards("train"),
                  val_shards=manifest.shards("val"), cache_options=cache_so, total_rows=total_rows,
                  threads=tc.threads or 1, checkpoint_batches=every.batches, checkpoint_seconds=every.seconds,
                  checkpoint_epochs=bool(every.batches or every.seconds))
    events.emit("stage", stage="training", epoch=(start.epoch if start else 0) + 1, epochs=tc.epochs,
                total_rows=total_rows, source="ddp", ranks=tc.ddp)
    out = train_ranks(client, tc.ddp, job, events, start=start, on_pause=on_pause, stop=stop, device=tc.device,
                      rank_bytes=rank_bytes)
    model.load_state_dict(out["state"])
    history, confusions = [], []
    for h in out["history"]:
        val = h.pop("val")
        history.append({**h, **{f"val_{k}": val.get(v) for k, v in _VAL_KEYS.items()}})
        confusions.append(val.get("confusion"))
    best = out["best"]
    if best is not None:
        best["state"] = model.state_dict()
        if best.get("sample") is not None:
            best["sample"] = tuple(np.asarray(x) for x in best["sample"])
    if best is not None and tc.early_stopping and len(history) < tc.epochs:
        events.emit("early_stop", epoch=len(history), best_epoch=best["epoch"], monitor=tc.monitor)
    ddp_info.update(ranks=tc.ddp, backend=out["backend"], device=out["device"], workers=out["workers"],
                    steps=out["steps"], replica_digests=out["digests"], rank_seconds=out["rank_seconds"])
    return history, confusions, best, out["last_val"]


def _sum_rows(results: list[PartitionResult]) -> dict:
    skipped: dict[str, int] = {}
    for r in results:
        for k, v in r.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
    return {"read": sum(r.rows_read for r in results), "trained": sum(r.train_rows for r in results),
            "validated": sum(r.val_rows for r in results), "skipped": skipped}


def _cache_options(cache: str, data_urls: list[str], storage_options: dict) -> dict:
    """The data's storage options also open the cache when both use one protocol."""
    proto = lambda u: u.split("://", 1)[0] if "://" in u else "file"  # noqa: E731
    return storage_options if proto(cache) == proto(data_urls[0]) else {}


def train(cfg: TrainConfig, events: Events = NULL_EVENTS, client: Any = None, resume: str | None = None
          ) -> TrainResult:
    """Train a model as ``cfg`` says; return the run folder and its metrics.

    ``client``: an existing ``distributed.Client`` to use instead of starting
    a LocalCluster (its workers' limits are read from the scheduler).
    ``resume``: a run folder holding a checkpoint; training continues from it
    (``cfg`` must be that run's configuration, see :func:`resume_config`)."""
    cfg.validate()
    every = CheckpointEvery.parse(cfg.training.checkpoint_every)
    t0 = time.monotonic()
    stage_seconds: dict[str, float] = {}
    tc, fc = cfg.training, cfg.features
    torch.manual_seed(tc.seed)
    # With --ddp the ranks pick their own device on their workers; the trainer only keeps the result.
    device = pick_device(tc.device if not tc.ddp else "cpu")
    so = cfg.data.storage_options
    out_so = _cache_options(cfg.output.out, cfg.data.train, so)
    saved = None
    if resume:
        saved = load_checkpoint(resume, out_so)
        if saved is None:
            raise UserError(f"{resume} has no checkpoint to resume from",
                            "a checkpoint is written every --checkpoint-every, at the end of each epoch and on "
                            "Ctrl-C; a finished run has none (it was removed once the model was saved)")
    columns = training_columns(cfg)

    model_bytes = estimate_model_bytes(cfg)
    shuffle_bytes = tc.shuffle_buffer * ROW_BYTES_ESTIMATE
    events.emit("stage", stage="planning")
    plan = plan_memory(cfg.cluster.memory_budget, workers=cfg.cluster.workers, threads=cfg.cluster.threads,
                       model_bytes=model_bytes, shuffle_bytes=shuffle_bytes, blocksize=cfg.cluster.blocksize)
    given = client is not None
    external = given or bool(scheduler_address(cfg.cluster.scheduler))
    # Bad paths and columns fail before a cluster starts, where we can.
    sources = None if external else _plan_sources(cfg, plan, events)
    cluster_cm = (contextlib.nullcontext(client) if given else
                  open_cluster(plan, scheduler=cfg.cluster.scheduler, dashboard=cfg.cluster.dashboard))
    ts = time.monotonic()
    with cluster_cm as client:
        stage_seconds["cluster_start"] = time.monotonic() - ts
        if external:
            plan = plan_for_existing(client, trainer=TRAINER_BASE + model_bytes + shuffle_bytes,
                                     blocksize=cfg.cluster.blocksize)
        in_flight = tc.in_flight or plan.in_flight
        # Local workers own their cores; an OpenMP team spinning on a busy
        # core is several times slower than one thread.
        cpus = os.cpu_count() or 1
        busy = local_worker_threads(client) if plan.external else plan.workers * plan.threads
        torch.set_num_threads(tc.threads or max(1, cpus - busy))
        events.emit("plan", plan=plan.to_dict(), text=plan.describe(),
                    dashboard=getattr(client, "dashboard_link", None) if cfg.cluster.dashboard else None)

        if sources is None:
            sources = _plan_sources(cfg, plan, events)
        train_src, val_src = sources
        val_fraction = 0.0 if val_src else cfg.data.val_fraction

        cache = cfg.output.cache or join(cfg.output.out, ".cache")
        cache_so = _cache_options(cache, cfg.data.train, so)
        key = cache_key(CACHE_VERSION, train_src.fingerprint(), val_src.fingerprint() if val_src else None,
                        dataclasses.asdict(fc), dataclasses.astuple(columns), val_fraction)
        entry = join(cache, key)

        with MemoryMonitor(events, client, local_workers=not plan.external) as mon:
            # ---- fit: the vocabulary, labels and scalers (or the cached ones)
            ts = time.monotonic()
            features = read_features(entry, cache_so)
            if features is None:
                features, _ = fit_features(client, train_src.partitions, columns, fc, storage_options=so,
                                           chunk_bytes=plan.partition, val_fraction=val_fraction, events=events)
                if features.docs == 0:
                    raise UserError(f"no training rows in {', '.join(cfg.data.train)}",
                                    "the input holds a header only, or every row was skipped (malformed, empty "
                                    "text, missing label); check the file and --format")
                if columns.label and not features.labels:
                    raise UserError(f"no labelled training rows in {', '.join(cfg.data.train)}",
                                    f"check --label {cfg.data.label!r} and that rows have a value in it")
                if columns.target and features.target is None:
                    raise UserError(f"no numeric values in target column {cfg.data.target!r}",
                                    "check --target; rows with a missing or non-numeric target are skipped")
                if fc.mode != "hashing" and features.dim == 0:
                    raise UserError("the vocabulary is empty after pruning",
                                    "lower --min-df, raise --max-df, or check the --text column")
                write_features(entry, features, cache_so)
            else:
                events.emit("fitted", cached=True, vocabulary=features.dim, docs=features.docs,
                            labels=len(features.labels))
            stage_seconds["fit"] = time.monotonic() - ts

            # ---- model, task, optimisers
            task = make_task(cfg, features, device)
            classes = task.classes if task.classifies else 0
            need = TRAINER_BASE + estimate_model_bytes(cfg, features.dim, classes) + shuffle_bytes
            if need > plan.trainer and not plan.external:
                raise UserError(f"the model needs {format_size(need)} in the trainer, the plan gives it "
                                f"{format_size(plan.trainer)}",
                                "lower --max-features or --hidden, or raise --memory-budget")
            model, model_meta = create_model(cfg.model.name, dim=features.dim, classes=classes,
                                             regress=task.regresses, hidden=cfg.model.hidden,
                                             layers=cfg.model.layers, dropout=cfg.model.dropout,
                                             embed=cfg.model.embed, numeric=len(features.numeric))
            model.to(device)
            # With --ddp the ranks hold the optimiser moments; here they would be 2× the model, unused.
            opts = optim.make_optimizers(model, tc.optimizer, tc.lr) if not tc.ddp else []
            # The run folder exists from here on: a checkpoint has a home, and
            # config.json says how to continue it.
            run = new_run_dir(cfg.output.out, cfg.output.name, out_so) if not resume else RunFolder(resume, out_so)
            if not resume:
                write_json(join(run, "config.json"), cfg.to_dict(), out_so)

            # ---- epochs: live featurisation in epoch 1, the cache after
            manifest = read_manifest(entry, key, cache_so)

            def repair(info: ShardInfo) -> None:
                """Re-featurise the partition a missing or damaged shard came from."""
                events.emit("warning", message=f"shard {info.url} is missing or damaged; rebuilding it")
                split = "val" if (manifest.partitions.get("val") and info.split == "val") else None
                part = manifest.partition(split or "train", info.partition)
                client.submit(featurize_partition, part, split, columns=columns,
                              features=features, shard_dir=join(entry, "shards"), storage_options=so,
                              cache_options=cache_so, chunk_bytes=plan.partition, val_fraction=val_fraction,
                              pure=False).result()

            load = lambda info: load_or_repair(info, cache_so, repair)  # noqa: E731
            scattered = client.scatter(features, broadcast=True) if manifest is None else None
            history: list[dict] = []
            confusions: list = []   # per epoch; kept out of history.csv
            total_rows = manifest and sum(r.train_rows for r in manifest.results) or features.docs
            # Linear decay over the whole run; the fit pass already counted the rows.
            total_steps = tc.epochs * max(1, -(-total_rows // tc.batch_size))
            schedule = (lambda t: tc.lr) if tc.lr_schedule == "constant" else (
                lambda t: tc.lr * max(0.05, 1.0 - t / total_steps))
            step = 0
            best: dict | None = None   # the best epoch by --monitor: its score, weights and metrics
            stale = 0
            start_epoch, skip, resumed, ddp_start = 0, 0, None, None
            if saved is not None:
                if saved["key"] != key:
                    raise UserError(f"the training data or feature options changed since {resume} was checkpointed",
                                    "resume needs the same inputs; start a new run instead")
                if bool(saved.get("ddp")) != bool(tc.ddp):
                    raise UserError(f"{resume} was checkpointed by a run {'with' if saved.get('ddp') else 'without'} "
                                    "--ddp and cannot continue in the other mode", "start a new run instead")
                model.load_state_dict(saved["model"])
                for o, st in zip(opts, saved["optimizers"]):
                    o.load_state_dict(st)
                start_epoch, skip = saved["epoch"], saved["batches"]
                step, stale, total_steps = saved["step"], saved["stale"], saved["total_steps"]
                total_rows = saved["total_rows"]
                history, confusions, best = saved["history"], saved["confusions"], saved["best"]
                resumed = saved
                torch.set_rng_state(saved["rng"])
                events.emit("resumed", run=str(run), epoch=start_epoch + 1, batches=skip, step=step)
                if tc.ddp:
                    from .ddp import RankStart

                    ddp_start = RankStart(epoch=start_epoch, batches=skip, step=step, stale=stale,
                                          rows=saved["rows"], history=history, best=best,
                                          train_metrics=saved["train_metrics"], model=saved["model"],
                                          optimizers=saved["optimizers"], rng=saved["ddp"]["rng"])

            def checkpoint(epoch: int, batches: int, rows: int, train_m: Any, reason: str) -> None:
                """Everything needed to continue at batch ``batches`` of ``epoch`` (0-based)."""
                seconds = save_checkpoint(run, {
                    "key": key, "epoch": epoch, "batches": batches, "rows": rows, "step": step,
                    "stale": stale, "total_steps": total_steps, "total_rows": total_rows,
                    "history": history, "confusions": confusions, "best": best,
                    "train_metrics": train_m.state() if train_m is not None else None,
                    "model": model.state_dict(), "optimizers": [o.state_dict() for o in opts],
                    "rng": torch.get_rng_state()}, out_so)
                events.emit("checkpoint", run=str(run), epoch=epoch + 1, batches=batches, reason=reason,
                            seconds=seconds)

            def ddp_checkpoint(reason: str, at: Any) -> None:
                """A --ddp segment paused at ``at`` (a ``RankStart``): write it as this run's checkpoint."""
                seconds = save_checkpoint(run, {
                    "key": key, "epoch": at.epoch, "batches": at.batches, "rows": at.rows, "step": at.step,
                    "stale": at.stale, "total_steps": None, "total_rows": total_rows, "history": at.history,
                    "confusions": [], "best": at.best, "train_metrics": at.train_metrics, "model": at.model,
                    "optimizers": at.optimizers, "rng": torch.get_rng_state(),
                    "ddp": {"ranks": tc.ddp, "rng": at.rng}}, out_so)
                events.emit("checkpoint", run=str(run), epoch=at.epoch + 1, batches=at.batches, reason=reason,
                            seconds=seconds)
                if reason == "interrupt":
                    raise TrainingInterrupted(str(run), at.epoch + 1, at.batches)

            ts = time.monotonic()
            ddp_info: dict = {}
            with StopRequest() as stop:
                if tc.ddp:
                    # The epochs run on the workers (ddp.py); the loop below then has nothing to do.
                    from .ddp import preflight

                    # A rank holds what this process would (``need``): torch, the model, its moments, a shuffle buffer.
                    preflight(client, tc.ddp, need)   # before the featurisation pass, not after
                    if manifest is None:
                        events.emit("stage", stage="featurising")
                        jobs = [(p, None) for p in train_src.partitions] + [(p, "val") for p in
                                                                             (val_src.partitions if val_src else [])]
                        results = []
                        for r in Featurizer(client, featurize_partition, jobs, in_flight, columns=columns,
                                            features=scattered, shard_dir=join(entry, "shards"), storage_options=so,
                                            cache_options=cache_so, chunk_bytes=plan.partition,
                                            val_fraction=val_fraction):
                            if stop.requested:   # nothing trained yet, so nothing to checkpoint
                                raise KeyboardInterrupt
                            results.append(r)
                            events.emit("featurized", done=len(results), total=len(jobs), rows=r.rows_read,
                                        train_rows=r.train_rows, tokens=r.tokens, bytes_read=r.bytes_read,
                                        seconds=r.seconds)
                        manifest = _manifest(key, fc, train_src, val_src, results)
                        write_manifest(entry, manifest, cache_so)
                        del scattered
                    total_rows = sum(r.train_rows for r in manifest.results)
                    history, confusions, best, val = _ddp_epochs(client, cfg, model, model_meta, task, manifest,
                                                                 total_rows, cache_so, events, ddp_info, ddp_start,
                                                                 ddp_checkpoint, stop, every, need)
                for epoch in range(start_epoch, tc.epochs if not tc.ddp else 0):
                    results: list[PartitionResult] = []
                    if manifest is None:
                        order = epoch_order(len(train_src.partitions), tc.seed, epoch)
                        jobs = [(train_src.partitions[i], None) for i in order]
                        jobs += [(p, "val") for p in (val_src.partitions if val_src else [])]
                        feed = Featurizer(client, featurize_partition, jobs, in_flight, columns=columns,
                                          features=scattered, shard_dir=join(entry, "shards"), storage_options=so,
                                          cache_options=cache_so, chunk_bytes=plan.partition, val_fraction=val_fraction)
                        featurized = lambda r, results=results, n=len(jobs): events.emit(  # noqa: E731
                            "featurized", done=len(results), total=n, rows=r.rows_read, train_rows=r.train_rows,
                            tokens=r.tokens, bytes_read=r.bytes_read, seconds=r.seconds)
                        blocks = lambda feed=feed, results=results, f=featurized: live_blocks(  # noqa: E731
                            feed, "train", cache_so, results, on_result=f)
                    else:
                        blocks = lambda epoch=epoch: cached_blocks(manifest.shards("train"), tc.seed, epoch, load)  # noqa: E731
                    stream = BatchStream(blocks, batch_size=tc.batch_size, shuffle_buffer=tc.shuffle_buffer,
                                         seed=tc.seed, epoch=epoch)
                    events.emit("stage", stage="training", epoch=epoch + 1, epochs=tc.epochs, total_rows=total_rows,
                                source="live" if manifest is None else "cache")
                    train_m = task.new_metrics()
                    te = time.monotonic()
                    rows, skip_now = 0, (skip if epoch == start_epoch else 0)
                    if skip_now:
                        rows = resumed["rows"]
                        train_m.load_state(resumed["train_metrics"])
                    last_ckpt, last_ckpt_t = skip_now, time.monotonic()
                    for i, batch in enumerate(stream):
                        if i < skip_now:
                            continue   # trained before the checkpoint: the stream is replayed, not retrained
                        labels, targets = answers(batch, device)
                        out = model(**model_inputs(batch, device))
                        loss = task.loss(out, labels, targets)
                        optim.zero_grad(opts)
                        loss.backward()
                        optim.set_lr(opts, schedule(step))
                        optim.step(opts, model, tc.clip_grad)
                        step += 1
                        rows += len(batch)
                        train_m.update(out, batch.labels, batch.targets, loss.item() * len(batch))
                        events.emit("batch", epoch=epoch + 1, rows=rows, total_rows=total_rows, loss=loss.item(),
                                    tokens=int(batch.offsets[-1]))
                        if stop.requested or every.due(i + 1 - last_ckpt, time.monotonic() - last_ckpt_t):
                            checkpoint(epoch, i + 1, rows, train_m, "interrupt" if stop.requested else "periodic")
                            if stop.requested:
                                raise TrainingInterrupted(str(run), epoch + 1, i + 1)
                            last_ckpt, last_ckpt_t = i + 1, time.monotonic()
                    if manifest is None:
                        manifest = _manifest(key, fc, train_src, val_src, results)
                        write_manifest(entry, manifest, cache_so)
                        total_rows = sum(r.train_rows for r in results)
                        del scattered
                    train_seconds = time.monotonic() - te
                    events.emit("stage", stage="evaluating", epoch=epoch + 1, epochs=tc.epochs)
                    val_shards = manifest.shards("val")
                    val_m = (evaluate_blocks(model, prefetch(load(s) for s in val_shards), task, device)
                             if val_shards else None)
                    val = val_m.result() if val_m is not None else {}
                    tr = train_m.result()
                    record = {"epoch": epoch + 1, "train_loss": tr["loss"], "train_accuracy": tr.get("accuracy"),
                              **{f"val_{k}": val.get(v) for k, v in _VAL_KEYS.items()},
                              "rows": rows, "seconds": train_seconds, "lr": schedule(step),
                              "rows_per_s": rows / train_seconds if train_seconds > 0 else None}
                    history.append(record)
                    confusions.append(val.get("confusion"))
                    events.emit("epoch", **record)
                    trim_allocator()
                    best, stale = keep_best(best, stale, val, val_m, model, epoch + 1, tc.monitor)
                    if tc.early_stopping and stale >= tc.early_stopping:
                        events.emit("early_stop", epoch=epoch + 1, best_epoch=best["epoch"], monitor=tc.monitor)
                        break
                    if epoch + 1 < tc.epochs and (every.batches or every.seconds or stop.requested):
                        checkpoint(epoch + 1, 0, 0, None, "interrupt" if stop.requested else "epoch")
                        if stop.requested:
                            raise TrainingInterrupted(str(run), epoch + 2, 0)
            stage_seconds["train"] = time.monotonic() - ts
            final_val = val
            if best is not None:
                model.load_state_dict(best.pop("state"))
                final_val = best["val"]

        events.emit("stage", stage="saving")
        ts = time.monotonic()
        metrics = {
            "task": task.kind, "model": cfg.model.name,
            **{f"val_{k}": final_val.get(v) for k, v in _VAL_KEYS.items()},
            "confusion": final_val.get("confusion"), "per_class": final_val.get("per_class"),
            "labels": features.labels, "rows": _sum_rows(manifest.results),
            "epochs": [{**h, "val_confusion": c} for h, c in zip(history, confusions)],
            "best_epoch": best["epoch"] if best else None, "monitor": tc.monitor,
            "memory": {"budget_bytes": plan.budget, "trainer_peak_rss_bytes": mon.trainer_peak,
                       "workers_peak_bytes": mon.workers_peak, "plan": plan.to_dict()},
            "stage_seconds": stage_seconds, "seconds": time.monotonic() - t0,
            "vocabulary": features.dim, "device": str(device),
        }
        if ddp_info:
            metrics["ddp"] = ddp_info
        metrics["plots"] = [u.rsplit("/", 1)[-1] for u in write_plots(
            run, history=history, metrics=final_val, labels=features.labels if task.classifies else None,
            label_counts=features.label_counts, sample=best["sample"] if best else None)]
        save_run(run, config=cfg.to_dict(), features=features, model=model, model_meta=model_meta,
                 metrics=metrics, history=history, storage_options=out_so)
        remove_checkpoint(run, out_so)
        stage_seconds["save"] = time.monotonic() - ts
        events.emit("done", run=run, metrics={k: v for k, v in metrics.items() if k not in ("confusion", "per_class")})
        return TrainResult(run, metrics)


def resume_config(run: str, *, storage_options: dict | None = None, memory_budget: int | None = None,
                  workers: int | None = None, threads: int | None = None, scheduler: str | None = None
                  ) -> TrainConfig:
    """The configuration ``run`` was started with, to continue it with :func:`train` (``resume=run``).

    Secrets were masked when the configuration was saved, so storage options
    given here are merged over the saved ones; the cluster may differ."""
    import json

    from .shards import read_bytes

    so = storage_options or {}
    try:
        saved = json.loads(read_bytes(join(run, "config.json"), so))
    except FileNotFoundError:
        raise UserError(f"{run} is not a run folder (no config.json)",
                        "pass the folder named by the interrupted run, e.g. runs/20261130-101500") from None
    cfg = TrainConfig.from_dict(saved)
    cfg.data.storage_options = _merge(cfg.data.storage_options, so)
    masked = _masked_keys(cfg.data.storage_options)
    if masked:
        raise UserError(f"the run's storage options {', '.join(masked)} were masked when it was saved",
                        "give them again: " + " ".join(f"--storage-option {k}=..." for k in masked))
    c = cfg.cluster
    c.memory_budget = memory_budget or c.memory_budget
    c.workers = workers or c.workers
    c.threads = threads or c.threads
    c.scheduler = scheduler or c.scheduler
    return cfg


def _merge(base: dict, new: dict) -> dict:
    out = dict(base)
    for k, v in new.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _masked_keys(options: dict, prefix: str = "") -> list[str]:
    found: list[str] = []
    for k, v in options.items():
        if isinstance(v, dict):
            found += _masked_keys(v, f"{prefix}{k}.")
        elif v == "***":
            found.append(f"{prefix}{k}")
    return found
