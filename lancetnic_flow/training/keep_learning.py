"""Keep learning: ``train NEW_DATA --init-from RUN`` (and ``partial_fit``).

A continued run starts from a finished run's weights and trains them on new
data, into a new run folder; the old one is only read. What the old weights
mean must not change, so the continued run takes from the old one:

* **its features**, as fitted: the vocabulary or the hashing, the idf, the
  tokenisation (analyzer, n-gram range, stop words, normalisation), the
  target's and the numeric columns' scalers. The idf is *kept*, not updated
  with the new data's document frequencies: the old weights were learned on
  inputs weighed by it, and a new idf would rescale every term they read.
  A hashed bucket no old training row held weighs 0 in it; one the new
  data's training rows hold takes the old run's idf of no row, as it had
  before such buckets weighed 0, so its words are learned as they were.
  A fitted vocabulary stays the old one (words it lacks are not learned);
  hashed features have no vocabulary, so new words land in their buckets.
* **its model and task**: the same network, its sizes, its task;
* **its labels, with their ids**: labels the new data adds are appended, and
  the output layer grows (:mod:`lancetnic_flow.models.grow`): old classes keep
  their weights, new ones start as a fresh network starts them.

Options: a feature, model or task option left at its default takes the old
run's value; given with another value it is refused, naming it (:data:`FIXED`).
The columns and the training options in :data:`INHERITED` also take the old
run's values when left at their defaults, and may be given anew. The new
data goes through the normal dataflow (its fit pass counts its rows and
labels; its shards are featurised with the old features, in a cache entry of
their own); the old data is not read. The learning rate goes on with the old
weights' schedule (:func:`~.step.lr_schedule`'s ``start``): as one run over
the old run's steps and the new data's would decay it, not from full strength,
which would shake what the old weights learned; from full strength where the
new data has rows of a label the old run had none of, whose output row has
learned nothing.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..config import FeatureConfig, TrainConfig
from ..errors import UserError, reworded
from ..features.label_values import in_run_names
from ..features.vectorize import FittedFeatures
from ..features.vocab import seen_filled
from ..models.calibrate import Prior
from ..options import BY_FIELD, NGRAM_FIELDS, REQUIRED, Words, bad
from ..runs.bucket_names import read_bucket_names
from ..runs.learned_rows import LearnedRows, read_learned
from ..registry import ROW_WISE
from ..storage import absolute, options_for
from .step import schedule_start

# What fixes the meaning of the weights: another value is refused.
FIXED = ("training.task", "model.name", "model.hidden", "model.layers", "model.embed", "data.numeric",
         *(f"features.{f.name}" for f in dataclasses.fields(FeatureConfig)))
# Taken from the old run when left at their defaults; another value is used as given.
# data.val_fraction: the hash band the old run held out; a wider one would hold out rows it trained on.
INHERITED = ("data.text", "data.label", "data.target", "data.label_sep", "data.val_fraction", "model.dropout",
             "training.epochs", "training.batch_size", "training.lr", "training.lr_schedule", "training.optimizer",
             "training.sparse_optimizer", "training.sparse_lr", "training.class_loss", "training.value_loss",
             "training.loss_weights", "training.class_weights", "training.early_stopping", "training.monitor",
             "training.clip_grad")
CLASSIFIES = ("classify", "multitask", "multilabel")
NEW_RUN = "or train a new run without {training.init_from}"
# An estimator's partial_fit continues its own last run: its refusals name what its caller typed.
PARTIAL_FIT = "partial_fit"
EARLIER = "partial_fit continues the model the earlier calls fitted"
REFIT = "or call fit(X, y) to train a new model"
# What y holds for each task an estimator trains.
ANSWERS = {"classify": "one label per row", "multilabel": "a list of labels per row", "regress": "a number per row"}


def _get(cfg: Any, field: str) -> Any:
    section, name = field.split(".")
    return getattr(getattr(cfg, section), name)


def _set(cfg: Any, field: str, value: Any) -> None:
    section, name = field.split(".")
    setattr(getattr(cfg, section), name, value)


def _plain(value: Any) -> Any:
    """A value as config.json holds it: tuples as lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _is_default(field: str, value: Any) -> bool:
    default = BY_FIELD[field].default
    return default is not REQUIRED and _plain(value) == _plain(default)


