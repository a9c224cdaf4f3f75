"""Typed configuration, validated at the edge.

One :class:`TrainConfig` describes a run: data, features, model, training,
cluster and output. The CLI and workflow files build it; everything below
reads it. Validation raises :class:`UserError` naming the field, the bad
value and what would work.
"""
from __future__ import annotations

import copy
import dataclasses
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .errors import UserError, close_matches
from .formats import csv_delimiter, format_names, text_encoding
from .options import (BY_DEST, BY_FIELD, SECTIONS, bad, default, parse_columns, parse_df, parse_ngram_range,
                      parse_storage_options, placeholder, refused)
from .scores import MONITORS
from .sizes import parse_size

FEATURE_MODES = ("tfidf", "hashing", "ids")
ANALYZERS = ("auto", "word", "char", "char_wb")
NORMALIZATIONS = ("none", "nfkc", "nfc", "nfkd", "nfd")
MAX_NGRAM = 32   # a sanity bound: the kernels' working arrays grow with the number of n-gram lengths
TASKS = ("classify", "regress", "multitask", "multilabel")
OPTIMIZERS = ("adam", "sgd", "radam", "rmsprop", "adadelta")
CLASS_LOSSES = ("cross_entropy", "bce", "hinge")
VALUE_LOSSES = ("mse", "l1", "smooth_l1")
SYNC_ROWS = ("all", "touched")
SECRET_HINTS = ("key", "secret", "token", "password", "credential", "session")


def _choice(field: str, value: Any, options: tuple) -> None:
    """``field`` (``training.optimizer``) must be one of ``options``."""
    if value not in options:
        raise bad(field, f"{{name}}: {value!r} is not one of {', '.join(map(str, options))}"
                  + close_matches(str(value), [str(o) for o in options]))


