"""The command line, derived from the declarations.

The ``train`` and ``tune`` options, and the data and cluster options
``predict`` and ``evaluate`` share, are :data:`lancetnic_flow.options.OPTIONS`
(declared once with their fields, types, defaults and help); the other
commands' own options are tables of the same :class:`Option` below. Each
``--help`` group lists its options in the declarations' order.
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Any, NoReturn

from .. import __version__
from ..errors import close_matches
from ..formats import registered
from ..options import FLAG_ALIASES, GROUPS, OPTIONS, Option, command_options

O = Option


# Columns a run reads one of: given twice with two names, argparse would keep the last without a word.
_ONE_COLUMN = {"data.label": "a run learns one label column (a multi-task run: one --label and one --target)",
               "data.target": "a run learns one numeric target (a multi-task run: one --label and one --target)",
               "data.label_sep": "one separator splits every label string"}


class _Once(argparse.Action):
    """A column option given twice with two values is an error naming both."""

    def __init__(self, *args, why: str = "", **kw):
        super().__init__(*args, **kw)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        mark = f"_{self.dest}_given"   # set by this option alone (a namespace's extra names are not options)
        before = getattr(namespace, mark, None)
        if before is not None and before != values:
            parser.error(f"{option_string} given twice ({before}, {values}): {self.why}")
        setattr(namespace, mark, values)
        setattr(namespace, self.dest, values)


class _Joined(argparse.Action):
    """``--numeric a --numeric b,c`` is ``--numeric a,b,c``, as ``--text`` repeats (``--keep``
    too: ``--keep id --keep source`` kept ``source`` alone)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, f"{before},{values}" if isinstance(before, str) and before else values)


def add_option(group: Any, o: Option) -> None:
    """One option on a parser or an argument group, as declared."""
    if o.kind == "positional":
        group.add_argument(o.dest, nargs="*", metavar=o.metavar, help=o.help_text)
        return
    if o.kind == "flag":
        group.add_argument(o.flag, action="store_true", help=o.help_text)
        return
    if o.kind == "bool":
        group.add_argument(o.flag, action=argparse.BooleanOptionalAction, default=o.parser_default, help=o.help_text)
        return
    kw: dict[str, Any] = {"metavar": o.metavar, "help": o.help_text}
    if o.type is not None:
        kw["type"] = o.type
    if o.parser_default is not None:
        kw["default"] = o.parser_default
    if o.required:
        kw["required"] = True
    if o.kind == "append":
        kw["action"] = "append"
    elif o.kind == "list":
        # Given twice (--input a.csv --input b.csv), argparse kept the last list alone: a.csv's rows
        # went unread without a word. Each occurrence adds its values.
        kw.update(nargs="+", action="extend")
    elif o.field in _ONE_COLUMN:
        kw.update(action=_Once, why=_ONE_COLUMN[o.field])
    elif o.field == "data.numeric" or o.flag == "--keep":
        kw["action"] = _Joined
    group.add_argument(o.flag, **kw)


def groups_of(command: str) -> dict[str, list[Option]]:
    """``command``'s declared options by their ``--help`` group."""
    return {title: command_options(command, title) for title in GROUPS if command_options(command, title)}


