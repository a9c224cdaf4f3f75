"""Every training option, declared once.

An :class:`Option` holds an option's configuration field (``training.lr``),
its command-line flag, help, type and default. Everything else is derived
from :data:`OPTIONS`:

* the dataclass defaults of :mod:`lancetnic_flow.config` (``lr: float = default("training.lr")``);
* the ``train`` and ``tune`` parsers, and the data and cluster options
  ``predict`` and ``evaluate`` share (:mod:`lancetnic_flow.cli.parser`);
* the mapping of parsed values to a :class:`~lancetnic_flow.config.TrainConfig`
  (:func:`lancetnic_flow.config.config_from_options`), which the command
  line, workflow files and the estimators share;
* workflow keys and their ``key=value`` overrides, checked against the
  declared types (:func:`typed_value`, :func:`text_value`);
* the estimators' parameter defaults (:func:`api_default`).

A validation error names its field (:func:`bad`): the command line shows
it as the flag (``--lr``), the Python API as the parameter (``lr``).

This module is core: no torch, no Dask, nothing above it.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import shlex
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from .errors import UserError, close_matches, name_options_with
from .formats import format_names

SECTIONS = ("data", "features", "model", "training", "cluster", "output")
REQUIRED = object()     # a field without a default (data.train)
SAME = object()         # the parser's (or the estimator's) default is the declared one


@dataclass(frozen=True)
class Option:
    """One option. ``field``: its place in TrainConfig (None: command-line only);
    ``type``: how a command-line word becomes a value (None: kept as text);
    ``parse``: that value → the field's value, ``parse(value, name)``, where
    ``name`` is a placeholder its errors use (``{training.lr}``);
    ``kind``: value | flag (store_true) | bool (--x/--no-x) | append
    (repeatable) | list (1+ values) | positional;
    ``api``: the estimators' parameter name; ``commands``: where the
    command line offers it."""

    flag: str | None
    help: str
    metavar: str | None = None
    type: Callable | None = None
    default: Any = None
    kind: str = "value"
    required: bool = False
    field: str | None = None
    parse: Callable | None = None
    api: str | None = None
    key: str | None = None            # the argparse destination when not the flag's (a positional's)
    name: str | None = None           # how the command line names a field without a flag of its own
    group: str = ""
    cli_default: Any = SAME
    api_default: Any = SAME
    commands: tuple[str, ...] = ("train", "tune")

    @property
    def dest(self) -> str:
        """The argparse destination and workflow key: ``--max-features`` → ``max_features``."""
        if self.key:
            return self.key
        if self.flag:
            return self.flag.lstrip("-").replace("-", "_")
        return self.field.split(".")[1]

    @property
    def parser_default(self) -> Any:
        """The parsed value when the option is not given. Repeatable, list and
        --x/--no-x options keep None (argparse appends to a default list; a
        bool's help would show it); a value option starts at the declared default."""
        if self.cli_default is not SAME:
            return self.cli_default
        if self.field is None:      # a command's own option (predict's --top-k): its default as given
            return self.default
        return self.default if self.kind == "value" and self.default is not REQUIRED else None

    @property
    def help_text(self) -> str:
        """The help, its ``{default}`` filled from the declaration."""
        return self.help.replace("{default}", str(self.default))

    @property
    def estimator_default(self) -> Any:
        return self.default if self.api_default is SAME else self.api_default


# ---------------------------------------------------------------- values as written → values


def parse_df(text: Any, name: str) -> float | int:
    """min_df/max_df: an integer is a document count, a decimal a fraction."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise UserError(f"{name}: {text!r} is neither a count nor a fraction",
                            f"e.g. {name} 2 or {name} 0.95") from None


def parse_pair(text: Any, name: str) -> tuple[float, float]:
    """``"1,0.5"`` (or ``[1, 0.5]``) → ``(1.0, 0.5)``."""
    try:
        a, b = (float(x) for x in (text.split(",") if isinstance(text, str) else text))
    except (ValueError, TypeError):
        raise UserError(f"{name} {text!r}: expected two numbers", f"e.g. {name} 1,0.5") from None
    return a, b


def parse_columns(text: Any, name: str) -> list[str]:
    """``"a,b"`` (or ``["a", "b"]``) → ``["a", "b"]``."""
    items = text.split(",") if isinstance(text, str) else [str(x) for x in text]
    return [c.strip() for c in items if c.strip()]


def parse_storage_options(pairs: Any, name: str = "--storage-option") -> dict[str, Any]:
    """``["anon=true", "client_kwargs.endpoint_url=http://..."]`` → nested dict
    (a dict, from a workflow file, is kept).

    Values are read as YAML scalars (true, 3, 1.5); dotted keys nest."""
    import yaml

    if isinstance(pairs, dict):
        return pairs
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"{name} {pair!r}: expected KEY=VALUE",
                            f"e.g. {name} anon=true or {name} client_kwargs.endpoint_url=http://127.0.0.1:9000")
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


def parse_ngram_range(text: Any, name: str) -> tuple[int, int]:
    """``"1,3"`` (or ``(1, 3)``) → ``(1, 3)``."""
    try:
        low, high = (int(x) for x in (text.split(",") if isinstance(text, str) else text))
    except (ValueError, TypeError):
        raise UserError(f"{name} {text!r}: expected MIN,MAX", f"e.g. {name} 1,3") from None
    return low, high


def _size(text: Any, name: str) -> int:
    from .sizes import parse_size   # Dask's parser: imported when a size is read, not with the declarations

    return parse_size(text, name)


# ---------------------------------------------------------------- the declarations

O = Option


def _group(title: str, options: Iterable[Option]) -> list[Option]:
    return [replace(o, group=title) for o in options]


OPTIONS: list[Option] = [
    O(None, "training data: paths, URLs or globs", "DATA", kind="positional", field="data.train", key="data",
      name="DATA", default=REQUIRED),
    *_group("columns and validation", [
        O("--text", "text column (repeatable; default: text)", "COL", kind="append", field="data.text",
          default=("text",)),
        O("--label", "label column (default: {default})", "COL", default="label", field="data.label"),
        O("--label-sep", "--task multilabel: split a label string into a row's labels at SEP, e.g. \"|\" (lists, "
          "JSON lists and fastText tags need none)", "SEP", field="data.label_sep"),
        O("--target", "numeric target column (regression, multi-task)", "COL", field="data.target"),
        O("--numeric", "numeric input columns joined to the text features (repeatable)", "COL,...", field="data.numeric",
          default=(), parse=parse_columns),
        O("--val", "separate validation data", "DATA", kind="list", field="data.val", default=()),
        O(None, "labels the model has even where the training rows lack them (partial_fit's classes)",
          field="data.classes", name="classes"),
        O("--val-fraction", "share of rows held out by a stable hash (default {default})", "F", float, 0.1,
          field="data.val_fraction", api="val_fraction"),
    ]),
    *_group("data", [
        O("--format", f"auto|{'|'.join(format_names())} (default: from the file name)", "FMT",
          default="auto", field="data.format"),
        O("--storage-option", "fsspec storage option of the remote paths (s3://, gs://, ...), repeatable; dotted keys "
          "nest (client_kwargs.endpoint_url=...); refused where every path is local",
          "K=V", default={}, kind="append", field="data.storage_options", parse=parse_storage_options,
          cli_default=[]),
        O("--encoding", "text encoding of CSV/TSV/JSON Lines/text/fastText files and of Parquet/Arrow columns "
          "of bytes, e.g. latin-1, cp1252 (default utf-8; predict and evaluate: the run's)", "NAME",
          field="data.encoding"),
        O("--delimiter", "the character between a CSV file's fields, e.g. ';' or '|' (pandas' sep; default ','; "
          "TSV is tabs; predict and evaluate: the run's; predict writes a .csv output with it too)", "CHAR",
          field="data.delimiter"),
    ]),
    *_group("features", [
        O("--features", "hashing|tfidf|ids (default: the model's: hashed terms for Scalpel* and FastTextBag, "
          "token ids for Lancet*)", "MODE", field="features.mode", api="features"),
        O("--max-len", "tokens kept per row with --features ids (default {default})", "N", int, 256,
          field="features.max_len"),
        O("--ngrams", "1 = words, 2 = words and word pairs (default {default}); short for --ngram-range 1,N", "N",
          int, 2, field="features.ngrams", cli_default=None, name="--ngram-range"),
        O("--ngram-range", "n-grams from MIN to MAX, scikit-learn's ngram_range: 1,3 = words, pairs and triples; "
          "2,4 with --analyzer char_wb = 2- to 4-character pieces (default 1,2)", "MIN,MAX", default=(1, 2),
          parse=parse_ngram_range, api="ngram_range", cli_default=None),
        O(None, "the shortest n-gram (--ngram-range's MIN)", type=int, default=1, field="features.ngram_min",
          name="--ngram-range", api="ngram_range"),
        O("--analyzer", "auto|word|char|char_wb, scikit-learn's: word n-grams, character n-grams of the text, or of "
          "each word padded with spaces (text without spaces, typos; hashed features); auto: char_wb 1,3 when at "
          "least 30%% of a sample's letters are in scripts whose words do not repeat in one form (no spaces: "
          "Chinese, Japanese, Thai, ...; particles joined to words: Korean; vowel signs that cut words: Hindi, "
          "Bengali, Tamil, ...), or when 10%% of its words hold vowel marks (vocalised Arabic, Hebrew), else word "
          "(default {default})", "NAME", default="auto", field="features.analyzer", api="analyzer"),
        O("--stop-words", "leave these words out before n-grams: english (scikit-learn's list) or FILE, one word "
          "a line, any URL; read once and stored with the run", "english|FILE", field="features.stop_words",
          api="stop_words"),
        O("--lowercase", "lower-case texts before tokenising (default on)", kind="bool", default=True,
          field="features.lowercase", api="lowercase"),
        O("--normalize", "Unicode normalisation before lower-casing: nfkc (full-width Ａ → a, ligatures) or none "
          "(default {default})", "nfkc|none", default="none", field="features.normalize"),
        O("--tokenizer", "a tokenizer of your own: a name registered with lancetnic_flow.features.register_tokenizer "
          "in MODULE, imported here and on the workers (see workflows/custom_tokenizer.py)", "MODULE:NAME",
          field="features.tokenizer"),
        O("--buckets", "hashed columns with --features hashing (default {default} = 2^19)", "N", int, 2**19,
          field="features.buckets", api="buckets"),
        O("--idf", "weight hashed terms by inverse document frequency (default on; not FastTextBag, whose mean reads "
          "no term weight)", kind="bool", default=True,
          field="features.idf"),
        O("--sublinear-tf", "use 1 + log(tf) (default on; not FastTextBag)", kind="bool", default=True, field="features.sublinear_tf"),
        O("--max-features", "vocabulary size cap with --features tfidf or ids (default 100000)", "N", int,
          field="features.max_features", api="max_features"),
        O("--min-df", "--features tfidf or ids: drop terms in fewer documents: a count, or a fraction like 0.001 "
          "(default {default})", "N|F", default=1, field="features.min_df", parse=parse_df),
        O("--max-df", "--features tfidf or ids: drop terms in more documents: a count, or a fraction (default "
          "{default})",
          "N|F", default=1.0, field="features.max_df", parse=parse_df),
    ]),
    *_group("model and task", [
        O("--model", "auto|LinearSVM|ScalpelMC|ScalpelReg|ScalpelMTSK|FastTextBag|LancetMC|LancetMCA|LancetMCA_gru|"
          "LancetReg (default auto: LinearSVM for one label per row, ScalpelMC otherwise; see docs/models.md)",
          "NAME", default="auto", field="model.name", api="model", api_default=None),
        O("--task", "classify|regress|multitask|multilabel (default: the model's; --model auto with --target: "
          "regress; multilabel: a set of labels per row, see docs/multilabel.md)", "TASK", field="training.task"),
        O("--class-loss", "cross_entropy|bce (two classes)|hinge (one-vs-rest); default cross_entropy, LinearSVM's hinge", "NAME",
          default="cross_entropy", field="training.class_loss"),
        O("--value-loss", "mse|l1|smooth_l1 (default {default})", "NAME", default="mse", field="training.value_loss"),
        O("--loss-weights", "multi-task: class and value loss weights (default 1,1)", "C,V", default=(1.0, 1.0),
          field="training.loss_weights", parse=parse_pair),
        O("--class-weights", "none|balanced (for imbalanced labels; default {default})", "MODE", default="none",
          field="training.class_weights", api="class_weights"),
        O("--embed", "token embedding width (Lancet models; default {default})", "N", int, 128, field="model.embed"),
        O("--hidden", "hidden layer width (default 64 for Scalpel*/FastTextBag, 128 for Lancet*)", "N", int,
          field="model.hidden", api="hidden"),
        O("--layers", "hidden layers; 0 = linear model (default {default})", "N", int, 1, field="model.layers"),
        O("--dropout", "dropout after each hidden layer (default {default})", "P", float, 0.2, field="model.dropout",
          api="dropout"),
        O("--epochs", "passes over the training data, at most (default {default}; early stopping usually ends "
          "sooner)", "N", int, 10, field="training.epochs", api="epochs"),
        O("--batch-size", "rows per optimiser step (default 512; 128 for Lancet*)", "N", int,
          field="training.batch_size", api="batch_size"),
        O("--lr", "peak learning rate of the dense layers (default {default}); with a bag model's --layers 0 they are "
          "the output bias alone, the input rows stepping at --sparse-lr", "X", float, 1e-2, field="training.lr",
          api="lr"),
        O("--lr-schedule", "linear (decay to 5%% of --lr over the run) or constant (default {default})", "NAME",
          default="linear", field="training.lr_schedule"),
    ]),
    *_group("training", [
        O("--optimizer", "adam|radam|sgd|rmsprop|adadelta, the dense layers' (default {default})", "NAME", default="adam", field="training.optimizer"),
        O("--sparse-optimizer", "sgd|adam for the input rows (default: sgd for Scalpel*/FastTextBag, adam for "
          "Lancet*; LinearSVM has its own per-example hinge step)", "NAME", field="training.sparse_optimizer"),
        O("--sparse-lr", "learning rate of the input rows: per example with sgd (default 2.5; 1.0 when a "
          "target is learnt) and LinearSVM (default 0.3), as --lr with adam", "X", float,
          field="training.sparse_lr", api="sparse_lr"),
        O("--early-stopping", "stop after this many epochs without improving --monitor, keeping the best weights "
          "(default 2; 0: train every epoch; LinearSVM's default is 0, keeping the last epoch's weights)", "EPOCHS",
          int, field="training.early_stopping", api="early_stopping"),
        O("--learn-val", "LinearSVM: the saved model also learns the validation rows, while a twin that never "
          "sees them gives the validation figures, early stopping and the probability scale (default on when the "
          "validation rows are split from the training data and the training rows number at most 250,000; off with "
          "--val FILE)", kind="bool", field="training.learn_val", api="learn_val"),
        O("--monitor", "val_loss|val_accuracy|val_macro_f1|val_micro_f1|val_subset_accuracy|val_mae|val_rmse|val_r2 "
          "(default: val_accuracy for one label a row, val_micro_f1 for LinearSVM's label sets, else val_loss)",
          "METRIC", field="training.monitor"),
        O("--clip-grad", "clip the gradient norm (default: off)", "NORM", float, field="training.clip_grad"),
        O("--device", "auto|cpu|cuda (auto: CUDA when present; with --ddp, on the ranks' workers, a GPU per rank)",
          "DEV", default="auto", field="training.device"),
        O("--threads", "a network's trainer threads (default: cores not used by workers); LinearSVM trains here on "
          "one core without torch and refuses it (its --ddp ranks take it)", "N", int, field="training.threads"),
        O("--seed", "fixes partition order, shuffling, init and dropout (default {default})", "N", int, 0,
          field="training.seed", api="random_state"),
        O("--shuffle-buffer", "rows held for shuffling (default {default})", "ROWS", int, 20_000,
          field="training.shuffle_buffer"),
        O("--checkpoint-every", "write a checkpoint every N batches (and at each epoch's end) or every TIME (90s, "
          "10m, 1h), and on Ctrl-C; off = only on Ctrl-C (default {default})", "N|TIME", default="10m",
          field="training.checkpoint_every"),
        O("--ddp", "data-parallel training: N ranks on N Dask workers, gradients averaged (torch.distributed; "
          "LinearSVM averages its weights instead)", "N", int, field="training.ddp", commands=("train",)),
        O("--train-on", "where the model trains: cluster (one trainer task on a Dask worker, or the --ddp ranks; "
          "the client reads no shard), client (this process, reading every shard), or auto: cluster with --scheduler "
          "or --ddp, else client (default {default}; docs/cluster.md)", "WHERE", default="auto",
          field="cluster.train_on", commands=("train",)),
        O("--sync-every", "with --ddp, LinearSVM's ranks average their weights every N of their steps as well as "
          "at each epoch's end (default: each epoch's end up to 4 ranks; with more, every steps / (ranks / 4)² steps "
          "of an epoch too)",
          "N", int, field="training.sync_every",
          commands=("train",)),
        O("--sync-rows", "with --ddp, which rows of LinearSVM's weights a sync averages: all (every row: traffic "
          "in proportion to the vocabulary) or touched (the rows some rank's steps changed since the last sync: "
          "fewer bytes, for slow networks, at the cost of gathering them); the weights come out the same "
          "(default {default})", "ROWS", default="all", field="training.sync_rows", commands=("train",)),
        O("--resume", "continue the run folder RUN from its checkpoint, with its own options (only "
          "--storage-option and the memory and cluster options may be given again)", "RUN", commands=("train",)),
        O("--init-from", "keep learning: start from the finished run RUN's weights and train them on DATA, into a "
          "new run folder (RUN is only read): its features, model and task are kept, labels DATA adds grow the "
          "output layer; options left at their defaults take RUN's values, one given with another value is "
          "refused (docs/cli.md)", "RUN", field="training.init_from", commands=("train",)),
        O(None, "batches prepared ahead of the trainer (default: planned)", type=int, field="training.in_flight"),
    ]),
    *_group("memory and cluster", [
        O("--memory-budget", "total memory to plan for, e.g. 8GiB (default: the smaller of RAM and 16GiB)", "SIZE",
          field="cluster.memory_budget", parse=_size, api="memory_budget"),
        O("--workers", "local Dask worker processes (default: planned)", "N", int, field="cluster.workers",
          api="workers"),
        O("--worker-threads", "threads per Dask worker (default 1)", "N", int, field="cluster.threads"),
        O("--scheduler", "use an existing Dask cluster (or set DASK_SCHEDULER_ADDRESS)", "ADDRESS",
          field="cluster.scheduler", api="scheduler"),
        O("--scheduler-wait", "with --scheduler: how long a lost scheduler is waited for (and a worker with it) "
          "before the work that needs it stops (a training run first writes a checkpoint to --resume from): 90s, 10m, or "
          "seconds (default {default})", "TIME", default="60s", field="cluster.scheduler_wait", cli_default=None),
        O("--blocksize", "partition size (default: from the memory plan)", "SIZE", field="cluster.blocksize",
          parse=_size),
        O("--run-on", "where the data is read and featurised: process (here, no cluster), cluster (a "
          "LocalCluster, or --scheduler's), or auto: here when the inputs are small and no option needs a cluster "
          "(default {default}; docs/memory.md)", "WHERE", default="auto", field="cluster.run_on", api="run_on"),
        O(None, "the live dashboard's link in events (the command line's views show it)", default=False,
          field="cluster.dashboard"),
    ]),
    *_group("output", [
        O("--out", "parent of the run folder (default {default}/)", "DIR", default="runs", field="output.out",
          api="out", api_default=None),
        O("--name", "run folder name (default: a timestamp)", "NAME", field="output.name"),
        O("--cache", "shard cache (default OUT/.cache); none: no cache, the workers featurise every epoch afresh "
          "(for data read once or that no disk holds; a folder named none is ./none)", "URL", field="output.cache"),
        O("--plots", "draw the run's charts (PNG: curves, confusion matrix, per-class bars) beside its tables; "
          "--no-plots writes the tables alone and skips matplotlib (default on; the estimators draw them only "
          "with out=)", kind="bool", default=True, field="output.plots", api="plots", api_default=None),
        O("--wait-for-plots", "end the command only once the charts are drawn; by default it ends as soon as "
          "the model, metrics and tables are saved, and a detached copy of the process draws the charts into the "
          "run folder a second or two later (Linux; elsewhere they are always drawn first; the estimators and "
          "train() always wait)", kind="bool", default=True, field="output.wait_for_plots", cli_default=False),
        O("--track", "log each epoch's metrics, the options and the run folder to tensorboard (RUN/tensorboard/) "
          "or mlflow (MLFLOW_TRACKING_URI, else MLflow's local default); repeatable or a comma list; needs "
          "pip install 'lancetnic_flow[track]' (docs/tracking.md)", "NAME", kind="append", default=(),
          field="output.track", api="track", api_default=None),
        O("--experiment", "--track mlflow: the experiment (default: MLFLOW_EXPERIMENT_NAME, else --out's folder "
          "name)", "NAME", field="output.experiment"),
    ]),
]
GROUPS = tuple(dict.fromkeys(o.group for o in OPTIONS if o.group))
BY_FIELD = {o.field: o for o in OPTIONS if o.field}
BY_DEST = {o.dest: o for o in OPTIONS if o.flag or o.kind == "positional"}


def command_line_defaults() -> dict[str, Any]:
    """Values the command line (and a workflow file, which means what its
    command line means) gives fields it is not told, where these differ from
    the configuration's own defaults (``train()``'s): by destination."""
    return {o.dest: o.cli_default for o in OPTIONS
            if o.field and o.kind != "value" and o.cli_default is not SAME and o.cli_default not in (None, [])}


def option(field: str) -> Option:
    """The declaration of ``section.name``."""
    return BY_FIELD[field]


def command_options(command: str, group: str | None = None) -> list[Option]:
    """The flags ``command`` offers (of ``group``), in the order of ``--help``."""
    return [o for o in OPTIONS if o.flag and command in o.commands and (group is None or o.group == group)]


def default(field: str) -> Any:
    """A dataclass field whose default is the declared one:
    ``lr: float = default("training.lr")``; a list or mapping is built anew for each instance."""
    o = option(field)
    meta = {"option": o}
    if o.default is REQUIRED:
        return dataclasses.field(metadata=meta)
    value = o.default
    if isinstance(value, dict):
        return dataclasses.field(default_factory=lambda: dict(value), metadata=meta)
    if o.kind in ("append", "list") or o.parse is parse_columns:
        return dataclasses.field(default_factory=lambda: list(value), metadata=meta)
    return dataclasses.field(default=value, metadata=meta)


def api_default(name: str) -> Any:
    """The estimators' default of parameter ``name`` (``random_state`` → training.seed's)."""
    return next(o.estimator_default for o in OPTIONS if o.api == name and o.flag)


def api_options() -> list[Option]:
    """The options an estimator parameter sets, one per parameter."""
    return [o for o in OPTIONS if o.api and (o.flag or o.field is None)]


# ---------------------------------------------------------------- errors naming a field

_PLACEHOLDER = re.compile(r"\{(name|(?:%s)\.[a-z_]+)\}" % "|".join(SECTIONS))


def cli_name(field: str) -> str:
    """How the command line names a field: ``training.lr`` → ``--lr``."""
    o = BY_FIELD.get(field)
    if o is None:
        return field.split(".")[-1]
    return o.flag or o.name or field.split(".")[-1]


def python_name(field: str) -> str:
    """How the Python API names a field: an estimator parameter (``training.seed``
    → ``random_state``), else the field's own name (``shuffle_buffer``)."""
    o = BY_FIELD.get(field)
    return (o.api if o is not None and o.api else None) or field.split(".")[-1]