def _positive(field: str, value: float | int | None, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        raise bad(field, f"{{name}}: must be {'≥ 0' if allow_zero else '> 0'}, got {value!r}")


# Each field's default (and its flag, help and type) is declared once, in
# lancetnic_flow/options.py: ``default("data.val")`` reads it from there.
@dataclass
class DataConfig:
    train: list[str] = default("data.train")   # required: no default
    val: list[str] = default("data.val")
    val_fraction: float = default("data.val_fraction")
    format: str = default("data.format")
    text: list[str] = default("data.text")
    label: str | None = default("data.label")
    target: str | None = default("data.target")
    numeric: list[str] = default("data.numeric")
    storage_options: dict[str, Any] = default("data.storage_options")
    label_sep: str | None = default("data.label_sep")   # --task multilabel: labels in one string, e.g. "a|b"
    encoding: str | None = default("data.encoding")     # None: UTF-8; predict and evaluate default to it
    delimiter: str | None = default("data.delimiter")   # a CSV file's field separator; None: ","
    # Labels the model has even where the training rows lack them, after those the rows give
    # (TextClassifier.partial_fit's classes); None: the rows' labels only.
    classes: list[str] | None = default("data.classes")

    def validate(self) -> None:
        # Columns as a caller types them: text="body" is one column (its letters were read as
        # columns 'b', 'o', ...), numeric="a,b" two, as --numeric a,b.
        if isinstance(self.text, str):
            self.text = [self.text]
        if isinstance(self.numeric, str):
            self.numeric = parse_columns(self.numeric, "{data.numeric}")
        if not self.train:
            raise bad("data.train", "no training data given", "pass one or more URLs or globs, e.g. data/*.csv")
        _choice("data.format", self.format, ("auto", *format_names()))
        if self.val and self.val_fraction not in (0.0, BY_FIELD["data.val_fraction"].default):
            raise bad("data.val_fraction", f"{{name}} {self.val_fraction} holds rows of the training data out by "
                      "hash; with {data.val} the validation rows are that data's, and every training row trains",
                      "drop {name}, or drop {data.val}")
        if not self.val and not (0.0 < self.val_fraction < 1.0):
            if self.val_fraction != 0.0:
                raise bad("data.val_fraction", f"{{name}}: must be in [0, 1), got {self.val_fraction}",
                          "e.g. {name} 0.1, or {data.val} URL for a separate validation set")
        if not self.text:
            raise bad("data.text", "at least one text column is needed", "pass {name} COLUMN")
        text_encoding(self.encoding)   # an unknown codec, or one not readable in byte ranges: exit 2 now
        self.delimiter = csv_delimiter(self.delimiter)
        if self.classes is not None:   # labels travel as text: "1" is the label 1
            self.classes = list(dict.fromkeys(str(c) for c in self.classes))


@dataclass
class FeatureConfig:
    mode: str | None = default("features.mode")     # None: the model's own (registry.ModelSpec.features[0])
    ngrams: int = default("features.ngrams")        # the longest n-gram (--ngram-range's MAX)
    max_features: int | None = default("features.max_features")   # a fitted vocabulary's cap (None: 100,000)
    min_df: float = default("features.min_df")
    max_df: float = default("features.max_df")
    sublinear_tf: bool = default("features.sublinear_tf")   # 1 + log(tf)
    lowercase: bool = default("features.lowercase")
    buckets: int = default("features.buckets")      # hashed columns (--features hashing)
    max_len: int = default("features.max_len")
    idf: bool = default("features.idf")             # hashing: weight buckets by inverse document frequency
    analyzer: str = default("features.analyzer")    # auto | word | char | char_wb: scikit-learn's analyzers
    ngram_min: int = default("features.ngram_min")  # the shortest n-gram (--ngram-range's MIN)
    stop_words: str | list[str] | None = default("features.stop_words")   # "english", or a FILE's words (read once)
    normalize: str = default("features.normalize")  # Unicode normalisation before lower-casing
    tokenizer: str | None = default("features.tokenizer")   # a registered tokenizer ("module:name" when importable)

    def validate(self) -> None:
        if self.mode is not None:
            _choice("features.mode", self.mode, FEATURE_MODES)
        _positive("features.max_features", self.max_features)
        _positive("features.min_df", self.min_df)
        _positive("features.buckets", self.buckets)
        _positive("features.max_len", self.max_len)
        if isinstance(self.max_df, float) and not 0 < self.max_df <= 1.0:
            raise bad("features.max_df", f"{{name}}: a fraction must be in (0, 1], got {self.max_df}")
        if isinstance(self.min_df, float) and self.min_df > 1.0:   # as scikit-learn: a count is a whole number
            raise bad("features.min_df", f"{{name}}: a fraction must be in (0, 1], got {self.min_df}",
                      f"a count of documents is a whole number: {{name}} {int(self.min_df)} or {int(self.min_df) + 1}")
        self._check_text()

    def _check_text(self) -> None:
        """The tokenisation options, each error naming its field."""
        _choice("features.analyzer", self.analyzer, ANALYZERS)
        _choice("features.normalize", self.normalize, NORMALIZATIONS)
        if not (isinstance(self.ngrams, int) and isinstance(self.ngram_min, int) and 1 <= self.ngram_min <= self.ngrams):
            pair, field = (self.ngram_min, self.ngrams), "features.ngram_min"
            raise bad(field, lambda say: f"{say.setting(field, pair)}: need 1 ≤ MIN ≤ MAX",
                      lambda say: f"e.g. {say.setting(field, (1, 2))} (words and pairs) or {say.value(field, (2, 4))} "
                                  f"with {say.setting('features.analyzer', 'char_wb')}")
        if self.ngrams > MAX_NGRAM:
            raise bad("features.ngram_min", f"{{name}}: n-grams of up to {MAX_NGRAM}, got {self.ngrams}",
                      "e.g. 1,3 or 2,5")
        word = self.analyzer in ("word", "auto")   # auto with stop words or a tokenizer reads words (resolve.py)
        if self.stop_words is not None and not word:
            raise bad("features.stop_words", f"{{name}} applies to words, not to {{features.analyzer}} {self.analyzer}",
                      "drop {name}, or use {features.analyzer} word (scikit-learn ignores them there too)")
        if self.tokenizer is not None and not word:
            raise bad("features.tokenizer", f"{{name}} splits words; {{features.analyzer}} {self.analyzer} reads "
                      "characters", "drop one of them")
        self.read_stop_words({})
        if self.tokenizer is not None:
            from .tokenizers import canonical

            self.tokenizer = canonical(self.tokenizer)   # registered here, recorded with its module

    def known_analyzer(self) -> str | None:
        """The analyzer, with ``auto`` settled where only words can be read (a
        feature mode other than ``hashing``, stop words, a tokenizer of words);
        None while ``auto`` waits for a sample of the text (resolve.resolve_sample)."""
        if self.analyzer != "auto":
            return self.analyzer
        if (self.mode is not None and self.mode != "hashing") or self.stop_words is not None \
                or self.tokenizer is not None:
            return "word"
        return None

    def read_stop_words(self, storage_options: dict) -> None:
        """--stop-words FILE (one word a line, any fsspec URL) → its words, read
        once now: the run stores them and never needs the file again (the
        tokenizer lower-cases them as it does the text: features/tokenize.stop_table)."""
        if self.stop_words is None or self.stop_words == "english":
            return
        words = self.stop_words
        if isinstance(words, str):
            from .storage import NotRegularFile, read_bytes

            try:   # utf-8-sig: a byte-order mark would stick to the first word, which then never matches
                text = read_bytes(words, storage_options).decode("utf-8-sig")
            except NotRegularFile as e:   # read again at each check of the options: a pipe's second read is empty
                raise bad("features.stop_words", f"{{name}} {e.message}",
                          "write the words to a file, one a line, and pass that file") from None
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise bad("features.stop_words", f"{{name}} {words}: cannot read it ({e})",
                          "give 'english' or a UTF-8 file of one word per line") from None
            words = text.splitlines()
        self.stop_words = sorted({w.strip() for w in words if w.strip()})


@dataclass
class ModelConfig:
    name: str = default("model.name")        # auto: the first of registry.AUTO_CHOICES that fits (resolve)
    hidden: int | None = default("model.hidden")   # None: the model's (registry.ModelSpec.hidden)
    layers: int = default("model.layers")
    dropout: float = default("model.dropout")
    embed: int = default("model.embed")      # token embedding width of sequence models

    def validate(self) -> None:
        from .registry import AUTO, MODELS

        _choice("model.name", self.name, (AUTO, *MODELS))
        _positive("model.embed", self.embed)
        _positive("model.hidden", self.hidden)
        _positive("model.layers", self.layers, allow_zero=True)
        if not 0.0 <= self.dropout < 1.0:
            raise bad("model.dropout", f"{{name}}: must be in [0, 1), got {self.dropout}")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)\s*$")


