"""The training run, top to bottom, as named stages:

    plan → cluster → fit → model → epochs → save

``train(config)`` runs them in order; each stage is a method of
:class:`Training` with one job, and each calls into the module that owns the
work (the memory plan, the fit pass, the shard feed, the loop or the ranks,
the run folder). Epoch 1 overlaps featurisation with training; later epochs,
and later runs on the same data and options, read the shards from the cache.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ..config import CheckpointEvery, TrainConfig, label_sep_given
from ..data.checks import (coarse_cache_warning, idle_ranks_warning, plan_training_sources, sample_label_count,
                           sample_rows, sample_texts, skip_hint, training_columns)
from ..data.sources import Columns
from ..data.readers.labels import separator_counts, separator_warnings
from ..data.readers.table import UNREADABLE_TARGET
from ..data.usable import rules_before
from ..dataflow.cluster import local_worker_threads, open_cluster, plan_for_existing, scheduler_address
from ..dataflow.feed import FeedSpec, ShardFeed
from ..dataflow.fresh import FreshFeed, fit_partition_counted
from ..dataflow.inprocess import InProcessClient, choose_where, input_bytes
from ..dataflow.entry_lock import EntryLock, lock_entry
from ..dataflow.manifest import (DURATIONS_IN_SECONDS, LONE_CR_NOT_A_ROW_END, MALFORMED_READ_PAST_ITS_RECORD,
                                 SHORT_ROWS_MALFORMED, SPACE_LINES_READ_AS_ROWS, entry_key, read_features,
                                 key_parts, read_manifest, read_names, read_read_as, shards_digest,
                                 write_features, write_names, write_read_as)
from ..dataflow.monitor import MemoryMonitor
from ..dataflow.plan import PEAK_PER_BYTE, TASK_BASE, TRAINER_BASE, GiB, plan_in_process, plan_memory
from ..dataflow.shards import LEARNED, SHARD_READS, count_partition
from ..errors import UserError, reworded
from ..options import BY_FIELD, bad, said
from ..events import NULL_EVENTS, Events
from ..features.fit import DEFAULT_MAX_FEATURES, fit_features
from ..features.label_values import (LABEL_AS_RUN, counted_names, read_as_of, read_as_warning, spelled_apart_warning,
                                     spelled_twice)
from ..features.labelsets import joined_in_sets, joined_labels, refuse_joined_sets, unseen
from ..features.names import merge_names
from ..features.scripts import vowel_marked
from ..features.split import fraction_of
from ..reconnect import SchedulerLost, connection_lost, lost_why, retrying, scheduler_of
from ..features.vectorize import TRUNCATED, FittedFeatures
from ..models.linear_arrays import is_arrays
from ..models.calibrate import Calibration, calibrate
from ..models.tasks import Task
from ..registry import MODELS
from ..resolve import (CUT_WORD_SHARE, FitCounts, bias_only_lr, cut_words_warning, idle_epoch_options,
                       refuse_sizes_for_client, resolve, resolve_counts, resolve_sample, sizes_for_client,
                       unused_monitor, words_kept_warning)
from ..runs.bucket_names import write_bucket_names
from ..runs.learned_rows import write_learned
from ..runs.folder import (RunFolder, check_output_places, claim_run_dir, finish_run, renamed_run_warning, save_run,
                           write_config, write_json)
from ..runs.run_lock import lock_run
from ..runs.loading import read_config
from ..runs.plots import preload as preload_plots
from ..runs.plots import can_detach, draw_detached, plot_jobs, write_jobs
from ..scores import val_scores
from ..sizes import format_size
from ..storage import WriteError, absolute, join, options_for
from .held_out import HeldOut, holdout_for
from .key_change import key_changes
from .resume import refuse_other_config
from .checkpoints import (check_network, has_checkpoint, load_checkpoint, network_of, remove_checkpoint, restore_weights,
                          write_checkpoint)
from .keep_learning import (PARTIAL_FIT, InitRun, check_resolved, continue_config, continued_by, is_continued,
                            key_options, labelled, load_init, refusal, run_options)
from .loop import EpochLoop, Trainee, rng_state
from .rules import rule_for
from .state import TrainState
from .step import (CHOOSING_ROWS, EVAL_BATCH, constant_target, decided_at, evaluate_blocks, keep_best, kept_steps, lr_schedule,
                   no_better_than_the_mean)
from .stop import StoppedAfterTraining, StoppedAtOnce, StopRequest, TrainingInterrupted
from .tracking import start_tracking
from ..plurals import counted, verb

if TYPE_CHECKING:   # torch is imported where a network is built: a LinearSVM run in this process never needs it
    import torch

ROW_BYTES_ESTIMATE = 2048  # a buffered row: ~200 non-zeros × (4 + 4) bytes + slack
LABEL_SET_SLACK = 256      # labels of a multilabel row (a byte each) that slack covers
# Finished shards the trainer keeps between epochs, at most (ShardFeed.keep): reading,
# decoding and weighing every shard again each epoch is a good share of a LinearSVM
# epoch's CPU (docs/benchmarks.md).
KEEP_MAX = 1 << 30


@dataclass
class TrainResult:
    run: str
    metrics: dict


# Before the fit the classes are unknown: plan for this many (a hidden layer's head is small either way),
# or for the classes a sample of the rows shows, and this many times over (rare ones are missing from it).
PLANNED_CLASSES = 64
SAMPLED_CLASSES_MARGIN = 1.25


def estimate_model_bytes(cfg: TrainConfig, dim: int | None = None, classes: int = PLANNED_CLASSES) -> int:
    """Weights, optimiser moments, the best epoch's copy and gradients, in bytes,
    of ``cfg``'s model (resolved). The input rows take the copies the training
    rule holds (:meth:`~.rules.GradientRule.weight_copies`); the dense rest,
    the output layer's hidden × classes included, four and a bit. Plus a
    batch's outputs (logits, their softmax and gradient) at the larger of a
    training and an evaluation batch: with thousands of classes these are tens
    of megabytes."""
    f, m = cfg.features, cfg.model
    if dim is None:
        dim = f.buckets if f.mode == "hashing" else (f.max_features or DEFAULT_MAX_FEATURES) + 2
    spec, rule = MODELS[m.name], rule_for(cfg)
    outputs_width = classes + 1
    width = {"embed": m.embed, "outputs": outputs_width,
             "hidden": m.hidden if m.layers > 0 else outputs_width}[spec.input_width]
    h = m.hidden
    dense = max(m.layers, 1) * spec.layer_weights * h * h + h * outputs_width
    outputs = 3 * max(cfg.training.batch_size or spec.batch_size, EVAL_BATCH) * outputs_width
    return int((dim * width * rule.weight_copies() + dense * 4.2 + outputs) * 4) + rule.extra_bytes()


def pick_device(name: str = "auto") -> torch.device | str:
    """The device to train on: ``"cpu"`` as the name torch takes for it (asking
    for the CPU imports no torch), or the CUDA device when asked and present."""
    if name == "cpu":
        return "cpu"
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise bad("training.device", "{name} cuda: this machine has no CUDA device torch can use",
                  "use {name} cpu, or {name} auto to take CUDA when present")
    return torch.device(name)


def make_task(cfg: TrainConfig, features: FittedFeatures, device: torch.device) -> Task:
    """The task to train, with its classes (checked) and class weights."""
    tc = cfg.training
    task = Task(tc.task, classes=len(features.labels), class_loss=tc.class_loss, value_loss=tc.value_loss,
                loss_weights=tuple(tc.loss_weights), target=features.target or (0.0, 1.0), seed=tc.seed,
                device=device)
    if task.multilabel:
        return label_set_task(task, features, tc.class_weights, device)
    if task.classifies:
        if task.classes < 2:
            raise bad("data.label", f"found {counted(task.classes, 'label value')} ({', '.join(features.labels)}); "
                      "classification needs at least 2", "check {name}, or use {training.task} regress")
        if tc.class_loss == "bce" and task.classes != 2:
            raise bad("training.class_loss", f"{{name}} bce needs exactly 2 classes, the data has {task.classes}",
                      "use {name} cross_entropy")
        if tc.class_weights == "balanced":
            # A continued run's old labels may have no row in its data: weighed as one row (never a target).
            import torch

            counts = np.maximum(np.asarray(features.label_counts, np.float64), 1.0)
            task.class_weights = torch.tensor(counts.sum() / (len(counts) * counts), dtype=torch.float32,
                                              device=device)
    return task


def label_set_task(task: Task, features: FittedFeatures, class_weights: str, device: torch.device) -> Task:
    """A multilabel task, checked; ``balanced`` weighs each label's positive rows
    by its negatives over its positives (BCE's ``pos_weight``)."""
    if task.classes < 1:
        raise bad("data.label", "found no label value: every training row's label set is empty ([]) or missing",
                  "check {name} and {data.label_sep}: a multilabel run learns labels some rows have")
    if task.classes == 1 and features.label_counts[0] >= features.docs:
        raise bad("data.label", f"found 1 label value ({features.labels[0]}), and every training row has it: "
                  "there is nothing to tell it from (a row without it is an empty set, [])",
                  "add the rows the label does not apply to, with an empty label set; or check {name} and "
                  "{data.label_sep}")
    if class_weights == "balanced":
        import torch

        counts = np.maximum(np.asarray(features.label_counts, np.float64), 1.0)
        task.class_weights = torch.tensor(np.maximum(features.docs - counts, 1.0) / counts, dtype=torch.float32,
                                          device=device)
    return task


def learned_validation_warning(calibration: Calibration, continued: str | None) -> str:
    """What a probability scale at the top of its range says about the validation rows;
    ``continued``: how the caller continued a run (``{training.init_from}``, ``partial_fit``), if it did."""
    why = (f"this run continues one ({continued}) whose model learned rows of this data, and the "
           "validation rows are among them" if continued else
           "the validation rows are too few or too easy to fit a scale on, or they repeat training rows")
    return (f"the probability scale reached its limit ({calibration.scale:.0f}) on "
            f"{counted(calibration.rows, 'validation row')}: the model scores every one of them right by a wide margin, as rows it has learned; likely "
            f"{why}. The validation figures are then not those of unseen text, and the probabilities are "
            "over-confident: validate on rows no run trained on ({data.val})")


def no_rows_error(cfg: TrainConfig, rows_read: int, skipped: dict[str, int]) -> UserError:
    """No training row: what was read, why each row was skipped, and what to check."""
    data = ", ".join(cfg.data.train)
    if not rows_read:
        return bad("data.format", f"no training rows in {data}", "the input holds a header only; check the file and "
                   "{name}")
    if not skipped:
        return bad("data.val_fraction", f"no training rows in {data}: the {counted(rows_read, 'row')} read were all "
                   "held out for validation", "add rows, or lower {name}")
    reasons = ", ".join(f"{n:,} {k}" for k, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
    worst = max(skipped, key=skipped.get)
    hint = skip_hint(worst, label=cfg.data.label, target=cfg.data.target, text=cfg.data.text, style=None)
    f = cfg.features
    if worst == "empty_text" and f.analyzer == "word" and f.mode == "hashing" and f.tokenizer is None \
            and f.stop_words is None:
        # a corpus of emoji (reactions) or symbols holds no word, and nothing said what reads them
        hint += ("; emoji, symbols and single letters are no word: {features.analyzer} char_wb reads every "
                 "character")
    return bad("data.train", f"no training rows in {data}: {counted(rows_read, 'row')} read, "
               f"{sum(skipped.values()):,} skipped ({reasons})", hint)


def check_fitted(cfg: TrainConfig, columns: Columns, features: FittedFeatures, rows_read: int = 0,
                 skipped: dict[str, int] | None = None, numeric: dict | None = None) -> None:
    """Refuse a fit that left nothing to train on, naming what to check;
    ``numeric``: the pass's moments of each ``--numeric`` column (FitStats.numeric)."""
    data = ", ".join(cfg.data.train)
    if features.docs == 0:
        raise no_rows_error(cfg, rows_read, skipped or {})
    if columns.label and not features.labels:
        raise bad("data.label", f"no labelled training rows in {data}",
                  f"check {{name}} {cfg.data.label!r} and that rows have a value in it")
    if columns.target and features.target is None:
        raise bad("data.target", f"no numeric values in target column {cfg.data.target!r}",
                  "check {name}; rows with a missing or non-numeric target are skipped")
    if cfg.features.mode != "hashing" and features.dim == 0:
        raise bad("features.min_df", "the vocabulary is empty after pruning",
                  "lower {name}, raise {features.max_df}, or check the {data.text} column")
    # A column without one number stands at the same value in every row: it would train as given and do nothing.
    empty = [c for c in columns.numeric if numeric is not None and not getattr(numeric.get(c), "n", 0)]
    if empty:
        raise bad("data.numeric", f"{{name}} {', '.join(empty)}: no training row in {data} holds a number there "
                  "(every value is missing or unreadable, such as a decimal comma 0,5 or text)",
                  "write the numbers with a decimal point (0.5), or leave the column out of {name}")


def numeric_labels_note(labels: list[str], column: str | None) -> str | None:
    """Words for a label column whose every value is a number (each is trained as a
    class, as written: ``1`` and ``1.0`` are two), or None."""
    if not labels:
        return None
    try:
        [float(x) for x in labels]
    except ValueError:
        return None
    shown = ", ".join(labels[:5]) + (", …" if len(labels) > 5 else "")
    return (f"the label column {column!r} holds numbers ({counted(len(labels), 'value')}: {shown}): each value is a class, "
            f"as written; to predict a number, use {{data.target}} {column}")


# A label column is taken for identifiers when its classes are at least this share of the
# training rows, and at least IDENTIFIER_MIN_CLASSES of them (a toy set of a few rows, each
# its own class, is what its author meant): each class is then learned from about one row.
IDENTIFIER_SHARE = 0.9
IDENTIFIER_MIN_CLASSES = 20


def identifier_labels_note(classes: int, rows: int, column: str | None) -> str | None:
    """Words for a label column whose values look like row identifiers (about one
    training row per class, the rule of :data:`IDENTIFIER_SHARE`), or None."""
    if classes < IDENTIFIER_MIN_CLASSES or rows <= 0 or classes < IDENTIFIER_SHARE * rows:
        return None
    return (f"the label column {column!r} looks like identifiers, not classes: {counted(classes, 'class', 'classes')} "
            f"over {counted(rows, 'training row')} (warned at a class for every row, or nearly: at least "
            f"{IDENTIFIER_SHARE:.0%} of them), so each class is learned from about one row and a validation row's "
            "label is one no training row has (skipped, unknown_label); pass {data.label} the column that holds the classes "
            "(to a TextClassifier: a y of classes)")


def sum_rows(results: list) -> dict:
    """Row accounting over partition results: read, trained, validated, skipped by
    reason, and (when any) the rows kept but read changed, by reason (``noted``)."""
    skipped: dict[str, int] = {}
    noted: dict[str, int] = {}
    for r in results:
        for k, v in r.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        for k, v in getattr(r, "noted", {}).items():
            noted[k] = noted.get(k, 0) + v
    rows = {"read": sum(r.rows_read for r in results), "trained": sum(r.train_rows for r in results),
            "validated": sum(r.val_rows for r in results), "skipped": skipped}
    if split := separator_counts(noted):   # what --label-sep split: no row was changed by it
        rows["label_sep"] = split
    if noted:
        rows["noted"] = noted
    return rows


# What a noted row was changed to, for the run's warning.
# Each as the noun counted and what is said of them ({its}, {are}: as the count wants).
NOTED = {"repeated_label": ("row", "named a label twice in {its} label set; each label counts once"),
         "unreadable_numeric": ("{{data.numeric}} value", "that {are} not a number (a decimal comma, text): each counts "
                                "as the training mean, as a missing one does"),
         UNREADABLE_TARGET: ("{{data.target}} value", "that {are} not a number (a decimal comma such as 1,5, text, "
                             "nan, inf): skipped as missing_target; write a number with a decimal point"),
         LEARNED: ("validation row", "the {continued} model had learned: trained on, not held out, since a "
                   "row a model learned does not test it"),
         TRUNCATED: ("row", "held more tokens than {{features.max_len}} {max_len}: the model reads the first "
                     "{max_len} of each (raise {{features.max_len}} to read more)")}


def with_absolute_paths(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with its local data, validation and cache paths, its --out (where the default
    cache is, OUT/.cache) and the run it continues (--init-from), made absolute (URLs as given)."""
    d, o, t = cfg.data, cfg.output, cfg.training
    out = dataclasses.replace(
        cfg, data=dataclasses.replace(d, train=[absolute(u) for u in d.train], val=[absolute(u) for u in d.val]),
        output=dataclasses.replace(o, out=absolute(o.out), cache=absolute(o.cache) if o.cache and not o.no_cache
                                   else o.cache),
        # --resume loads the continued run again: from another folder, a relative one is not found (or another's)
        training=dataclasses.replace(t, init_from=absolute(str(t.init_from)) if t.init_from else t.init_from))
    return out


def saved_config(cfg: TrainConfig) -> dict:
    """``cfg`` as config.json holds it: local paths as this folder means them (absolute), so
    that ``--resume`` finds the data and the cache from any folder. Messages name them as typed."""
    return with_absolute_paths(cfg).to_dict()


class Training:
    """One training run; its stages, in the order :func:`train` calls them."""

    def __init__(self, cfg: TrainConfig, events: Events, resume: str | None):
        if cfg.training.init_from and not is_continued(cfg):   # the command line merged it already
            cfg = continue_config(cfg)
        # What was asked (--model auto's fallback starts from it), and what that resolves to.
        self.given, self.events, self.resume = cfg, events, resume
        self.out_so = options_for(cfg.output.out, cfg.data.storage_options, like=cfg.data.train[0])
        # The run folder's writer lock (runs/run_lock.py), held until the run is saved: a second
        # trainer into a folder being trained is refused before any work.
        self.run_lock = lock_run(resume, self.out_so) if resume else None
        if resume:   # train(cfg, resume=RUN) with options other than the run's: refused, as --resume refuses them
            try:
                refuse_other_config(resume, saved_config(cfg), self._run_config())
            except BaseException:
                self.release_run()
                raise
        self.cfg = cfg = resolve(cfg)
        check_resolved(cfg)
        self.tc = cfg.training
        # --init-from: the finished run this one starts from, every file checked before any data is read.
        init = cfg.training.init_from
        self.init: InitRun | None = load_init(init, run_options(init, cfg), continued_by(self.given)) if init else None
        self.every = CheckpointEvery.parse(self.tc.checkpoint_every)
        self.t0, self.stage_seconds = time.monotonic(), {}
        self.reads_at_start = SHARD_READS.now()   # shards this process reads from here on go into metrics.json
        # With --ddp the ranks pick their own device on their workers; the trainer only keeps the result.
        self.device = pick_device(self.tc.device if not self.tc.ddp else "cpu")
        self.saved = self._load_checkpoint() if resume else None
        self.columns = training_columns(cfg)
        self.model_bytes = estimate_model_bytes(cfg)
        self.shuffle_bytes = self.tc.shuffle_buffer * ROW_BYTES_ESTIMATE
        # What this process holds past a trainer's base before the run (tune's search): train() sets it.
        self.held_bytes = 0
        self.needs_cluster: str | None = None   # the caller's reason to run on one (tune: its trials)
        self.in_process, self.where = False, ""
        self.decisions: dict = {}   # what auto options chose from the data (metrics.json)
        self.entry_lock: EntryLock | None = None   # held while this run writes its cache entry
        self.bucket_names = None   # hashing: the fit pass's sampled terms per bucket (top_terms.csv)
        self.partitioning: list | None = None   # how the inputs are cut (_partitioning), once planned
        self.ranks_top_rows = None   # --ddp: rank 0's runs/explain.top_rows of the weights it sent
        self.training_began = self.whole = False   # what a Ctrl-C leaves: see train()
        if not self.tc.ddp:   # the margin kernel compiles where the model trains
            rule_for(cfg).warm()

    def _run_config(self) -> dict:
        """The resumed run's config.json; none (a folder without one is refused as holding no checkpoint)."""
        try:
            return read_config(self.resume, self.out_so)
        except (FileNotFoundError, NotADirectoryError):
            return {}

    def _load_checkpoint(self) -> TrainState:
        saved = load_checkpoint(self.resume, self.out_so)
        if saved is None:
            raise bad("training.checkpoint_every", f"{self.resume} has no checkpoint to resume from",
                      "a checkpoint is written every {name} and on Ctrl-C; a finished run has none (it was "
                      "removed once the model was saved)")
        return TrainState.from_checkpoint(saved)

    # ---- plan
    def plan(self, external: bool) -> None:
        """The memory plan; with a local cluster, the inputs planned and checked before it starts."""
        c = self.cfg.cluster
        self.events.emit("stage", stage="planning")
        # Unwritable --out or --cache: refused before the cluster starts, not when the first file is due.
        check_output_places(self.cfg, self.resume)
        self.external = external or bool(scheduler_address(c.scheduler))
        self.memory = plan_memory(c.memory_budget, workers=c.workers, threads=c.threads, model_bytes=self.model_bytes,
                                  shuffle_bytes=self.shuffle_bytes, blocksize=c.blocksize,
                                  model_options=self._model_options(), held=self.held_bytes, ranks=self.ranks)
        # Bad paths and columns fail before a cluster starts, where we can.
        self.sources = None if self.external else self._plan_sources()
        self.sample = None
        if self.sources is not None:
            self._plan_for_sampled_labels()
        self.in_process, self.where = self._where()
        if self.in_process:
            self.memory = plan_in_process(self.memory, self.memory.workers * self.memory.threads)

    @property
    def ranks(self) -> int:
        """The workers ``--ddp``'s ranks need of a cluster this run starts, one each (0: none
        asked; an existing cluster's ranks go on the workers it has)."""
        return 0 if self.external or (self.tc.ddp or 0) < 2 else self.tc.ddp

    @property
    def base_bytes(self) -> int:
        """The trainer process's base: Python, torch, the Dask client, and what it held before the run."""
        return TRAINER_BASE + self.held_bytes

    def release_data(self) -> None:
        """Drop what this run read and fitted (features, the feed, the sample, the sources), keeping
        its configuration and cluster: tune's search is done with them when its final run starts,
        a run of its own that reads its cache entry again."""
        for name in ("features", "feed", "sample", "held_out", "bucket_names", "sources", "train_src", "val_src"):
            if hasattr(self, name):
                setattr(self, name, None)

    def _model_options(self) -> str:
        """The options that make this run's model smaller, as a refused plan names them:
        the input width its features have (buckets or the vocabulary), and a hidden layer's."""
        f, m = self.cfg.features, self.cfg.model
        opts = ["fewer {features.buckets}" if f.mode == "hashing" else "a smaller {features.max_features}"]
        if m.layers != 0:
            opts.append("a smaller {model.hidden}")
        return ", ".join(opts)

    def _plan_for_sampled_labels(self) -> None:
        """The plan made for the classes a sample of the training rows shows, when
        more than :data:`PLANNED_CLASSES`: the trainer's share then holds the
        model the data needs (a linear model's weights are terms × classes), where
        a plan for too few classes would pass it by for a smaller model after the
        fit. A model whose weights would leave the workers too little is planned
        without the copies it can do without (its twin), or as before."""
        cfg, c, data = self.cfg, self.cfg.cluster, self.cfg.data
        if not self.columns.label:
            return
        self.sample = sample_rows(self.sources[0], self.columns, data.storage_options)
        seen = sample_label_count(self.sample)
        if seen <= PLANNED_CLASSES:
            return
        classes = math.ceil(seen * SAMPLED_CLASSES_MARGIN)
        for candidate in (cfg, dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, learn_val=False))):
            model_bytes = estimate_model_bytes(candidate, classes=classes)
            try:
                memory = plan_memory(c.memory_budget, workers=c.workers, threads=c.threads, model_bytes=model_bytes,
                                     shuffle_bytes=self.shuffle_bytes, blocksize=c.blocksize, held=self.held_bytes,
                                     ranks=self.ranks)
            except UserError:
                continue
            self.memory, self.model_bytes = memory, model_bytes
            self.sources = self._plan_sources()   # the partition size follows the workers' new share
            self.decisions["planned_classes"] = {"classes": classes, "sampled": seen}
            self.planned_note = (f"memory plan for {classes:,} classes: a sample of the training rows shows "
                                 f"{seen:,} labels" + (" (without the twin that learns the validation rows)"
                                                       if candidate is not cfg else ""))
            return

    def _where(self) -> tuple[bool, str]:
        """In this process or on a cluster (:func:`~lancetnic_flow.dataflow.inprocess.choose_where`), and why."""
        c, tc = self.cfg.cluster, self.tc
        # tune's final run is given the search's cluster: it is not one the user started with --scheduler.
        given = "an existing cluster ({cluster.scheduler})" if scheduler_address(c.scheduler) else "the cluster it was given"
        needs = (given if self.external else
                 "the model trains on a Dask worker ({cluster.train_on} cluster, {training.ddp})" if tc.ddp else self.needs_cluster)
        size = None if self.sources is None else input_bytes(*self.sources)
        here, why = choose_where(c.run_on, input_bytes=size, needs_cluster=needs, plan=self.memory,
                                 trainer_need=self.base_bytes + self.model_bytes + self.shuffle_bytes,
                                 threads=self.memory.workers * self.memory.threads)
        return here, said(why, self.events.words)   # shown in the plan, not an event's message

    def after_write_error(self, exc: WriteError) -> WriteError:
        """``exc`` with what to do once the place is writable again: resume from the checkpoint, or run again."""
        run = getattr(self, "run", None)
        if run is not None and has_checkpoint(run, self.out_so):
            then = f"then continue with `lancetnic-flow train --resume {run}`"
        else:
            then = "then run the same command again (finished work in the cache is reused)"
        return reworded(exc, lambda message, hint: (message, f"{hint}; {then}"))

    def _plan_sources(self) -> tuple:
        """Partitions of the training (and validation) data, columns checked; the planner's warnings emitted."""
        self.partitioning = self._partitioning()
        train_src, val_src = plan_training_sources(self.cfg, self.partitioning[0], threads=self.partitioning[1])
        for w in train_src.warnings + (val_src.warnings if val_src else []):
            self.events.emit("warning", message=w)
        sniffed = train_src.sniffed + (val_src.sniffed if val_src else [])
        if sniffed and "format" not in self.decisions:   # planned again for the workers' share: said once
            self.decisions["format"] = [dataclasses.asdict(s) for s in sniffed]
            for s in sniffed:
                if s.news:
                    self.events.emit("decided", what="format", message=s.message())
        return train_src, val_src

    def _partitioning(self) -> list[int]:
        """The block size (of partitions, and of the shards cut from them) and worker threads the
        inputs are cut by: this session's plan's, or a resumed run's own. Featurised afresh (no cache entry to read them from), other partitions
        make other batches, and the replay of those trained before the checkpoint trained some
        rows twice and others not at all; --workers, --worker-threads and --memory-budget may change."""
        plan = self.memory
        saved = self.saved.partitioning if self.saved is not None else None
        return list(saved) if saved else [plan.partition, plan.workers * plan.threads]

    # ---- cluster
    @contextlib.contextmanager
    def cluster(self, client: Any = None, closer: Any = None) -> Iterator[Any]:
        """The Dask client: ``client`` as given, an existing scheduler's, or a
        LocalCluster's (shut down through ``closer``, an executor, when given)."""
        ts = time.monotonic()
        if client is not None:
            cm = contextlib.nullcontext(client)
        elif self.in_process:
            cm = InProcessClient(self.memory.threads)
        else:
            cm = open_cluster(self.memory, scheduler=self.cfg.cluster.scheduler, dashboard=self.cfg.cluster.dashboard,
                              closer=closer, wait=self.cfg.cluster.wait_seconds())
        with cm as c:
            self.stage_seconds["cluster_start"] = time.monotonic() - ts
            self.client = c
            self._connected()
            yield c

    def _connected(self) -> None:
        """On a cluster: its plan (an existing one's workers decide), the trainer's threads, the inputs."""
        cfg, tc, client = self.cfg, self.tc, self.client
        if self.external:
            self.memory = dataclasses.replace(
                plan_for_existing(client, trainer=self.base_bytes + self.model_bytes + self.shuffle_bytes,
                                  blocksize=cfg.cluster.blocksize), held=self.held_bytes)
            if cfg.features.tokenizer:
                from ..tokenizers import check_on_cluster

                check_on_cluster(client, cfg.features.tokenizer)
        plan = self.memory
        # Local workers own their cores; an OpenMP team spinning on a busy
        # core is several times slower than one thread.
        busy = local_worker_threads(client) if plan.external else plan.workers * plan.threads
        # In this process the featurising threads and torch's take turns (the fit pass, then epochs):
        # set when a network is built (build_model), for the epochs.
        self.torch_threads = tc.threads or max(1, (os.cpu_count() or 1) - busy)
        # The size the inputs were cut into, where they were planned before the cluster (not on an existing one).
        cut = max((p.length for p in self.sources[0].partitions), default=0) if self.sources else 0
        self.events.emit("plan", plan=plan.to_dict(), text=plan.describe(cut) + (f"\nfeaturising  {self.where}" if self.where else ""),
                         where=self.where,
                         dashboard=getattr(client, "dashboard_link", None) if cfg.cluster.dashboard else None)
        if getattr(self, "planned_note", None):
            self.events.emit("decided", what="plan", message=self.planned_note)
        self.train_src, self.val_src = self.sources or self._plan_sources()
        self._decide_analyzer()
        cfg = self.cfg   # with the analyzer decided: the cache key and the shards read it
        # Until now the texts were read by the widest rule (the sample auto decides from); from here by
        # the rule of the analyzer decided, in every pass and the cache key.
        self.columns = training_columns(cfg)
        spec = MODELS.get(cfg.model.name)
        # Held out by hash (none beside a validation source), less the rows a continued run's model learned.
        self.val_fraction = holdout_for(0.0 if self.val_src else cfg.data.val_fraction, self.init,
                                        self.tc.learn_val, bool(spec and spec.learns_val))
        self.held_out = HeldOut(self.val_fraction)
        # The key names the data and options a checkpoint belongs to, with a cache or without.
        self.key = entry_key(self.train_src, self.val_src, self._key_options(), self.columns,
                             fraction_of(self.val_fraction))
        self.key_parts = key_parts(self.train_src, self.val_src, self._key_options(), self.columns,
                                   fraction_of(self.val_fraction))
        if self.saved is not None and self.saved.key != self.key:   # before a fit pass of other data or options
            self._refuse_changed_parts(self.saved.key_parts)
            self._refuse_other_key(self.saved.key)
        if cfg.output.no_cache:
            self.cache_so, self.entry = {}, None
            self.decisions["cache"] = "none"
            where = (f"by the {self.tc.ddp} ranks, each its own share," if (self.tc.ddp or 0) > 1 else
                     "by the trainer task on the cluster" if self.tc.ddp == 1 else
                     f"{counted(self.tc.in_flight or plan.in_flight, 'partition')} in flight")
            self.events.emit("decided", what="cache", message=(
                f"no shard cache (--cache none): every epoch and validation pass is featurised afresh, {where}; "
                "nothing is written but the run folder"))
            return
        cache = absolute(cfg.output.cache or join(cfg.output.out, ".cache"))   # workers write the shards
        self.cache_so = options_for(cache, cfg.data.storage_options, like=cfg.data.train[0])
        self.entry = join(cache, self.key)

    def _key_options(self) -> dict:
        """What the cache entry is keyed by besides the data: the feature options, and
        the run continued (--init-from) and declared labels, when there are."""
        return key_options(dataclasses.asdict(self.cfg.features), self.init, self.cfg.data.classes)

    def _decide_analyzer(self) -> None:
        """``--analyzer auto``: words, or character n-grams for text whose words
        do not repeat in one form (or are cut at their vowel signs), from a sample of the training text
        (resolve_sample); a warning when another option settled it on words
        for such text (words_kept_warning)."""
        if self.given.features.analyzer != "auto":
            return
        from ..features.scripts import char_script_share

        texts = sample_texts(self.train_src, self.columns, self.cfg.data.storage_options,
                             sample=getattr(self, "sample", None))
        share, letters = char_script_share(texts)
        if self.cfg.features.analyzer != "auto":
            warning = words_kept_warning(self.cfg.features, self.cfg.model.name, share, letters)
            if not warning:   # Thai's or Hindi's marks are said there, with their script
                self._warn_of_cut_words(texts)
            if warning:
                # metrics.json holds the words the run's caller was told, not the options' placeholders
                self.decisions["analyzer"] = {"analyzer": self.cfg.features.analyzer, "letters_sampled": letters,
                                              "char_script_share": round(share, 4),
                                              "warning": said(warning, self.events.words)}
                self.events.emit("warning", message=warning)
            return
        self.given, self.cfg, note = resolve_sample(self.given, self.cfg, share, letters, vowel_marked(texts))
        self.decisions["analyzer"] = {"analyzer": self.cfg.features.analyzer, "char_script_share": round(share, 4),
                                      "letters_sampled": letters}
        if note:
            self.events.emit("decided", what="analyzer", message=note)
        self._warn_of_cut_words(texts)

    def _warn_of_cut_words(self, texts: list[str]) -> None:
        """A warning where the words the run reads are cut at their combining marks
        (decomposed accents, vowel marks): resolve.cut_words_warning, on the sample."""
        import unicodedata

        from ..features.scripts import cut_word_share

        share, words = cut_word_share(texts)
        if share < CUT_WORD_SHARE:
            return
        composed, _ = cut_word_share(unicodedata.normalize("NFC", t) for t in texts)
        warning = cut_words_warning(self.cfg.features, share, words, composed)
        if warning:
            self.decisions["cut_words"] = {"share": round(share, 4), "words_sampled": words,
                                           "warning": said(warning, self.events.words)}
            self.events.emit("warning", message=warning)

    # ---- fit
    def fit(self) -> None:
        """The vocabulary (or buckets' idf), labels and scalers: from the cache, or
        by the fit pass. Hashing features count and write every row's terms in
        the same pass, so the corpus is tokenised once; the other modes write
        their shards while the first epoch trains."""
        ts = time.monotonic()
        if self.entry is None:
            self._fit_without_cache()
            self.stage_seconds["fit"] = time.monotonic() - ts
            return
        features = read_features(self.entry, self.cache_so, self.key)
        if features is None or read_manifest(self.entry, self.key, self.cache_so) is None:
            # This run may write the entry: one writer at a time. A run that held it
            # may have completed it meanwhile, so what is there is read again.
            self.entry_lock = lock_entry(self.entry, self.cache_so, on_wait=self._waiting_for_entry)
            features = read_features(self.entry, self.cache_so, self.key)
        results = None
        if features is None:
            features, results, totals = self._fit_pass()
            check_fitted(self.cfg, self.columns, features, totals.rows_read, totals.skipped, totals.numeric)
            self.bucket_names = totals.names
            self.held_out.take(totals, self._unread(), self._row_labels(features), self._partitions())
            self.held_out.write_entry(self.entry, self.cache_so)
            write_names(self.entry, totals.names, self.cache_so)
            write_read_as(self.entry, getattr(self, "init_read_as", None) or {}, self.cache_so)
            write_features(self.entry, features, self.cache_so)
        else:
            if self.init is None:   # an entry fitted before unseen buckets weighed 0 weighs them so now
                features.zero_unseen()
            self.bucket_names = read_names(self.entry, self.cache_so)
            self.init_read_as = read_read_as(self.entry, self.cache_so) if self.init is not None else None
            self.held_out.read_entry(self.entry, self.cache_so, self._partitions())
            self.events.emit("fitted", cached=True, vocabulary=features.dim, docs=features.docs,
                             labels=len(features.labels))
        self._fitted(features)
        self.feed = ShardFeed(self.client, self._feed_spec(), self.events, lock=self.entry_lock)
        if results is not None and not self.feed.complete:
            self.feed.finish_entry(results)
        if self.feed.complete:
            self.feed.release()
        self.stage_seconds["fit"] = time.monotonic() - ts

    def _fit_without_cache(self) -> None:
        """``--cache none``: the fit pass counts rows without writing a shard, every
        run (a resumed one too: the pass is deterministic), and the feed featurises
        each epoch afresh (dataflow/fresh.py)."""
        features, results, totals = self._fit_pass()
        check_fitted(self.cfg, self.columns, features, totals.rows_read, totals.skipped, totals.numeric)
        self.bucket_names = totals.names
        self.held_out.take(totals, self._unread(), self._row_labels(features), self._partitions())
        self._fitted(features)
        self.feed = FreshFeed(self.client, self._feed_spec(), self.events, trained=totals.results,
                              results=results)

    def _row_labels(self, features: FittedFeatures) -> list[str] | None:
        """The run's classes where a validation row of another label is skipped; None for
        label sets, whose row stays (only such a label is left out of its set)."""
        return None if self.columns.multilabel else features.labels

    def _partitions(self) -> list:
        """Every partition with its source's forced split (None: split by hash)."""
        return [(p, None) for p in self.train_src.partitions] + self._unread(hashing=True)

    def _unread(self, hashing: bool = False) -> list:
        """The partitions the fit pass does not read: a validation source's, in the vocabulary modes."""
        if self.val_src is None or (self.cfg.features.mode == "hashing" and not hashing):
            return []
        return [(p, "val") for p in self.val_src.partitions]

    def _fitted(self, features: FittedFeatures) -> None:
        self.features = features
        if self.init is not None:
            # The old run's bucket names too: its strongest buckets were learned from data this run does not read.
            self.bucket_names = merge_names([self.init.names, self.bucket_names])
            self._say_continued()
        # (a continued run pairs the labels it adds with its old run's: _say_continued)
        twice = None if self.init is not None else spelled_apart_warning(
            spelled_twice(features.labels), "and", "each is learned as a class of its own")
        if twice:
            self.decisions["labels_spelled_twice"] = [list(p) for p in spelled_twice(features.labels)]
            self.events.emit("warning", message=twice)
        self._warn_of_joined_sets(features.labels)
        self._refuse_joined_val_sets(features.labels)
        joined = joined_labels(features.labels) if self.cfg.training.task in ("classify", "multitask") else None
        if joined:
            sep, shown = joined
            self.decisions["joined_labels"] = {"separator": sep, "examples": shown}
            self.events.emit("warning", message=(
                f"the labels look like sets joined by {sep!r} ({', '.join(repr(x) for x in shown)}): each whole "
                f"string is learned as a class of its own, so a row is never predicted two labels; to learn each "
                f"label, pass {{training.task}} multilabel {{data.label_sep}} '{sep}' (to a TextClassifier: y as "
                "lists of labels)"))

    def _refuse_joined_val_sets(self, labels: list[str]) -> None:
        """Refuse, before the first epoch, a --val source whose label sets (in a sample of its head, read
        as a worker reads them) join the run's labels by a separator they were not read with, as
        ``evaluate`` refuses them; the epochs' check (:meth:`_check_val_labels`) stays for the blocks
        past that sample. Found only there, a whole epoch (every one, with --ddp) trained first."""
        if not self.columns.multilabel or self.val_src is None:
            return
        sample = sample_rows(self.val_src, self.columns, self.cfg.data.storage_options)
        if sample is not None:
            refuse_joined_sets(unseen(sample.column("label"), labels)[1], labels, self.columns.label_sep)

    def _warn_of_joined_sets(self, labels: list[str]) -> None:
        """A multilabel run's labels that are its other labels joined by a separator it did not split by."""
        joined = joined_in_sets(labels, self.cfg.data.label_sep) if self.columns.multilabel else None
        if joined:
            sep, names = joined
            self.decisions["joined_labels"] = {"separator": sep, "examples": names[:3]}
            self.events.emit("warning", message=(
                f"{counted(len(names), 'label')} of this run {verb(len(names), 'is', 'are')} its other labels joined by "
                f"{sep!r} ({', '.join(repr(x) for x in names[:3])}{', …' if len(names) > 3 else ''}): each was read "
                f"as one label string, so its rows learned the joined string, not the labels it joins; "
                f"pass {{data.label_sep}} '{sep}' to split such strings (a list's items are never split)"))

    def _feed_spec(self) -> FeedSpec:
        plan = self.memory
        return FeedSpec(self.key, self.entry, self.train_src, self.val_src, self.columns, self.features,
                        dataclasses.asdict(self.cfg.features), self.cfg.data.storage_options, self.cache_so,
                        self.partitioning[0], self.val_fraction, self.tc.in_flight or plan.in_flight, self.tc.seed)

    def _waiting_for_entry(self, holder: str) -> None:
        self.events.emit("waiting", what="cache_entry", entry=self.entry, holder=holder,
                         message=f"{holder} is writing the cache entry {self.entry}; this run reads it once it is "
                                 "complete")

    def release_run(self) -> None:
        """The run folder's writer lock, if this run holds it (saved, or stopped)."""
        if self.run_lock is not None:
            self.run_lock.release()

    def release_entry(self) -> None:
        """The entry's writer lock, if this run still holds it (it stops before the manifest)."""
        if self.entry_lock is not None:
            self.entry_lock.release()

    def _fit_pass(self) -> tuple[FittedFeatures, list | None, Any]:
        """The pass over the data on the cluster: fitted features, the shards it
        wrote (hashing only) and the pass's totals (rows read, skipped by reason)."""
        # A continued run's features are its old run's (the data's labels added): the pass says those.
        fc, opts = self.cfg.features, dict(storage_options=self.cfg.data.storage_options,
                                            chunk_bytes=self.partitioning[0], val_fraction=self.val_fraction,
                                            events=self.events, relabel=self._labelled)
        # A lost scheduler connection cancels the pass's futures: once the client is back, it runs again.
        again = dict(on_retry=lambda: self.events.emit(
            "warning", message="lost the connection to the Dask scheduler; reconnected, fitting again"))
        if fc.mode != "hashing":
            # Without a cache each partition's training rows are counted: the epochs visit those that have some.
            task = dict(task=fit_partition_counted) if self.entry is None else {}
            features, stats = retrying(self.client, fit_features, self.client, self.train_src.partitions, self.columns,
                                       fc, **task, **again, **opts)
            return features, None, stats
        val = self.val_src.partitions if self.val_src else []
        # Without a cache the pass counts the rows and writes nothing.
        shards = dict(shard_dir=None, keep=()) if self.entry is None else dict(shard_dir=join(self.entry, "shards"))
        features, stats = retrying(self.client, fit_features, self.client, self.train_src.partitions + val,
                                   self.columns, fc, task=count_partition,
                                   splits=[None] * len(self.train_src.partitions) + ["val"] * len(val),
                                   cache_options=self.cache_so, **shards, **again, **opts)
        for r in stats.results:   # a label written otherwise is noted, read as training's (the run warns at its end)
            r.drop_unknown(features.labels, sets=self.columns.multilabel)
        return features, stats.results, stats

    def _labelled(self, fitted: FittedFeatures) -> FittedFeatures:
        """The fit pass's features as this run trains with them: a continued run's are
        its old run's, with the labels the data adds; declared labels come last."""
        if self.init is None and not self.cfg.data.classes:
            return fitted
        if self.init is not None:   # the training rows of labels the old run spells otherwise: said once fitted
            self.init_read_as = counted_names(dict(zip(fitted.labels, fitted.label_counts)),
                                              self.init.features.labels)[0]
        return labelled(fitted, self.init, self.cfg.data.classes)[0]

    def _say_continued(self) -> None:
        """What a continued run keeps and adds, said once and kept in metrics.json."""
        init, f = self.init, self.features
        added = f.labels[len(init.features.labels):]
        self.decisions["init_from"] = {"run": init.url, "labels_kept": len(init.features.labels),
                                       "labels_added": added}
        kept = (f"{f.mode} features ({f.dim:,} {'buckets' if f.mode == 'hashing' else 'terms'}, "
                f"idf {'kept' if f.idf is not None else 'none'})")
        news = (f"{counted(len(added), 'new label')}: {', '.join(added[:10])}{', …' if len(added) > 10 else ''}"
                if added else "no new label")
        kept_labels = counted(len(init.features.labels), "label")
        labels = f"{kept_labels} kept; {news}" if f.labels else "the target's scale kept"
        self.events.emit("decided", what="init_from", message=(
            f"continuing {init.url}: its {kept}, {self.cfg.model.name} weights and {labels}"))
        self.decisions["init_from"]["learned_rows"] = int(init.learned.hashes.size)
        self.decisions["init_from"]["schedule_from_step"] = self._schedule_start()
        read_as = getattr(self, "init_read_as", None)
        if read_as:
            self.decisions["init_from"]["labels_read_as"] = read_as
            self.events.emit("warning", message=read_as_warning(read_as, f"{init.url}'s",
                                                                "decided.init_from.labels_read_as in metrics.json"))
        if not init.learned.complete:
            self.events.emit("warning", message=(
                f"{init.url} learned its validation rows and does not record them all (a run saved by an earlier "
                "version, or past the record's limit): where this data repeats them, validation is not held out "
                "from the model, and its scores and probabilities read high; {data.val} with rows it never saw "
                "validates it"))

    # ---- model
    def decide(self) -> None:
        """The choices that need the fit's counts (:func:`~lancetnic_flow.resolve.resolve_counts`),
        taken once: the configuration is final from here on, and ``config.json`` is what runs."""
        classes = len(self.features.labels)
        counts = FitCounts(rows=self.feed.total_rows(), classes=classes)
        self._say_labels(counts)
        resolved, before = self.cfg, self.cfg.model.name
        if self.saved is not None:
            # A resumed run goes on as the run it was: config.json names what its start chose, the
            # checkpoint's weights what the rule needs. A --memory-budget given again plans where it
            # runs; deciding from it again (the twin dropped) trained another model, or failed as
            # "another run's checkpoint". A plan without room for it is refused (build_model).
            options = rule_for(resolved).resume_options(self.saved.model)
            self.cfg = dataclasses.replace(resolved, training=dataclasses.replace(resolved.training, **options))
            notes = []
        else:
            self.cfg, notes = resolve_counts(self.given, resolved, counts,
                                             lambda c: self._fits(self._trainer_need(classes, c)))
        self.tc = self.cfg.training
        for note in notes:
            self.events.emit("warning", message=note)
        if self.tc.learn_val:
            # The saved model learns the validation rows too, whose buckets no training row held: weighed
            # as they were before such buckets weighed 0, so its twin learns their words.
            self.features.weigh_unseen(self.init.features.docs if self.init is not None else self.features.docs)
        if self.tc.learn_val:   # the validation rows no record has yet are hashed beside the epochs
            self.held_out.start_pass(self.client, self.columns, self.cfg.data.storage_options, self.partitioning[0],
                                     self.features.labels)
        if self.cfg.model.name != before:   # --model auto's next choice: terms × classes outgrew the plan
            self.device = pick_device(self.tc.device if not self.tc.ddp else "cpu")
        self.rule = rule_for(self.cfg)
        unused = unused_monitor(self.given, self.cfg, self.rule.keeps_last_epoch())
        if unused:
            self.events.emit("warning", message=unused)

    def _say_labels(self, counts: FitCounts) -> None:
        """Warn of a label column that looks like identifiers, else of one that holds numbers
        (both would say --target of a row id: only the first is true of one)."""
        labels, column = self.features.labels, self.cfg.data.label
        ids = None if self.columns.multilabel else identifier_labels_note(counts.classes, counts.rows, column)
        if ids:
            self.decisions["identifier_labels"] = {"classes": counts.classes, "training_rows": counts.rows}
            self.events.emit("warning", message=ids)
        note = numeric_labels_note(labels, column)
        if note:
            self.decisions["numeric_labels"] = len(labels)
            # A task chosen (--task classify; a TextClassifier, whose y of integers are
            # classes as scikit-learn's are) is not a regression the run guessed wrong.
            if self.given.training.task is None and not ids:
                self.events.emit("warning", message=note)

    def build_model(self) -> None:
        """Task, model and the rule's optimisers (refused if the plan cannot hold them), and the run folder."""
        cfg, tc = self.cfg, self.tc
        self.task = make_task(cfg, self.features, self.device)
        classes = self.task.classes if self.task.classifies else 0
        # Label sets travel as a byte per row and label; a buffered row's estimate
        # has room for LABEL_SET_SLACK of them, the shuffle buffer holds the rest.
        label_sets = tc.shuffle_buffer * max(0, classes - LABEL_SET_SLACK) if self.task.multilabel else 0
        self.need = self._trainer_need(classes) + label_sets
        self._make_room(classes)
        if isinstance(self.feed, ShardFeed) and not self.tc.ddp:
            self.feed.keep(self._keep_limit())
        m = cfg.model
        args = dict(dim=self.features.dim, classes=classes, regress=self.task.regresses, hidden=m.hidden,
                    layers=m.layers, dropout=m.dropout, embed=m.embed, numeric=len(self.features.numeric))
        # A rule whose model trains as arrays does so here, without torch; --ddp ranks train the network.
        arrays = None if self.tc.ddp else self.rule.arrays_model(m.name, **args)
        if arrays is not None:
            self.model, self.model_meta = arrays
        else:
            import torch

            from ..models import create_model

            torch.manual_seed(tc.seed)
            torch.set_num_threads(self.torch_threads)
            self.model, self.model_meta = create_model(m.name, **args)
        if self.init is not None:
            self._start_from_init(classes)
        # The task kind goes into model.json: a multilabel model's heads look like a classifier's.
        self.model_meta["task"] = self.task.kind
        self.rule.prepare(self.model)
        self.model.to(self.device)
        # With --ddp the ranks hold the optimiser moments; here they would be 2× the model, unused.
        self.opts = self.rule.optimizers(self.model) if not tc.ddp else []
        # The run folder exists from here on: a checkpoint has a home, and config.json says how to continue it.
        if self.resume:
            self.run = RunFolder(self.resume, self.out_so)
        else:
            self.run, self.run_lock = claim_run_dir(cfg.output.out, cfg.output.name, self.out_so)
            write_config(self.run, saved_config(cfg), self.out_so)
            renamed = renamed_run_warning(self.run, cfg.output.name)
            if renamed:
                self.events.emit("warning", message=renamed)

    def _start_from_init(self, classes: int) -> None:
        """--init-from: the old run's weights into the network built for this run's
        classes (the old ones keep theirs, new ones start as a fresh network's)."""
        from ..models.grow import grow_into

        old = {k: v for k, v in self.init.meta["kwargs"].items() if k != "classes"}
        new = {k: v for k, v in self.model_meta["kwargs"].items() if k != "classes"}
        if old != new or self.init.meta.get("net") != self.model_meta["net"]:
            differ = ", ".join(f"{k} {old.get(k)} → {new.get(k)}" for k in sorted(set(old) | set(new))
                               if old.get(k) != new.get(k)) or f"net {self.init.meta.get('net')}"
            raise refusal(self.init.url, continued_by(self.given), f"its network does not match the one its "
                          f"configuration builds here ({differ})",
                          "continue it with the lancetnic_flow version that trained it")
        try:
            grow_into(self.model, self.init.state, self.init.classes, classes)
        except ValueError as exc:
            raise refusal(self.init.url, continued_by(self.given), f"its weights do not fit the network ({exc})",
                          "restore the run folder from a copy") from None
        self.init.state = {}   # the model holds them now

    def _fit_shuffle_buffer(self, classes: int) -> None:
        """The model with the real classes outgrew the trainer's share, planned
        before the fit for :data:`PLANNED_CLASSES`: a default shuffle buffer gives
        up to half its rows to make room (said in a warning, kept in config.json);
        otherwise the run is refused naming only options that change what was
        short, each with a value that fits."""
        tc, plan = self.tc, self.memory
        per_row = ROW_BYTES_ESTIMATE + (max(0, classes - LABEL_SET_SLACK) if self.task.multilabel else 0)
        short = self.need - plan.trainer
        rows = (tc.shuffle_buffer - -(-short // per_row)) // 1000 * 1000
        default = BY_FIELD["training.shuffle_buffer"].default
        if tc.shuffle_buffer == default and rows >= default // 2:
            tenths = self._budget_tenths(classes)
            self.events.emit("warning", message=(
                f"the model with {classes:,} classes needs {format_size(self.need)} in the trainer, the plan "
                f"gives it {format_size(plan.trainer)}: the shuffle buffer holds {rows:,} rows instead of "
                f"{tc.shuffle_buffer:,}" + (f" ({{cluster.memory_budget}} {tenths / 10:.1f}GiB keeps them all)"
                                            if tenths else "")))
            self.need -= (tc.shuffle_buffer - rows) * per_row
            tc.shuffle_buffer, self.shuffle_bytes = rows, rows * ROW_BYTES_ESTIMATE
            return
        # Each fix as a rerun would plan it: before the fit, for PLANNED_CLASSES.
        fixes = []
        rows = next((r for r in range(tc.shuffle_buffer // 1000 * 1000, 999, -1000)
                     if r < tc.shuffle_buffer and self._rerun_fits(classes, rows=r)), None)
        if rows:
            fixes.append(f"{{training.shuffle_buffer}} {rows}")
        if self.cfg.features.mode == "hashing":
            buckets = next((b for b in (self.cfg.features.buckets >> k for k in range(1, 8))
                            if self._rerun_fits(classes, buckets=b)), None)
            if buckets:
                fixes.append(f"{{features.buckets}} {buckets}")
        tenths = self._budget_tenths(classes)
        if tenths:
            fixes.append(f"{{cluster.memory_budget}} {tenths / 10:.1f}GiB")
        if self.cfg.model.hidden and self.cfg.model.name != "LinearSVM":
            fixes.append("a smaller {model.hidden}")
        raise UserError(f"the model with {classes:,} classes needs {format_size(self.need)} in the trainer, "
                        f"the plan gives it {format_size(plan.trainer)}", "use " + ", or ".join(fixes))

    def _make_room(self, classes: int) -> None:
        """A model that outgrew the plan: a new run gives up shuffle-buffer rows (or is refused
        naming what fits); a resumed one is refused, as a smaller buffer would replay other
        batches than those it trained."""
        if self._fits(self.need):
            return
        if self.resume:
            raise self._too_small_to_resume(classes)
        self._fit_shuffle_buffer(classes)

    def _too_small_to_resume(self, classes: int) -> UserError:
        """The run's model does not fit this session's plan: it continues only as it started
        (the same twin, the same shuffle buffer), so only a larger --memory-budget helps."""
        tenths = self._budget_tenths(classes)
        return UserError(f"the run's model with {classes:,} classes needs {format_size(self.need)} in the trainer, "
                         f"the plan of {{cluster.memory_budget}} {format_size(self.memory.budget)} gives it "
                         f"{format_size(self.memory.trainer)}: {self.resume} continues only as it was started",
                         f"resume with {{cluster.memory_budget}} {tenths / 10:.1f}GiB" if tenths else
                         "resume on a machine with more memory")

    def _budget_tenths(self, classes: int) -> int | None:
        """The smallest budget, in tenths of a GiB, above this one whose rerun holds the model (None: none to 4 TiB)."""
        start = math.ceil(self.memory.budget * 10 / GiB) + 1
        return next((t for t in range(start, 10 * 4096) if self._rerun_fits(classes, budget=t * GiB // 10)), None)

    def _rerun_fits(self, classes: int, *, rows: int | None = None, buckets: int | None = None,
                    budget: int | None = None) -> bool:
        """Whether a run with these changes would hold this model: its plan made as
        before the fit (the model for PLANNED_CLASSES), its need with ``classes``."""
        cfg, c = self.cfg, self.cfg.cluster
        if buckets:
            cfg = dataclasses.replace(cfg, features=dataclasses.replace(cfg.features, buckets=buckets))
        rows = rows or self.tc.shuffle_buffer
        labels = max(0, classes - LABEL_SET_SLACK) if self.task.multilabel else 0
        try:
            rerun = plan_memory(budget or self.memory.budget, workers=c.workers, threads=c.threads,
                                model_bytes=estimate_model_bytes(cfg), shuffle_bytes=rows * ROW_BYTES_ESTIMATE,
                                held=self.held_bytes, ranks=self.ranks)
        except UserError:
            return False
        share = rerun.trainer + (rerun.workers * rerun.worker_limit if self.memory.in_process else 0)
        need = self.base_bytes + estimate_model_bytes(cfg, buckets or self.features.dim, classes) \
            + rows * (ROW_BYTES_ESTIMATE + labels)
        return need <= share

    def holds_model(self, cfg: TrainConfig, classes: int) -> bool:
        """Whether the trainer's share holds ``cfg``'s model with ``classes`` classes (tune's search
        asks for each width it may pick, which its final run trains here)."""
        return self._fits(self._trainer_need(classes, cfg))

    def _trainer_need(self, classes: int, cfg: TrainConfig | None = None) -> int:
        """The trainer's bytes for ``cfg``'s model (this run's by default) with ``classes`` classes:
        base, model, shuffle buffer."""
        return self.base_bytes + estimate_model_bytes(cfg or self.cfg, self.features.dim, classes) + self.shuffle_bytes

    def _keep_limit(self) -> int:
        """How many bytes of finished shards this process keeps between epochs:
        half of what the plan gives the trainer beyond its needs, at most
        :data:`KEEP_MAX` (an existing cluster's trainer is not planned: none)."""
        if self.memory.external:
            return 0
        return min(KEEP_MAX, max(0, self.memory.trainer - self.need) // 2)

    def _fits(self, need: int) -> bool:
        """Whether the trainer's share of the plan holds ``need`` (an existing cluster's trainer is not planned)."""
        return need <= self.memory.trainer or self.memory.external

    # ---- epochs
    def _refuse_changed_parts(self, saved_parts: dict | None) -> None:
        """A checkpoint that keeps its key's parts: refused naming each that differs from today's."""
        changes = key_changes(saved_parts, self.key_parts) if saved_parts else []
        if changes:
            raise UserError(f"the training data or feature options changed since {self.resume} was checkpointed: "
                            + "; ".join(changes), "resume needs the same inputs; start a new run instead")

    def _refuse_other_key(self, saved_key: str) -> None:
        """A checkpoint of other inputs or options, or of an earlier cache version
        (a validation split of the text's ends only): a clear error either way."""
        old = entry_key(self.train_src, self.val_src, self._key_options(), self.columns,
                        fraction_of(self.val_fraction), version=2, revisions=False)
        if saved_key == old:
            raise UserError(f"{self.resume} was checkpointed by an earlier lancetnic-flow, whose validation split "
                            "(a hash of the text's first and last bytes) differs from this version's",
                            "start a new run on the same data (see CHANGELOG.md: validation splits changed)")
        if saved_key == entry_key(self.train_src, self.val_src, self._key_options(), self.columns,
                                  fraction_of(self.val_fraction), revisions=False):
            raise UserError(f"{self.resume} was checkpointed by an earlier lancetnic-flow, which read some rows of "
                            "these files differently (a CSV or TSV row whose quoted text holds line ends, cut in two "
                            "where the file was split; a JSON number label named two ways; a word's final capital "
                            "sigma lower-cased as σ; a true or false numeric value read as no number; a validation "
                            "label spelled otherwise than training's skipped)",
                            "start a new run on the same data (see CHANGELOG.md)")
        for readers, why in ((SPACE_LINES_READ_AS_ROWS, "it read a one-column file's lines of spaces as empty_text "
                                                        "rows"),
                             (LONE_CR_NOT_A_ROW_END, "a lone \\r, a classic Mac line end, now ends a row everywhere"),
                             (MALFORMED_READ_PAST_ITS_RECORD, "a malformed row's lines are now read the same however "
                                                              "the file is cut"),
                             (SHORT_ROWS_MALFORMED, "a row of fewer fields than the header is now read with its "
                                                    "missing fields empty, no longer skipped as malformed")):
            if saved_key == entry_key(self.train_src, self.val_src, self._key_options(), self.columns,
                                      fraction_of(self.val_fraction), readers=readers):
                raise UserError(f"{self.resume} was checkpointed by an earlier lancetnic-flow, whose CSV and TSV "
                                f"reader was revised since ({why})", "start a new run on the same data (see CHANGELOG.md)")
        if saved_key == entry_key(self.train_src, self.val_src, self._key_options(), self.columns,
                                  fraction_of(self.val_fraction), numbers=DURATIONS_IN_SECONDS - 1):
            raise UserError(f"{self.resume} was checkpointed by an earlier lancetnic-flow, which read a Parquet or "
                            "Arrow duration column of {data.numeric} or {data.target} in the unit the file stores "
                            "(nanoseconds, microseconds), where it now reads seconds",
                            "start a new run on the same data (see CHANGELOG.md)")
        for rule in rules_before(self.columns.text_rule):   # the rows an earlier version kept or skipped as empty_text
            if saved_key == entry_key(self.train_src, self.val_src, self._key_options(),
                                      dataclasses.replace(self.columns, text_rule=rule), fraction_of(self.val_fraction)):
                raise UserError(f"{self.resume} was checkpointed by an earlier lancetnic-flow, which told empty_text "
                                "rows by words alone (it skipped one Chinese character or :) under character n-grams, "
                                "and trained texts of stop words alone, or of fewer words than {features.ngram_min}'s MIN, "
                                "or from which a {features.tokenizer} of yours read no token)",
                                "start a new run on the same data (see CHANGELOG.md)")
        raise UserError(f"the training data or feature options changed since {self.resume} was checkpointed",
                        "resume needs the same inputs; start a new run instead")

    def _start_state(self, feed: ShardFeed) -> TrainState:
        """Where training starts: a fresh state, or the checkpoint's (checked, weights and RNG restored)."""
        total_rows = feed.total_rows()
        # Linear decay over the whole run; the fit pass already counted the rows.
        state = TrainState(key=self.key, total_rows=total_rows,
                           total_steps=self.tc.epochs * max(1, -(-total_rows // self.tc.batch_size)))
        saved = self.saved
        if saved is None:
            state.network = network_of(self.model_meta)
            return state
        if bool(saved.ddp) != bool(self.tc.ddp):
            raise UserError(f"{self.resume} was checkpointed by a run {'with' if saved.ddp else 'without'} "
                            "{training.ddp} and cannot continue in the other mode", "start a new run instead")
        if saved.ddp and saved.ddp.get("ranks", self.tc.ddp) != self.tc.ddp:
            raise UserError(f"{self.resume} was checkpointed by {counted(saved.ddp['ranks'], 'rank')} and cannot continue "
                            f"with {self.tc.ddp}", "resume with the run's own {training.ddp}, or start a new run")
        check_network(str(self.resume), saved, network_of(self.model_meta))
        self._check_same_shards(saved, feed)
        restore_weights(str(self.resume), self.model, self.opts, saved)
        saved.network = network_of(self.model_meta)
        if saved.rng is not None and not is_arrays(self.model):
            import torch

            torch.set_rng_state(saved.rng)
        self._keep_decisions(saved.decided or {})
        # The epochs finished before the checkpoint, so that the dashboard's best and last epoch are the run's.
        self.resumed_at = {"epoch": saved.epoch + 1, "batches": saved.batches}   # metrics.json: its time is this session's
        self.events.emit("resumed", run=str(self.run), epoch=saved.epoch + 1, batches=saved.batches, step=saved.step,
                         history=list(saved.history), monitor=self.tc.monitor)
        return saved

    def _check_same_shards(self, saved: TrainState, feed: Any) -> None:
        """A resume replays the batches trained before the checkpoint by skipping them: from a
        cache entry rebuilt since (deleted, then made again by a run on another plan) it would
        skip other rows than were trained. Refused; an entry not complete yet is rebuilt by this
        run as the checkpoint's partitioning cut it."""
        manifest = getattr(feed, "manifest", None)
        if saved.shards is None or manifest is None or shards_digest(manifest) == saved.shards:
            return
        raise UserError(f"the cache entry {self.entry} was made again since {self.resume}'s checkpoint, and its "
                        "training shards differ from those the run trained on: resuming would replay other "
                        "batches than it trained", "start a new run (what was fitted and featurised is cached), "
                        "or resume with the cache the run was trained with ({output.cache})")

    def _keep_decisions(self, before: dict) -> None:
        """The checkpoint's decisions, in the order the run made them, with those this
        segment made again as it made them: metrics.json says what a run never stopped says."""
        merged = {**before, **self.decisions}
        self.decisions.clear()
        self.decisions.update(merged)

    def _checkpoint(self, state: TrainState, reason: str) -> None:
        """Write ``state`` as this run's checkpoint, stamped with what identifies the run: its cache
        entry, decisions and network, whichever loop built the state (a --ddp rank's knows none)."""
        manifest = getattr(getattr(self, "feed", None), "manifest", None)
        write_checkpoint(self.run, dataclasses.replace(state, key=self.key, key_parts=self.key_parts,
                                                       decided=self.decisions,
                                                       network=network_of(self.model_meta),
                                                       partitioning=self.partitioning,
                                                       shards=shards_digest(manifest) if manifest else None),
                         self.out_so, self.events, reason)

    def _schedule_start(self) -> int:
        """The step a continued run's linear learning rate starts at: after those its weights
        took, as one run over both would decay it, not at full strength, which would shake what
        they learned. From the start where this run trains a label the old run had no training
        row of (added, or declared by partial_fit's classes): its output row learned nothing yet,
        and a decayed rate would leave it so. 0 for a fresh run."""
        init = self.init
        if init is None or self.tc.lr_schedule != "linear":
            return 0
        before = dict(zip(init.features.labels, init.features.label_counts or []))
        fresh = any(n and not before.get(name) for name, n in zip(self.features.labels, self.features.label_counts or []))
        return 0 if fresh else init.steps

    def _check_val_labels(self, val: dict) -> None:
        """Refuse, after the first validation, label sets of the validation data (a --val file's) that
        join the run's labels by a separator they were not read with, as ``evaluate`` refuses them:
        every such row was scored as missing all its labels, and every figure of the run with it."""
        if self.task.multilabel:
            refuse_joined_sets(val.get("unseen_labels") or {}, self.features.labels, self.columns.label_sep)

    def _choosing_floor(self) -> int:
        """The validation rows below which no epoch is chosen by them (step.CHOOSING_ROWS): none
        when the user typed a patience, which then stops on whatever rows there are."""
        return 0 if self.given.training.early_stopping else CHOOSING_ROWS

    def _start_as_candidate(self, state: TrainState) -> None:
        """A continued run's starting weights (its old run's) as epoch 0 of the best-epoch choice,
        scored on this run's validation rows before the first step: where no epoch beats them, they
        are what the run saves, not an epoch that lost what the old run knew (a rate that suits fresh
        weights can throw trained ones off). Not LinearSVM's: its saved model and twin learn the
        validation rows as its epochs score them (models/margin.py)."""
        if (self.init is None or state.epoch or state.batches or state.best is not None
                or self.rule.keeps_last_epoch() or self.rule.scales_logits or not self.feed.has_val()):
            return
        val_m = evaluate_blocks(self.model, self.feed.val_blocks(), self.task, self.device)
        state.best, _ = keep_best(None, 0, val_m.result(), val_m, self.model, 0, self.tc.monitor)
        # Told now, not only in the summary: an epoch that does not beat it is not the best so far.
        self.events.emit("start_scored", epoch=0, **val_scores(val_m.result()))

    def _keep_start_weighing(self) -> None:
        """A continued run that saves the weights it started from (no epoch beat them): hashed
        buckets only its new data holds weigh 0 again, as in the run it continued, whose weights
        never learned them. Weighed as this run's epochs had them (keep_learning.seen_filled),
        they only shrank every known term of a row, and the run saved predicted otherwise than
        the weights it kept had."""
        f, old = self.features, self.init.features
        if f.mode == "hashing" and f.idf is not None and old.idf is not None and len(old.idf) == len(f.idf):
            f.idf = np.where(np.asarray(old.idf) > 0, f.idf, np.float32(0.0)).astype(np.float32)

    def train_epochs(self, stop: StopRequest) -> dict:
        """Every epoch, in this process or on the --ddp ranks; the final validation metrics
        (the best epoch's, whose weights the model then holds, or LinearSVM's last epoch's).
        ``stop``: Ctrl-C, which a batch boundary turns into a checkpoint and a stop."""
        state = self._start_state(self.feed)
        if self.cfg.output.plots and not self.charts_later():
            threading.Thread(target=preload_plots, name="lancetnic-matplotlib", daemon=True).start()
        ts = time.monotonic()
        self.training_began = True
        if self.tc.ddp:
            val = self._ddp_epochs(state, stop)
            self._check_val_labels(val)
        else:
            # Reading the cache, local workers sit idle: the trainer may take every core.
            cached = 0 if self.tc.threads or self.memory.external or is_arrays(self.model) else (os.cpu_count() or 1)
            trainee = Trainee(self.model, self.task, self.rule, self.opts, self.device,
                              lr_schedule(self.tc.lr_schedule, self.tc.lr, state.total_steps or 1,
                                          self.rule.decay_steps, self._schedule_start()), cached,
                              self._check_val_labels, self._choosing_floor())
            self._start_as_candidate(state)
            val = EpochLoop(trainee, self.feed, self.tc, self.events, self._checkpoint, str(self.run)
                            ).run_epochs(state, stop, self.every)
        self.stage_seconds["train"] = time.monotonic() - ts
        self.state = state
        if state.best is not None and "state" in state.best:
            self.model.load_state_dict(state.best.pop("state"))
            val = state.best["val"]
            if state.best["epoch"] == 0:
                self._keep_start_weighing()
                self.events.emit("warning", message=(
                    f"no epoch scored better by {self.tc.monitor} on the validation rows than the weights "
                    f"{self.init.url} started this run with: it saves them as they were (kept: start in "
                    "metrics.json); a lower learning rate ({training.lr}, {training.sparse_lr}) moves them less"))
        self._calibrate()
        self.rule.finish(self.model)
        # Which rows the model learned besides its training rows (a pass beside the epochs may still
        # be hashing some): gathered while the cluster is up, written with the model.
        self.learned = self.held_out.learned(bool(self.tc.learn_val), self.init)
        return val

    def _calibrate(self) -> None:
        """On the validation rows, before the rule's finish (a twin that learned them
        would flatter its own scores): the probability scale of a margin model's
        scores, and a multilabel run's threshold per label (model.json keeps them).
        Trained on the cluster, rank 0 fitted them there (the weights it sent hold
        the scale): this process reads no shard."""
        self.calibration = Calibration()
        if self.tc.ddp:
            self.calibration, seconds = self.ranks_calibration
            if seconds:
                self.stage_seconds["calibrate"] = seconds
        elif self.feed.has_val() and (self.rule.scales_logits or self.task.multilabel):
            ts = time.monotonic()
            self.calibration = calibrate(self.model, self.feed.val_blocks(), scale=self.rule.scales_logits,
                                         prior=self.init.prior if self.init is not None else None,
                                         again=self.feed.val_blocks)
            self.stage_seconds["calibrate"] = time.monotonic() - ts
        if self.calibration.at_limit:
            self.events.emit("warning", message=learned_validation_warning(
                self.calibration, self._continued() if self.init is not None else None))
        if self.calibration.thresholds is not None:
            self.model_meta["thresholds"] = [round(float(t), 6) for t in self.calibration.thresholds]
        elif self.init is not None and isinstance(self.init.meta.get("thresholds"), list):
            # No validation rows to choose them on: the old run's, and 0.5 for the labels added.
            old = self.init.meta["thresholds"]
            self.model_meta["thresholds"] = old + [0.5] * (len(self.features.labels) - len(old))

    def _ddp_epochs(self, state: TrainState, stop: StopRequest) -> dict:
        """``--ddp N``: featurise first, then train on N workers; rank 0's weights end up in ``self.model``."""
        from ..models import registration
        from .ddp.driver import CUDA_HOST_BYTES, RankDriver, choose_device, preflight, rank_keep_bytes
        from .ddp.rank import RankJob

        # A rank holds what this process would (``need``: torch, the model, its moments, a shuffle buffer),
        # and sends its weights back through Dask at each pause: a copy or two of them on the way.
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        rank_bytes = self.need + 2 * weights
        if self.entry is None:   # --cache none: each rank featurises a partition at a time, as a worker's task does
            parts = self.train_src.partitions + (self.val_src.partitions if self.val_src else [])
            biggest = max((p.length if p.length > 0 else self.memory.partition for p in parts), default=0)
            rank_bytes += TASK_BASE + PEAK_PER_BYTE * min(biggest, self.memory.partition)
        own = 0 if self.memory.external else self.memory.workers   # workers this run started, see preflight
        resuming = self.saved is not None
        chosen = preflight(self.client, self.tc.ddp, rank_bytes, own_workers=own, events=self.events,
                           resuming=resuming)
        if self.tc.device != "cpu" and choose_device(self.client, chosen, self.tc.device)[0] == "cuda":
            rank_bytes += CUDA_HOST_BYTES   # checked again with what CUDA adds to the rank's worker
            preflight(self.client, self.tc.ddp, rank_bytes, own_workers=own, events=self.events, cuda=True,
                      resuming=resuming)
        if not self.feed.complete:
            self.events.emit("stage", stage="featurising")
            for _ in self.feed.featurize():
                if stop.requested:   # nothing trained yet, so nothing to checkpoint
                    raise KeyboardInterrupt("before training began, so there is nothing to resume: run the same "
                                            "command again (what was already fitted or featurised is cached)")
        state.total_rows = self.feed.total_rows()
        task, m = self.task, self.feed.manifest
        if m is None:   # --cache none: the ranks featurise their share of the partitions each epoch
            train_shards, val_shards, fresh = self.feed.pieces()
        else:
            train_shards, val_shards, fresh = m.shards("train"), m.shards("val"), None
        job = RankJob(world=self.tc.ddp, training=self.tc, net=self.model_meta["net"],
                      model_kwargs=dict(self.model_meta["kwargs"]),
                      task=dict(kind=task.kind, classes=task.classes, class_loss=task.class_loss,
                                value_loss=task.value_loss, loss_weights=task.loss_weights,
                                class_weights=task.class_weights.cpu() if task.class_weights is not None else None,
                                target=task.target, seed=task.seed),
                      train_shards=train_shards, val_shards=val_shards, fresh=fresh, cache_options=self.cache_so,
                      every=self.every, features=self.features, rule=MODELS[self.cfg.model.name].rule,
                      decay_steps=MODELS[self.cfg.model.name].decay_steps,
                      model_entry=registration(self.cfg.model.name),
                      keep_bytes=0 if fresh is not None else rank_keep_bytes(self.client, chosen, rank_bytes, KEEP_MAX),
                      floor=self._choosing_floor())
        self._warn_partitions(job)
        # Rank 0 reports each epoch's stages (training, evaluating) itself, as the loop here would.
        driver = RankDriver(self.client, job, self.events, rank_bytes=rank_bytes, device=self.tc.device, stop=stop,
                            own_workers=own)
        address = scheduler_of(self.client)   # a client that gives up forgets it
        try:
            done = driver.run(state if self.saved is not None else None, self._ddp_pause, self._ddp_reload)
        except SchedulerLost:   # the driver asked the scheduler and got no answer: say how to go on
            raise self._ranks_lost_scheduler(address) from None
        except (UserError, TrainingInterrupted):
            raise
        except Exception as exc:
            if getattr(self.client, "status", "running") == "running" and not connection_lost(exc):
                raise
            raise self._ranks_lost_scheduler(address) from None
        self.model.load_state_dict(done.weights)
        done.weights = None   # the copy sent back goes once it is in the model
        if m is None:
            self.feed.counted_by_ranks(done.counted)
        self.ranks_calibration = (done.calibration, done.calibrate_seconds)
        self.ranks_top_rows = done.top_rows
        state.history, state.confusions, state.best = done.history, done.confusions, done.best
        if state.best is not None:
            if not self.rule.keeps_last_epoch():   # the weights sent are the best epoch's: its figures are the run's
                state.best["state"] = self.model.state_dict()
            if state.best.get("sample") is not None:
                state.best["sample"] = tuple(np.asarray(x) for x in state.best["sample"])
        if state.best is not None and self.tc.early_stopping and len(state.history) < self.tc.epochs:
            self.events.emit("early_stop", epoch=len(state.history), best_epoch=state.best["epoch"],
                             monitor=self.tc.monitor)
        self.ddp_info = done.info
        return done.last_val

    def _warn_partitions(self, job: Any) -> None:
        """Say when the ranks' shares of the partitions cost them: an entry cut
        coarser than this run's plan, or a rank whose share holds no row."""
        from .ddp.shares import shares
        from .rules import RULES

        planned = len(self.train_src.partitions) if self.train_src else 0
        m = self.feed.manifest
        # the entry's own partitions: counted by their shards, one without a training row (a last byte
        # range that holds only the file's final line end) read as an entry an earlier run cut coarser
        cut = (len(m.partitions.get("train") or []) if m is not None and m.partitions else
               len({s.partition for s in job.train_shards}) if m is not None else planned)
        coarse = coarse_cache_warning(cut, planned, job.world)
        if coarse:
            self.events.emit("warning", message=coarse)
        dealt = shares(job.train_shards, job.world, self.tc.seed, 0, RULES[job.rule].averages_weights)
        idle = idle_ranks_warning([sum(s.rows for s in mine) for mine in dealt],
                                  len({s.partition for s in job.train_shards if s.rows}))
        if idle:
            self.events.emit("warning", message=idle)

    def _ranks_lost_scheduler(self, address: str) -> SchedulerLost:
        """The scheduler went away while the model trained on the workers: what they
        trained since the last pause went with it (their results come through it).
        Waits ``--scheduler-wait`` for it, then says how to go on: from the last
        checkpoint, or the same command again (the cache is kept)."""
        why = lost_why(self.client) or "the trainer's tasks were lost with it"
        message = f"lost the Dask scheduler at {address}: {why}"
        if has_checkpoint(self.run, self.out_so):
            return SchedulerLost(f"{message}; training on the workers stopped, the last checkpoint is in {self.run}",
                                 f"start `dask scheduler` and its workers again, then continue: lancetnic-flow train "
                                 f"--resume {self.run} (with --scheduler ADDRESS if its address changed)",
                                 address=address)
        return SchedulerLost(f"{message}; training on the workers stopped before its first checkpoint",
                             address=address)

    def _ddp_pause(self, reason: str, at: TrainState) -> None:
        """A --ddp segment paused at ``at``: write it as this run's checkpoint."""
        self._checkpoint(dataclasses.replace(at, total_rows=self.feed.total_rows(), rng=rng_state(self.model)),
                         reason)
        if reason == "interrupt":
            raise TrainingInterrupted(str(self.run), at.epoch + 1, at.batches)

    def _ddp_reload(self) -> TrainState:
        """The checkpoint the last --ddp pause wrote, read back: where a segment lost after it starts again
        (the driver keeps no copy of a written state while the ranks train)."""
        saved = load_checkpoint(str(self.run), self.out_so)
        if saved is None:
            raise RuntimeError(f"the checkpoint written in {self.run} is gone: a lost --ddp segment cannot restart")
        return TrainState.from_checkpoint(saved)

    # ---- save
    def charts_later(self) -> bool:
        """Whether the charts are drawn after the run, by a forked copy of this
        process (``--wait-for-plots`` off: the command line's default), so the
        command ends once the model, metrics and tables are saved. Not when MLflow
        is to copy the run folder: it uploads as the run ends, and would miss them."""
        out = self.cfg.output
        return out.plots and not out.wait_for_plots and "mlflow" not in out.track and can_detach()

    def _top_terms(self) -> list:
        """Each class's strongest terms (top_terms.csv, top_terms.png) as plot jobs, for a
        network whose outputs are a sum over terms (runs/explain.py); none for another."""
        from ..runs.explain import exact_decomposition, top_terms_jobs

        dec = exact_decomposition(self.model, self.model_meta, self.features.target)
        if dec is None:   # ReLU layers: a term's weight depends on the text (explain's "local" method)
            self.bucket_names = None   # nothing to name, here or in a run continued from it (the same network)
            return []
        # trained on the cluster, rank 0 found them on the weights it sent (none where it left them to this process)
        return top_terms_jobs(self.run, dec, self.features, self.bucket_names, self.out_so, self.ranks_top_rows)

    def _continued(self) -> str:
        """The model continued, as the caller asked for it: partial_fit's caller gave no init_from."""
        return "partial_fit" if continued_by(self.given) == PARTIAL_FIT else "{training.init_from}"

    def _warn_of_rows(self, rows: dict, read_as: dict[str, int]) -> None:
        """The run's warnings about its rows: those read changed (noted; ``read_as``: the
        labels read as training's spelling of their value), and a patience with no
        validation row to watch."""
        cfg, tc = self.cfg, self.tc
        if read_as:
            self.events.emit("warning", message=read_as_warning(read_as, "training's"))
        for message in separator_warnings(cfg.data.label_sep, rows.get("label_sep", {}), idle=label_sep_given(cfg)):
            self.events.emit("warning", message=message)
        for reason, n in rows.get("noted", {}).items():
            if reason == LABEL_AS_RUN:   # said above, spelling by spelling
                continue
            noun, said = NOTED.get(reason, (reason, ""))
            said = said.format(max_len=cfg.features.max_len, continued=self._continued(), its=verb(n, "its", "their"),
                               are=verb(n, "is", "are"))
            self.events.emit("warning", message=f"{counted(n, noun.format())} {said} ({reason} in metrics.json)")
        # The patience in effect (the model's own when none was given), where rows were to be held out.
        if tc.early_stopping and not rows["validated"] and (cfg.data.val or cfg.data.val_fraction):
            given = "" if self.given.training.early_stopping else " (the model's default)"
            self.events.emit("warning", message=(
                f"{{training.early_stopping}} {tc.early_stopping}{given} had no validation row to watch (every one was "
                "skipped, trained on, or none was held out: rows in metrics.json), so no epoch was stopped early "
                "and the last was kept"))

    def _calibration_metrics(self) -> dict:
        """metrics.json's record of the calibration: a margin model's probability scale and the
        validation loss at it on the rows it was fitted on (the loss of the probabilities predict
        gives; val_loss is its scores' at scale 1, as each epoch's)."""
        c = self.calibration
        if c.loss is None:
            return {}
        return {"calibration": {"scale": round(c.scale, 6), "val_loss": round(c.loss, 6), "rows": c.rows,
                                "at_limit": c.at_limit}}

    def _leading_figures(self, final_val: dict) -> dict:
        """metrics.json's validation figures, those of the saved model first: for label sets every
        validation row at the saved thresholds (chosen on the first of them), what predict decides;
        then the kept epoch's, as each epoch's are and --monitor judges them, with where those decide
        a label (``val_decided_at``: margin 0 or probability 0.5, not the thresholds)."""
        c = self.calibration
        # Every validation row counted; the thresholds were chosen on a uniform sample, thresholds_rows of them.
        at = {"val_at_thresholds": {**c.at_thresholds, "thresholds_rows": c.rows}} if c.at_thresholds else {}
        decided = decided_at(self.task) if final_val else None
        return {**at, **val_scores(final_val), **({"val_decided_at": decided} if decided else {})}

    def _write_for_continuations(self, kept: int | None) -> None:
        """What a run continued from this one reads besides the model, recorded in model.json: which
        rows the model learned besides its training rows (it trains on them), the buckets' names
        (it names the terms this one learned), and the steps the weights of the ``kept`` epoch took,
        the runs they continued included (its learning rate's schedule goes on from there)."""
        self.model_meta["steps"] = (self.init.steps if self.init else 0) + kept_steps(
            self.state.history, kept, self.tc.batch_size)
        learned = write_learned(self.run, self.learned, self.out_so)
        if learned is not None:
            self.model_meta["learned_rows"] = learned
        names = write_bucket_names(self.run, self.bucket_names, self.out_so)
        if names is not None:
            self.model_meta["bucket_names"] = names

    def _warn_of_few_rows(self) -> None:
        """Say when too few validation rows to choose an epoch by left every epoch run and the
        last kept, where the model's default would have stopped or picked by them."""
        best = self.state.best
        if not best or "few" not in best or (self.rule.keeps_last_epoch() and not self.tc.early_stopping):
            return
        self.events.emit("warning", message=(
            f"{counted(best['few'], 'validation row')} {verb(best['few'], 'is', 'are')} too few to choose an epoch by (under {CHOOSING_ROWS}: "
            f"one row moves accuracy by {1 / max(best['few'], 1):.0%}), so no epoch was stopped early or picked: "
            f"all {len(self.state.history)} ran and the last was kept (kept: last in metrics.json); hold out more "
            "rows ({data.val_fraction}, {data.val}) for the scores to choose, or type {training.early_stopping} "
            "N to stop on these anyway"))

    def _warn_of_the_mean(self, final_val: dict) -> None:
        """Warn when a regression's saved model predicts no better than the training mean, or its
        target is one value (which it then predicts)."""
        if constant := constant_target(self.task):
            self.events.emit("warning", message=constant)
        if meanless := no_better_than_the_mean(self.task, final_val, self.state.history):
            self.events.emit("warning", message=meanless + (
                "; lower the learning rates ({training.lr}, and {training.sparse_lr} for the input rows), train "
                "more epochs ({training.epochs}), or check that the text says something of the target"))

    def save(self, final_val: dict, mon: MemoryMonitor) -> TrainResult:
        """metrics.json, plots and the model into the run folder; the checkpoint goes."""
        cfg, tc, state, plan = self.cfg, self.tc, self.state, self.memory
        self.events.emit("stage", stage="saving")
        ts = time.monotonic()
        metrics = {
            "task": self.task.kind, "model": cfg.model.name, **self._leading_figures(final_val),
            # The matrix as non-zero cells; dense as well only for a few classes (see models/metrics.py).
            "confusion": final_val.get("confusion"), "confusion_cells": final_val.get("confusion_cells"),
            "per_class": final_val.get("per_class"),
            **({"per_label": final_val.get("per_label")} if self.task.multilabel else {}),
            # Labels of validation sets that training never had, as evaluate names them (each a missed one).
            **({"unseen_labels": final_val["unseen_labels"]} if final_val.get("unseen_labels") else {}),
            "labels": self.features.labels, "rows": (rows := sum_rows(self.feed.results())),
            # Validation labels written otherwise than training's, read as training's ("1 as 1.0": rows).
            **({"labels_read_as": read_as} if (read_as := read_as_of(rows.get("noted", {}))) else {}),
            "epochs": [{**h, "val_confusion": c} for h, c in zip(state.history, state.confusions)],
            # The epoch whose weights were saved: the best by --monitor, or the last (the rule's keeps_last_epoch).
            # Without validation scores there is no best: the last epoch's weights are what was trained.
            "best_epoch": (state.best["epoch"] if state.best and not self.rule.keeps_last_epoch() else
                           len(state.history) or None), "monitor": tc.monitor,
            "kept": ("last" if not state.best or self.rule.keeps_last_epoch() or "few" in state.best else
                     "start" if state.best["epoch"] == 0 else "best"),
            **self._calibration_metrics(),
            "stage_seconds": self.stage_seconds, "decided": self.decisions, "where": self.where,
            "vocabulary": self.features.dim, "device": str(self.device),
            # Where the model trained, and the shards this process read (none when the cluster trained it).
            "trained_on": "cluster" if tc.ddp else "client",
            # Where the shards were: the cache entry, or "none" (featurised afresh every epoch, never stored).
            "cache": "none" if self.entry is None else self.entry,
            "client_shard_reads": SHARD_READS.now()[0] - self.reads_at_start[0],
            "shards_kept": self.feed.kept_shards() if isinstance(self.feed, ShardFeed) else None,
            "client_shard_bytes": SHARD_READS.now()[1] - self.reads_at_start[1],
        }
        self._warn_of_rows(rows, read_as)
        self._warn_of_few_rows()
        self._warn_of_the_mean(final_val)
        if getattr(self, "ddp_info", None):
            metrics["ddp"] = self.ddp_info
        if getattr(self, "resumed_at", None):
            metrics["resumed"] = self.resumed_at
        # Plots (matplotlib, a second or two) draw beside the weights' write, or after the run by a forked
        # copy of this process (charts_later); metrics.json, naming them, goes last.
        jobs = [j for j in plot_jobs(self.run, history=state.history, metrics=final_val,
                                     labels=self.features.labels if self.task.classifies else None,
                                     label_counts=self.features.label_counts,
                                     sample=state.best["sample"] if state.best else None) + self._top_terms()
                if cfg.output.plots or not j.chart]
        later = [j for j in jobs if j.chart] if self.charts_later() else []
        with ThreadPoolExecutor(1, thread_name_prefix="lancetnic-plots") as pool:
            plots = pool.submit(write_jobs, [j for j in jobs if j not in later])
            weights = save_run(self.run, config=saved_config(cfg), features=self.features, model=self.model,
                               model_meta=self.model_meta, metrics=None, history=state.history,
                               storage_options=self.out_so, finish=False)
            plots.result()
            metrics["plots"] = [u.rsplit("/", 1)[-1] for j in jobs for u in j.files]
        self._write_for_continuations(metrics["best_epoch"])
        # Time and peaks include the save (weights, plots): all but the few small JSON files below.
        mon.close()
        self.stage_seconds["save"] = time.monotonic() - ts
        # The peaks of trainer and workers come at different times (fit, training): the budget's use is
        # the largest sum of one sample, not the sum of the two peaks.
        metrics.update(memory={"budget_bytes": plan.budget, "trainer_peak_rss_bytes": mon.trainer_peak,
                               "workers_peak_bytes": mon.workers_peak, "peak_rss_bytes": mon.total_peak,
                               "plan": plan.to_dict()},
                       seconds=time.monotonic() - self.t0)
        write_json(join(self.run, "metrics.json"), metrics, self.out_so)
        # model.json last: until it is written the folder is an unfinished run, resumable from its checkpoint.
        finish_run(self.run, self.model_meta, self.out_so, weights)
        self.whole = True
        remove_checkpoint(self.run, self.out_so)
        self.release_run()   # before the chart drawer forks: a copy of the lock's descriptor would hold it
        # The run is whole: the charts are drawn from here on by a copy of this process that outlives it.
        drawing = {"charts": {"pid": draw_detached(self.run, later),
                              "files": [u.rsplit("/", 1)[-1] for j in later for u in j.files]}} if later else {}
        self.events.emit("done", run=self.run, metrics={k: v for k, v in metrics.items()
                                                        if k not in ("confusion", "confusion_cells", "per_class",
                                                                     "per_label")}, **drawing)
        return TrainResult(self.run, metrics)


def train(cfg: TrainConfig, events: Events = NULL_EVENTS, client: Any = None, resume: str | None = None,
          *, held_bytes: int = 0, own_cluster: bool = False, searched: bool = False) -> TrainResult:
    """Train a model as ``cfg`` says; return the run folder and its metrics.

    ``client``: an existing ``distributed.Client`` to use instead of starting
    a LocalCluster (its workers' limits are read from the scheduler).
    ``resume``: a run folder holding a checkpoint; training continues from it
    (``cfg`` must be that run's configuration, see :func:`~.resume.resume_config`).
    ``held_bytes``: what the calling process holds past a trainer's base that the run cannot
    free (tune's search): planned as part of the trainer's share, so its bound stays true.
    ``own_cluster``: ``client`` is a LocalCluster this process started from ``cfg``'s
    memory plan (tune's): the run is planned from ``--memory-budget`` as one that starts
    its own (the model checked against the trainer's share, shards kept between epochs),
    not as someone else's cluster whose workers decide. ``searched``: tune's final run, whose
    epochs are the best trial's (tune said what its typed epoch options do)."""
    if client is not None and not own_cluster:
        if resume is None:
            refuse_sizes_for_client(cfg)
        else:   # the run's own LocalCluster sizes are left behind, as resume_config's for a scheduler
            cfg = sizes_for_client(cfg)
    run = Training(cfg, events, resume)
    for idle in [] if searched else [*idle_epoch_options(run.given, run.cfg), bias_only_lr(run.given, run.cfg)]:
        if idle:
            events.emit("warning", message=idle)
    run.held_bytes = held_bytes
    if own_cluster:
        run.needs_cluster = "the cluster it was given"
    run.plan(external=client is not None and not own_cluster)
    tracking = None
    stop: StopRequest | None = None
    try:
        # From the first batch until the cluster is closed a first Ctrl-C is a request (training/stop.py).
        with contextlib.ExitStack() as stopping:
            # Saving needs no cluster: a local one's workers shut down (a second or two) while the run is saved.
            with ThreadPoolExecutor(1, thread_name_prefix="lancetnic-close") as closer, \
                    contextlib.ExitStack() as watch:
                with run.cluster(client, closer):
                    # The monitor outlives the cluster: the summary's peak includes the save.
                    mon = watch.enter_context(MemoryMonitor(events, run.client,
                                                            local_workers=not run.memory.external))
                    try:
                        run.fit()
                        run.decide()
                        run.build_model()
                        # --track listens from here on: the run folder exists.
                        tracking = start_tracking(run.cfg, run.run, run.out_so, events, resumed=resume is not None)
                        stop = stopping.enter_context(StopRequest())
                        final_val = run.train_epochs(stop)
                    finally:
                        mon.client = None   # the cluster closes while the run saves: its scheduler is not asked
                result = run.save(final_val, mon)
        if stop.requested:   # after the last batch: the run was finished rather than left half saved
            raise StoppedAfterTraining(str(run.run))
        return result
    except WriteError as exc:   # a full disk, here or on a worker
        raise run.after_write_error(exc) from None
    except KeyboardInterrupt as exc:
        if not run.training_began or str(exc):   # a stop that says where it left the run
            raise
        # a second Ctrl-C: say what the folder holds to go on from
        raise StoppedAtOnce(str(run.run), whole=run.whole, checkpoint=not run.whole and
                            has_checkpoint(run.run, run.out_so)) from None
    finally:
        run.release_entry()
        run.release_run()
        if tracking is not None:   # a run that ended without `done` (interrupted or failed) ends its tracked run
            tracking.end(sys.exc_info()[1])