# The two fields --ngram-range sets: an error about either names the pair as the caller gives it.
NGRAM_FIELDS = ("features.ngram_min", "features.ngrams")


def workflow_name(field: str) -> str:
    """How a workflow file names a field: its key (``training.lr`` → ``lr``, the
    n-gram range's MIN → ``ngram_range``), as ``--set KEY=VALUE`` does."""
    o = BY_FIELD.get(field)
    if field == NGRAM_FIELDS[0]:
        return "ngram_range"
    return o.dest if o is not None else field.split(".")[-1]


class Words:
    """How one reader names options and their values: the command line's flags
    (``--no-idf``, ``--ngram-range 1,3``), the Python API's parameters
    (``idf=False``, ``ngram_range=(1, 3)``) or a workflow file's keys
    (``idf: false``, ``ngram_range: 1,3``). ``style``: cli | python | workflow."""

    NAMERS = {"cli": "cli_name", "python": "python_name", "workflow": "workflow_name"}

    def __init__(self, style: str):
        self.style = style
        self.namer: Callable[[str], str] = globals()[self.NAMERS[style]]

    def __call__(self, field: str) -> str:
        """The option's name alone: ``--lr`` or ``lr``."""
        return self.namer(field)

    def setting(self, field: str, value: Any) -> str:
        """The option given ``value``, as this reader would have typed it. A field of
        --ngram-range takes the pair (MIN, MAX)."""
        field, value = _one_option(field, value)
        name = self.namer(field)
        if self.style == "python":
            return f"{name}={value!r}"
        if self.style == "workflow":
            return f"{name}: {self.value(field, value)}"
        o = BY_FIELD.get(field)
        if o is not None and o.kind in ("bool", "flag") and isinstance(value, bool):
            if value:
                return name
            return "--no-" + name.removeprefix("--") if o.kind == "bool" else f"no {name}"
        said = self.value(field, value)
        # A column or path with a space or quote is one word only quoted: the hint must paste as typed.
        return f"{name} {shlex.quote(said) if isinstance(value, str) else said}"

    def value(self, field: str, value: Any) -> str:
        """``value`` alone where the option is named before it: ``1,3``, ``(1, 3)``;
        on the command line a boolean as its setting (``--no-idf``), as a flag has no value."""
        field, value = _one_option(field, value)
        o = BY_FIELD.get(field)
        if self.style == "python":
            return repr(value)
        if isinstance(value, bool):
            if self.style == "workflow":
                return "true" if value else "false"   # YAML's words
            if o is not None and o.kind in ("bool", "flag"):
                return self.setting(field, value)
        if isinstance(value, (list, tuple)):
            return ",".join(map(str, value)) if value else "(none)"
        return "(none)" if value is None else str(value)