DATA = command_options("train", "data")
CLUSTER = command_options("train", "memory and cluster")
TRAIN: dict[str, list[Option]] = groups_of("train")
PREDICT = [
    O("--text", "a text to classify (repeatable)", "TEXT", kind="append"),
    O("--input", "data to predict over Dask partitions", "DATA", kind="list"),
    O("--output", "where to write predictions: .csv, .tsv, .jsonl, .parquet or .arrow (CSV and JSON Lines may add "
      ".gz/.bz2/.xz/.zst), a path or any fsspec URL", "URL"),
    O("--text-column", "text column of --input (default: the run's)", "COL", kind="append"),
    O("--keep", "input columns to carry into the output, e.g. --keep id,source (repeatable); all = every column "
      "(default: the text)", "COL,...|all"),
    O("--top-k", "also write the K most probable labels and their probabilities", "K", int),
    O("--threshold", "a multilabel run: predict every label with probability ≥ P (default: each label's own "
      "threshold, chosen on the run's validation rows; 0.5 for a run without them)", "P", float, None),
    O("--force", "replace --output when it is already a file (without it an existing file is refused; an input "
      "or a run's own file is refused always)", kind="flag"),
]
EXPLAIN = [
    O("--text", "a text to explain (repeatable)", "TEXT", kind="append"),
    O("--top", "terms listed per text, by the size of their contribution (default 10; the rest are summed)",
      "N", int, 10),
    O("--label", "explain this label's score (default: the predicted label)", "LABEL"),
    O("--json", "print one JSON object per text (Predictor.explain's dict)", kind="flag"),
    O("--storage-option", "fsspec storage option of the run's URL, repeatable", "K=V", default=[], kind="append"),
]
EVALUATE = [
    O("--json", "print the metrics as one JSON object", kind="flag"),
    O("--text", "text column (default: the run's)", "COL", kind="append"),
    O("--label", "label column (default: the run's)", "COL"),
    O("--target", "target column (default: the run's)", "COL"),
    O("--label-sep", "a multilabel run: the separator of a label string (default: the run's)", "SEP"),
    O("--plots", "also write plots and per-class tables to DIR", "DIR"),
    O("--force", "replace an earlier evaluation's tables and charts in --plots DIR (without it they are refused)",
      kind="flag"),
]
MAKE_DATA = [
    O("--rows", "rows to write", "N", int, required=True),
    O("--classes", "label classes (default 4)", "K", int, 4),
    O("--multilabel", "1 to 3 labels per row, each with its own topic words: in csv/tsv/parquet a label column "
      "like \"sports|tech\" (train with --task multilabel --label-sep \"|\"), a JSON list in jsonl, a list column "
      "in arrow, several __label__ tags in fastText; refused for .txt (text alone)", kind="flag"),
    O("--seed", "picks the vocabulary, topics and rows (default 0)", "S", int, 0),
    O("--delimiter", "split a CSV file's fields by CHAR: ';', '|' or tab (default ','); train, predict and "
      "evaluate read it with the same --delimiter", "CHAR"),
    O("--force", "replace OUT when it is already a file (without it an existing file is refused)", kind="flag"),
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
    O("--max-body", "largest request body, e.g. 16MiB; a larger one is refused with 413 (default 64MiB)", "SIZE",
      default="64MiB"),
    O("--max-queue", "most /predict requests held at once, answered or waiting; past it a request is refused "
      "with 503 and Retry-After (default 100)", "N", int, 100),
    O("--body-timeout", "seconds a request head or body may stall before it is refused with 408 (default 30)",
      "SECONDS", float, 30.0),
    O("--max-connections", "most connections open at once, idle keep-alive ones included; past it a request is "
      "refused with 503 and Retry-After (default 500)", "N", int, 500),
    O("--storage-option", "fsspec storage option of the run's URL, repeatable", "K=V", default=[], kind="append"),
]
EXPORT = [
    O("--onnx", "write the network as an ONNX graph to FILE (a path or any fsspec URL)", "FILE"),
    O("--compact", "write a copy of the run with 8-bit weights to DIR (a run folder: predict, evaluate and serve "
      "read it; about a quarter of the weights' bytes, the accuracy cost in docs/benchmarks.md)", "DIR"),
    O("--force", "replace --onnx FILE when it is already a file (without it an existing file is refused; a file "
      "of a run folder is refused always)", kind="flag"),
    O("--storage-option", "fsspec storage option of the run's and FILE's URLs, repeatable", "K=V", default=[],
      kind="append"),
]

TUNE = [
    O("--time-budget", "how long to search: 90s, 10m, 1h, or seconds (default 10m); the final run with the best "
      "options trains after it", "TIME", default="10m"),
    O("--trials", "at most N trials, the defaults' trial included (default: until the time budget is spent)", "N",
      int),
]
# `train` options that `tune` does not take (a search trains new runs, one process each): declared so.
NOT_TUNED = tuple(o.flag for o in command_options("train") if "tune" not in o.commands)

EXAMPLES_TRAIN = """examples:
  lancetnic-flow make-data data/train.csv --rows 100000
  lancetnic-flow train data/train.csv --text text --label label --epochs 3
  lancetnic-flow train 's3://bucket/corpus/*.jsonl.gz' --text body --label topic \\
      --storage-option anon=false --cache s3://bucket/cache --memory-budget 8GiB
  lancetnic-flow train data/*.parquet --text text --label label --scheduler tcp://10.0.0.5:8786
"""


DATA_ARGUMENT = next(o for o in OPTIONS if o.kind == "positional")


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