def _chooses(value: Any) -> bool:
    """Whether an option's value asks the tool to choose (``auto``, None: the model's own)."""
    return value is None or value == "auto"


def _value(cfg: Any, fields: tuple[str, ...]) -> Any:
    """One option's value: a field's, or --ngram-range's pair."""
    return tuple(_get(cfg, f) for f in fields) if len(fields) > 1 else _get(cfg, fields[0])


def run_options(run: str, cfg: TrainConfig) -> dict:
    """The storage options that open the run folder ``run``: the data's, when it speaks their protocol."""
    return options_for(run, cfg.data.storage_options, like=cfg.data.train[0] if cfg.data.train else None)


def refusal(run: str, by: str | None, what: str, hint: str | None) -> UserError:
    """Continuing ``run`` refused: ``what`` is wrong with it, ``hint`` what would work; said as
    the caller asked for the run (``by``: :data:`PARTIAL_FIT`, else ``--init-from``/``init_from``)."""
    anew = REFIT if by == PARTIAL_FIT else NEW_RUN
    if by == PARTIAL_FIT:
        hint = for_estimator(hint)
    hint = f"{hint}, {anew}" if hint else anew.removeprefix("or ")
    if by == PARTIAL_FIT:
        return UserError(f"{EARLIER} ({run}), and cannot: {what}", hint)
    return bad("training.init_from", f"{{training.init_from}} {run}: {what}", hint)


def refused_run(run: str, by: str | None, exc: UserError) -> UserError:
    """:func:`refusal` of ``run`` for what ``exc`` (reading it) says is wrong, in each
    reader's words: the command line's flags stay flags in ``--init-from RUN: ...``."""
    if by == PARTIAL_FIT:
        return refusal(run, by, exc.message, exc.hint)
    refused = reworded(exc, lambda what, hint: (f"{{training.init_from}} {run}: {what}",
                                                f"{hint}, {NEW_RUN}" if hint else NEW_RUN.removeprefix("or ")), UserError)
    refused.field = "training.init_from"
    return refused


def for_estimator(hint: str | None) -> str | None:
    """A run folder's hint as an estimator's caller can act on it: what it says of training
    the run again by command (``train it again (what was fitted … is cached)``,
    ``lancetnic-flow train --resume``) is fit(X, y)'s to do here, which :data:`REFIT` says."""
    if hint is None:
        return None
    kept = hint.split(", or train ")[0]
    return None if kept.startswith("train ") or "lancetnic-flow" in kept else kept


def read_old_run(run: str, storage_options: dict, by: str | None = None) -> tuple[dict, dict, FittedFeatures]:
    """The finished run ``run``'s config.json, model.json and features.json, checked
    (no torch): a damaged or unfinished folder is a UserError naming the file."""
    from ..runs.loading import FileNotARun, read_features, read_run_json

    try:
        meta, config = read_run_json(run, storage_options)
        return config, meta, read_features(run, storage_options, meta, config)
    except (NotADirectoryError, FileNotARun):   # a file where the folder should be: the data, given twice?
        raise bad("training.init_from", f"{{training.init_from}} {run} is a file, not a run folder",
                  "pass the folder of a finished run, as printed at the end of `lancetnic-flow train`, "
                  "e.g. {training.init_from} runs/20261130-101500") from None
    except UserError as exc:
        raise refused_run(run, by, exc) from None


