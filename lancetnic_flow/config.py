"""Typed configuration, validated at the edge.

One :class:`TrainConfig` describes a run: data, features, model, training,
cluster and output. The CLI and workflow files build it; everything below
reads it. Validation raises :class:`UserError` naming the field, the bad
value and what would work.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import UserError, close_matches
from .formats import format_names, text_encoding
from .scores import MONITORS, monitor_fits
from .sizes import parse_size

FEATURE_MODES = ("tfidf", "hashing", "ids")
ANALYZERS = ("word", "char", "char_wb")
NORMALIZATIONS = ("none", "nfkc", "nfc", "nfkd", "nfd")
MAX_NGRAM = 32   # a sanity bound: the kernels' working arrays grow with the number of n-gram lengths
TASKS = ("classify", "regress", "multitask", "multilabel")
OPTIMIZERS = ("adam", "sgd", "radam", "rmsprop", "adadelta")
CLASS_LOSSES = ("cross_entropy", "bce", "hinge")
VALUE_LOSSES = ("mse", "l1", "smooth_l1")
# --monitor's default per task (else val_loss). Multilabel keeps val_loss:
# micro-F1 at a 0.5 threshold stays 0 while every probability is still below
# it (a slowly learning model's first epochs), which early stopping would read
# as no progress; the loss moves from the first step.
DEFAULT_MONITOR = {"classify": "val_accuracy"}
SECRET_HINTS = ("key", "secret", "token", "password", "credential", "session")


def _choice(name: str, value: Any, options: tuple) -> None:
    if value not in options:
        raise UserError(f"{name}: {value!r} is not one of {', '.join(map(str, options))}"
                        + close_matches(str(value), [str(o) for o in options]))


def _positive(name: str, value: float | int | None, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        raise UserError(f"{name}: must be {'≥ 0' if allow_zero else '> 0'}, got {value!r}")


@dataclass
class DataConfig:
    train: list[str]
    val: list[str] = field(default_factory=list)
    val_fraction: float = 0.1
    format: str = "auto"
    text: list[str] = field(default_factory=lambda: ["text"])
    label: str | None = "label"
    target: str | None = None
    numeric: list[str] = field(default_factory=list)
    storage_options: dict[str, Any] = field(default_factory=dict)
    label_sep: str | None = None     # --task multilabel: labels in one string, e.g. "a|b" with "|"
    encoding: str | None = None      # the files' text encoding (None: UTF-8); predict and evaluate default to it

    def validate(self) -> None:
        if not self.train:
            raise UserError("no training data given", "pass one or more URLs or globs, e.g. data/*.csv")
        _choice("format", self.format, ("auto", *format_names()))
        if not self.val and not (0.0 < self.val_fraction < 1.0):
            if self.val_fraction != 0.0:
                raise UserError(f"val_fraction: must be in [0, 1), got {self.val_fraction}",
                                "e.g. --val-fraction 0.1, or --val URL for a separate validation set")
        if not self.text:
            raise UserError("at least one text column is needed", "pass --text COLUMN")
        text_encoding(self.encoding)   # an unknown codec, or one not readable in byte ranges: exit 2 now


@dataclass
class FeatureConfig:
    mode: str | None = None          # None: the model's own (registry.ModelSpec.features[0])
    ngrams: int = 2                  # the longest n-gram: 1: words; 2: words and word pairs (--ngram-range's MAX)
    max_features: int | None = None  # a fitted vocabulary's size cap (None: 100,000)
    min_df: float = 1
    max_df: float = 1.0
    sublinear_tf: bool = True        # 1 + log(tf)
    lowercase: bool = True
    buckets: int = 2**19             # hashed columns (--features hashing)
    max_len: int = 256
    idf: bool = True                 # hashing: weight buckets by inverse document frequency
    analyzer: str = "word"           # word | char | char_wb: scikit-learn's analyzers
    ngram_min: int = 1               # the shortest n-gram (--ngram-range's MIN)
    stop_words: str | list[str] | None = None   # "english", or the words of --stop-words FILE (read once)
    normalize: str = "none"          # Unicode normalisation before lower-casing: none | nfkc | nfc | nfkd | nfd
    tokenizer: str | None = None     # a registered tokenizer ("module:name" when importable)

    def validate(self) -> None:
        if self.mode is not None:
            _choice("features", self.mode, FEATURE_MODES)
        _positive("max_features", self.max_features)
        _positive("min_df", self.min_df)
        _positive("buckets", self.buckets)
        _positive("max_len", self.max_len)
        if isinstance(self.max_df, float) and not 0 < self.max_df <= 1.0:
            raise UserError(f"max_df: a fraction must be in (0, 1], got {self.max_df}")
        self._check_text()

    def _check_text(self) -> None:
        """The tokenisation options, each error naming its flag."""
        _choice("--analyzer", self.analyzer, ANALYZERS)
        _choice("--normalize", self.normalize, NORMALIZATIONS)
        if not (isinstance(self.ngrams, int) and isinstance(self.ngram_min, int) and 1 <= self.ngram_min <= self.ngrams):
            raise UserError(f"--ngram-range {self.ngram_min},{self.ngrams}: need 1 ≤ MIN ≤ MAX",
                            "e.g. --ngram-range 1,2 (words and pairs) or 2,4 with --analyzer char_wb")
        if self.ngrams > MAX_NGRAM:
            raise UserError(f"--ngram-range: n-grams of up to {MAX_NGRAM}, got {self.ngrams}", "e.g. 1,3 or 2,5")
        word = self.analyzer == "word"
        if self.stop_words is not None and not word:
            raise UserError(f"--stop-words applies to words, not to --analyzer {self.analyzer}",
                            "drop --stop-words, or use --analyzer word (scikit-learn ignores them there too)")
        if self.tokenizer is not None and not word:
            raise UserError(f"--tokenizer splits words; --analyzer {self.analyzer} reads characters",
                            "drop one of them")
        self.read_stop_words({})
        if self.tokenizer is not None:
            from .tokenizers import canonical

            self.tokenizer = canonical(self.tokenizer)   # registered here, recorded with its module

    def read_stop_words(self, storage_options: dict) -> None:
        """--stop-words FILE (one word a line, any fsspec URL) → its words, read
        once now: the run stores them and never needs the file again."""
        if not isinstance(self.stop_words, str) or self.stop_words == "english":
            return
        from .storage import read_bytes

        try:
            text = read_bytes(self.stop_words, storage_options).decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise UserError(f"--stop-words {self.stop_words}: cannot read it ({e})",
                            "give 'english' or a UTF-8 file of one word per line") from None
        self.stop_words = sorted({w.strip() for w in text.splitlines() if w.strip()})


@dataclass
class ModelConfig:
    name: str = "auto"               # auto: LinearSVM for one label per row, else ScalpelMC (TrainConfig.validate)
    hidden: int | None = None        # None: 64 for Scalpel* and FastTextBag, 128 for Lancet*
    layers: int = 1
    dropout: float = 0.2
    embed: int = 128                 # token embedding width of sequence models

    def validate(self) -> None:
        from .registry import AUTO, MODELS

        _choice("model", self.name, (AUTO, *MODELS))
        _positive("embed", self.embed)
        _positive("hidden", self.hidden)
        _positive("layers", self.layers, allow_zero=True)
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"dropout: must be in [0, 1), got {self.dropout}")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)\s*$")


def parse_duration(text: str | float | None, name: str = "time_budget") -> float:
    """``"90s"``, ``"10m"``, ``"1h"`` (``--checkpoint-every``'s durations), or plain seconds → seconds (> 0)."""
    s = str(text).strip().lower() if text is not None else ""
    m = _DURATION.match(s) or re.match(r"^\s*(\d+(?:\.\d+)?)()\s*$", s)
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "": 1}[m.group(2)] if m else 0.0
    if seconds <= 0:
        raise UserError(f"{name}: {text!r} is not a duration above zero",
                        f"e.g. --{name.replace('_', '-')} 10m, 90s, 1h (or seconds: 600)")
    return seconds


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
            raise UserError(f"checkpoint_every: {text!r} is neither a number of batches nor a duration",
                            "e.g. --checkpoint-every 500 (batches), 10m, 90s, 1h, or off")
        return cls(seconds=float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)])

    def due(self, batches_since: int, seconds_since: float) -> bool:
        return bool((self.batches and batches_since >= self.batches) or
                    (self.seconds and seconds_since >= self.seconds))