def _one_option(field: str, value: Any) -> tuple[str, Any]:
    # --ngrams N is --ngram-range 1,N: the pair says either
    return (NGRAM_FIELDS[0], tuple(value)) if field in NGRAM_FIELDS else (field, value)


def render(text: Any, field: str | None, style: str = "python") -> str | None:
    """``{name}`` (the error's field) and ``{section.field}`` in ``text``, named as
    ``style`` (:class:`Words`) names them; ``text`` may be a function of
    :class:`Words` that says values as the reader types them."""
    if text is None:
        return None
    words = Words(style)
    if callable(text):
        text = text(words)

    def name(m: re.Match) -> str:
        key = m.group(1)
        if key == "name":
            return words(field) if field else "option"
        return words(key) if key in BY_FIELD else m.group(0)

    return _PLACEHOLDER.sub(name, text)


_FIELD = re.compile(r"\{((?:%s)\.[a-z_]+)\}" % "|".join(SECTIONS))


def said(text: str, style: str) -> str:
    """``text`` with its ``{section.field}`` placeholders named as ``style``
    (:class:`Words`) names them: a run's warnings, said to the command line with
    its flags, to Python with its parameters, to a workflow with its keys.
    Anything else in braces (a label, a path) stays as written."""
    if "{" not in text:
        return text
    words = Words(style)
    return _FIELD.sub(lambda m: words(m.group(1)) if m.group(1) in BY_FIELD else m.group(0), text)