def continue_config(given: TrainConfig, explicit: Iterable[str] = (), by: str | None = None) -> TrainConfig:
    """``given`` (with ``training.init_from``) as the continued run trains it: the old
    run's features, model and task, and its columns and training options where
    ``given`` leaves them at their defaults (``explicit``, and ``given.given``: fields
    given even where their value is the default, e.g. the command line's ``--text text``,
    a workflow's ``epochs: 10``). Refuses,
    naming them, the options that contradict the old run, a damaged old run, and new
    data without its columns. The result is marked (:func:`is_continued`): merged once.
    ``by``: :data:`PARTIAL_FIT` when an estimator's partial_fit asks, whose refusals say so."""
    run = str(given.training.init_from)
    config, _, _ = read_old_run(run, run_options(run, given), by)
    old = TrainConfig.from_dict(config)
    # A workflow's keys and an estimator's parameters are given as the command line's flags are; a feature
    # or model option given a value that leaves the choice to the tool (auto, None), by any of them, is
    # not: the run's choice is that choice (`--model auto` continues the run's LinearSVM).
    explicit = {f for f in {*explicit, *(f for f in given.given if f in FIXED + INHERITED)}
                if not ((f in FIXED or f in given.given) and _chooses(_get(given, f)))}
    _check_task(run, given, old, by)

    def left(field: str) -> bool:   # not given: the old run's value
        return field not in explicit and _is_default(field, _get(given, field))

    cfg = copy.deepcopy(given)
    cfg.training.init_from = run
    saved, differ = _as_saved(given), []
    for field in FIXED:
        if left(field) or _plain(_get(saved, field)) == _plain(_get(old, field)):
            _set(cfg, field, copy.deepcopy(_get(old, field)))
        else:
            differ.append(field)
    if differ:
        raise _contradiction(run, given, old, differ, by)
    # With a validation source of its own the run holds nothing out by hash: no band to take.
    inherited = [f for f in INHERITED if left(f) and not (f == "data.val_fraction" and given.data.val)]
    for field in inherited:
        _set(cfg, field, copy.deepcopy(_get(old, field)))
    if "data.label_sep" not in inherited and cfg.data.label_sep is not None:
        # the caller's own (train(cfg) names no field it gave): checked as a typed --label-sep is
        cfg.given = cfg.given | {"data.label_sep"}
    if cfg.training.optimizer not in ROW_WISE and "training.optimizer" not in inherited:
        # another optimiser given steps every parameter: the old run's input-row step is not this run's
        cfg.training.sparse_optimizer = cfg.training.sparse_lr = None
    check_columns(cfg, run, [f for f in inherited if f.startswith("data.")] + ["data.numeric"])
    mark_continued(cfg, by)
    return cfg


def _as_saved(given: TrainConfig) -> TrainConfig:
    """``given`` with the feature values a run saves in another form than typed, as it saves them:
    --stop-words FILE as its words, --tokenizer NAME as MODULE:NAME. The same file or tokenizer
    given again is then no contradiction of the run's."""
    from ..tokenizers import canonical

    saved = copy.deepcopy(given)
    f = saved.features
    f.read_stop_words(given.data.storage_options)
    if f.tokenizer is not None:
        f.tokenizer = str(canonical(f.tokenizer))
    return saved


def mark_continued(cfg: TrainConfig, by: str | None = None) -> None:
    """Say that ``cfg`` is a continued run's configuration as merged (a resumed one's
    config.json is too): :func:`continue_config` is not applied to it again; and who
    asked for it (``by``, :data:`PARTIAL_FIT`), so that the run's refusals name it."""
    cfg.continued = True
    if by is not None:
        cfg.continued_by = by


def own_label_sep(cfg: TrainConfig) -> bool:
    """Whether a continued run's saved configuration (a resume's) holds a label separator its
    caller gave rather than the one it took from the run it continues: one that is not that
    run's was given (config.json keeps values, not who set them). One the same as that run's
    counts as taken, as :func:`continue_config` would take it; an old run no longer readable,
    too (the resume then stops on loading it)."""
    from ..runs.loading import read_config

    run = cfg.training.init_from
    if not run or cfg.data.label_sep is None:
        return False
    try:
        old = read_config(str(run), run_options(str(run), cfg))
    except (OSError, UserError):
        return False
    return (old.get("data") or {}).get("label_sep") != cfg.data.label_sep