def given_dests(argv: list[str], command: str) -> set[str]:
    """The destinations of ``command``'s options that ``argv`` gives itself, whatever their
    values (``--text text`` too): parsed again with every default suppressed."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[command]._actions:
        action.default = argparse.SUPPRESS
    # A command's set_defaults (tune's None for train's --ddp, --sync-rows, …) are no option typed.
    offered = {action.dest for action in sub.choices[command]._actions}
    given = vars(parser.parse_args(with_negative_values(list(argv))))
    return {k for k, v in given.items() if k in offered and not (k == "data" and v == [])}


class Parser(argparse.ArgumentParser):
    """argparse refusing as every other check of the command line does: one
    line naming what is wrong, a hint with what would work, exit 2; never the
    usage block, whose thirty lines hid the one that mattered."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        names = self._command_names()
        taken = log_file_as_command(list(sys.argv[1:] if args is None else args), names)
        if taken is not None:
            meant = taken if taken in names else difflib.get_close_matches(taken, names, n=1, cutoff=0.5)[0]
            self._refuse(f"--json-log took {taken!r} as its FILE, so no command follows it"
                         + ("" if taken == meant else f" (did you mean the command {meant!r}?)"),
                         f"to log to stdout, put --json-log after the command (lancetnic-flow {meant} … --json-log) "
                         f"or write --json-log=- {meant} …; to a file: --json-log FILE {meant} …")
        a, extra = self.parse_known_args(args, namespace)
        if extra:
            parser = self._command_parser(getattr(a, "command", None))
            parser.error(unknown_words(extra, parser))
        return a

    def _command_parser(self, command: str | None) -> argparse.ArgumentParser:
        sub = next((x for x in self._actions if isinstance(x, argparse._SubParsersAction)), None)
        return sub.choices[command] if sub is not None and command in sub.choices else self

    def _command_names(self) -> list[str]:
        sub = next((x for x in self._actions if isinstance(x, argparse._SubParsersAction)), None)
        return list(sub.choices) if sub is not None else []

    def error(self, message: str) -> NoReturn:
        self._refuse(*refusal_words(message, self))

    def _refuse(self, said: str, hint: str) -> NoReturn:
        self._print_message(f"error: {said}\n  hint: {hint}\n", sys.stderr)
        raise Refused(said, hint)


class Refused(SystemExit):
    """The parser's refusal, exit status 2, with its words kept for ``--json-log``'s ``error`` event."""

    def __init__(self, said: str, hint: str):
        super().__init__(2)
        self.said, self.hint = said, hint


def logs_to_stdout(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the JSON log on stdout (``--json-log`` with no FILE, or ``-``),
    read without the parser: for a command line the parser refused."""
    for i, token in enumerate(argv):
        if token == "--":
            return False
        if token in ("--json-log", "--json-log=-"):
            after = argv[i + 1] if i + 1 < len(argv) and token == "--json-log" else "-"
            return after == "-" or after.startswith("-")
    return False


def log_file_as_command(argv: list[str], commands: list[str]) -> str | None:
    """The word ``--json-log`` given before the command took as its FILE where that word is
    a command, or close to one, and no command follows it (``lancetnic-flow --json-log trian``
    printed the whole help, ``--json-log train data.csv`` refused a command 'data.csv'); else None."""
    if not commands:
        return None
    for i, token in enumerate(argv):
        if token in commands or token == "--":
            return None
        if token == "--json-log" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            word, rest = argv[i + 1], argv[i + 2:]
            follows = next((w for w in rest if not w.startswith("-")), None)
            if follows not in commands and (word in commands or close_matches(word, commands)):
                return word
            return None
    return None


def unknown_words(extra: list[str], parser: argparse.ArgumentParser) -> str:
    """What argparse left unread, with the command's flags closest to the first such option."""
    first = next((w for w in extra if w.startswith("-")), None)
    if first is None:
        return f"no option or argument {' '.join(extra)!r}"
    flags = [s for action in parser._actions for s in action.option_strings]
    return f"no option {first!r}{flag_matches(first.split('=', 1)[0], flags)}"


def flag_matches(word: str, flags: list[str]) -> str:
    """A 'did you mean' phrase for an unknown flag: another tool's name for one of ``flags``
    (:data:`FLAG_ALIASES`), else those spelt closest once the dashes are set aside (the
    shared ``--`` made every pair look alike), written with or without underscores."""
    name = word.lstrip("-").replace("_", "-")
    names = {f.lstrip("-"): f for f in flags if f.startswith("--")}
    alias = FLAG_ALIASES.get(name.lower())
    if alias in names:
        return f" (did you mean {names[alias]!r}?)"
    if name in names:   # --batch_size: the flag, with dashes
        return f" (did you mean {names[name]!r}?)"
    found = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(names[f]) for f in found)}?)" if found else ""