name_options_with(said)


def hinted(message: str, hint: Any) -> UserError:
    """A UserError whose ``hint`` names options as ``{section.field}``, or is a function of
    :class:`Words`, said in each reader's words; ``message`` (a file's name, its columns) is
    shown as it is."""
    def told(style: str) -> str:
        return said(hint(Words(style)) if callable(hint) else hint, style)

    return UserError(message, told("python"), cli=(message, told("cli")), workflow=(message, told("workflow")))


def bad(field: str, message: Any, hint: Any = None) -> UserError:
    """A UserError about ``field``: ``message`` and ``hint`` name options as
    ``{name}`` (this field) or ``{section.field}``; the Python API reads them
    with parameter names (``str(error)``), the command line with flags
    (``error.cli``), a workflow run with its file's keys (``error.workflow``).
    A message that shows an option's value is a function of :class:`Words`
    (``lambda say: say.setting("features.idf", False)``), so that each reader
    sees the value as it spells it: ``--no-idf``, ``idf=False``, ``idf: false``."""
    return UserError(render(message, field), render(hint, field), field=field,
                     cli=(render(message, field, "cli"), render(hint, field, "cli")),
                     workflow=(render(message, field, "workflow"), render(hint, field, "workflow")))


def refused(field: str, exc: UserError) -> UserError:
    """``exc``, a parse function's error naming the option as :func:`placeholder` gave it,
    as the error about ``field``: each reader keeps its own words."""
    return UserError(exc.message, exc.hint, field=field, cli=exc.said("cli"), workflow=exc.said("workflow"))


