"""The ``lancetnic-flow`` command: argument parsing only.

Each subcommand turns its arguments into typed configs and calls the
library. A :class:`UserError` becomes one clear message and exit status 2;
anything else is a bug: exit 1, with the traceback under ``--debug``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from . import __version__
from .errors import UserError

EXAMPLES_TRAIN = """examples:
  lancetnic-flow make-data data/train.csv --rows 100000
  lancetnic-flow train data/train.csv --text text --label label --epochs 3
  lancetnic-flow train 's3://bucket/corpus/*.jsonl.gz' --text body --label topic \\
      --storage-option anon=false --cache s3://bucket/cache --memory-budget 8GiB
  lancetnic-flow train data/*.parquet --text text --label label --scheduler tcp://10.0.0.5:8786
"""


def _add_data_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--format", default="auto", metavar="FMT",
                   help="auto|csv|tsv|jsonl|parquet|text|fasttext (default: from the file name)")
    g.add_argument("--storage-option", action="append", default=[], metavar="K=V",
                   help="fsspec storage option, repeatable; dotted keys nest (client_kwargs.endpoint_url=...)")


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("memory and cluster")
    g.add_argument("--memory-budget", metavar="SIZE",
                   help="total memory to plan for, e.g. 8GiB (default: the smaller of RAM and 16GiB)")
    g.add_argument("--workers", type=int, metavar="N", help="local Dask worker processes (default: planned)")
    g.add_argument("--worker-threads", type=int, metavar="N", help="threads per Dask worker (default 1)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="use an existing Dask cluster (or set DASK_SCHEDULER_ADDRESS)")
    g.add_argument("--blocksize", metavar="SIZE", help="partition size (default: from the memory plan)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lancetnic-flow",
        description="Train text models on more text than fits in memory: Dask + fsspec + PyTorch.",
        epilog="Run `lancetnic-flow demo` to see a whole run on generated data.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lancetnic-flow {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("output control")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for every error")
    g.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help="print only the final result")
    g.add_argument("--json-log", nargs="?", const="-", default=argparse.SUPPRESS, metavar="FILE",
                   help="one JSON object per event: to stdout (no other output there; the console view is off), "
                        "or to FILE (the console view stays)")
    parser._add_container_actions(common)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _sub_add = sub.add_parser
    sub.add_parser = lambda *args, **kw: _sub_add(*args, parents=[common], **kw)  # type: ignore[method-assign]

    t = sub.add_parser("train", help="train a classifier", epilog=EXAMPLES_TRAIN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("data", nargs="*", metavar="DATA", help="training data: paths, URLs or globs")
    g = t.add_argument_group("columns and validation")
    g.add_argument("--text", action="append", metavar="COL", help="text column (repeatable; default: text)")
    g.add_argument("--label", default="label", metavar="COL", help="label column (default: label)")
    g.add_argument("--target", metavar="COL", help="numeric target column (regression, multi-task)")
    g.add_argument("--numeric", metavar="COL,...", help="numeric input columns joined to the text features")
    g.add_argument("--val", nargs="+", metavar="DATA", help="separate validation data")
    g.add_argument("--val-fraction", type=float, default=0.1, metavar="F",
                   help="share of rows held out by a stable hash (default 0.1)")
    _add_data_options(t)
    g = t.add_argument_group("features")
    g.add_argument("--features", metavar="MODE",
                   help="tfidf|hashing|ids (default: the model's: tfidf; hashing for FastTextBag; ids for Lancet*)")
    g.add_argument("--max-len", type=int, default=256, metavar="N", help="tokens kept per row with --features ids")
    g.add_argument("--ngrams", type=int, default=1, metavar="N", help="1 = words, 2 = words and word pairs")
    g.add_argument("--max-features", type=int, default=100_000, metavar="N", help="vocabulary size cap (default 100000)")
    g.add_argument("--min-df", default="1", metavar="N|F", help="drop terms in fewer documents: a count, or a fraction like 0.001 (default 1)")
    g.add_argument("--max-df", default="1.0", metavar="N|F", help="drop terms in more documents: a count, or a fraction (default 1.0)")
    g.add_argument("--sublinear-tf", action="store_true", help="use 1 + log(tf)")
    g.add_argument("--buckets", type=int, default=2**18, metavar="N", help="columns for --features hashing (default 262144)")
    g = t.add_argument_group("model and task")
    g.add_argument("--model", default="ScalpelMC", metavar="NAME",
                   help="ScalpelMC|ScalpelReg|ScalpelMTSK|FastTextBag|LancetMC|LancetMCA|LancetMCA_gru|LancetReg "
                        "(default ScalpelMC; see docs/models.md)")
    g.add_argument("--task", metavar="TASK", help="classify|regress|multitask (default: the model's)")
    g.add_argument("--class-loss", default="cross_entropy", metavar="NAME", help="cross_entropy|bce (two classes)")
    g.add_argument("--value-loss", default="mse", metavar="NAME", help="mse|l1|smooth_l1")
    g.add_argument("--loss-weights", default="1,1", metavar="C,V", help="multi-task: class and value loss weights")
    g.add_argument("--class-weights", default="none", metavar="MODE", help="none|balanced (for imbalanced labels)")
    g.add_argument("--embed", type=int, default=128, metavar="N", help="token embedding width (Lancet models)")
    g.add_argument("--hidden", type=int, default=128, metavar="N", help="hidden layer width (default 128)")
    g.add_argument("--layers", type=int, default=1, metavar="N", help="hidden layers; 0 = linear model (default 1)")
    g.add_argument("--dropout", type=float, default=0.2, metavar="P", help="dropout after each hidden layer (default 0.2)")
    g.add_argument("--epochs", type=int, default=3, metavar="N", help="passes over the training data (default 3)")
    g.add_argument("--batch-size", type=int, default=256, metavar="N", help="rows per optimiser step (default 256)")
    g.add_argument("--lr", type=float, default=1e-2, metavar="X", help="peak learning rate (default 0.01)")
    g.add_argument("--lr-schedule", default="linear", metavar="NAME",
                   help="linear (decay to 5%% of --lr over the run) or constant (default linear)")
    g = t.add_argument_group("training")
    g.add_argument("--optimizer", default="adam", metavar="NAME", help="adam|radam|sgd|rmsprop|adadelta")
    g.add_argument("--early-stopping", type=int, metavar="EPOCHS",
                   help="stop after this many epochs without improving --monitor (the best weights are kept)")
    g.add_argument("--monitor", default="val_loss", metavar="METRIC",
                   help="val_loss|val_accuracy|val_macro_f1|val_mae|val_rmse|val_r2 (default val_loss)")
    g.add_argument("--clip-grad", type=float, metavar="NORM", help="clip the gradient norm")
    g.add_argument("--device", default="auto", metavar="DEV", help="auto|cpu|cuda (auto: CUDA when present; with --ddp, on the ranks' workers, a GPU per rank)")
    g.add_argument("--threads", type=int, metavar="N", help="trainer threads (default: cores not used by workers)")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="fixes partition order, shuffling, init and dropout (default 0)")
    g.add_argument("--shuffle-buffer", type=int, default=20_000, metavar="ROWS", help="rows held for shuffling (default 20000)")
    g.add_argument("--checkpoint-every", default="10m", metavar="N|TIME",
                   help="write a checkpoint every N batches or every TIME (90s, 10m, 1h), plus at each epoch's end "
                        "and on Ctrl-C; off = only on Ctrl-C (default 10m)")
    g.add_argument("--ddp", type=int, metavar="N",
                   help="data-parallel training: N ranks on N Dask workers, gradients averaged (torch.distributed)")
    g.add_argument("--resume", metavar="RUN",
                   help="continue the run folder RUN from its checkpoint, with its own options (only "
                        "--storage-option and the memory and cluster options may be given again)")
    _add_cluster_options(t)
    g = t.add_argument_group("output")
    g.add_argument("--out", default="runs", metavar="DIR", help="parent of the run folder (default runs/)")
    g.add_argument("--name", metavar="NAME", help="run folder name (default: a timestamp)")
    g.add_argument("--cache", metavar="URL", help="shard cache (default OUT/.cache)")

    p = sub.add_parser("predict", help="predict with a trained run",
                       epilog="examples:\n  lancetnic-flow predict runs/demo --text 'a great match' --text 'new phone'\n"
                              "  lancetnic-flow predict runs/demo --input 'data/*.csv' --output preds.jsonl",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", metavar="RUN", help="run folder")
    p.add_argument("--text", action="append", metavar="TEXT", help="a text to classify (repeatable)")
    p.add_argument("--input", nargs="+", metavar="DATA", help="data to predict over Dask partitions")
    p.add_argument("--output", metavar="URL", help="where to write predictions (.csv or .jsonl)")
    p.add_argument("--text-column", action="append", metavar="COL", help="text column of --input (default: the run's)")
    _add_data_options(p)
    _add_cluster_options(p)

    e = sub.add_parser("evaluate", help="evaluate a trained run on labelled data")
    e.add_argument("run", metavar="RUN")
    e.add_argument("data", nargs="+", metavar="DATA")
    e.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    e.add_argument("--text", action="append", metavar="COL", help="text column (default: the run's)")
    e.add_argument("--label", metavar="COL", help="label column (default: the run's)")
    e.add_argument("--target", metavar="COL", help="target column (default: the run's)")
    e.add_argument("--plots", metavar="DIR", help="also write plots and per-class tables to DIR")
    _add_data_options(e)
    _add_cluster_options(e)

    m = sub.add_parser("make-data", help="write a generated, learnable corpus of any size",
                       epilog="the format follows the extension: .csv .tsv .jsonl .parquet .txt .ft, "
                              "plus .gz/.bz2/.xz/.zst to compress")
    m.add_argument("out", metavar="OUT", help="file path or URL")
    m.add_argument("--rows", type=int, required=True, metavar="N")
    m.add_argument("--classes", type=int, default=4, metavar="K")
    m.add_argument("--seed", type=int, default=0, metavar="S")
    m.add_argument("--storage-option", action="append", default=[], metavar="K=V")

    w = sub.add_parser("run", help="run a workflow file (YAML)",
                       epilog="examples:\n  lancetnic-flow run workflows/quickstart.yaml\n"
                              "  lancetnic-flow run workflows/multiclass.yaml --set epochs=1 --set data.train=x.csv",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    w.add_argument("workflow", metavar="FILE", help="a workflow file; its keys are `train` options")
    w.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field (repeatable): epochs=1, training.lr=0.02, make_data.rows=5000")

    d = sub.add_parser("demo", help="generate a corpus, train on it, predict with it")
    d.add_argument("--rows", type=int, default=50_000, metavar="N")
    d.add_argument("--dir", default="demo-data", metavar="DIR", help="where the demo corpus and runs go")
    d.add_argument("--epochs", type=int, default=2, metavar="N")
    return parser


def _size(text: str | None, what: str) -> int | None:
    from .sizes import parse_size

    return parse_size(text, what) if text else None


def _pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--loss-weights {text!r}: expected two numbers", "e.g. --loss-weights 1,0.5") from None
    return a, b


def _train_config(a: argparse.Namespace):
    from .config import (ClusterConfig, DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig,
                         TrainingConfig, parse_df, parse_storage_options)

    return TrainConfig(
        data=DataConfig(train=a.data, val=a.val or [], val_fraction=a.val_fraction, format=a.format,
                        text=a.text or ["text"], label=a.label, target=a.target,
                        numeric=[c.strip() for c in (a.numeric or "").split(",") if c.strip()],
                        storage_options=parse_storage_options(a.storage_option)),
        features=FeatureConfig(mode=a.features, ngrams=a.ngrams, max_features=a.max_features,
                               min_df=parse_df(a.min_df, "--min-df"), max_df=parse_df(a.max_df, "--max-df"),
                               sublinear_tf=a.sublinear_tf, buckets=a.buckets, max_len=a.max_len),
        model=ModelConfig(name=a.model, hidden=a.hidden, layers=a.layers, dropout=a.dropout, embed=a.embed),
        training=TrainingConfig(epochs=a.epochs, batch_size=a.batch_size, lr=a.lr, lr_schedule=a.lr_schedule,
                                optimizer=a.optimizer, seed=a.seed, shuffle_buffer=a.shuffle_buffer,
                                task=a.task, class_loss=a.class_loss, value_loss=a.value_loss,
                                loss_weights=_pair(a.loss_weights), class_weights=a.class_weights,
                                early_stopping=a.early_stopping, monitor=a.monitor, clip_grad=a.clip_grad,
                                device=a.device, threads=a.threads, checkpoint_every=a.checkpoint_every,
                                ddp=a.ddp),
        cluster=ClusterConfig(memory_budget=_size(a.memory_budget, "--memory-budget"), workers=a.workers,
                              threads=a.worker_threads, scheduler=a.scheduler, blocksize=_size(a.blocksize, "--blocksize"),
                              dashboard=True),  # the dashboard link is shown by the console views
        output=OutputConfig(out=a.out, name=a.name, cache=a.cache),
    ).validate()


# Options that may be given again with --resume: where the data and the
# cluster are, not what is trained.
RESUME_OPTIONS = ("storage_option", "memory_budget", "workers", "worker_threads", "scheduler", "resume",
                  "debug", "quiet", "json_log", "command")


def cmd_train(a: argparse.Namespace, report) -> int:
    from .events import Events

    events = Events()
    events.subscribe(report)
    if a.resume:
        from .trainer import resume_config, train

        defaults = vars(build_parser().parse_args(["train"]))
        changed = sorted(k for k, v in vars(a).items()
                         if k not in RESUME_OPTIONS and k in defaults and v != defaults[k])
        if changed:
            flags = ", ".join("DATA" if k == "data" else "--" + k.replace("_", "-") for k in changed)
            raise UserError(f"--resume continues a run with the options it was started with; {flags} cannot change",
                            "drop them, or start a new run (cached shards are reused)")
        cfg = resume_config(a.resume, storage_options=_parse_options(a.storage_option),
                            memory_budget=_size(a.memory_budget, "--memory-budget"), workers=a.workers,
                            threads=a.worker_threads, scheduler=a.scheduler)
        train(cfg, events, resume=a.resume)
        return 0
    if not a.data:
        raise UserError("train needs training data", "e.g. lancetnic-flow train data/train.csv, "
                        "or --resume RUN to continue an interrupted run")
    from .cluster import scheduler_address

    cfg = _train_config(a).validate()
    if not scheduler_address(cfg.cluster.scheduler):
        # Bad paths, formats and columns: exit 2 before torch loads (2 s).
        # The trainer plans the inputs again with its memory plan (a listing
        # and a file head more); on an existing cluster it alone does, once
        # connected, as the partitions depend on the workers' limits.
        from .inputs import check_training_inputs

        check_training_inputs(cfg)
    from .trainer import train

    train(cfg, events)
    return 0


def _parse_options(pairs: list[str]) -> dict:
    from .config import parse_storage_options

    return parse_storage_options(pairs)


def _cluster_for(a: argparse.Namespace):
    from .cluster import open_cluster, plan_memory

    plan = plan_memory(_size(a.memory_budget, "--memory-budget"), workers=a.workers, threads=a.worker_threads,
                       blocksize=_size(a.blocksize, "--blocksize"))
    return plan, open_cluster(plan, scheduler=a.scheduler)


def _run_options(run: str, storage_options: dict) -> dict:
    """--storage-option opens a remote run folder (s3://bucket/runs/NAME) too; a local one needs none."""
    return storage_options if "://" in run and not run.startswith("file://") else {}


def cmd_predict(a: argparse.Namespace, report) -> int:
    from .config import parse_storage_options
    from .inputs import checked_source
    from .runs import read_run_json
    from .sources import Columns

    if bool(a.text) == bool(a.input):
        raise UserError("predict needs either --text TEXT... or --input DATA --output URL")
    if a.input and not a.output:
        raise UserError("--input needs --output URL", "e.g. --output predictions.jsonl or predictions.csv")
    so = parse_storage_options(a.storage_option)
    run_so = _run_options(a.run, so)
    # A wrong run folder or input is exit 2 before torch loads and before a cluster starts.
    _, config = read_run_json(a.run, run_so)
    if a.text:
        from .predict import Predictor

        pred = Predictor(a.run, run_so)
        for text, p in zip(a.text, pred.predict(a.text)):
            print(json.dumps({"text": text, **p}, ensure_ascii=False))
        return 0
    data = config["data"]
    cols = Columns(text=tuple(a.text_column or data["text"]), numeric=tuple(data.get("numeric") or ()))
    plan, cluster = _cluster_for(a)
    src = checked_source(a.input, a.format, so, plan.partition, cols)
    from .predict import Predictor, output_format, predict_files

    output_format(a.output)
    Predictor(a.run, run_so)          # damaged weights fail here, once, not on every worker
    with cluster as client:
        out = predict_files(client, a.run, src, cols, a.output, storage_options=so, run_options=run_so,
                            chunk_bytes=plan.partition, window=plan.in_flight)
    report.console.print(f"wrote {out['rows_written']:,} predictions to {a.output}", markup=False)
    return 0


def cmd_evaluate(a: argparse.Namespace, report) -> int:
    from .config import parse_storage_options
    from .inputs import checked_source
    from .runs import read_run_json, task_kind
    from .sources import Columns

    so = parse_storage_options(a.storage_option)
    run_so = _run_options(a.run, so)
    # A wrong run folder or input is exit 2 before torch loads and before a cluster starts.
    meta, config = read_run_json(a.run, run_so)
    kind, data = task_kind(meta), config["data"]
    cols = Columns(text=tuple(a.text or data["text"]),
                   label=(a.label or data["label"]) if kind != "regress" else None,
                   target=(a.target or data.get("target")) if kind != "classify" else None,
                   numeric=tuple(data.get("numeric") or ()))
    plan, cluster = _cluster_for(a)
    src = checked_source(a.data, a.format, so, plan.partition, cols)
    from .predict import evaluate_files
    from .runs import load_run
    from .tasks import task_of_run

    run = load_run(a.run, run_so)
    task = task_of_run(run)
    with cluster as client:
        out, merged = evaluate_files(client, a.run, src, cols, storage_options=so, run_options=run_so,
                                     chunk_bytes=plan.partition, window=plan.in_flight)
    if a.plots:
        from .plots import write_plots

        reg = merged.reg if merged is not None else None
        out["plots"] = write_plots(a.plots, metrics=out, labels=run.features.labels if task.classifies else None,
                                   sample=(reg.true, reg.pred) if reg is not None else None)
    out["labels"] = run.features.labels
    if a.json:
        print(json.dumps(out))
    else:
        shown = [f"{k} {out[k]:.4f}" for k in ("accuracy", "macro_f1", "mae", "rmse", "r2", "loss")
                 if out.get(k) is not None]
        report.console.print(" · ".join(shown) + f" · {out['rows']['evaluated']:,} rows", markup=False)
        if out.get("plots"):
            report.console.print(f"plots in {a.plots}", markup=False)
    return 0


def cmd_make_data(a: argparse.Namespace, report) -> int:
    from .config import parse_storage_options
    from .synth import write_corpus

    if a.rows <= 0:
        raise UserError(f"--rows must be > 0, got {a.rows}")
    if a.classes < 2:
        raise UserError(f"--classes must be ≥ 2, got {a.classes}")
    info = write_corpus(a.out, a.rows, classes=a.classes, seed=a.seed,
                        storage_options=parse_storage_options(a.storage_option))
    report.console.print(f"wrote {info['rows']:,} rows to {a.out} ({info['format']})", markup=False)
    return 0


def cmd_demo(a: argparse.Namespace, report) -> int:
    from .config import DataConfig, TrainConfig, TrainingConfig, OutputConfig
    from .events import Events
    from .predict import Predictor
    from .synth import write_corpus

    os.makedirs(a.dir, exist_ok=True)
    data = os.path.join(a.dir, f"demo-{a.rows}.csv")
    if not os.path.exists(data):
        report.console.print(f"generating {a.rows:,} rows → {data}", markup=False)
        write_corpus(data + ".tmp.csv", a.rows, classes=4, seed=0)
        os.replace(data + ".tmp.csv", data)
    events = Events()
    events.subscribe(report)
    from .trainer import train

    res = train(TrainConfig(data=DataConfig(train=[data]), training=TrainingConfig(epochs=a.epochs),
                            output=OutputConfig(out=os.path.join(a.dir, "runs"))), events)
    pred = Predictor(res.run)
    import pyarrow.csv as pacsv

    sample = pacsv.open_csv(data).read_next_batch().slice(0, 3)
    for text, label, p in zip(sample["text"].to_pylist(), sample["label"].to_pylist(),
                              pred.predict(sample["text"].to_pylist())):
        report.console.print(f"  {text[:60]!r}… → {p['label']} ({p['probability']:.2f}), true {label}", markup=False)
    return 0


def cmd_run(a: argparse.Namespace, report) -> int:
    from .workflow import prepare_workflow

    # The workflow becomes a `train` command line, parsed by the same parser
    # and run with this command's report (so --quiet/--json-log apply).
    return cmd_train(build_parser().parse_args(prepare_workflow(a.workflow, a.set)), report)


def _known_failure(exc: Exception) -> tuple[str, str] | None:
    """Failures of the machinery around a run, said in words: (message, hint)."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return (f"a Dask worker died repeatedly while running task {getattr(exc, 'task', '?')}",
                "most often it ran out of memory: use a smaller --blocksize, fewer --worker-threads, or a larger "
                "--memory-budget; the worker logs (or `dmesg` for the OOM killer) say more")
    if name == "RanksKeptFailing":
        return (str(exc), "most often a worker ran out of memory (its limit must hold the model, its optimiser "
                          "moments and a shuffle buffer; `dmesg` shows the OOM killer); fix that, then continue "
                          "with `lancetnic-flow train --resume RUN` from the last checkpoint")
    if name in ("CommClosedError", "StreamClosedError") or (isinstance(exc, OSError) and "scheduler" in str(exc)):
        return (f"lost the connection to the Dask cluster ({exc})",
                "check that the scheduler is still running and reachable, then rerun: cached shards are reused")
    return None


COMMANDS = {"run": cmd_run, "train": cmd_train, "predict": cmd_predict, "evaluate": cmd_evaluate, "make-data": cmd_make_data,
            "demo": cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if not a.command:
        parser.print_help()
        return 2
    from .report import ConsoleReport

    debug = getattr(a, "debug", False)
    try:
        report = ConsoleReport(quiet=getattr(a, "quiet", False), json_log=getattr(a, "json_log", None))
    except OSError as exc:
        print(f"error: --json-log {a.json_log}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[a.command](a, report)
    except UserError as exc:
        if debug:
            raise
        report.error(exc.message, exc.hint, 2)
        return 2
    except KeyboardInterrupt as exc:
        report.close()
        # A TrainingInterrupted says where the checkpoint is and how to resume.
        said = str(exc) or ("before training began, so there is nothing to resume: run the same command again "
                            "(what was already fitted or featurised is cached)" if a.command in ("train", "run") else "")
        report.console.print(f"interrupted: {said}" if said else "interrupted", highlight=False, soft_wrap=True,
                             markup=False)
        return 130
    except Exception as exc:
        if debug:
            raise
        known = _known_failure(exc)
        if known:
            report.error(*known, 1)
            return 1
        report.error(f"{type(exc).__name__}: {exc}", "rerun with --debug for the traceback, and report it if it "
                     "looks like a bug", 1, label="internal error")
        return 1
    finally:
        report.finish()


if __name__ == "__main__":
    sys.exit(main())
