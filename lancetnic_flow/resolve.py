"""Every ``auto`` choice and model default of a run, decided in two pure
functions, after which the configuration does not change:

* :func:`resolve` — before the data is read: the sections checked, the model
  ``--model auto`` picks, the model's defaults (task, width, early stopping,
  the input rows' optimiser and rate, the options it fixes), its refusals,
  the feature mode, the monitor;
* :func:`resolve_counts` — once, after the fit pass: the choices that need
  the data's counts (``--model auto``'s fallback when the first choice's
  weights do not fit the plan, and whether a model that can learns the
  validation rows too).

Both return a new :class:`~lancetnic_flow.config.TrainConfig` and leave their
input as it was; resolving a resolved configuration gives it back unchanged,
so a run folder's ``config.json`` resumes as exactly what ran. Every fact
about a model comes from its :class:`~lancetnic_flow.registry.ModelSpec`.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

from .column_roles import WHY_TWICE, named_twice
from .options import BY_FIELD, bad
from .registry import AUTO, AUTO_CHOICES, MODELS, ROW_WISE, ModelSpec
from .scores import monitor_fits
from .sizes import format_size
from .storage import refuse_local_storage_options

# The configurations here are lancetnic_flow.config.TrainConfig (annotations
# only): config's TrainConfig.validate calls resolve, so resolve never imports config.

# --monitor's default per task (else val_loss). Multilabel keeps val_loss:
# micro-F1 at a 0.5 threshold stays 0 while every probability is still below
# it (a slowly learning model's first epochs), which early stopping would read
# as no progress; the loss moves from the first step.
DEFAULT_MONITOR = {"classify": "val_accuracy"}
# A margin model's (the hinge rule's) is not its loss: an epoch's val_loss is
# that of its scores at scale 1, which grows as the margins do while the
# labels get better (a search that chose by it picked the least trained
# trial: micro-F1 0.37 where the defaults had 0.61). Micro-F1 at 0.5 is its
# scores' own boundary, 0, whatever the scale.
MARGIN_MONITOR = {"classify": "val_accuracy", "multilabel": "val_micro_f1"}

# The twin that lets a linear model learn the validation rows (models/margin.py)
# runs only up to this many training rows: a tenth more data is worth 0.5 point
# at 50 k rows (docs/benchmarks.md) and little at a million, while the twin's
# cost, a second kernel beside the model's, grows with the rows.
LEARN_VAL_MAX_ROWS = 250_000


def check_finite(part: Any, section: str) -> None:
    """Refuse a nan or infinite number in any field of a configuration section
    (``--lr nan`` trained an epoch to a "diverged" error naming the learning
    rates; ``nan < 0`` is False, so range checks let it through)."""
    for f in dataclasses.fields(part):
        value = getattr(part, f.name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, float) and not math.isfinite(v):
                raise bad(f"{section}.{f.name}", f"{{name}}: a finite number, got {value!r}")


def resolve(given: TrainConfig) -> TrainConfig:
    """``given`` checked, with every choice that can be taken before the data
    is read taken. Raises :class:`UserError` naming the option at fault."""
    if "data.storage_options" in given.given:
        refuse_local_storage_options(given.data.storage_options, config_places(given))
    cfg = copy.deepcopy(given)
    cfg.features.read_stop_words(cfg.data.storage_options)   # the data's credentials open the file
    for section in ("data", "features", "model", "training", "cluster", "output"):
        part = getattr(cfg, section)
        check_finite(part, section)
        part.validate()
    auto = cfg.model.name == AUTO
    if auto:
        cfg.model.name = choose_model(cfg)
    spec = MODELS[cfg.model.name]
    _refuse(cfg, spec)
    _refuse_idle(cfg)
    _train_on(cfg)
    _training(cfg, spec, value_asked=auto and bool(cfg.data.target))
    _refuse_idle_threads(cfg, spec)
    _features(cfg, spec)
    _check_task(cfg, spec)
    return cfg


def config_places(cfg: TrainConfig) -> dict[str, Any]:
    """Every path of ``cfg`` that its storage options could open, by its option:
    the data, the run folder's parent, the cache, the run continued and a stop-word file."""
    d, o, words = cfg.data, cfg.output, cfg.features.stop_words
    return {"the data": d.train, "{data.val}": d.val, "{output.out}": o.out,
            "{output.cache}": None if o.cache is None or o.no_cache else o.cache,
            "{training.init_from}": cfg.training.init_from,
            "{features.stop_words}": words if isinstance(words, str) and words != "english" else None}


def choose_model(cfg: TrainConfig, after: str | None = None) -> str:
    """``--model auto``'s choice for ``cfg``'s options: the first of
    :data:`~lancetnic_flow.registry.AUTO_CHOICES` (after ``after``, if given)
    that does the task, reads the features and refuses no option; the last
    choice otherwise."""
    names = list(AUTO_CHOICES)
    if after is not None:
        names = names[names.index(after) + 1:]
    for name in names[:-1]:
        spec = MODELS[name]
        task = cfg.training.task or ("regress" if cfg.data.target else spec.task)
        mode = cfg.features.mode
        if (task in spec.every_task and (mode is None or mode in spec.features) and spec.accepts_for_auto(cfg)
                and (task != "classify" or cfg.data.label)):
            return name
    return names[-1]