def placeholder(field: str) -> str:
    """The name a parse function puts in its errors: ``{training.lr}``."""
    return "{%s}" % field


# ---------------------------------------------------------------- workflow values

_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _expected(o: Option) -> str:
    if o.kind in ("flag", "bool"):
        return "true or false"
    return {int: "an integer", float: "a number"}.get(o.type, "text")


def text_value(o: Option, text: str) -> Any:
    """A ``key=value`` override's value, read as the command line reads the
    option: ``epochs=1`` → 1, ``lowercase=false`` → False, ``text=body`` → ["body"]."""
    if o.kind in ("flag", "bool"):
        word = text.strip().lower()
        if word not in _WORDS:
            raise ValueError(_expected(o))
        return _WORDS[word]
    if o.kind in ("append", "list", "positional"):
        return [_word(o, text)]
    return _word(o, text)


def _word(o: Option, text: str) -> Any:
    if o.type is None:
        return text
    try:
        return o.type(text)
    except (TypeError, ValueError):
        raise ValueError(_expected(o)) from None


def typed_value(o: Option, value: Any) -> Any:
    """A workflow file's YAML value checked against the declared type, as the
    command line would have read it; a wrong type is a ValueError saying
    what was expected."""
    if o.kind in ("flag", "bool"):
        if not isinstance(value, bool):
            quoted = isinstance(value, str) and value.strip().isalpha() and value.strip().lower() in _WORDS
            raise ValueError(_expected(o) + (" without quotes (a quoted word is text)" if quoted else ""))
        return value
    if o.dest == "storage_option" and isinstance(value, dict):
        return value
    if isinstance(value, (list, tuple)):
        if o.kind in ("append", "list", "positional"):
            return [_scalar(o, v) for v in value]
        if o.parse is parse_columns and not value:   # ``numeric: []``: none, as the default
            return []
        if o.parse in (parse_columns, parse_pair, parse_ngram_range):
            return ",".join(str(_scalar(o, v)) for v in value)
        raise ValueError("one value, not a list")
    if isinstance(value, dict):
        raise ValueError("one value, not a mapping")
    v = _scalar(o, value)
    return [v] if o.kind in ("append", "list", "positional") else v