def refusal_words(message: str, parser: argparse.ArgumentParser) -> tuple[str, str]:
    """argparse's ``message`` as (what is wrong, what would work)."""
    listed = f"`{parser.prog} --help` lists its options and what each takes"
    choice = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from (.*)\)$", message)
    if choice:
        names = re.findall(r"'([^']+)'", choice.group(2))
        return (f"no command {choice.group(1)!r}{close_matches(choice.group(1), names)}",
                f"the commands: {', '.join(names)}; `lancetnic-flow --help` says what each does")
    typed = re.match(r"argument (\S+): invalid (int|float) value: (.*)$", message)
    if typed:
        kind = "a whole number" if typed.group(2) == "int" else "a number"
        flag = typed.group(1).split("/")[0]
        # This command's own option: --epochs of `demo` and of `train` say different defaults.
        action = next((x for x in parser._actions if flag in x.option_strings), None)
        return (f"{flag}: expected {kind}, got {typed.group(3)}",
                f"{flag} {action.metavar}: {action.help}" if action is not None and action.help else listed)
    if message.startswith("argument "):
        message = message[len("argument "):]
    return f"{parser.prog}: {message}" if not message.startswith("lancetnic-flow") else message, listed


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
            add_option(g, o)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="lancetnic-flow",
        description="Train text models on more text than fits in memory: Dask + fsspec + PyTorch.",
        epilog="Run `lancetnic-flow demo` to see a whole run on generated data.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lancetnic-flow {__version__}")
    _add_output_control(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("train", help="train a model on text: classify, regress, multitask or multilabel", epilog=EXAMPLES_TRAIN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_option(t, DATA_ARGUMENT)
    _add_output_control(t)
    for title, options in TRAIN.items():
        g = t.add_argument_group(title)
        for o in options:
            add_option(g, o)

    p = _command(sub, "predict", "predict with a trained run",
                 {"": PREDICT, "data": DATA, "memory and cluster": CLUSTER},
                 epilog="examples:\n  lancetnic-flow predict runs/demo --text 'a great match' --text 'new phone'\n"
                        "  lancetnic-flow predict runs/demo --input 'data/*.csv' --output preds.jsonl\n"
                        "  lancetnic-flow predict runs/demo --input data.parquet --keep id --top-k 3 --output preds.parquet")
    p.add_argument("run", metavar="RUN", help="run folder")
    xp = _command(sub, "explain", "why a run predicts what it does: each text's top terms and their contributions "
                  "(linear and bag models; docs/cli.md)", {"": EXPLAIN},
                  epilog="examples:\n  lancetnic-flow explain runs/demo --text 'a late goal won the match'\n"
                         "  lancetnic-flow explain runs/demo --text 'new phone' --top 5 --label tech --json\n"
                         "each class's strongest terms are in the run folder: top_terms.csv (and top_terms.png)")
    xp.add_argument("run", metavar="RUN", help="run folder")
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
    v = _command(sub, "serve", "serve a trained run over HTTP: POST /predict, POST /explain, GET /health (docs/serving.md)",
                 {"": SERVE}, epilog="examples:\n  lancetnic-flow serve runs/demo --port 8000\n"
                 "  curl -s localhost:8000/predict -d '{\"texts\": [\"a great match\"], \"top_k\": 2}'")
    v.add_argument("run", metavar="RUN", help="run folder")
    x = _command(sub, "export", "export a trained run's network (ONNX, or a copy with 8-bit weights; docs/serving.md)", {"": EXPORT},
                 epilog="examples:\n  lancetnic-flow export runs/demo --onnx model.onnx\n"
                        "  lancetnic-flow export runs/demo --compact runs/demo-int8")
    x.add_argument("run", metavar="RUN", help="run folder")
    _tune_command(sub)
    return parser


def _tune_command(sub: Any) -> None:
    """``tune``: ``train``'s options (but --resume, --ddp) and the search's own."""
    groups = {"search": TUNE, **groups_of("tune")}
    t = _command(sub, "tune", "search the model's options on the Dask workers for a time budget, then train with "
                 "the best (docs/tune.md)", groups,
                 description="Each trial trains on a worker's CPU, one thread per trial: --device and --threads\n"
                             "apply to the final run only.",
                 epilog="examples:\n  lancetnic-flow tune data/train.csv --time-budget 10m\n"
                        "  lancetnic-flow tune data/train.csv --val data/val.csv --time-budget 2m --trials 20 "
                        "--name tuned")
    add_option(t, DATA_ARGUMENT)
    t.set_defaults(**{o.dest: None for o in command_options("train") if "tune" not in o.commands})