def _refuse_idle(cfg: TrainConfig) -> None:
    """Refuse an option given where it does nothing: the run would say it was set."""
    c, o = cfg.cluster, cfg.output
    if "cluster.scheduler_wait" in cfg.given and not (c.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")):
        raise bad("cluster.scheduler_wait", f"{{name}} {c.scheduler_wait} is how long a lost scheduler of an existing "
                  "cluster is waited for, and this run starts its own (no {cluster.scheduler})",
                  "add {cluster.scheduler} ADDRESS, or drop {name}")
    existing = "{cluster.scheduler}" if c.scheduler else "DASK_SCHEDULER_ADDRESS"
    for field, value in (("cluster.workers", c.workers), ("cluster.threads", c.threads)):
        # An existing cluster's workers are its own: the run plans from what its scheduler reports.
        if value is not None and (c.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")):
            raise bad(field, f"{{name}} {value} sizes the LocalCluster a run starts, and {existing} names an "
                      "existing cluster, whose workers and threads are its own",
                      "drop {name}; a cluster's workers and threads are set where they start (`dask worker "
                      "ADDRESS`, its nworkers and nthreads options)" + ("" if c.scheduler else
                                                        ", or unset DASK_SCHEDULER_ADDRESS to start a LocalCluster"))
    if c.memory_budget is not None and (c.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")):
        # An existing cluster's workers report their own limits: the plan (partitions, the window) is theirs.
        raise bad("cluster.memory_budget", f"{{name}} {format_size(c.memory_budget)} splits this machine's memory "
                  f"between the trainer and the LocalCluster a run starts, and {existing} names an existing "
                  "cluster, whose workers' memory limits plan the run",
                  "drop {name}; an existing cluster's limits are set where its workers start (`dask worker "
                  "ADDRESS --memory-limit 4GiB`)" + ("" if c.scheduler else
                                                   ", or unset DASK_SCHEDULER_ADDRESS to start a LocalCluster"))
    d = cfg.data
    if "data.val_fraction" in cfg.given and d.val and d.val_fraction == BY_FIELD["data.val_fraction"].default:
        # another value is refused by DataConfig; the default's, typed, would do nothing as silently
        raise bad("data.val_fraction", f"{{name}} {d.val_fraction} holds rows of the training data out by hash; "
                  "with {data.val} the validation rows are that data's, and every training row trains",
                  "drop {name}, or drop {data.val}")
    if "output.wait_for_plots" in cfg.given and o.wait_for_plots and not o.plots:
        raise bad("output.wait_for_plots", "{name} waits for the charts, and {output.plots} is off: none is drawn",
                  "drop one of them")


LOCAL_SIZES = ("cluster.memory_budget", "cluster.workers", "cluster.threads")


def refuse_sizes_for_client(cfg: TrainConfig, only: frozenset[str] | None = None) -> None:
    """``train(cfg, client=...)`` on a cluster of the caller's: the options that size a LocalCluster
    (``memory_budget``, ``workers``, ``threads``) are refused, as with ``scheduler``: the run plans
    from the cluster's workers and would record them as set while doing nothing. ``only``: refuse
    these fields alone (those a resume was given again)."""
    c = cfg.cluster
    for field, value in zip(LOCAL_SIZES, (c.memory_budget, c.workers, c.threads)):
        if value is not None and (only is None or field in only):
            shown = format_size(value) if field == "cluster.memory_budget" else value
            raise bad(field, f"{{name}} {shown} sizes the LocalCluster a run starts, and the run was given a client "
                      "of an existing cluster, whose workers' memory limits and threads plan it",
                      "drop {name}, or drop the client to start a LocalCluster")


def sizes_for_client(cfg: TrainConfig) -> TrainConfig:
    """A resumed run's configuration for ``train(cfg, client=..., resume=RUN)``: the LocalCluster
    sizes it was started with (this machine's budget, workers and threads) left behind, as
    ``resume_config`` leaves them for a scheduler, so that its config.json does not say they
    planned a run the client's workers planned; those given to the resume again are refused."""
    refuse_sizes_for_client(cfg, only=cfg.given & frozenset(LOCAL_SIZES))
    out = copy.copy(cfg)   # keeps the marks of a continued and of a saved configuration
    out.cluster = dataclasses.replace(cfg.cluster, memory_budget=None, workers=None, threads=None)
    return out


def _refuse_idle_threads(cfg: TrainConfig, spec: ModelSpec) -> None:
    """``--threads`` where no torch network trains: LinearSVM in this process steps its NumPy
    weights one example at a time on one core (models/linear_arrays.py), and reads no thread count;
    its ``--ddp`` ranks and ``--train-on cluster``'s trainer task train a network, which takes it."""
    t = cfg.training
    if t.threads is not None and spec.rule == "hinge" and not t.ddp:
        raise bad("training.threads", f"{{name}} {t.threads} sets the torch threads of a network trained in this "
                  f"process, and {cfg.model.name} trains here without torch, one example at a time on one core",
                  "drop {name}, or train on several cores with {training.ddp} N, whose ranks take it")


def _refuse(cfg: TrainConfig, spec: ModelSpec) -> None:
    for r in spec.refusals(cfg):
        if r.instead:
            raise bad(r.field, f"{{name}} does not apply to {cfg.model.name}: {r.why}",
                      f"drop {{name}}, or pass {r.instead}")
        # a model that honours the option as given (the fallback of --model auto first)
        takes = [n for n in (AUTO_CHOICES[-1], *MODELS) if n != cfg.model.name
                 and not any(x.field == r.field for x in MODELS[n].refusals(cfg))]
        raise bad(r.field, f"{{name}} does not apply to {cfg.model.name}: {r.why}",
                  f"drop {{name}}, or pass {{model.name}} {takes[0]}" if takes else "drop {name}")


def _train_on(cfg: TrainConfig) -> None:
    """Where the model trains (``--train-on``): ``auto`` is the cluster with an
    existing one (``--scheduler`` or ``DASK_SCHEDULER_ADDRESS``) or ``--ddp``,
    else this process. On the cluster the rank machinery trains it: ``--ddp``'s
    ranks, or one trainer task (``--ddp 1``) when no ``--ddp`` was given."""
    c, t = cfg.cluster, cfg.training
    if c.train_on == "client" and t.ddp:
        raise bad("cluster.train_on", f"{{name}} client trains in this process; {{training.ddp}} {t.ddp} trains "
                  "on Dask workers", "drop {name} client, or drop {training.ddp}")
    if c.train_on == "auto":
        c.train_on = "cluster" if t.ddp or c.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") else "client"
        if c.train_on == "cluster" and c.run_on == "process":
            # Name what asked for the cluster: the user never gave --train-on.
            cause = (f"{{training.ddp}} {t.ddp}" if t.ddp else "{cluster.scheduler}" if c.scheduler
                     else "DASK_SCHEDULER_ADDRESS")
            raise bad("cluster.run_on", f"{{name}} process starts no cluster, and {cause} trains on Dask workers",
                      f"drop {{name}} process, or drop {cause.split()[0]}")
    if c.train_on == "cluster" and c.run_on == "process":
        raise bad("cluster.train_on", "{name} cluster trains on a Dask worker; {cluster.run_on} process starts "
                  "no cluster", "drop {cluster.run_on} process, or pass {name} client")
    if c.train_on == "cluster" and not t.ddp:
        t.ddp = 1   # one trainer task: the rank machinery with a world of one


def _training(cfg: TrainConfig, spec: ModelSpec, value_asked: bool) -> None:
    """The model's training defaults: task, width, patience, what it fixes, the input rows' step."""
    t, name = cfg.training, cfg.model.name
    # --model auto with a target: a value is asked for (the MLP's own task, classify, would leave it unread).
    t.task = t.task or ("regress" if value_asked else spec.task)
    cfg.model.hidden = cfg.model.hidden or spec.hidden
    t.batch_size = t.batch_size or spec.batch_size
    if t.early_stopping is None:
        # No row held out: no patience (recorded so: a resumed or continued run would read the model's own as given)
        t.early_stopping = spec.early_stopping if cfg.data.val or cfg.data.val_fraction else 0
    elif t.early_stopping and not cfg.data.val and not cfg.data.val_fraction:
        # Given: it would run and stop nothing (a default patience only applies where there is validation).
        raise bad("training.early_stopping", f"{{name}} {t.early_stopping} stops when the validation scores stop "
                  "improving, and {data.val_fraction} 0 without {data.val} holds no row out to score",
                  "give {data.val} FILE or a {data.val_fraction} above 0, or drop {name}")
    own = t.monitor != default_monitor(spec, t.task) or "training.monitor" in cfg.given
    if t.monitor and own and not cfg.data.val and not cfg.data.val_fraction:
        # Given (the model's own score typed too): it would choose no epoch. The model's default, as a saved
        # configuration holds it, is let by.
        raise bad("training.monitor", f"{{name}} {t.monitor} chooses the epoch kept by its validation score, and "
                  "{data.val_fraction} 0 without {data.val} holds no row out to score",
                  "give {data.val} FILE or a {data.val_fraction} above 0, or drop {name}")
    for key, value in spec.sets.items():
        section, option = key.split(".")
        setattr(getattr(cfg, section), option, value)
    if t.sync_every and not ((t.ddp or 0) > 1 and spec.rule == "hinge"):   # the rule whose ranks average weights
        # One rank (--ddp 1, a trainer task on the cluster) has nothing to average with: it ran and did nothing.
        why = (f"; {name}'s ranks exchange gradients every step" if t.ddp and spec.rule != "hinge" else
               ", and this run trains one rank, which has no other to average with" if t.ddp else
               ", and this run has no {training.ddp}")
        raise bad("training.sync_every", "{name} sets how often {training.ddp} ranks of LinearSVM average their weights" + why,
                  "drop {name}" + ("" if t.ddp and spec.rule != "hinge" else ", or add {training.ddp} N (N ≥ 2)"))
    # Typed at its default (all) too: a choice among rows no rank averages.
    typed = t.sync_rows == "touched" or "training.sync_rows" in cfg.given
    if typed and not (t.ddp and t.ddp > 1 and spec.rule == "hinge"):
        raise bad("training.sync_rows", f"{{name}} {t.sync_rows} chooses the rows {{training.ddp}} ranks of LinearSVM "
                  "average" + (
                  f"; {name}'s ranks exchange gradients every step" if t.ddp and spec.rule != "hinge"
                  else ", and this run has no ranks to average"),
                  "drop {name}" + ("" if t.ddp and spec.rule != "hinge" else ", or add {training.ddp} N (N ≥ 2)"))
    if not spec.learns_val:
        if t.learn_val:
            learners = ", ".join(n for n, m in MODELS.items() if m.learns_val)
            raise bad("training.learn_val", f"{{name}}: {name} does not learn the validation rows",
                      f"drop {{name}}, or pass {{model.name}} {learners} (or auto)")
        t.learn_val = False
    elif t.learn_val and not cfg.data.val and not cfg.data.val_fraction:
        # Given: the twin would learn no row more than the model, at twice the weights (config.json said it did).
        raise bad("training.learn_val", "{name}: the saved model learns the validation rows too, and "
                  "{data.val_fraction} 0 without {data.val} holds no row out", "drop {name}, or give {data.val} "
                  "FILE or a {data.val_fraction} above 0")
    elif t.learn_val and (t.ddp or 0) > 1:
        raise bad("training.learn_val", "{name}: under {training.ddp} the ranks average their weights, and only rank 0 "
                  "scores the validation rows, so no twin can learn them there", "drop {name}, or {training.ddp}")
    elif t.learn_val is None and (cfg.data.val or not cfg.data.val_fraction or (t.ddp or 0) > 1):
        # A validation file stays held out; under --ddp N > 1 only rank 0 scores the validation rows (no twin
        # there); one trainer task on the cluster (--ddp 1) keeps the twin, as in this process.
        # Else None is decided by the rows (resolve_counts).
        t.learn_val = False
    if spec.sparse_optimizer is not None and t.optimizer not in ROW_WISE:
        _one_optimizer(t, spec, cfg.given)
        return
    if t.sparse_optimizer == "hinge":   # the linear model's own step, as configurations before 0.2 named it
        if spec.sparse_optimizer is not None:
            raise bad("training.sparse_optimizer", f"{{name}} hinge is a linear model's own step, not {name}'s",
                      "pass {model.name} LinearSVM, or {name} sgd|adam")
        t.sparse_optimizer = None
    elif t.sparse_optimizer is None:
        t.sparse_optimizer = spec.sparse_optimizer
    if t.sparse_lr is None:
        t.sparse_lr = spec.default_sparse_lr(t.sparse_optimizer, t.task)


def _one_optimizer(t: Any, spec: ModelSpec, given: frozenset[str]) -> None:
    """``--optimizer radam|rmsprop|adadelta``: one torch optimiser steps every
    parameter, the input rows too, at ``--lr`` (training/optim.py): a
    ``--sparse-optimizer`` or ``--sparse-lr`` would do nothing, so one given
    is refused, typed at the model's own value too (``given``); what the model
    would have filled in is let by where nobody typed it (a saved
    configuration), and the run records neither."""
    used = spec.default_sparse_lr(t.sparse_optimizer or spec.sparse_optimizer, t.task)
    # "adam": what a configuration saved before the sparse step existed reads as (config.ADDED_FIELDS)
    for field, value, own in (("training.sparse_optimizer", t.sparse_optimizer, (spec.sparse_optimizer, "adam")),
                              ("training.sparse_lr", t.sparse_lr, (used,))):
        if value is not None and (value not in own or field in given):
            raise bad(field, f"{{name}} {value}: {{training.optimizer}} {t.optimizer} steps every parameter, the "
                      "input rows too, at {training.lr}", "drop {name}, or pass {training.optimizer} adam or sgd, "
                      "whose input rows take their own step")
    t.sparse_optimizer = t.sparse_lr = None


def _features(cfg: TrainConfig, spec: ModelSpec) -> None:
    """The feature mode (the model's own unless given) and the options it allows."""
    f, name = cfg.features, cfg.model.name
    if f.mode is None:
        f.mode = spec.features[0]
        if f.mode == "hashing" and _prunes(f) and "tfidf" in spec.features:
            f.mode = "tfidf"   # a vocabulary cap or a document-frequency cut asks for a fitted vocabulary
    f.analyzer = f.known_analyzer() or AUTO   # only hashed features read characters; stop words are words
    if f.mode == "ids" and (f.ngram_min > 1 or f.analyzer != "word"):
        raise bad("features.mode", f"{{name}} ids reads word tokens in order, not {f.analyzer} n-grams "
                  f"{f.ngram_min},{f.ngrams}", "drop {features.ngram_min}/{features.analyzer}, or pick a bag model")
    if f.mode == "ids":
        # Token ids in order: no word pairs (the default's pairs are the bag models', let by untyped; typed,
        # --ngrams 2 trained the same bytes as --ngrams 1), and no weights.
        if f.ngrams != 1 and (f.ngrams != BY_FIELD["features.ngrams"].default or "features.ngrams" in cfg.given):
            raise bad("features.ngrams", lambda say: f"{say.setting('features.ngrams', (f.ngram_min, f.ngrams))}: "
                      "{features.mode} ids reads word tokens in order, not n-grams",
                      "drop it, or pick a bag model (ScalpelMC) for n-grams")
        for field, on in (("features.idf", f.idf), ("features.sublinear_tf", f.sublinear_tf)):
            if _set(cfg, field, on):
                raise bad(field, lambda say: f"{say.setting(field, on)}: idf and sublinear tf weigh the terms of "
                          "a bag; {features.mode} ids feeds token ids in order, unweighted", "drop it")
        f.ngrams = 1
    if f.analyzer not in ("word", AUTO) and f.mode != "hashing":
        raise bad("features.analyzer", f"{{name}} {f.analyzer}: character n-grams are hashed, not a fitted "
                  f"vocabulary ({{features.mode}} {f.mode})", "use {features.mode} hashing (ScalpelMC's default)")
    if f.mode == "hashing" and f.max_features is not None:
        raise bad("features.max_features", "{name} caps a fitted vocabulary; hashed features have "
                  "{features.buckets} columns", "drop {name}, or use {features.mode} tfidf")
    for field, given in (("features.min_df", f.min_df), ("features.max_df", f.max_df)):
        if f.mode == "hashing" and _set(cfg, field, given):
            raise bad(field, f"{{name}} {given} prunes a fitted vocabulary's terms by how many rows hold them; "
                      "hashed features keep every term in its bucket", "drop {name}, or use {features.mode} tfidf")
    # Options of one feature mode, given with another: they would do nothing.
    if f.mode != "hashing" and _set(cfg, "features.buckets", f.buckets):
        raise bad("features.buckets", f"{{name}} sets the columns of hashed features; {{features.mode}} {f.mode} "
                  "fits a vocabulary ({features.max_features} caps it)", "drop {name}, or use {features.mode} hashing")
    if f.mode != "ids" and _set(cfg, "features.max_len", f.max_len):
        raise bad("features.max_len", f"{{name}} cuts the token ids a sequence model reads; {{features.mode}} "
                  f"{f.mode} makes a bag of terms of the whole text", "drop {name}, or use a Lancet* model")
    if f.mode not in spec.features:
        raise bad("features.mode", f"model {name} reads {{name}} {'/'.join(spec.features)}, not {f.mode}",
                  f"drop {{name}}, or pick a model for {f.mode}: "
                  + ", ".join(n for n, m in MODELS.items() if f.mode in m.features))


def _set(cfg: TrainConfig, field: str, value: Any) -> bool:
    """Whether ``field`` was given (typed, at the default's value too: ``--idf`` with token
    ids does nothing as ``--no-idf`` does) or holds another value than its default."""
    return field in cfg.given or value != BY_FIELD[field].default


def _prunes(f: Any) -> bool:
    """Whether a vocabulary's cap or a document-frequency cut was given (a fitted vocabulary's options)."""
    return f.max_features is not None or any(getattr(f, name) != BY_FIELD[f"features.{name}"].default
                                             for name in ("min_df", "max_df"))


def _check_loss_options(cfg: TrainConfig) -> None:
    """A loss option of a task this run does not train would do nothing: refused, typed at
    its default's value too (``--value-loss mse`` of a classifier reads no value either)."""
    t = cfg.training
    values, classes = t.task in ("regress", "multitask"), t.task != "regress"
    weights = None if t.loss_weights is None else tuple(t.loss_weights)
    if t.task != "multitask" and ("training.loss_weights" in cfg.given
                                  or weights not in (None, tuple(BY_FIELD["training.loss_weights"].default))):
        raise bad("training.loss_weights", f"{{name}} weighs the class and the value losses of "
                  f"{{training.task}} multitask; this run's task is {t.task}", "drop {name}")
    if not values and _set(cfg, "training.value_loss", t.value_loss):
        raise bad("training.value_loss", f"{{name}} {t.value_loss} is the loss of a {{data.target}} value; this run's "
                  f"task, {t.task}, predicts none", "drop {name}")
    if not classes and _set(cfg, "training.class_loss", t.class_loss):
        raise bad("training.class_loss", f"{{name}} {t.class_loss} is the loss of labels; this run's task, "
                  f"{t.task}, predicts a value only", "drop {name}")
    if not classes and _set(cfg, "training.class_weights", t.class_weights):
        raise bad("training.class_weights", f"{{name}} {t.class_weights} weighs the classes of labels; this run's "
                  f"task, {t.task}, predicts a value only", "drop {name}")


def _check_task(cfg: TrainConfig, spec: ModelSpec) -> None:
    """The task against the model and the columns; the monitor against the task."""
    t, name = cfg.training, cfg.model.name
    if t.task not in spec.every_task:
        raise bad("training.task", f"model {name} cannot {t.task}",
                  f"it does: {', '.join(spec.every_task)}; models for {t.task}: "
                  + ", ".join(n for n, m in MODELS.items() if t.task in m.every_task))
    _check_multilabel(cfg)
    if t.task in ("classify", "multitask", "multilabel") and not cfg.data.label:
        raise bad("data.label", f"{{training.task}} {t.task} needs a label column", "pass {name} COLUMN")
    if t.task in ("regress", "multitask") and not cfg.data.target:
        raise bad("data.target", f"{{training.task}} {t.task} needs a numeric target column", "pass {name} COLUMN")
    if t.task == "regress":
        # The default, not typed, names no column of its own; typed (--label label), it asks for that column.
        if cfg.data.label is not None and (cfg.data.label != BY_FIELD["data.label"].default
                                           or "data.label" in cfg.given):
            raise bad("data.label", f"{{name}} {cfg.data.label}: {{training.task}} regress predicts {{data.target}} "
                      f"{cfg.data.target} alone, so the labels would be read and not learned",
                      "drop {name}, or pass {training.task} multitask to learn both")
        cfg.data.label = None
    if cfg.data.target and t.task not in ("regress", "multitask"):
        raise bad("data.target", f"{{name}} {cfg.data.target} is a value to predict, and this run's task, {t.task}, "
                  f"predicts labels ({name}'s)", "drop {name}, or pass {training.task} regress (or multitask) with "
                  "a model that does it: " + ", ".join(n for n, m in MODELS.items() if "regress" in m.every_task))
    _check_columns(cfg.data)
    _check_loss_options(cfg)
    t.monitor = t.monitor or default_monitor(spec, t.task)
    if not monitor_fits(t.monitor, t.task):
        raise bad("training.monitor", f"{{name}} {t.monitor} does not fit {{training.task}} {t.task}",
                  "use val_loss, or a metric of the task")


# The columns of the rows a reader hands on (and prediction's status): a numeric column of one of these
# names would be read as that column (a classify run's numeric `target` trained as a target, its input
# left out) or stop the run as a name found twice.
READ_AS = {"text": "text", "label": "label", "target": "target", "status": "prediction status"}


# What would work instead of one column in two roles, by the roles (column_roles.WHY_TWICE says why not).
_INSTEAD = {
    ("text", "label"): "read the text from another column, or name the label column with {data.label}",
    ("text", "target"): "read the text from another column, or name the target column with {data.target}",
    ("text", "numeric"): "drop it from {data.numeric} to read its words, or from {data.text} to read it as a number",
    ("label", "target"): "pass the label and the value as two columns, or {training.task} classify or regress to "
                         "learn one of them",
    ("label", "numeric"): "drop it from {name}",
    ("target", "numeric"): "drop it from {name}",
}


def _check_columns(d: Any) -> None:
    """Each column in one role, once: text, label, target and ``--numeric``
    columns; none of the numeric ones of a name the rows read take."""
    twice = named_twice([("text", d.text), ("label", [d.label]), ("target", [d.target]), ("numeric", d.numeric)])
    if twice:
        col, first, again = twice
        why = WHY_TWICE[first, again]
        if first == again:
            raise bad(f"data.{again}", f"{{name}} names the column {col!r} twice: {why}", "name each column once")
        raise bad(f"data.{again}", f"{{name}} {col}: it is also the run's {{data.{first}}} column: {why}",
                  _INSTEAD[first, again])
    for col in d.numeric:
        if col in READ_AS:
            raise bad("data.numeric", f"{{name}} {col}: the rows a run reads hold its own {READ_AS[col]} "
                      f"column under that name, so a numeric column named {col!r} cannot be read beside it",
                      f"rename that column in the data, e.g. to {col}_value")


def default_monitor(spec: ModelSpec, task: str) -> str:
    """The score a run of ``spec`` on ``task`` watches when ``--monitor`` is not given."""
    return (MARGIN_MONITOR if spec.rule == "hinge" else DEFAULT_MONITOR).get(task, "val_loss")


def idle_epoch_options(given: TrainConfig, resolved: TrainConfig, monitor: bool = True) -> list[str]:
    """Warnings for the epoch options typed that this run's ``--epochs`` leave
    nothing to do: ``--early-stopping N`` stops a run once N epochs in a row have
    not bettered the best one before them, after an epoch that is not the last,
    so with ``--epochs`` N + 1 or fewer it stops none; ``--monitor`` with one
    epoch has no epoch to choose (``monitor``: False where the score is read for
    something else, tune's objective). Warned, not refused: a workflow may set
    them for runs of any length."""
    g, t, out = given.training, resolved.training, []
    patience = t.early_stopping
    if "training.early_stopping" in given.given and patience and t.epochs <= patience + 1:
        kept = (f" ({resolved.model.name} still keeps the best epoch's weights with it)"
                if MODELS[resolved.model.name].rule == "hinge" and t.epochs > 1 else "")
        out.append(f"{{training.early_stopping}} {patience} can stop no epoch of {{training.epochs}} {t.epochs}: it "
                   f"stops once {patience} epochs in a row have not bettered the best {t.monitor} before them, and "
                   f"the run's last epoch comes first{kept}; give {{training.epochs}} {patience + 2} or more for it "
                   "to stop a run early, or a smaller {training.early_stopping}")
    if monitor and "training.monitor" in given.given and g.monitor and t.epochs == 1:
        out.append(f"{{training.monitor}} {g.monitor} chooses no epoch with {{training.epochs}} 1: the run has one "
                   "epoch, whose weights it keeps; give {training.epochs} 2 or more for it to keep the epoch with "
                   f"the best {g.monitor}, or drop {{training.monitor}}")
    return out


def bias_only_lr(given: TrainConfig, resolved: TrainConfig) -> str | None:
    """A warning when ``--lr`` was typed for a bag model with ``--layers 0``, no
    ``--numeric`` column, and input rows that step at their own ``--sparse-lr``:
    the rows are the whole model then, and ``--lr`` moves only the output bias."""
    t, m = resolved.training, resolved.model
    if ("training.lr" not in given.given or m.layers != 0 or resolved.data.numeric or t.sparse_lr is None
            or MODELS[m.name].rule != "gradient"):
        return None
    return (f"{{training.lr}} {t.lr} moves only the output bias of {m.name} with {{model.layers}} 0 and no "
            f"{{data.numeric}} column: its input rows, every other weight, step at {{training.sparse_lr}} {t.sparse_lr}"
            f" ({t.sparse_optimizer}); set {{training.sparse_lr}} to change how fast it learns, or add {{model.layers}} "
            "1 for a hidden layer that {training.lr} trains")


def unused_monitor(given: TrainConfig, resolved: TrainConfig, keeps_last: bool) -> str | None:
    """A warning when ``--monitor`` was given a score of its own and the run
    keeps its last epoch whatever the scores (``LinearSVM`` without
    ``--early-stopping``): the option would choose nothing. ``tune`` reads it
    as its objective, so it is not refused."""
    g, t = given.training, resolved.training
    if not keeps_last or not g.monitor or g.monitor == default_monitor(MODELS[resolved.model.name], t.task):
        return None
    if idle_epoch_options(given, resolved):   # one epoch: there is nothing to choose, said once
        return None
    return (f"{{training.monitor}} {g.monitor} chooses no epoch in this run: {resolved.model.name} keeps the last "
            "epoch's weights without {training.early_stopping} (docs/models.md); add {training.early_stopping} N to "
            f"keep the epoch with the best {g.monitor}, or drop {{training.monitor}}")


def _check_multilabel(cfg: TrainConfig) -> None:
    """--label-sep belongs to --task multilabel; multilabel trains a loss per label: BCE, or the hinge."""
    t = cfg.training
    if cfg.data.label_sep is not None and t.task != "multilabel":
        raise bad("data.label_sep", f"{{name}} splits a row's labels for {{training.task}} multilabel, not "
                  f"{{training.task}} {t.task}", "add {training.task} multilabel, or drop {name}")
    if cfg.data.label_sep == "":
        raise bad("data.label_sep", "{name}: an empty separator", 'e.g. {name} "|" or {name} ","')
    if t.task == "multilabel" and t.class_loss not in ("cross_entropy", "hinge"):
        raise bad("training.class_loss", f"{{name}} {t.class_loss}: {{training.task}} multilabel trains a binary "
                  "cross entropy per label (cross_entropy) or a hinge per label (hinge)",
                  "drop {name}, or pass {name} hinge")


#: --analyzer auto reads character n-grams from this share of word characters in
#: scripts whose words a word analyzer cannot match (features/scripts.py measures it):
#: below it a corpus is mostly words; above it, character n-grams still read its
#: other words well, while words lose every unspaced clause and joined particle.
CHAR_SCRIPT_SHARE = 0.3
# --analyzer auto's character n-grams, chosen on the validation rows of real
# Japanese and Chinese text (docs/benchmarks.md).
AUTO_CHAR_ANALYZER, AUTO_CHAR_NGRAMS = "char_wb", (1, 3)
# The n-gram range auto keeps as given: the default one stands for words.
DEFAULT_NGRAMS = (1, 2)


def resolve_sample(given: TrainConfig, resolved: TrainConfig, share: float, letters: int, marked: float = 0.0
                   ) -> tuple[TrainConfig, TrainConfig, str | None]:
    """``--analyzer auto`` decided from a sample of the training text, before
    the fit pass: ``share`` is the share of its ``letters`` word characters
    in scripts written without spaces, with particles joined to their words or
    with vowel signs the word pattern cuts them at
    (:func:`~lancetnic_flow.features.scripts.char_script_share`); ``marked``
    the share of its words that hold vowel marks between their letters even
    once composed (vocalised Arabic or Hebrew:
    :func:`~lancetnic_flow.features.scripts.cut_word_share` of the NFC text).
    From :data:`CHAR_SCRIPT_SHARE` (``share``) or :data:`CUT_WORD_SHARE`
    (``marked``) up the features are
    character n-grams (:data:`AUTO_CHAR_NGRAMS`, unless an n-gram range was
    given, at the default's value too), else words. The choice goes into both
    configurations, as if given, so a later re-resolution (``--model auto``'s
    fallback, ``--resume``) keeps it. Returns them and the line the run prints
    (None when there was nothing to decide)."""
    if resolved.features.analyzer != AUTO:
        return given, resolved, None
    scripts = letters > 0 and share >= CHAR_SCRIPT_SHARE
    chars = scripts or marked >= CUT_WORD_SHARE
    # A range typed at the default's value (--ngram-range 1,2, --ngrams 2) is the user's, as any typed option is.
    typed = bool({"features.ngram_min", "features.ngrams"} & given.given)
    char_range = chars and not typed and (given.features.ngram_min, given.features.ngrams) == DEFAULT_NGRAMS
    given, resolved = copy.deepcopy(given), copy.deepcopy(resolved)
    for f in (given.features, resolved.features):
        f.analyzer = AUTO_CHAR_ANALYZER if chars else "word"
        if char_range:
            f.ngram_min, f.ngrams = AUTO_CHAR_NGRAMS
    f = resolved.features
    if not chars:
        return given, resolved, None
    if not scripts:
        return given, resolved, (f"analyzer {f.analyzer} {f.ngram_min},{f.ngrams}: {marked:.0%} of the sampled "
                                 "words hold vowel marks between their letters (as vocalised Arabic or Hebrew "
                                 "writes them), where the word pattern cuts each word; {features.analyzer} word "
                                 "keeps words")
    return given, resolved, (f"analyzer {f.analyzer} {f.ngram_min},{f.ngrams}: {share:.0%} of the sampled "
                             "letters are in scripts whose words do not repeat in one form (written without "
                             "spaces: Chinese, Japanese, Thai, …; with particles joined to each word: Korean; "
                             "with vowel signs the word pattern cuts each word at: Hindi, Bengali, Tamil, …); "
                             "{features.analyzer} word keeps words")


#: A word analyzer warns from this share of a sample's words cut at a combining mark
#: (features/scripts.cut_word_share): below it, a stray shadda or accent here and there.
CUT_WORD_SHARE = 0.1


def cut_words_warning(features, share: float, words: int, composed_share: float) -> str | None:
    """Words read for text whose words the word pattern cuts at their combining marks
    (``share`` of ``words`` sampled; ``composed_share``: the same once the text is NFC,
    its accents joined to their letters): the warning that names what reads them
    whole. None where few words are cut, or their accents are decomposed and the run
    composes them (``--normalize``: vowel marks stay), or the analyzer reads characters."""
    if words == 0 or share < CUT_WORD_SHARE or features.analyzer != "word":
        return None
    if composed_share < share / 2:
        if features.normalize in ("nfc", "nfkc"):   # composing joins each accent to its letter
            return None
        why = "text written decomposed (NFD: 'résumé' is read as 're' and 'sume')"
        fix = "{features.normalize} nfc joins each accent to its letter"
    else:
        why = "vowel marks written into the words (as in vocalised Arabic or Hebrew)"
        fix = ("{features.analyzer} char_wb reads every character" if features.mode in (None, "hashing")
               and features.tokenizer is None and features.stop_words is None
               else "a tokenizer of your own ({features.tokenizer}) can keep the marks")
    return (f"{share:.0%} of the sampled words hold combining marks between their letters, where the word "
            f"pattern (letters and digits, as scikit-learn's) cuts them: {why}; {fix}")


def words_kept_warning(features, model: str, share: float, letters: int) -> str | None:
    """``--analyzer auto`` left to decide, but another option settled it on
    words (:meth:`~lancetnic_flow.config.FeatureConfig.known_analyzer`) while
    the sample is mostly in scripts whose words do not repeat in one form
    (``share`` of its ``letters``, as :func:`resolve_sample` takes them): the
    warning that names the option and what reads characters instead. None
    when words fit the text, or when the user's own tokenizer splits it
    (a word segmenter is the right tool there)."""
    if letters == 0 or share < CHAR_SCRIPT_SHARE or features.tokenizer is not None:
        return None
    if features.mode == "ids":
        why = f"{model} reads word tokens in order"
        fix = ("a bag model reads character n-grams ({model.name} LinearSVM, the default, or ScalpelMC), or give "
               "{features.tokenizer} a word segmenter")
    elif features.mode != "hashing":
        why = f"a fitted vocabulary ({{features.mode}} {features.mode}) holds words"
        fix = "{features.mode} hashing reads character n-grams here ({features.analyzer} auto decides them)"
    elif features.stop_words is not None:
        why = "{features.stop_words} makes the analyzer read words"
        fix = "drop {features.stop_words} to read character n-grams"
    else:
        return None
    return (f"{share:.0%} of the sampled letters are in scripts whose words do not repeat in one form (Chinese, "
            f"Japanese, Thai, Korean, Hindi, …), but {why}: a token there is a whole clause, a word with its "
            f"particles, seldom seen twice, or a piece of a word cut at its vowel signs, so the model learns "
            f"little; {fix}")


@dataclass(frozen=True)
class FitCounts:
    """What the fit pass counted that the last choices need."""

    rows: int       # training rows
    classes: int    # label values (0 for a regression)


def resolve_counts(given: TrainConfig, resolved: TrainConfig, counts: FitCounts,
                   fits: Callable[[TrainConfig], bool]) -> tuple[TrainConfig, list[str]]:
    """The configuration to train, once the data's counts are known, and the
    warnings to show. ``resolved`` is :func:`resolve` of ``given``;
    ``fits(config)`` says whether the trainer's share of the memory plan
    holds that configuration's model with these classes.

    * ``--model auto`` moves to its next choice when the chosen model's
      weights do not fit, or it has more classes (labels) than it takes;
    * a model that can learn the validation rows (``--learn-val`` unset)
      does when the training rows are at most :data:`LEARN_VAL_MAX_ROWS` and
      its twin fits; one that asked to but does not fit learns without it."""
    cfg, notes = resolved, []
    while given.model.name == AUTO and cfg.model.name != AUTO_CHOICES[-1]:
        spec = MODELS[cfg.model.name]
        alone = _with_learn_val(cfg, False) if spec.learns_val else cfg
        if spec.takes_classes(cfg.training.task, counts.classes) and fits(alone):
            break
        retry = copy.deepcopy(given)
        retry.model.name = choose_model(given, after=cfg.model.name)
        cfg = resolve(retry)
        if dataclasses.asdict(cfg.features) != dataclasses.asdict(resolved.features):
            raise RuntimeError("--model auto's choices must read the same features: the cache entry is fitted")
    spec = MODELS[cfg.model.name]
    if spec.learns_val and cfg.training.learn_val is not False:
        wanted = cfg.training.learn_val or counts.rows <= LEARN_VAL_MAX_ROWS
        learn = wanted and fits(_with_learn_val(cfg, True))
        if wanted and not learn and fits(_with_learn_val(cfg, False)):
            notes.append(f"{cfg.model.name}: the plan has no room for the twin that lets the saved model learn "
                         "the validation rows; it learns the training rows only (raise {cluster.memory_budget} to learn "
                         "them too)")
        cfg = _with_learn_val(cfg, learn)
    return cfg, notes


def _with_learn_val(cfg: TrainConfig, learn: bool) -> TrainConfig:
    return dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, learn_val=learn))
