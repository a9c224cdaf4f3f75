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
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .cluster import TRAINER_BASE, open_cluster, plan_for_existing, plan_memory
from .config import TrainConfig
from .errors import UserError
from .events import NULL_EVENTS, Events
from .fit import fit_features
from .metrics import ClassificationMetrics
from .models import ScalpelMC
from .models.sparse_input import DenseOptimizer, RowOptimizer
from .monitor import MemoryMonitor, trim_allocator
from .rows import RowBlock
from .runs import new_run_dir, save_run
from .shards import (CACHE_VERSION, Manifest, PartitionResult, cache_key, featurize_partition, join,
                     read_features, read_manifest, write_features, write_manifest)
from .sizes import format_size
from .readers import check_columns
from .sources import Columns, plan_source
from .stream import BatchStream, Featurizer, cached_blocks, epoch_order, live_blocks, prefetch
from .shards import load_shard

ROW_BYTES_ESTIMATE = 2048  # a buffered row: ~200 non-zeros × (4 + 4) bytes + slack


@dataclass
class TrainResult:
    run: str
    metrics: dict


def estimate_model_bytes(cfg: TrainConfig, dim: int | None = None, classes: int = 2) -> int:
    """Weights + Adam's two moments + a sparse gradient's worst case, in bytes."""
    f = cfg.features
    if dim is None:
        dim = f.buckets if f.mode == "hashing" else (f.max_features or 1_000_000) + 2
    h = cfg.model.hidden if cfg.model.layers > 0 else classes
    params = dim * h + (cfg.model.layers - 1) * h * h + h * classes
    return int(params * 4 * 4.2)  # + a copy of the best epoch's weights


def set_lr(opts: list, lr: float) -> None:
    for o in opts:
        if isinstance(o, (RowOptimizer, DenseOptimizer)):
            o.lr = lr
        else:
            for g in o.param_groups:
                g["lr"] = lr


def to_tensors(batch: RowBlock, device: torch.device) -> tuple[torch.Tensor, ...]:
    idx = torch.from_numpy(batch.indices.astype(np.int64)).to(device)
    off = torch.from_numpy(batch.offsets[:-1]).to(device)
    w = torch.from_numpy(batch.values).to(device) if batch.values is not None else None
    return idx, off, w


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def make_optimizers(model: ScalpelMC, name: str, lr: float) -> list:
    """A row-wise optimiser for the sparse first layer (a step touches only
    the rows a batch used) and the matching torch optimiser for the rest."""
    dense = [p for n, p in model.named_parameters() if n != "input.weight"]
    return [RowOptimizer(model.input, name, lr), DenseOptimizer(dense, name, lr)]


def evaluate_blocks(model: torch.nn.Module, blocks, classes: int, device: torch.device,
                    batch_size: int = 2048) -> ClassificationMetrics:
    """Streaming evaluation: blocks in order, no shuffling, no gradients."""
    m = ClassificationMetrics(classes)
    model.eval()
    with torch.no_grad():
        for block in blocks:
            for start in range(0, len(block), batch_size):
                b = block.slice(start, start + batch_size)
                y = torch.from_numpy(b.labels.astype(np.int64)).to(device)
                logits = model(*to_tensors(b, device))
                loss = F.cross_entropy(logits, y, reduction="sum")
                m.update(b.labels.astype(np.int64), logits.argmax(1).cpu().numpy(), loss.item())
    model.train()
    return m


def _plan_sources(cfg: TrainConfig, plan, columns: Columns, events: Events) -> tuple:
    """Partitions of the training (and validation) data, columns checked."""
    so, fmt = cfg.data.storage_options, cfg.data.format
    train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=plan.partition)
    if not cfg.cluster.blocksize:
        # Small inputs still get a few partitions per worker thread, so
        # featurisation runs in parallel and epoch 1 overlaps training.
        small = split_blocksize(train_src, plan.partition, 4 * plan.workers * plan.threads)
        if small < plan.partition:
            train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=small)
    val_src = plan_source(cfg.data.val, format=fmt, storage_options=so, blocksize=plan.partition) if cfg.data.val else None
    for w in train_src.warnings + (val_src.warnings if val_src else []):
        events.emit("warning", message=w)
    check_columns(train_src, columns, storage_options=so)
    if val_src:
        check_columns(val_src, columns, storage_options=so)
    return train_src, val_src