@dataclass
class TrainingConfig:
    epochs: int = 10                 # at most: early stopping usually ends the run sooner
    batch_size: int = 512
    lr: float = 1e-2
    lr_schedule: str = "linear"
    optimizer: str = "adam"
    sparse_optimizer: str | None = None   # the sparse input rows': None → the model's (registry.SPARSE_STEP)
    sparse_lr: float | None = None        # per example for sgd; None → the model's
    seed: int = 0
    shuffle_buffer: int = 20_000
    in_flight: int | None = None
    task: str | None = None          # None: the model's own (ScalpelReg regresses, ScalpelMTSK does both)
    class_loss: str = "cross_entropy"
    value_loss: str = "mse"
    loss_weights: tuple[float, float] = (1.0, 1.0)
    class_weights: str = "none"      # or "balanced"
    # Patience in epochs; 0: train every epoch; None: the model's default
    # (2; LinearSVM 0, keeping the last epoch's weights: see keeps_last_epoch).
    early_stopping: int | None = None
    monitor: str | None = None       # None: DEFAULT_MONITOR of the task, else val_loss
    clip_grad: float | None = None
    device: str = "auto"
    threads: int | None = None
    checkpoint_every: str = "10m"    # batches ("500"), a duration ("90s", "10m", "1h") or "off"
    ddp: int | None = None           # data-parallel ranks on Dask workers (ddp.py)
    # LinearSVM: the saved model also learns the validation rows (a twin trained
    # without them gives the validation figures); None: when they are split from
    # the training data and the training rows are at most LEARN_VAL_MAX_ROWS.
    # Resolved by TrainConfig.validate and build_model.
    learn_val: bool | None = None

    def keeps_last_epoch(self) -> bool:
        """LinearSVM without early stopping keeps its last epoch's weights, not
        the best epoch's: its rate has decayed to 5 % by then, and validation
        accuracy over the last epochs moves by noise, which picked earlier,
        worse models (docs/models.md). Every other model keeps the best epoch."""
        return self.sparse_optimizer == "hinge" and not self.early_stopping

    def validate(self) -> None:
        _positive("epochs", self.epochs)
        _positive("batch_size", self.batch_size)
        _positive("lr", self.lr)
        _positive("shuffle_buffer", self.shuffle_buffer, allow_zero=True)
        _positive("in_flight", self.in_flight)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.sparse_optimizer is not None:
            _choice("sparse_optimizer", self.sparse_optimizer, ("sgd", "adam", "hinge"))
        _positive("sparse_lr", self.sparse_lr)
        _choice("lr_schedule", self.lr_schedule, ("linear", "constant"))
        if self.task is not None:
            _choice("task", self.task, TASKS)
        _choice("class_loss", self.class_loss, CLASS_LOSSES)
        _choice("value_loss", self.value_loss, VALUE_LOSSES)
        _choice("class_weights", self.class_weights, ("none", "balanced"))
        if self.monitor is not None:
            _choice("monitor", self.monitor, MONITORS)
        _choice("device", self.device, ("auto", "cpu", "cuda"))
        _positive("early_stopping", self.early_stopping, allow_zero=True)
        _positive("clip_grad", self.clip_grad)
        _positive("threads", self.threads)
        self.checkpoint_every = str(self.checkpoint_every)
        CheckpointEvery.parse(self.checkpoint_every)
        if self.ddp is not None and self.ddp < 2:
            raise UserError(f"ddp: {self.ddp} rank(s) is not data-parallel training", "use --ddp 2 or more, or drop it")
        if len(self.loss_weights) != 2 or min(self.loss_weights) < 0:
            raise UserError(f"loss_weights: two non-negative numbers (class, value), got {self.loss_weights}",
                            "e.g. --loss-weights 1,0.5")