def is_continued(cfg: TrainConfig) -> bool:
    return cfg.continued


def continued_by(cfg: TrainConfig) -> str | None:
    """:data:`PARTIAL_FIT` where an estimator's partial_fit continues the run, else None."""
    return cfg.continued_by


def _check_task(run: str, given: TrainConfig, old: TrainConfig, by: str | None = None) -> None:
    """A run continues as the task it was trained for: another is refused first, in its own words."""
    theirs, mine = old.training.task, given.training.task
    if by == PARTIAL_FIT and mine is not None and mine != theirs:   # the estimator's task is y's shape
        raise UserError(f"{EARLIER} ({run}), a {theirs} model ({old.model.name}), and this y asks for a {mine} "
                        f"one: {ANSWERS.get(mine, mine)}",
                        f"give y as the earlier calls did, {ANSWERS.get(theirs, theirs)}, {REFIT}")
    what = f"{{training.init_from}} {run} is a {theirs} run ({old.model.name})"
    if mine is not None and mine != theirs:
        raise bad("training.task", f"{what}; {{name}} {mine} asks for a {mine} run",
                  f"continue it as a {theirs} run (drop {{name}}), {NEW_RUN}")
    if theirs not in ("regress", "multitask") and given.data.target:
        raise bad("data.target", f"{what}: it predicts labels, and {{name}} {given.data.target} asks for a value",
                  f"drop {{name}}, {NEW_RUN}")


def _contradiction(run: str, given: TrainConfig, old: TrainConfig, fields: list[str], by: str | None = None
                   ) -> UserError:
    # --ngram-range sets two fields: one entry, said as the pair.
    named = list(dict.fromkeys(NGRAM_FIELDS if f in NGRAM_FIELDS else (f,) for f in fields))
    what = "features" if all(f.startswith("features.") for f in fields) else "model and features"

    def shown(say, whose: str = "the run's") -> str:
        return "; ".join(f"{say.setting(fs[-1], _value(given, fs))} ({whose}: "
                         f"{say.value(fs[-1], _value(old, fs))})" for fs in named)

    if by == PARTIAL_FIT:   # the estimator's parameters, changed since the earlier calls (set_params)
        say = Words("python")
        back, differ = ", ".join(say.setting(fs[-1], _value(old, fs)) for fs in named), shown(say, "the model's")
        return UserError(f"{EARLIER} ({run}) and keeps its {what}, so its weights mean what they meant, and these "
                         f"parameters differ: {differ}", f"set them back (set_params({back})), {REFIT}")

    return bad(fields[0], lambda say: f"{{training.init_from}} {run} keeps the run's {what}, so its weights mean "
                                      f"what they meant, and these options differ: {shown(say)}",
               "drop them (a continued run takes them from its run), " + NEW_RUN)