def split_blocksize(src, blocksize: int, want: int, floor: int = 1 << 20) -> int:
    """A block size that gives about ``want`` partitions of the splittable
    files, never below ``floor`` bytes nor above ``blocksize``."""
    splittable = sum(f.size for f in src.files if f.compression is None and f.format != "parquet")
    if not splittable or len(src.partitions) >= want:
        return blocksize
    return max(floor, min(blocksize, -(-splittable // want)))


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


def train(cfg: TrainConfig, events: Events = NULL_EVENTS, client: Any = None) -> TrainResult:
    """Train a classifier as ``cfg`` says; return the run folder and its metrics.

    ``client``: an existing ``distributed.Client`` to use instead of starting
    a LocalCluster (its workers' limits are read from the scheduler)."""
    cfg.validate()
    t0 = time.monotonic()
    stage_seconds: dict[str, float] = {}
    tc, fc = cfg.training, cfg.features
    torch.manual_seed(tc.seed)
    device = pick_device()
    so = cfg.data.storage_options
    columns = Columns(text=tuple(cfg.data.text), label=cfg.data.label)
    if not cfg.data.label:
        raise UserError("training a classifier needs a label column", "pass --label COLUMN")

    model_bytes = estimate_model_bytes(cfg)
    shuffle_bytes = tc.shuffle_buffer * ROW_BYTES_ESTIMATE
    events.emit("stage", stage="planning")
    plan = plan_memory(cfg.cluster.memory_budget, workers=cfg.cluster.workers, threads=cfg.cluster.threads,
                       model_bytes=model_bytes, shuffle_bytes=shuffle_bytes, blocksize=cfg.cluster.blocksize)
    given = client is not None
    external = given or bool(cfg.cluster.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS"))
    # Bad paths and columns fail before a cluster starts, where we can.
    sources = None if external else _plan_sources(cfg, plan, columns, events)
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
        torch.set_num_threads(max(1, cpus - plan.workers * plan.threads) if not plan.external else cpus)
        events.emit("plan", plan=plan.to_dict(), text=plan.describe(),
                    dashboard=getattr(client, "dashboard_link", None) if cfg.cluster.dashboard else None)

        if sources is None:
            sources = _plan_sources(cfg, plan, columns, events)
        train_src, val_src = sources
        val_fraction = 0.0 if val_src else cfg.data.val_fraction

        cache = cfg.output.cache or join(cfg.output.out, ".cache")
        cache_so = _cache_options(cache, cfg.data.train, so)
        key = cache_key(CACHE_VERSION, train_src.fingerprint(), val_src.fingerprint() if val_src else None,
                        dataclasses.asdict(fc), dataclasses.astuple(columns), val_fraction)
        entry = join(cache, key)

        with MemoryMonitor(events, client, local_workers=not plan.external) as mon:
            ts = time.monotonic()
            features = read_features(entry, cache_so)
            if features is None:
                features, _ = fit_features(client, train_src.partitions, columns, fc, storage_options=so,
                                           chunk_bytes=plan.partition, val_fraction=val_fraction, events=events)
                if not features.labels:
                    raise UserError(f"no labelled training rows in {', '.join(cfg.data.train)}",
                                    f"check --label {cfg.data.label!r} and that rows have a value in it")
                if fc.mode != "hashing" and features.dim == 0:
                    raise UserError("the vocabulary is empty after pruning",
                                    "lower --min-df, raise --max-df, or check the --text column")
                write_features(entry, features, cache_so)
            else:
                events.emit("fitted", cached=True, vocabulary=features.dim, docs=features.docs,
                            labels=len(features.labels))
            stage_seconds["fit"] = time.monotonic() - ts
            classes = len(features.labels)
            need = TRAINER_BASE + estimate_model_bytes(cfg, features.dim, classes) + shuffle_bytes
            if need > plan.trainer and not plan.external:
                raise UserError(f"the model needs {format_size(need)} in the trainer, the plan gives it "
                                f"{format_size(plan.trainer)}",
                                "lower --max-features or --hidden, or raise --memory-budget")

            model = ScalpelMC(features.dim, classes, hidden=cfg.model.hidden, layers=cfg.model.layers,
                              dropout=cfg.model.dropout).to(device)
            opts = make_optimizers(model, tc.optimizer, tc.lr)
            manifest = read_manifest(entry, key, cache_so)
            scattered = client.scatter(features, broadcast=True) if manifest is None else None
            history: list[dict] = []
            total_rows = manifest and sum(r.train_rows for r in manifest.results) or features.docs
            # Linear decay over the whole run; the fit pass already counted the rows.
            total_steps = tc.epochs * max(1, -(-total_rows // tc.batch_size))
            schedule = (lambda t, n: tc.lr) if tc.lr_schedule == "constant" else (
                lambda t, n: tc.lr * max(0.05, 1.0 - t / n))
            step = 0
            best: tuple[float, dict, dict, int] | None = None   # (val loss, state, val metrics, epoch)
            best_epoch = None
            ts = time.monotonic()
            for epoch in range(tc.epochs):
                results: list[PartitionResult] = []
                if manifest is None:
                    order = epoch_order(len(train_src.partitions), tc.seed, epoch)
                    jobs = [(train_src.partitions[i], None) for i in order]
                    jobs += [(p, "val") for p in (val_src.partitions if val_src else [])]
                    feed = Featurizer(client, featurize_partition, jobs, in_flight, columns=columns,
                                      features=scattered, shard_dir=join(entry, "shards"), storage_options=so,
                                      cache_options=cache_so, chunk_bytes=plan.partition, val_fraction=val_fraction)
                    blocks = lambda feed=feed, results=results: live_blocks(feed, "train", cache_so, results)  # noqa: E731
                else:
                    blocks = lambda epoch=epoch: cached_blocks(manifest.shards("train"), tc.seed, epoch, cache_so)  # noqa: E731
                stream = BatchStream(blocks, batch_size=tc.batch_size, shuffle_buffer=tc.shuffle_buffer,
                                     seed=tc.seed, epoch=epoch)
                events.emit("stage", stage="training", epoch=epoch + 1, epochs=tc.epochs, total_rows=total_rows)
                train_m = ClassificationMetrics(classes)
                te = time.monotonic()
                rows = 0
                for batch in stream:
                    idx, off, w = to_tensors(batch, device)
                    y = torch.from_numpy(batch.labels.astype(np.int64)).to(device)
                    logits = model(idx, off, w)
                    loss = F.cross_entropy(logits, y)
                    for o in opts:
                        o.zero_grad(set_to_none=True)
                    loss.backward()
                    set_lr(opts, schedule(step, total_steps))
                    for o in opts:
                        o.step()
                    step += 1
                    rows += len(batch)
                    train_m.update(batch.labels.astype(np.int64), logits.detach().argmax(1).cpu().numpy(),
                                   loss.item() * len(batch))
                    events.emit("batch", epoch=epoch + 1, rows=rows, total_rows=total_rows, loss=loss.item(),
                                tokens=int(batch.offsets[-1]))
                if manifest is None:
                    results.sort(key=lambda r: r.partition)
                    manifest = Manifest(key, train_src.fingerprint(), {"features": dataclasses.asdict(fc)}, results)
                    write_manifest(entry, manifest, cache_so)
                    total_rows = sum(r.train_rows for r in results)
                    del scattered
                train_seconds = time.monotonic() - te
                events.emit("stage", stage="evaluating", epoch=epoch + 1, epochs=tc.epochs)
                val_shards = manifest.shards("val")
                val = (evaluate_blocks(model, prefetch(load_shard(s, cache_so) for s in val_shards), classes, device)
                       .result() if val_shards else {})
                tr = train_m.result()
                record = {"epoch": epoch + 1, "train_loss": tr["loss"], "train_accuracy": tr["accuracy"],
                          "val_loss": val.get("loss"), "val_accuracy": val.get("accuracy"),
                          "val_macro_f1": val.get("macro_f1"), "val_precision": val.get("macro_precision"),
                          "val_recall": val.get("macro_recall"), "rows": rows, "seconds": train_seconds,
                          "rows_per_s": rows / train_seconds if train_seconds > 0 else None}
                history.append(record)
                if val and (best is None or val["loss"] < best[0]):
                    # Keep the best epoch's weights: later epochs may overfit.
                    best = (val["loss"], {k: v.detach().clone() for k, v in model.state_dict().items()}, val,
                            epoch + 1)
                events.emit("epoch", **record)
                trim_allocator()
            stage_seconds["train"] = time.monotonic() - ts
            last_val = val
            if best is not None:
                model.load_state_dict(best[1])
                last_val, best_epoch = best[2], best[3]
                del best

        events.emit("stage", stage="saving")
        ts = time.monotonic()
        run = new_run_dir(cfg.output.out, cfg.output.name)
        rows = _sum_rows(manifest.results)
        metrics = {
            "val_accuracy": last_val.get("accuracy"), "val_macro_f1": last_val.get("macro_f1"),
            "val_loss": last_val.get("loss"), "val_precision": last_val.get("macro_precision"),
            "val_recall": last_val.get("macro_recall"),
            "confusion": last_val.get("confusion"), "per_class": last_val.get("per_class"),
            "labels": features.labels, "epochs": history, "rows": rows,
            "memory": {"budget_bytes": plan.budget, "trainer_peak_rss_bytes": mon.trainer_peak,
                       "workers_peak_bytes": mon.workers_peak, "plan": plan.to_dict()},
            "stage_seconds": stage_seconds, "seconds": time.monotonic() - t0,
            "vocabulary": features.dim, "device": str(device),
            "best_epoch": best_epoch,
        }
        model_meta = {"model": "ScalpelMC", "task": "classify", "kwargs": model.config}
        save_run(run, config=cfg.to_dict(), features=features, model=model, model_meta=model_meta,
                 metrics=metrics, history=history)
        metrics["stage_seconds"]["save"] = time.monotonic() - ts
        events.emit("done", run=run, metrics={k: v for k, v in metrics.items() if k not in ("confusion", "per_class")})
        return TrainResult(run, metrics)