def _scalar(o: Option, value: Any) -> Any:
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError(_expected(o))
    if o.type in (int, float):
        ok = not isinstance(value, bool) and isinstance(value, (int, float, str))
        try:
            ok = ok and o.type(value) == float(value)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(_expected(o))
        return o.type(value)
    if isinstance(value, bool) and o.type in (None, str):
        # YAML reads an unquoted on/off/yes/no/true/false as a boolean: str(False) would be "False"
        raise ValueError("text (YAML reads an unquoted on, off, yes, no, true or false as true/false: quote it, "
                         "as 'off')")
    return value if o.type is None and isinstance(value, str) else (o.type or str)(value)


# Other tools' names for options, as users type them (flags and workflow keys alike, dashes for underscores):
# a close spelling would not find them, and spelling alone offered --format for --overwrite, --learn-val
# for --learning-rate.
FLAG_ALIASES = {"learning-rate": "lr", "output-dir": "out", "model-dir": "out", "outdir": "out", "out-dir": "out",
                "gpu": "device", "cuda": "device", "val-split": "val-fraction", "validation-split": "val-fraction",
                "test-size": "val-fraction", "num-epochs": "epochs", "max-epochs": "epochs", "n-epochs": "epochs",
                "word-ngrams": "ngrams", "wordngrams": "ngrams", "num-workers": "workers", "n-jobs": "workers",
                "overwrite": "force", "overwrite-output": "force", "clobber": "force"}