def parse_duration(text: str | float | None, name: str = "time_budget") -> float:
    """``"90s"``, ``"10m"``, ``"1h"`` (``--checkpoint-every``'s durations), or plain seconds → seconds (> 0)."""
    s = str(text).strip().lower() if text is not None else ""
    m = _DURATION.match(s) or re.match(r"^\s*(\d+(?:\.\d+)?)()\s*$", s)
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "": 1}[m.group(2)] if m else 0.0
    if seconds <= 0:
        raise argument_error(name, f"{text!r} is not a duration above zero", "{name} 10m, 90s, 1h (or seconds: 600)",
                             "{name}='10m', '90s', '1h' (or seconds: 600)")
    return seconds


def argument_error(name: str, what: str, example: str, python_example: str) -> UserError:
    """A refused value of ``name`` (``time_budget``: a field, or an argument of tune() that the
    command line gives as ``--time-budget``), in each reader's words: ``example`` as the command
    line and a workflow write it, ``python_example`` as Python does, ``{name}`` standing for it."""
    flag = "--" + name.replace("_", "-")
    return UserError(f"{name}: {what}", "e.g. " + python_example.format(name=name), field=None,
                     cli=(f"{flag}: {what}", "e.g. " + example.format(name=flag)),
                     workflow=(f"{name}: {what}", "e.g. " + example.format(name=name + ":")))


@dataclass(frozen=True)
class CheckpointEvery:
    """``--checkpoint-every``: a number of batches, a duration, or never."""

    batches: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str | int | None) -> "CheckpointEvery":
        """``"500"`` → every 500 batches; ``"90s"``, ``"10m"``, ``"1h"`` → by time; ``"off"`` → only on
        Ctrl-C."""
        if text is None or str(text).strip().lower() in ("off", "never", "0"):
            return cls()
        s = str(text).strip().lower()
        if s.isdigit():
            return cls(batches=int(s))
        m = _DURATION.match(s)
        if not m:
            raise bad("training.checkpoint_every", f"{{name}}: {text!r} is neither a number of batches nor a "
                      "duration", "e.g. {name} 500 (batches), 10m, 90s, 1h, or off")
        return cls(seconds=float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)])

    def due(self, batches_since: int, seconds_since: float) -> bool:
        return bool((self.batches and batches_since >= self.batches) or
                    (self.seconds and seconds_since >= self.seconds))