def check_columns(cfg: TrainConfig, run: str, fields: list[str]) -> None:
    """The columns the old run read that the new data must have (``fields``: those
    taken from the run), checked in the first file's header: a missing one is refused
    naming it, the new data's columns and the option that names another."""
    from ..data.checks import first_columns
    from ..data.readers.table import format_hint
    from ..data.sources import plan_source
    from ..formats import csv_delimiter, text_encoding

    d, task = cfg.data, cfg.training.task
    wanted = {"data.text": list(d.text), "data.numeric": list(d.numeric),
              "data.label": [d.label] if d.label and task in CLASSIFIES else [],
              "data.target": [d.target] if d.target and task in ("regress", "multitask") else []}
    if not d.train or not any(wanted.get(f) for f in fields):
        return
    delimiter = csv_delimiter(d.delimiter)
    plan = plan_source(d.train, format=d.format, storage_options=d.storage_options, delimiter=delimiter)
    have = first_columns(plan, d.storage_options, text_encoding(d.encoding), delimiter)
    if have is None:   # a line format (fastText, text): its columns are fixed
        return
    used = {c for cols in wanted.values() for c in cols}
    for field in fields:
        missing = [c for c in wanted.get(field, []) if c not in have]
        if not missing:
            continue
        role = {"data.text": "text", "data.label": "labels", "data.target": "target",
                "data.numeric": "numeric inputs"}[field]
        free = [c for c in have if c not in used]
        url = plan.files[0].url.removeprefix("file://")
        # A header split by another delimiter (';' without --delimiter) is one column: the fix is the delimiter.
        other = format_hint(plan.files[0].format, have)
        raise bad(field, f"the new data {url} has no column {missing[0]!r}, where {{training.init_from}} {run} read "
                         f"its {role} (the new data's columns: {', '.join(have)})",
                  other or (f"name the new data's column with {{name}} COL" + (f", e.g. {{name}} {free[0]}" if free
                                                                                  else "")
                            if field != "data.numeric" else
                            f"the run's network takes the numeric columns {', '.join(wanted[field])}: add them, "
                            f"{NEW_RUN}"))


def check_resolved(cfg: TrainConfig) -> None:
    """What a continued run cannot do, once resolved: write into the run it
    continues (:func:`check_places`), train on Dask workers (the ranks and the
    trainer task there build their network afresh)."""
    t = cfg.training
    check_places(cfg)
    if not (t.init_from and t.ddp):
        return
    if t.ddp > 1:
        cause, fix = f"{{training.ddp}} {t.ddp} trains", "drop {training.ddp}"
    else:
        cause = ("{cluster.train_on} cluster (asked for by {cluster.train_on}, {training.ddp} 1 or an existing cluster's "
                 "{cluster.scheduler}) trains")
        fix = "pass {cluster.train_on} client: the model trains in this process, the cluster still featurises"
    raise bad("training.init_from", f"{{name}} continues a run in this process; {cause} on Dask workers, which "
                                    "start from fresh weights", fix)


def _inside(path: str, folder: str) -> bool:
    path, folder = absolute(path).rstrip("/"), absolute(folder).rstrip("/")
    return path == folder or path.startswith(folder + "/")


def check_places(cfg: TrainConfig) -> None:
    """A continued run's --out and --cache outside the run it continues, which is only
    read: ``--out runs/jan`` would put the new run folder and the shard cache in it."""
    run, o = cfg.training.init_from, cfg.output
    if not run:
        return
    parent = posixpath.dirname(str(run).rstrip("/")) or "."
    if _inside(o.out, run):
        raise bad("output.out", f"{{name}} {o.out} is inside {{training.init_from}} {run}, the run this one "
                                "continues, which is only read: the new run folder and its cache would be written "
                                "into it", f"give the folder that holds the runs, e.g. {{name}} {parent}")
    if o.cache and not o.no_cache and _inside(o.cache, run):
        raise bad("output.cache", f"{{name}} {o.cache} is inside {{training.init_from}} {run}, the run this one "
                                  "continues, which is only read", "give another {name}, or leave it out (OUT/.cache)")


@dataclass
class InitRun:
    """The finished run a continued run starts from."""

    url: str
    features: FittedFeatures
    meta: dict
    state: dict            # its weights, as tensors
    digest: str            # of its features.json: the continued run's cache entry is its own
    learned: LearnedRows = dataclasses.field(default_factory=LearnedRows)   # rows it learned besides training rows
    names: Any = None      # hashing: its buckets' sampled terms (runs/bucket_names.py), None where it keeps none

    scale: float = 1.0     # its probability scale (a margin model's logit_scale)
    steps: int = 0         # the steps its weights took: a continued run's learning rate goes on from there

    @property
    def classes(self) -> int:
        return int(self.meta["kwargs"].get("classes") or 0)

    @property
    def prior(self) -> Prior | None:
        """A multilabel run's thresholds, as a continued run's calibration starts from them."""
        old = self.meta.get("thresholds")
        return Prior(np.asarray(old, np.float64), self.scale) if isinstance(old, list) else None