@dataclass
class ClusterConfig:
    memory_budget: int | None = None
    workers: int | None = None
    threads: int | None = None
    scheduler: str | None = None
    blocksize: int | None = None
    dashboard: bool = False

    def validate(self) -> None:
        _positive("workers", self.workers)
        _positive("threads", self.threads)
        _positive("memory_budget", self.memory_budget)
        _positive("blocksize", self.blocksize)


@dataclass
class OutputConfig:
    out: str = "runs"
    name: str | None = None
    cache: str | None = None
    track: list[str] = field(default_factory=list)   # experiment trackers (TRACKERS), training/tracking.py
    experiment: str | None = None    # --track mlflow: None → MLFLOW_EXPERIMENT_NAME, else --out's folder name

    def validate(self) -> None:
        # The same rule new_run_dir applies, checked before any work starts.
        if self.name is not None and (not re.fullmatch(r"[A-Za-z0-9._-]+", self.name) or self.name in (".", "..")):
            raise UserError(f"name: {self.name!r} is not a plain folder name",
                            "use letters, digits, '-', '_' and '.', without '/' or '..'")
        self.track = parse_trackers(self.track)


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
            raise UserError(f"track: {name!r} is not one of {', '.join(TRACKERS)}"
                            + close_matches(name, list(TRACKERS)),
                            "e.g. --track tensorboard, --track mlflow, or --track tensorboard,mlflow")
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise UserError(f"--track {name} needs the {TRACKERS[name]} package, which is not installed",
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

    def validate(self) -> "TrainConfig":
        """Check every field and resolve the model's defaults (task, features)."""
        from .registry import MODELS

        self.features.read_stop_words(self.data.storage_options)   # the data's credentials open the file
        for part in (self.data, self.features, self.model, self.training, self.cluster, self.output):
            part.validate()
        from .registry import SPARSE_STEP, VALUE_SPARSE_LR

        self._resolve_auto_model()
        spec = MODELS[self.model.name]
        t = self.training
        # --model auto with a target: a value is asked for (the MLP's own task, classify, would leave it unread).
        auto_value = getattr(self, "_auto_from", None) is not None and self.data.target
        t.task = t.task or ("regress" if auto_value else spec.task)
        self.model.hidden = self.model.hidden or (64 if spec.net == "ScalpelNet" else 128)
        if t.early_stopping is None:
            t.early_stopping = 0 if spec.fixed.get("margin") else 2
        if spec.fixed.get("margin"):
            self._linear_svm_options()
        elif t.learn_val:
            raise UserError(f"--learn-val: only LinearSVM learns the validation rows (through a twin that never sees "
                            f"them), not {self.model.name}",
                            "drop --learn-val, or pass --model LinearSVM (or --model auto)")
        else:
            t.learn_val = False
        if t.sparse_optimizer == "hinge" and not spec.fixed.get("margin"):
            raise UserError(f"--sparse-optimizer hinge is LinearSVM's own step, not {self.model.name}'s",
                            "pass --model LinearSVM, or --sparse-optimizer sgd|adam")
        elif t.sparse_optimizer is None:
            t.sparse_optimizer, lr = SPARSE_STEP.get(spec.net, ("adam", None))   # a model of your own: lazy Adam
        else:
            lr = SPARSE_STEP["ScalpelNet"][1] if t.sparse_optimizer == "sgd" else None
        if t.sparse_lr is None:
            t.sparse_lr = VALUE_SPARSE_LR if t.sparse_optimizer == "sgd" and t.task in ("regress", "multitask") else lr
        if t.task not in spec.every_task:
            raise UserError(f"model {self.model.name} cannot {t.task}",
                            f"it does: {', '.join(spec.every_task)}; models for {t.task}: "
                            + ", ".join(n for n, m in MODELS.items() if t.task in m.every_task))
        f = self.features
        if f.mode is None:
            f.mode = spec.features[0]
            if f.mode == "hashing" and f.max_features is not None and "tfidf" in spec.features:
                f.mode = "tfidf"   # a vocabulary cap asks for a fitted vocabulary
            if spec.ngrams:
                f.ngrams = max(f.ngrams, spec.ngrams)
        if f.mode == "ids" and (f.ngram_min > 1 or f.analyzer != "word"):
            raise UserError(f"--features ids reads word tokens in order, not {f.analyzer} n-grams "
                            f"{f.ngram_min},{f.ngrams}", "drop --ngram-range/--analyzer, or pick a bag model")
        if f.mode == "ids":
            f.ngrams = 1   # token ids in order: no word pairs
        if f.analyzer != "word" and f.mode != "hashing":
            raise UserError(f"--analyzer {f.analyzer}: character n-grams are hashed, not a fitted vocabulary "
                            f"(--features {f.mode})", "use --features hashing (ScalpelMC's default)")
        if f.mode == "hashing" and f.max_features is not None:
            raise UserError("--max-features caps a fitted vocabulary; hashed features have --buckets columns",
                            "drop --max-features, or use --features tfidf")
        if f.mode not in spec.features:
            raise UserError(f"model {self.model.name} reads --features {'/'.join(spec.features)}, not {f.mode}",
                            f"drop --features, or pick a model for {f.mode}: "
                            + ", ".join(n for n, m in MODELS.items() if f.mode in m.features))
        self._check_multilabel()
        if t.task in ("classify", "multitask", "multilabel") and not self.data.label:
            raise UserError(f"--task {t.task} needs a label column", "pass --label COLUMN")
        if t.task in ("regress", "multitask") and not self.data.target:
            raise UserError(f"--task {t.task} needs a numeric target column", "pass --target COLUMN")
        if t.task == "regress":
            self.data.label = None
        t.monitor = t.monitor or DEFAULT_MONITOR.get(t.task, "val_loss")
        if not monitor_fits(t.monitor, t.task):
            raise UserError(f"--monitor {t.monitor} does not fit --task {t.task}",
                            "use val_loss, or a metric of the task")
        return self

    def _resolve_auto_model(self) -> None:
        """``--model auto`` (the default): LinearSVM for one label per row over
        sparse rows when no option asks for what only the MLP has (numeric
        columns, --ddp, a GPU, class weights, another loss or optimiser, hidden
        layers); ScalpelMC otherwise. ``build_model`` may still turn to
        ScalpelMC once the classes are counted (:meth:`without_linear_model`)."""
        from .registry import AUTO

        m, t, d = self.model, self.training, self.data
        if m.name != AUTO:
            return
        self._auto_from = (dataclasses.replace(m), dataclasses.replace(t))
        mlp = ModelConfig()
        plain = (t.task in (None, "classify") and bool(d.label) and not d.target and not d.numeric
                 and not t.ddp and self.features.mode in (None, "hashing", "tfidf") and d.label_sep is None
                 and t.class_loss == "cross_entropy" and t.class_weights == "none" and t.device in ("auto", "cpu")
                 and t.sparse_optimizer is None and (m.hidden, m.layers, m.dropout) == (mlp.hidden, mlp.layers,
                                                                                        mlp.dropout))
        m.name = "LinearSVM" if plain else "ScalpelMC"

    def chose_linear_model(self) -> bool:
        """Whether ``--model auto`` chose LinearSVM (so it may turn to ScalpelMC)."""
        return getattr(self, "_auto_from", None) is not None and self.model.name == "LinearSVM"

    def without_linear_model(self) -> None:
        """``--model auto`` again, choosing ScalpelMC (LinearSVM's terms × classes
        weight does not fit): the options as given, validated anew, in place."""
        m, t = self._auto_from
        for part, saved in ((self.model, m), (self.training, t)):
            for f in dataclasses.fields(part):
                setattr(part, f.name, getattr(saved, f.name))
        self.model.name = "ScalpelMC"
        self.training.learn_val = None   # asked of the linear model auto chose, not of the MLP
        self._auto_from = None
        self.validate()

    def _linear_svm_options(self) -> None:
        """LinearSVM trains one example at a time on the CPU with its own hinge
        step: options that cannot apply are refused, not ignored."""
        from .registry import LINEAR_LR

        t, name = self.training, self.model.name
        refuse = [("--ddp", t.ddp, "ranks exchange gradients of batches"),
                  ("--numeric", self.data.numeric, "its step reads the sparse rows only"),
                  ("--class-weights", t.class_weights != "none", "its hinge step weighs every row alike"),
                  ("--device", t.device not in ("auto", "cpu"), "its step runs on the CPU"),
                  ("--class-loss", t.class_loss not in ("cross_entropy", "hinge"), "it trains the hinge loss"),
                  ("--sparse-optimizer", t.sparse_optimizer not in (None, "hinge"), "it has its own step")]
        for flag, bad, why in refuse:
            if bad:
                raise UserError(f"{flag} does not apply to {name}: {why}",
                                f"drop {flag}, or pass --model ScalpelMC")
        t.class_loss, t.sparse_optimizer, t.device = "hinge", "hinge", "cpu"
        if t.learn_val is None and (self.data.val or not self.data.val_fraction):
            t.learn_val = False   # a validation file stays held out; None is decided by the rows (build_model)
        t.sparse_lr = t.sparse_lr or LINEAR_LR
        self.model.layers = 0

    def _check_multilabel(self) -> None:
        """--label-sep belongs to --task multilabel; multilabel has one loss (BCE per label)."""
        t = self.training
        if self.data.label_sep is not None and t.task != "multilabel":
            raise UserError(f"--label-sep splits a row's labels for --task multilabel, not --task {t.task}",
                            "add --task multilabel, or drop --label-sep")
        if self.data.label_sep == "":
            raise UserError("--label-sep: an empty separator", 'e.g. --label-sep "|" or --label-sep ","')
        if t.task == "multilabel" and t.class_loss != "cross_entropy":
            raise UserError(f"--class-loss {t.class_loss}: --task multilabel always trains a binary cross "
                            "entropy per label", "drop --class-loss")

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        """Plain dict for run folders and logs; secrets in storage options are masked."""
        d = dataclasses.asdict(self)
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
        return cls(**kw)


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


def parse_storage_options(pairs: list[str]) -> dict[str, Any]:
    """``["anon=true", "client_kwargs.endpoint_url=http://..."]`` → nested dict.

    Values are read as YAML scalars (true, 3, 1.5); dotted keys nest."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--storage-option {pair!r}: expected KEY=VALUE",
                            "e.g. --storage-option anon=true or --storage-option client_kwargs.endpoint_url=http://127.0.0.1:9000")
        key, value = pair.split("=", 1)
        try:
            parsed = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            parsed = value
        if not isinstance(parsed, (str, int, float, bool, type(None))):
            parsed = value
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = parsed
    return out


def ngram_options(ngram_range: str | None, ngrams: int | None) -> dict[str, int]:
    """--ngram-range MIN,MAX (scikit-learn's ``ngram_range``) or --ngrams N
    (short for 1,N) → FeatureConfig's ``ngram_min`` and ``ngrams``; neither: {}."""
    if ngram_range is None:
        return {} if ngrams is None else {"ngrams": ngrams}
    if ngrams is not None:
        raise UserError("--ngrams N is short for --ngram-range 1,N: give one of them")
    try:
        low, high = (int(x) for x in str(ngram_range).split(","))
    except ValueError:
        raise UserError(f"--ngram-range {ngram_range!r}: expected MIN,MAX", "e.g. --ngram-range 1,3") from None
    return {"ngram_min": low, "ngrams": high}


def parse_df(text: str, name: str) -> float | int:
    """min_df/max_df: an integer is a document count, a decimal a fraction."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise UserError(f"{name}: {text!r} is neither a count nor a fraction", f"e.g. {name} 2 or {name} 0.95") from None


__all__ = ["TrainConfig", "DataConfig", "FeatureConfig", "ModelConfig", "TrainingConfig",
           "ClusterConfig", "OutputConfig", "parse_storage_options", "parse_size", "redact_options"]
