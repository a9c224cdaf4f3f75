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
from .formats import FORMATS, text_encoding
from .scores import MONITORS
from .sizes import parse_size

FEATURE_MODES = ("tfidf", "hashing", "ids")
ANALYZERS = ("word", "char", "char_wb")
NORMALIZATIONS = ("none", "nfkc", "nfc", "nfkd", "nfd")
MAX_NGRAM = 32   # a sanity bound: the kernels' working arrays grow with the number of n-gram lengths
TASKS = ("classify", "regress", "multitask", "multilabel")
OPTIMIZERS = ("adam", "sgd", "radam", "rmsprop", "adadelta")
CLASS_LOSSES = ("cross_entropy", "bce", "hinge")
VALUE_LOSSES = ("mse", "l1", "smooth_l1")
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
        _choice("format", self.format, ("auto", *FORMATS))
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
    name: str = "auto"               # auto: the first of registry.AUTO_CHOICES that fits (resolve.choose_model)
    hidden: int | None = None        # None: the model's (registry.ModelSpec.hidden)
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
    sparse_optimizer: str | None = None   # the sparse input rows': None → the model's (registry.ModelSpec)
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
    # (ModelSpec.early_stopping).
    early_stopping: int | None = None
    monitor: str | None = None       # None: resolve.DEFAULT_MONITOR of the task, else val_loss
    clip_grad: float | None = None
    device: str = "auto"
    threads: int | None = None
    checkpoint_every: str = "10m"    # batches ("500"), a duration ("90s", "10m", "1h") or "off"
    ddp: int | None = None           # data-parallel ranks on Dask workers (ddp.py)
    # A model that can (ModelSpec.learns_val): the saved model also learns the
    # validation rows (a twin trained without them gives the validation
    # figures); None: when they are split from the training data and the
    # training rows are few enough (resolve.resolve_counts).
    learn_val: bool | None = None

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
        """This configuration checked, with the model's defaults and every
        ``auto`` choice that needs no data taken (:func:`lancetnic_flow.resolve.resolve`):
        a new configuration; this one is left as it was."""
        from .resolve import resolve

        return resolve(self)

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