@dataclass
class TrainingConfig:
    epochs: int = default("training.epochs")     # at most: early stopping usually ends the run sooner
    batch_size: int | None = default("training.batch_size")   # None: the model's (ModelSpec.batch_size)
    lr: float = default("training.lr")
    lr_schedule: str = default("training.lr_schedule")
    optimizer: str = default("training.optimizer")
    sparse_optimizer: str | None = default("training.sparse_optimizer")   # None → the model's (registry.ModelSpec)
    sparse_lr: float | None = default("training.sparse_lr")   # per example for sgd; None → the model's
    seed: int = default("training.seed")
    shuffle_buffer: int = default("training.shuffle_buffer")
    in_flight: int | None = default("training.in_flight")
    task: str | None = default("training.task")  # None: the model's own (ScalpelReg regresses, ScalpelMTSK both)
    class_loss: str = default("training.class_loss")
    value_loss: str = default("training.value_loss")
    loss_weights: tuple[float, float] = default("training.loss_weights")
    class_weights: str = default("training.class_weights")   # or "balanced"
    # Patience in epochs; 0: train every epoch; None: the model's default
    # (ModelSpec.early_stopping).
    early_stopping: int | None = default("training.early_stopping")
    monitor: str | None = default("training.monitor")   # None: resolve.DEFAULT_MONITOR of the task, else val_loss
    clip_grad: float | None = default("training.clip_grad")
    device: str = default("training.device")
    threads: int | None = default("training.threads")
    checkpoint_every: str = default("training.checkpoint_every")   # batches ("500"), a duration ("10m") or "off"
    ddp: int | None = default("training.ddp")    # data-parallel ranks on Dask workers (ddp.py)
    # Ranks of a rule that averages weights (LinearSVM) average every N of their steps too; None: at epochs' ends.
    sync_every: int | None = default("training.sync_every")
    # Which rows of the sparse layer a sync averages: all, or those some rank touched since the last (ddp/comm.py).
    sync_rows: str = default("training.sync_rows")
    # A model that can (ModelSpec.learns_val): the saved model also learns the
    # validation rows (a twin trained without them gives the validation
    # figures); None: when they are split from the training data and the
    # training rows are few enough (resolve.resolve_counts).
    learn_val: bool | None = default("training.learn_val")
    # A finished run folder whose weights, features and labels this run starts from and
    # keeps learning (training/keep_learning.py); None: fresh weights.
    init_from: str | None = default("training.init_from")

    def validate(self) -> None:
        t = "training."
        _positive(t + "epochs", self.epochs)
        if self.batch_size is not None:   # None: the model's (resolve)
            _positive(t + "batch_size", self.batch_size)
        _positive(t + "lr", self.lr)
        _positive(t + "shuffle_buffer", self.shuffle_buffer, allow_zero=True)
        _positive(t + "in_flight", self.in_flight)
        _choice(t + "optimizer", self.optimizer, OPTIMIZERS)
        if self.sparse_optimizer is not None:
            _choice(t + "sparse_optimizer", self.sparse_optimizer, ("sgd", "adam", "hinge"))
        _positive(t + "sparse_lr", self.sparse_lr)
        _choice(t + "lr_schedule", self.lr_schedule, ("linear", "constant"))
        if self.task is not None:
            _choice(t + "task", self.task, TASKS)
        _choice(t + "class_loss", self.class_loss, CLASS_LOSSES)
        _choice(t + "value_loss", self.value_loss, VALUE_LOSSES)
        _choice(t + "class_weights", self.class_weights, ("none", "balanced"))
        if self.monitor is not None:
            _choice(t + "monitor", self.monitor, MONITORS)
        _choice(t + "device", self.device, ("auto", "cpu", "cuda"))
        _positive(t + "early_stopping", self.early_stopping, allow_zero=True)
        _positive(t + "clip_grad", self.clip_grad)
        _positive(t + "threads", self.threads)
        if isinstance(self.seed, numbers.Integral) and not isinstance(self.seed, bool):
            self.seed = int(self.seed)   # NumPy's integers (np.arange, a parameter grid) are seeds too
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            # numpy's generators take a non-negative seed, and the shuffle packs it into a 64-bit integer
            raise bad(t + "seed", f"{{name}}: a whole number from 0 to 2^63 - 1, got {self.seed!r}", "e.g. {name} 7")
        self.checkpoint_every = str(self.checkpoint_every)
        CheckpointEvery.parse(self.checkpoint_every)
        if self.sync_every is not None and self.sync_every < 1:
            raise bad(t + "sync_every", f"{{name}} must be ≥ 1 step, got {self.sync_every}",
                      "e.g. {name} 20, or drop it to average at each epoch's end")
        _choice(t + "sync_rows", self.sync_rows, SYNC_ROWS)
        if self.ddp is not None and self.ddp < 1:
            raise bad(t + "ddp", f"{{name}}: {self.ddp} ranks", "use {name} 1 (one trainer task on a worker) or more, "
                      "or drop it")
        if len(self.loss_weights) != 2 or min(self.loss_weights) < 0 or max(self.loss_weights) == 0:
            raise bad(t + "loss_weights", f"{{name}}: two non-negative numbers (class, value), not both 0, got "
                      f"{self.loss_weights}", "e.g. {name} 1,0.5")