def load_init(run: str, storage_options: dict, by: str | None = None) -> InitRun:
    """``run`` read back whole, every file checked (:func:`~lancetnic_flow.runs.loading.load_run`):
    a damaged one is a UserError naming it, before any data is read."""
    from ..runs.loading import load_run

    try:
        loaded = load_run(run, storage_options, numpy=True)
    except UserError as exc:
        raise refused_run(run, by, exc) from None
    features = loaded.features
    digest = hashlib.sha256(features.to_json().encode()).hexdigest()[:16]
    # A LinearSVM's weights as NumPy arrays (no torch to read them); another network's tensors.
    state = dict(loaded.linear.state) if loaded.linear is not None else loaded.model.state_dict()
    try:
        learned = read_learned(run, loaded.meta, loaded.config, storage_options)
        names = read_bucket_names(run, loaded.meta, storage_options)
    except UserError as exc:
        raise refused_run(run, by, exc) from None
    scale = float(np.asarray(state["logit_scale"])) if "logit_scale" in state else 1.0
    steps = schedule_start(loaded.meta, loaded.metrics or {}, loaded.config or {})
    return InitRun(str(run), features, dict(loaded.meta), state, digest, learned, names, scale, steps)


def key_options(feature_config: dict, init: InitRun | None, declared: list[str] | None) -> dict:
    """The feature options a cache entry is keyed by, with what else decides its shards:
    the run continued (its features), and labels declared beyond the data's."""
    # 1: the new data's labels that spell one of the run's otherwise are read as the run's (earlier: new classes)
    extra = {"init_from": init.digest, "labels_as_run": 1} if init is not None else {}
    if init is not None and (init.learned.hashes.size or not init.learned.complete):
        extra["learned_rows"] = init.learned.digest()   # they train instead of validating: other shards
    if declared:
        extra["classes"] = list(declared)
    return {**feature_config, **extra}


def labelled(fitted: FittedFeatures, init: InitRun | None, declared: list[str] | None
             ) -> tuple[FittedFeatures, list[str]]:
    """The features a run trains with, from the fit pass's ``fitted`` (the new data's
    rows and labels): a continued run's are its old run's, with the labels ``fitted``
    adds appended (one the old run holds in another spelling of its value, ``1`` for its
    ``1.0``, is the old run's); labels ``declared`` (``partial_fit``'s classes) that neither has
    come last. ``docs`` and ``label_counts`` count this run's rows (0 for a label they
    lack). Returns them and the labels added to the old run's."""
    base = dataclasses.replace(init.features) if init is not None else dataclasses.replace(fitted)
    base.__dict__.pop("_table", None)
    labels = list(init.features.labels) if init is not None else list(fitted.labels)
    # a label the old run holds in another spelling of its value (1 for its 1.0) is the run's, not a new class
    names = in_run_names(fitted.labels, labels) if init is not None else list(fitted.labels)
    counts: dict[str, int] = {}
    for name, n in zip(names, fitted.label_counts):
        counts[name] = counts.get(name, 0) + int(n)
    added = [x for x in dict.fromkeys(names) if x not in set(labels)]
    labels += added
    more = [str(x) for x in (declared or []) if str(x) not in set(labels)]
    labels += more
    base.labels, base.label_counts = labels, [int(counts.get(x, 0)) for x in labels]
    if init is not None and base.idf is not None and fitted.idf is not None and base.mode == "hashing":
        base.idf = seen_filled(base.idf, fitted.idf, base.docs)
    base.docs = fitted.docs
    if init is not None and base.target and not base.target[1] and tuple(fitted.target or ()) != tuple(base.target):
        # The old run's target was one value (scale 0: it predicted that value whatever its network said);
        # its network learnt at scale 1, and the new rows' other values need that scale to be predicted.
        base.target = (base.target[0], 1.0)
    return base, (added + more if init is not None else [])