def unknown_key(key: str, where: str) -> UserError:
    """An unknown workflow key, with the close names: another tool's name for one
    (:data:`FLAG_ALIASES`; ``output.dir`` is ``out``), else those spelt closest, within
    the key's own section first (``output.dir`` was offered ``delimiter``, a data field)."""
    known = sorted(k for k in BY_DEST if k != "resume") + ["train"]
    section, _, name = key.rpartition(".")
    name = name.replace("-", "_")
    dashed = name.replace("_", "-").lower()
    alias = FLAG_ALIASES.get(dashed) or FLAG_ALIASES.get(f"{section}-{dashed}".lstrip("-"))
    if alias and alias.replace("-", "_") in BY_DEST:
        said = f" (did you mean {alias.replace('-', '_')!r}?)"
    else:
        own = [k for k in known if k in BY_DEST and (BY_DEST[k].field or "").startswith(f"{section}.")]
        found = difflib.get_close_matches(name, own, n=3, cutoff=0.6) if section else []
        found = found or difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        said = f" (did you mean {', '.join(repr(f) for f in found)}?)" if found else ""
    return UserError(f"{where}: unknown field {key!r}" + said,
                     "fields are `lancetnic-flow train` options; see `lancetnic-flow train --help`")


__all__ = ["Option", "OPTIONS", "option", "command_options", "default", "api_default", "api_options", "bad",
           "cli_name", "python_name", "workflow_name", "Words", "said", "hinted", "NGRAM_FIELDS", "typed_value", "text_value", "parse_storage_options", "parse_df",
           "SECTIONS", "FLAG_ALIASES"]