@dataclass
class ClusterConfig:
    memory_budget: int | None = default("cluster.memory_budget")
    workers: int | None = default("cluster.workers")
    threads: int | None = default("cluster.threads")
    scheduler: str | None = default("cluster.scheduler")
    scheduler_wait: str = default("cluster.scheduler_wait")   # "60s": a lost scheduler's wait (reconnect.py)
    blocksize: int | None = default("cluster.blocksize")
    dashboard: bool = default("cluster.dashboard")
    run_on: str = default("cluster.run_on")
    train_on: str = default("cluster.train_on")   # "auto" until resolved: where the trainer runs (resolve.py)

    def validate(self) -> None:
        _choice("cluster.run_on", self.run_on, ("auto", "process", "cluster"))
        _choice("cluster.train_on", self.train_on, ("auto", "cluster", "client"))
        _positive("cluster.workers", self.workers)
        _positive("cluster.threads", self.threads)
        for name in ("memory_budget", "blocksize"):   # "4GiB", as the estimators and the command line take it
            if isinstance(getattr(self, name), str):
                try:
                    setattr(self, name, parse_size(getattr(self, name), placeholder(f"cluster.{name}")))
                except UserError as e:
                    raise refused(f"cluster.{name}", e) from None
        _positive("cluster.memory_budget", self.memory_budget)
        _positive("cluster.blocksize", self.blocksize)
        self.scheduler_wait = str(self.scheduler_wait)
        self.wait_seconds()

    def wait_seconds(self) -> float:
        """``scheduler_wait`` in seconds."""
        try:
            return parse_duration(self.scheduler_wait)
        except UserError:
            raise bad("cluster.scheduler_wait", f"{{name}}: {self.scheduler_wait!r} is not a duration above zero",
                      "e.g. {name} 60s, 5m, or seconds: 120") from None


# The --cache value that asks for no shard cache.
NO_CACHE = "none"


@dataclass
class OutputConfig:
    out: str = default("output.out")
    name: str | None = default("output.name")
    cache: str | None = default("output.cache")
    plots: bool = default("output.plots")   # the charts (runs/plots.py); the CSV tables are always written
    # False: the run ends once saved and a forked copy draws the charts (the command line's default)
    wait_for_plots: bool = default("output.wait_for_plots")
    track: list[str] = default("output.track")   # experiment trackers (TRACKERS), training/tracking.py
    experiment: str | None = default("output.experiment")   # --track mlflow: None → MLFLOW_EXPERIMENT_NAME, else
                                                            # --out's folder name

    def validate(self) -> None:
        # The same rule new_run_dir applies, checked before any work starts.
        if self.name is not None and (not re.fullmatch(r"[A-Za-z0-9._-]+", self.name) or self.name in (".", "..")):
            raise bad("output.name", f"{{name}}: {self.name!r} is not a plain folder name",
                      "use letters, digits, '-', '_' and '.', without '/' or '..'")
        self.track = parse_trackers(self.track)
        if self.experiment is not None and "mlflow" not in self.track:   # no MLflow run to put in it
            raise bad("output.experiment", f"{{name}} {self.experiment} names the MLflow experiment of "
                      "{output.track} mlflow, and this run tracks " + (", ".join(self.track) or "nothing"),
                      "add {output.track} mlflow, or drop {name}")
        if self.no_cache:
            self.cache = NO_CACHE   # reserved, in any case: a folder of that name is ./none

    @property
    def no_cache(self) -> bool:
        """``--cache none``: every epoch featurised afresh, no shard written (dataflow/fresh.py)."""
        return self.cache is not None and self.cache.strip().lower() == NO_CACHE


