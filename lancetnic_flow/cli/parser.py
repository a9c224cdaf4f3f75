"""The command line, declared as data.

Each option is an :class:`Option`; a command's options are grouped as they
appear in ``--help``. The parser is built from these tables, and workflow
files (:mod:`.workflow`) read the same tables to turn a YAML file into the
``train`` command line it means — one declaration, two readers.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

from .. import __version__
from ..formats import format_names, registered


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    metavar: str | None = None
    type: Callable | None = None
    default: Any = None
    kind: str = "value"    # value | flag (store_true) | bool (--x/--no-x) | append (repeatable) | list (1+ values)
    required: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, group: Any) -> None:
        if self.kind == "flag":
            group.add_argument(self.flag, action="store_true", help=self.help)
            return
        if self.kind == "bool":
            group.add_argument(self.flag, action=argparse.BooleanOptionalAction, default=None, help=self.help)
            return
        kw: dict[str, Any] = {"metavar": self.metavar, "help": self.help}
        if self.type is not None:
            kw["type"] = self.type
        if self.default is not None:
            kw["default"] = self.default
        if self.required:
            kw["required"] = True
        if self.kind == "append":
            kw["action"] = "append"
        elif self.kind == "list":
            kw["nargs"] = "+"
        group.add_argument(self.flag, **kw)


O = Option
DATA = [
    O("--format", f"auto|{'|'.join(format_names())} (default: from the file name)", "FMT", default="auto"),
    O("--storage-option", "fsspec storage option, repeatable; dotted keys nest (client_kwargs.endpoint_url=...)",
      "K=V", default=[], kind="append"),
    O("--encoding", "text encoding of CSV/TSV/JSON Lines/text/fastText files, e.g. latin-1, cp1252 (default utf-8; "
      "predict and evaluate: the run's)", "NAME"),
]
CLUSTER = [
    O("--memory-budget", "total memory to plan for, e.g. 8GiB (default: the smaller of RAM and 16GiB)", "SIZE"),
    O("--workers", "local Dask worker processes (default: planned)", "N", int),
    O("--worker-threads", "threads per Dask worker (default 1)", "N", int),
    O("--scheduler", "use an existing Dask cluster (or set DASK_SCHEDULER_ADDRESS)", "ADDRESS"),
    O("--blocksize", "partition size (default: from the memory plan)", "SIZE"),
]
TRAIN: dict[str, list[Option]] = {
    "columns and validation": [
        O("--text", "text column (repeatable; default: text)", "COL", kind="append"),
        O("--label", "label column (default: label)", "COL", default="label"),
        O("--label-sep", "--task multilabel: split a label string into a row's labels at SEP, e.g. \"|\" (lists, "
          "JSON lists and fastText tags need none)", "SEP"),
        O("--target", "numeric target column (regression, multi-task)", "COL"),
        O("--numeric", "numeric input columns joined to the text features", "COL,..."),
        O("--val", "separate validation data", "DATA", kind="list"),
        O("--val-fraction", "share of rows held out by a stable hash (default 0.1)", "F", float, 0.1),
    ],
    "data": DATA,
    "features": [
        O("--features", "hashing|tfidf|ids (default: the model's: hashed terms for Scalpel* and FastTextBag, "
          "token ids for Lancet*)", "MODE"),
        O("--max-len", "tokens kept per row with --features ids", "N", int, 256),
        O("--ngrams", "1 = words, 2 = words and word pairs (default 2); short for --ngram-range 1,N", "N", int),
        O("--ngram-range", "n-grams from MIN to MAX, scikit-learn's ngram_range: 1,3 = words, pairs and triples; "
          "2,4 with --analyzer char_wb = 2- to 4-character pieces (default 1,2)", "MIN,MAX"),
        O("--analyzer", "word|char|char_wb, scikit-learn's: word n-grams, character n-grams of the text, or of "
          "each word padded with spaces (text without spaces, typos; hashed features) (default word)", "NAME"),
        O("--stop-words", "leave these words out before n-grams: english (scikit-learn's list) or FILE, one word "
          "a line, any URL; read once and stored with the run", "english|FILE"),
        O("--lowercase", "lower-case texts before tokenising (default on)", kind="bool"),
        O("--normalize", "Unicode normalisation before lower-casing: nfkc (full-width Ａ → a, ligatures) or none "
          "(default none)", "nfkc|none"),
        O("--tokenizer", "a tokenizer of your own: a name registered with lancetnic_flow.features.register_tokenizer "
          "in MODULE, imported here and on the workers (see workflows/custom_tokenizer.py)", "MODULE:NAME"),
        O("--buckets", "hashed columns with --features hashing (default 524288 = 2^19)", "N", int),
        O("--idf", "weight hashed terms by inverse document frequency (default on)", kind="bool"),
        O("--sublinear-tf", "use 1 + log(tf) (default on)", kind="bool"),
        O("--max-features", "vocabulary size cap with --features tfidf (default 100000)", "N", int),
        O("--min-df", "--features tfidf: drop terms in fewer documents: a count, or a fraction like 0.001 "
          "(default 1)", "N|F", default="1"),
        O("--max-df", "--features tfidf: drop terms in more documents: a count, or a fraction (default 1.0)", "N|F",
          default="1.0"),
    ],
    "model and task": [
        O("--model", "auto|LinearSVM|ScalpelMC|ScalpelReg|ScalpelMTSK|FastTextBag|LancetMC|LancetMCA|LancetMCA_gru|"
          "LancetReg (default auto: LinearSVM for one label per row, ScalpelMC otherwise; see docs/models.md)",
          "NAME", default="auto"),
        O("--task", "classify|regress|multitask|multilabel (default: the model's; --model auto with --target: "
          "regress; multilabel: a set of labels per row, see docs/multilabel.md)", "TASK"),
        O("--class-loss", "cross_entropy|bce (two classes)|hinge (one-vs-rest; LinearSVM's)", "NAME",
          default="cross_entropy"),
        O("--value-loss", "mse|l1|smooth_l1", "NAME", default="mse"),
        O("--loss-weights", "multi-task: class and value loss weights", "C,V", default="1,1"),
        O("--class-weights", "none|balanced (for imbalanced labels)", "MODE", default="none"),
        O("--embed", "token embedding width (Lancet models)", "N", int, 128),
        O("--hidden", "hidden layer width (default 64 for Scalpel*/FastTextBag, 128 for Lancet*)", "N", int),
        O("--layers", "hidden layers; 0 = linear model (default 1)", "N", int, 1),
        O("--dropout", "dropout after each hidden layer (default 0.2)", "P", float, 0.2),
        O("--epochs", "passes over the training data, at most (default 10; early stopping usually ends sooner)",
          "N", int),
        O("--batch-size", "rows per optimiser step (default 512)", "N", int, 512),
        O("--lr", "peak learning rate (default 0.01)", "X", float, 1e-2),
        O("--lr-schedule", "linear (decay to 5%% of --lr over the run) or constant (default linear)", "NAME",
          default="linear"),
    ],
    "training": [
        O("--optimizer", "adam|radam|sgd|rmsprop|adadelta", "NAME", default="adam"),
        O("--sparse-optimizer", "sgd|adam for the input rows (default: sgd for Scalpel*/FastTextBag, adam for "
          "Lancet*; LinearSVM has its own per-example hinge step)", "NAME"),
        O("--sparse-lr", "learning rate of the input rows: per example with sgd (default 2.5; 1.0 when a "
          "target is learnt) and LinearSVM (default 0.3), as --lr with adam",
          "X", float),
        O("--early-stopping", "stop after this many epochs without improving --monitor, keeping the best weights "
          "(default 2; 0: train every epoch; LinearSVM's default is 0, keeping the last epoch's weights)", "EPOCHS", int),
        O("--learn-val", "LinearSVM: the saved model also learns the validation rows, while a twin that never "
          "sees them gives the validation figures, early stopping and the probability scale (default on when the "
          "validation rows are split from the training data and the training rows number at most 250,000; off with "
          "--val FILE)", kind="bool"),
        O("--monitor", "val_loss|val_accuracy|val_macro_f1|val_micro_f1|val_subset_accuracy|val_mae|val_rmse|val_r2 "
          "(default: val_accuracy when classifying, else val_loss)", "METRIC"),
        O("--clip-grad", "clip the gradient norm", "NORM", float),
        O("--device", "auto|cpu|cuda (auto: CUDA when present; with --ddp, on the ranks' workers, a GPU per rank)",
          "DEV", default="auto"),
        O("--threads", "trainer threads (default: cores not used by workers)", "N", int),
        O("--seed", "fixes partition order, shuffling, init and dropout (default 0)", "N", int, 0),
        O("--shuffle-buffer", "rows held for shuffling (default 20000)", "ROWS", int, 20_000),
        O("--checkpoint-every", "write a checkpoint every N batches (and at each epoch's end) or every TIME (90s, 10m, 1h), "
          "and on Ctrl-C; off = only on Ctrl-C (default 10m)", "N|TIME", default="10m"),
        O("--ddp", "data-parallel training: N ranks on N Dask workers, gradients averaged (torch.distributed)", "N",
          int),
        O("--resume", "continue the run folder RUN from its checkpoint, with its own options (only "
          "--storage-option and the memory and cluster options may be given again)", "RUN"),
    ],
    "memory and cluster": CLUSTER,
    "output": [
        O("--out", "parent of the run folder (default runs/)", "DIR", default="runs"),
        O("--name", "run folder name (default: a timestamp)", "NAME"),
        O("--cache", "shard cache (default OUT/.cache)", "URL"),
        O("--track", "log each epoch's metrics, the options and the run folder to tensorboard (RUN/tensorboard/) "
          "or mlflow (MLFLOW_TRACKING_URI, else MLflow's local default); repeatable or a comma list; needs "
          "pip install 'lancetnic_flow[track]' (docs/tracking.md)", "NAME", kind="append"),
        O("--experiment", "--track mlflow: the experiment (default: MLFLOW_EXPERIMENT_NAME, else --out's folder "
          "name)", "NAME"),
    ],
}
PREDICT = [
    O("--text", "a text to classify (repeatable)", "TEXT", kind="append"),
    O("--input", "data to predict over Dask partitions", "DATA", kind="list"),
    O("--output", "where to write predictions: .csv, .tsv, .jsonl or .parquet (CSV and JSON Lines may add "
      ".gz/.bz2/.xz/.zst), a path or any fsspec URL", "URL"),
    O("--text-column", "text column of --input (default: the run's)", "COL", kind="append"),
    O("--keep", "input columns to carry into the output, e.g. --keep id,source; all = every column "
      "(default: the text)", "COL,...|all"),
    O("--top-k", "also write the K most probable labels and their probabilities", "K", int),
    O("--threshold", "a multilabel run: predict every label with probability ≥ P (default 0.5)", "P", float, 0.5),
]
EVALUATE = [
    O("--json", "print the metrics as one JSON object", kind="flag"),
    O("--text", "text column (default: the run's)", "COL", kind="append"),
    O("--label", "label column (default: the run's)", "COL"),
    O("--target", "target column (default: the run's)", "COL"),
    O("--label-sep", "a multilabel run: the separator of a label string (default: the run's)", "SEP"),
    O("--plots", "also write plots and per-class tables to DIR", "DIR"),
]
MAKE_DATA = [
    O("--rows", "rows to write", "N", int, required=True),
    O("--classes", "label classes (default 4)", "K", int, 4),
    O("--multilabel", "1 to 3 labels per row, each with its own topic words: in csv/tsv/parquet a label column "
      "like \"sports|tech\" (train with --task multilabel --label-sep \"|\"), a JSON list in jsonl, several "
      "__label__ tags in fastText", kind="flag"),
    O("--seed", "picks the vocabulary, topics and rows (default 0)", "S", int, 0),
    O("--storage-option", "fsspec storage option, repeatable", "K=V", default=[], kind="append"),
]
RUN = [O("--set", "override a field (repeatable): epochs=1, training.lr=0.02, make_data.rows=5000", "KEY=VALUE",
         default=[], kind="append")]
DEMO = [
    O("--rows", "rows of the generated corpus (default 50000)", "N", int, 50_000),
    O("--dir", "where the demo corpus and runs go", "DIR", default="demo-data"),
    O("--epochs", "passes over the data (default 2)", "N", int, 2),
]
SERVE = [
    O("--host", "address to listen on (default 127.0.0.1, this machine only; 0.0.0.0: every interface)", "HOST",
      default="127.0.0.1"),
    O("--port", "port to listen on (default 8000; 0: any free port, printed at start)", "PORT", int, 8000),
    O("--max-batch", "most texts in one request; a larger one is refused with 413 (default 1000)", "N", int, 1000),
    O("--storage-option", "fsspec storage option of the run's URL, repeatable", "K=V", default=[], kind="append"),
]
EXPORT = [
    O("--onnx", "write the network as an ONNX graph to FILE (a path or any fsspec URL)", "FILE", required=True),
    O("--storage-option", "fsspec storage option of the run's and FILE's URLs, repeatable", "K=V", default=[],
      kind="append"),
]

TUNE = [
    O("--time-budget", "how long to search: 90s, 10m, 1h, or seconds (default 10m); the final run with the best "
      "options trains after it", "TIME", default="10m"),
    O("--trials", "at most N trials, the defaults' trial included (default: until the time budget is spent)", "N",
      int),
]
# `train` options that `tune` does not take: a search trains new runs, one process each.
NOT_TUNED = ("--resume", "--ddp")

EXAMPLES_TRAIN = """examples:
  lancetnic-flow make-data data/train.csv --rows 100000
  lancetnic-flow train data/train.csv --text text --label label --epochs 3
  lancetnic-flow train 's3://bucket/corpus/*.jsonl.gz' --text body --label topic \\
      --storage-option anon=false --cache s3://bucket/cache --memory-budget 8GiB
  lancetnic-flow train data/*.parquet --text text --label label --scheduler tcp://10.0.0.5:8786
"""


def train_options() -> dict[str, Option]:
    """Every ``train`` option by its destination name (``max_features``)."""
    return {o.dest: o for group in TRAIN.values() for o in group}


def all_options() -> dict[str, Option]:
    """Every option of every command by its flag (``--memory-budget``)."""
    tables = [*TRAIN.values(), DATA, CLUSTER, PREDICT, EVALUATE, MAKE_DATA, RUN, DEMO, SERVE, EXPORT, TUNE]
    return {o.flag: o for table in tables for o in table}


def with_negative_values(argv: list[str]) -> list[str]:
    """``--memory-budget -1GiB`` as ``--memory-budget=-1GiB``: argparse reads a
    value starting with "-" as an option and would answer with its usage block,
    where the option's own check says what is wrong."""
    options = all_options()
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        o = options.get(token)
        if o is not None and o.kind in ("value", "append") and i + 1 < len(argv) \
                and argv[i + 1].startswith("-") and argv[i + 1] not in options and not argv[i + 1].startswith("--"):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _add_output_control(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: given before or after the command, either place sets it.
    g = p.add_argument_group("output control")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for every error")
    g.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help="print only the final result")
    g.add_argument("--json-log", nargs="?", const="-", default=argparse.SUPPRESS, metavar="FILE",
                   help="one JSON object per event: to stdout (no other output there; the console view is off), "
                        "or to FILE (the console view stays)")


def _command(sub: Any, name: str, help: str, groups: dict[str, list[Option]], **kw: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    _add_output_control(p)
    for title, options in groups.items():
        g = p.add_argument_group(title) if title else p
        for o in options:
            o.add_to(g)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lancetnic-flow",
        description="Train text models on more text than fits in memory: Dask + fsspec + PyTorch.",
        epilog="Run `lancetnic-flow demo` to see a whole run on generated data.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lancetnic-flow {__version__}")
    _add_output_control(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("train", help="train a classifier", epilog=EXAMPLES_TRAIN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("data", nargs="*", metavar="DATA", help="training data: paths, URLs or globs")
    _add_output_control(t)
    for title, options in TRAIN.items():
        g = t.add_argument_group(title)
        for o in options:
            o.add_to(g)

    p = _command(sub, "predict", "predict with a trained run",
                 {"": PREDICT, "data": DATA, "memory and cluster": CLUSTER},
                 epilog="examples:\n  lancetnic-flow predict runs/demo --text 'a great match' --text 'new phone'\n"
                        "  lancetnic-flow predict runs/demo --input 'data/*.csv' --output preds.jsonl\n"
                        "  lancetnic-flow predict runs/demo --input data.parquet --keep id --top-k 3 --output preds.parquet")
    p.add_argument("run", metavar="RUN", help="run folder")
    e = _command(sub, "evaluate", "evaluate a trained run on labelled data",
                 {"": EVALUATE, "data": DATA, "memory and cluster": CLUSTER})
    e.add_argument("run", metavar="RUN")
    e.add_argument("data", nargs="+", metavar="DATA")
    m = _command(sub, "make-data", "write a generated, learnable corpus of any size", {"": MAKE_DATA},
                 epilog="the format follows the extension: "
                        f"{' '.join(f.extensions[0] for f in registered() if f.writer)}, "
                        "plus .gz/.bz2/.xz/.zst to compress")
    m.add_argument("out", metavar="OUT", help="file path or URL")
    w = _command(sub, "run", "run a workflow file (YAML)", {"": RUN},
                 epilog="examples:\n  lancetnic-flow run workflows/quickstart.yaml\n"
                        "  lancetnic-flow run workflows/multiclass.yaml --set epochs=1 --set data.train=x.csv")
    w.add_argument("workflow", metavar="FILE", help="a workflow file; its keys are `train` options")
    _command(sub, "demo", "generate a corpus, train on it, predict with it", {"": DEMO})
    v = _command(sub, "serve", "serve a trained run over HTTP: POST /predict, GET /health (docs/serving.md)",
                 {"": SERVE}, epilog="examples:\n  lancetnic-flow serve runs/demo --port 8000\n"
                 "  curl -s localhost:8000/predict -d '{\"texts\": [\"a great match\"], \"top_k\": 2}'")
    v.add_argument("run", metavar="RUN", help="run folder")
    x = _command(sub, "export", "export a trained run's network (ONNX; docs/serving.md)", {"": EXPORT},
                 epilog="examples:\n  lancetnic-flow export runs/demo --onnx model.onnx")
    x.add_argument("run", metavar="RUN", help="run folder")
    _tune_command(sub)
    return parser


def _tune_command(sub: Any) -> None:
    """``tune``: ``train``'s options (but --resume, --ddp) and the search's own."""
    groups = {"search": TUNE, **{title: [o for o in options if o.flag not in NOT_TUNED]
                                 for title, options in TRAIN.items()}}
    t = _command(sub, "tune", "search the model's options on the Dask workers for a time budget, then train with "
                 "the best (docs/tune.md)", groups,
                 epilog="examples:\n  lancetnic-flow tune data/train.csv --time-budget 10m\n"
                        "  lancetnic-flow tune data/train.csv --val data/val.csv --time-budget 2m --trials 20 "
                        "--name tuned")
    t.add_argument("data", nargs="*", metavar="DATA", help="training data: paths, URLs or globs")
    t.set_defaults(resume=None, ddp=None)