# --track's names and the module each needs (an optional extra: lancetnic_flow[track]).
TRACKERS = {"tensorboard": "tensorboard", "mlflow": "mlflow"}


def parse_trackers(names: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``["tensorboard,mlflow"]`` or ``"mlflow"`` → known tracker names, each once; an unknown
    name, or one whose package is missing, is a UserError before any work."""
    import importlib.util

    given = [names] if isinstance(names, str) else list(names or [])
    out: list[str] = []
    for name in (n.strip().lower() for item in given for n in str(item).split(",")):
        if not name or name in out:
            continue
        if name not in TRACKERS:
            raise bad("output.track", f"{{name}}: {name!r} is not one of {', '.join(TRACKERS)}"
                      + close_matches(name, list(TRACKERS)),
                      "e.g. {name} tensorboard, {name} mlflow, or {name} tensorboard,mlflow")
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise bad("output.track", f"{{name}} {name} needs the {TRACKERS[name]} package, which is not installed",
                      "pip install 'lancetnic_flow[track]'")
        out.append(name)
    return out


@dataclass
class TrainConfig:
    data: DataConfig
    features: FeatureConfig = field(default_factory=FeatureConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    # The fields (``section.name``) the caller set itself — typed on the command line, keys of a
    # workflow file, an estimator's parameters off their defaults — whatever their values: a model
    # refuses one it cannot honour even at its default (registry.Refusal). Not saved with a run:
    # its config.json holds resolved values, which resolve again as they are.
    given: frozenset[str] = field(default_factory=frozenset)
    # Whether ``given`` is its maker's account, empty or not: a configuration read from a run's
    # config.json (its values the run resolved), or made from options (config_from_options). A field,
    # so that dataclasses.replace and copies keep it; one built in Python has it False and
    # :func:`with_set_fields` counts its fields off their defaults as given.
    given_accounted: bool = field(default=False, compare=False, repr=False)
    # Marks of keep learning (training/keep_learning.py's mark_continued): ``continued``, a continued
    # run's configuration as merged with the run it continues, which is not merged again; ``continued_by``,
    # who asked for it (an estimator's partial_fit), whom its refusals name. Fields, so that
    # dataclasses.replace and copies keep them; never saved with a run.
    continued: bool = field(default=False, compare=False, repr=False)
    continued_by: str | None = field(default=None, compare=False, repr=False)

    def validate(self) -> "TrainConfig":
        """This configuration checked, with the model's defaults and every
        ``auto`` choice that needs no data taken (:func:`lancetnic_flow.resolve.resolve`):
        a new configuration; this one is left as it was. Built in Python, naming no field
        given, its fields set off their defaults count as given (:func:`with_set_fields`)."""
        from .resolve import resolve

        return resolve(with_set_fields(self))

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        """Plain dict for run folders and logs; secrets in storage options are masked."""
        d = dataclasses.asdict(self)
        d.pop("given", None)
        d.pop("given_accounted", None)
        d.pop("continued", None)
        d.pop("continued_by", None)
        if redact:
            d["data"]["storage_options"] = redact_options(d["data"]["storage_options"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        """A saved configuration (``config.json``). Fields added since it was
        written take the values that reproduce what it meant then (ADDED_FIELDS)."""
        parts = {"data": DataConfig, "features": FeatureConfig, "model": ModelConfig,
                 "training": TrainingConfig, "cluster": ClusterConfig, "output": OutputConfig}
        kw = {}
        for key, value in d.items():
            if key not in parts:
                raise UserError(f"unknown config section {key!r}" + close_matches(key, list(parts)))
            known = {f.name for f in dataclasses.fields(parts[key])}
            for k in value:
                if k not in known:
                    raise UserError(f"{key}.{k}: unknown field" + close_matches(k, sorted(known)))
            kw[key] = parts[key](**{**ADDED_FIELDS.get(key, {}), **value})
        # Its values are a run's resolved ones, not a caller's: none counts as given (with_set_fields).
        return cls(**kw, given_accounted=True)

# Fields added after the first release, with the value a configuration written
# before them meant: a saved run resumes, and its cache entry is found, as it was.
ADDED_FIELDS = {"features": {"idf": False, "analyzer": "word", "ngram_min": 1, "stop_words": None,
                             "normalize": "none", "tokenizer": None},
                "training": {"sparse_optimizer": "adam"}}


def redact_options(options: Any) -> Any:
    """Mask values whose key looks like a credential, recursively."""
    if isinstance(options, dict):
        return {k: ("***" if any(h in str(k).lower() for h in SECRET_HINTS) and not isinstance(v, dict)
                    else redact_options(v)) for k, v in options.items()}
    if isinstance(options, list):
        return [redact_options(v) for v in options]
    return options


def _bad_ngrams(ngrams: Any) -> UserError:
    """``--ngrams N`` out of its range, named as typed: checked as the pair (1, N) it was
    refused as ``--ngram-range 1,0``, an option and a value its user never gave."""
    def told(style: str) -> tuple[str, str]:
        typed, pair = {"cli": ("--ngrams {}", "--ngram-range MIN,MAX"), "workflow": ("ngrams: {}", "ngram_range: MIN,MAX"),
                       "python": ("ngrams={}", "ngram_range=(MIN, MAX)")}[style]
        return (f"{typed.format(ngrams)}: need a whole number from 1 to {MAX_NGRAM} (the longest n-gram, in words)",
                f"e.g. {typed.format(2)} (words and pairs), or {pair} for n-grams from MIN words")

    return UserError(*told("python"), field="features.ngrams", cli=told("cli"), workflow=told("workflow"))


def ngram_options(ngram_range: Any, ngrams: int | None) -> dict[str, int]:
    """--ngram-range MIN,MAX (scikit-learn's ``ngram_range``, also a pair) or
    --ngrams N (short for 1,N) → FeatureConfig's ``ngram_min`` and ``ngrams``; neither: {}."""
    if ngram_range is None:
        if ngrams is not None and not (isinstance(ngrams, int) and 1 <= ngrams <= MAX_NGRAM):
            raise _bad_ngrams(ngrams)
        return {} if ngrams is None else {"ngrams": ngrams}
    if ngrams is not None:
        raise bad("features.ngrams", "{features.ngrams} N is short for {features.ngram_min} 1,N: give one of them")
    try:
        low, high = parse_ngram_range(ngram_range, placeholder("features.ngram_min"))
    except UserError as e:
        raise refused("features.ngram_min", e) from None
    return {"ngram_min": low, "ngrams": high}


SECTION_CLASSES = {"data": DataConfig, "features": FeatureConfig, "model": ModelConfig,
                   "training": TrainingConfig, "cluster": ClusterConfig, "output": OutputConfig}


def config_from_options(values: dict[str, Any], given: Iterable[str] = (), **sections: Any) -> TrainConfig:
    """Parsed option values by their destination (``max_features``, ``data``
    for the training data; what argparse, a workflow file or an estimator
    gives) → a :class:`TrainConfig`, not yet validated. A value of None takes
    the declared default; each declared ``parse`` turns a value as written
    (``"8GiB"``, ``"1,0.5"``) into the field's, its errors naming the field.
    ``sections``: whole sections given as they are (an estimator's ``data``);
    ``given``: the destinations the caller set itself (``TrainConfig.given``)."""
    fields: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    fields["features"].update(ngram_options(values.get("ngram_range"), values.get("ngrams")))
    for o in BY_FIELD.values():
        value = values.get(o.dest)
        if o.field is None or value is None or o.field in ("features.ngrams", "features.ngram_min"):
            continue
        refuse_blank(o, value)
        if o.parse is not None:
            try:
                value = o.parse(value, placeholder(o.field))
            except UserError as e:
                raise refused(o.field, e) from None
        section, name = o.field.split(".")
        fields[section][name] = value
    fields["data"].setdefault("train", [])
    # ``given`` says what the caller set, all of it (an estimator at its defaults: nothing), not the values
    # its maker filled in itself (an estimator's out, run_on): with_set_fields leaves it so.
    return TrainConfig(**{s: sections[s] if s in sections else SECTION_CLASSES[s](**kw) for s, kw in fields.items()},
                       given=given_fields(given), given_accounted=True)


def refuse_blank(o: Any, value: Any) -> None:
    """A text option given an empty value (``--val ""``, ``init_from: ''``, an unset shell
    variable) is refused: as a path it read or wrote the current folder, elsewhere it
    counted as not given, so the option did nothing while the run said it was set."""
    if o.parse is parse_columns and isinstance(value, str) and not parse_columns(value, o.field):
        # --numeric "" (or ","), an unset shell variable: no column, where the run said the option was set
        raise bad(o.field, f"{{name}} {value!r}: an empty value, naming no column",
                  "give it COLUMN or COL1,COL2, or drop {name}")
    if o.type is not None or o.parse in (parse_columns, parse_storage_options) or o.kind in ("flag", "bool"):
        return
    values = value if isinstance(value, (list, tuple)) else [value]
    blank = next((v for v in values if isinstance(v, str) and not v.strip()), None)
    if blank is not None:
        path = o.field in _PATHS
        raise bad(o.field, f"{{name}} {blank!r}: an empty value" + (", which would name the current folder"
                                                                     if path else ""),
                  "give it a value" + (" (. for the current folder)" if path else "") + ", or drop {name}")


# Fields that name a place to read or write: empty, they named the current folder.
_PATHS = ("data.train", "data.val", "output.out", "output.cache", "training.init_from", "features.stop_words")


def label_sep_given(cfg: TrainConfig) -> bool:
    """Whether ``cfg``'s label separator is its caller's own, not the one a continued run
    takes from the run it continues (``--init-from`` without ``--label-sep``): that one
    applies where it splits a label string, unsaid, and is never to be dropped, as the
    caller never gave it."""
    return cfg.data.label_sep is not None and (not cfg.training.init_from or "data.label_sep" in cfg.given)


def with_set_fields(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` as its caller gave it: a configuration built in Python (``TrainConfig(...)``)
    names no field given, so its ``given`` becomes the fields set off their defaults, as an
    estimator's parameters are; the checks of an option given where it does nothing
    (storage options with local paths alone, ``scheduler_wait`` with no scheduler) then
    apply to it as to the command line. One that names its given fields, or whose given is
    accounted for even empty (read from a run's config.json, whose values the run resolved;
    made by :func:`config_from_options`), is returned as it is."""
    if cfg.given or cfg.given_accounted:
        return cfg
    own = copy.copy(cfg)
    own.given = frozenset(f"{name}.{f.name}" for name in SECTIONS for f in dataclasses.fields(getattr(cfg, name))
                          if _off_default(f, getattr(getattr(cfg, name), f.name)))
    own.given_accounted = True
    return own


def _off_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return value != f.default
    if f.default_factory is not dataclasses.MISSING:
        return value != f.default_factory()
    return bool(value)   # a required field (the training data): given where it holds something


def given_fields(dests: Iterable[str]) -> frozenset[str]:
    """The configuration fields of option destinations a caller set (``--ngram-range`` sets both
    of its fields)."""
    fields: set[str] = set()
    for dest in dests:
        if dest in ("ngram_range", "ngrams"):
            fields |= {"features.ngram_min", "features.ngrams"}
        elif dest in BY_DEST and BY_DEST[dest].field:
            fields.add(BY_DEST[dest].field)
    return frozenset(fields)


__all__ = ["TrainConfig", "DataConfig", "FeatureConfig", "ModelConfig", "TrainingConfig",
           "ClusterConfig", "OutputConfig", "config_from_options", "given_fields", "label_sep_given", "with_set_fields",
           "parse_storage_options", "parse_df", "parse_size", "redact_options"]
