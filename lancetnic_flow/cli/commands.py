"""The commands: each turns its parsed arguments into typed configs and
calls the library. Heavy imports (torch, Dask) happen inside a command, after
its arguments and inputs are checked, so a user error is reported at once.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex

from ..config import ClusterConfig, parse_storage_options
from ..errors import UserError, reworded
from ..scores import BY_KEY
from ..formats import csv_delimiter, text_encoding
from ..storage import (absolute, check_writable, open_options, options_for, refuse_existing_file,
                       refuse_local_storage_options, url_to_fs)
from ..plurals import counted, verb


def _size(text: str | None, what: str) -> int | None:
    from ..sizes import parse_size

    return parse_size(text, what) if text else None


def _train_config(a: argparse.Namespace):
    """The parsed ``train``/``tune`` options → a validated TrainConfig, as declared (options.py)."""
    from ..config import config_from_options

    # The dashboard link is shown by the console views. Not resolved: train() takes the options as given,
    # so --model auto decides again after the fit pass (resolve.resolve_counts).
    return config_from_options({**vars(a), "dashboard": True}, given=getattr(a, "given", ()))


# Options that may be given again with --resume: where the data and the
# cluster are, not what is trained.
RESUME_OPTIONS = ("storage_option", "memory_budget", "workers", "worker_threads", "scheduler", "scheduler_wait",
                  "resume", "debug", "quiet", "json_log", "command")


def _fields_of(dest: str) -> tuple[str, ...]:
    """The configuration fields an option's destination sets (none: command-line only)."""
    from ..options import BY_DEST

    if dest in ("ngram_range", "ngrams"):
        return ("features.ngram_min", "features.ngrams")
    return (BY_DEST[dest].field,) if dest in BY_DEST and BY_DEST[dest].field else ()


def _given_fields(a: argparse.Namespace) -> set[str]:
    """The configuration fields the command line gave itself (``main`` records their flags)."""
    from ..config import given_fields

    return set(given_fields(getattr(a, "given", ())))


def _flag(dest: str) -> str:
    return "DATA" if dest == "data" else "--" + dest.replace("_", "-")


def _as_typed(dest: str, cfg) -> str:
    """An option's value in ``cfg`` as the command line would give it: ``--no-lowercase``, ``--epochs 3``."""
    from ..options import BY_DEST
    from ..training.resume import field_value

    values = [field_value(cfg, f) for f in _fields_of(dest)]
    value = values if dest == "ngram_range" else values[-1]
    kind = BY_DEST[dest].kind if dest in BY_DEST else "value"
    if kind in ("bool", "flag") and isinstance(value, bool):
        return _flag(dest) if value else ("--no-" + dest.replace("_", "-") if kind == "bool" else f"no {_flag(dest)}")
    shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    return f"{_flag(dest)} {'(none)' if shown in (None, '') else shown}"


def refuse_resume_changes(a: argparse.Namespace, saved) -> None:
    """``--resume`` continues the run as it was started: an option it cannot change
    (any but :data:`RESUME_OPTIONS`) typed with another value than the run's is
    refused, naming it, even at the parser's default (``--epochs 10``), as the run
    would train on without it. Typed at the run's own value it changes nothing."""
    from ..training.orchestrator import with_absolute_paths
    from ..training.resume import changed_fields

    # Paths as config.json holds them (absolute): `--out runs` typed in the run's own folder is its value.
    typed, held = with_absolute_paths(_train_config(a)), with_absolute_paths(saved)
    changed = [d for d in sorted(getattr(a, "given", ())) if d not in RESUME_OPTIONS
               and (not _fields_of(d) or changed_fields(typed, held, _fields_of(d)))]
    if not changed:
        return
    runs = ", ".join(_as_typed(d, saved) for d in changed if _fields_of(d))
    raise UserError(f"--resume continues a run with the options it was started with; "
                    f"{', '.join(map(_flag, changed))} cannot change" + (f" (the run's: {runs})" if runs else ""),
                    "drop them, or start a new run (cached shards are reused)")


def cmd_train(a: argparse.Namespace, report) -> int:
    from ..runs.folder import check_output_places

    if a.resume is not None and not a.resume.strip():   # an unset variable: it started a new run instead
        raise UserError(f"--resume {a.resume!r}: an empty value", "give the run folder to continue: --resume RUN")
    if a.resume and a.init_from:
        raise UserError("--resume continues an interrupted run with its own options; --init-from starts a new run "
                        "from a finished one", f"give one of them: --resume {a.resume}, or DATA --init-from "
                        f"{a.init_from}")
    if a.resume:
        from ..training.orchestrator import train
        from ..training.resume import resume_config

        cfg = resume_config(a.resume, storage_options=parse_storage_options(a.storage_option),
                            memory_budget=_size(a.memory_budget, "--memory-budget"), workers=a.workers,
                            threads=a.worker_threads, scheduler=a.scheduler, scheduler_wait=a.scheduler_wait)
        refuse_resume_changes(a, cfg)
        check_output_places(cfg, a.resume)
        train(cfg, _events(report), resume=a.resume)
        return 0
    if not a.data:
        raise UserError("train needs training data", "e.g. lancetnic-flow train data/train.csv, "
                        "or --resume RUN to continue an interrupted run"
                        + (f"; --init-from {a.init_from} continues on new data: train NEW_DATA --init-from "
                           f"{a.init_from}" if a.init_from else ""))
    given = _train_config(a)
    if a.init_from:   # the run's features, model and task, and its values of the options not given
        from ..training.keep_learning import continue_config

        given = continue_config(given, explicit=_given_fields(a))
    return train_config(given, report)


def _events(report, words: str = "cli"):
    """The run's events, shown by ``report``; its messages name options as ``words``
    does (``cli``: flags; ``workflow``: a workflow file's keys)."""
    from ..events import Events

    events = Events(words=words)
    events.subscribe(report)
    return events


def train_config(given, report, words: str = "cli") -> int:
    """Train a configuration (of `train` or a workflow file, ``words`` ``workflow``: its
    messages name the file's keys), checked, its places and inputs too, first."""
    from ..dataflow.cluster import scheduler_address
    from ..runs.folder import check_output_places

    from ..training.keep_learning import check_resolved, continue_config, is_continued

    if given.training.init_from and not is_continued(given):   # a workflow's --init-from
        given = continue_config(given)
    # Bad options, then an unwritable --out or --cache: exit 2 now, not after the fit pass (train() checks
    # again, for the API). train() takes the options as given: --model auto decides again after the fit.
    cfg = given.validate()
    check_resolved(cfg)
    check_output_places(cfg)
    if not scheduler_address(cfg.cluster.scheduler):
        # Bad paths, formats and columns: exit 2 before torch loads (2 s).
        # The trainer plans the inputs again with its memory plan (a listing
        # and a file head more); on an existing cluster it alone does, once
        # connected, as the partitions depend on the workers' limits.
        from ..data.checks import check_training_inputs

        check_training_inputs(cfg)
    from ..training.orchestrator import train

    train(given, _events(report, words))
    return 0


def _plan_for(a: argparse.Namespace, model: int = 0, on_workers: bool = False):
    """predict's and evaluate's plan: this process holds the loaded run (``model`` bytes,
    :func:`~lancetnic_flow.runs.weights_size.loaded_bytes`), and so, ``on_workers``, does each worker."""
    from ..dataflow.plan import plan_memory

    return plan_memory(_size(a.memory_budget, "--memory-budget"), workers=a.workers, threads=a.worker_threads,
                       model_bytes=model, worker_model_bytes=model if on_workers else 0,
                       blocksize=_size(a.blocksize, "--blocksize"), holder="this process")


def _run_model_bytes(run: str, run_so: dict, meta: dict) -> int:
    """What loading ``run`` holds at its peak, read from its weights' header (nothing loaded)."""
    from ..runs.linear_scores import linear_shapes
    from ..runs.weights_size import loaded_bytes

    return loaded_bytes(run, run_so, torch_network=linear_shapes(meta) is None)


def _planned_inputs(a: argparse.Namespace, model: int, inputs) -> tuple:
    """predict's or evaluate's plan, inputs (``inputs(partition)``, checked), and where
    they run: this process's threads for small inputs (dataflow/inprocess.py's rule, as
    train's), else a cluster whose every worker holds the loaded run (``model`` bytes) —
    planned so, or refused naming what would hold it, before anything is loaded."""
    from ..dataflow.cluster import scheduler_address
    from ..dataflow.inprocess import choose_where, in_process_peak, input_bytes
    from ..dataflow.plan import TRAINER_BASE

    if scheduler_address(a.scheduler):
        plan = _plan_on_cluster(a, model)
        return plan, inputs(plan.partition), *choose_where(
            a.run_on, input_bytes=None, needs_cluster="an existing cluster (--scheduler)", plan=plan,
            trainer_need=TRAINER_BASE + model, threads=plan.workers * plan.threads)
    plan = _plan_for(a)
    src = inputs(plan.partition)
    threads = plan.workers * plan.threads
    here, where = choose_where(a.run_on, input_bytes=input_bytes(src), needs_cluster=None, plan=plan,
                               trainer_need=TRAINER_BASE + model, threads=threads)
    if not model:
        return plan, src, here, where
    share, need_here = plan.budget - plan.reserve, TRAINER_BASE + model + in_process_peak(plan, threads)
    if here:
        if need_here > share:
            raise _too_small_here(plan, model, need_here)
        return plan, src, here, where
    try:
        on_workers = _plan_for(a, model, on_workers=True)
    except UserError as exc:
        here_too = ("--run-on process (this process alone holds it)" if need_here <= share else
                    f"--run-on process with --memory-budget {_budget_here(need_here)}")
        # The plan's refusal in the command line's words (its flags), the run's model added.
        raise reworded(exc, lambda message, hint: (f"{message} (the run's model, loaded, takes {_size_text(model)} in "
                                                   f"this process and in every worker)", f"{hint}, or {here_too}"),
                       UserError) from None
    return on_workers, inputs(on_workers.partition), here, where


def _plan_on_cluster(a: argparse.Namespace, model: int):
    """predict's and evaluate's plan on an existing cluster: its workers' memory limits and threads
    (each holding the loaded run, ``model`` bytes) size the partitions and the window, as train's
    are; the options that size a LocalCluster are refused, as they would do nothing."""
    from ..dataflow.cluster import WORKERS_WAIT_S, open_cluster, plan_for_existing
    from ..dataflow.plan import TRAINER_BASE

    idle = [flag for flag, value in (("--memory-budget", a.memory_budget), ("--workers", a.workers),
                                     ("--worker-threads", a.worker_threads)) if value is not None]
    if idle:
        existing = "--scheduler" if a.scheduler else "DASK_SCHEDULER_ADDRESS"
        raise UserError(f"{', '.join(idle)} size{'s' if len(idle) == 1 else ''} the LocalCluster this command starts, "
                        f"and {existing} names an existing cluster, whose workers' memory limits and threads plan it",
                        f"drop {', '.join(idle)}; an existing cluster's workers are sized where they start "
                        "(`dask worker ADDRESS --memory-limit 4GiB --nthreads 2`)")
    wait = ClusterConfig(**({"scheduler_wait": a.scheduler_wait} if a.scheduler_wait else {})).wait_seconds()
    with open_cluster(None, scheduler=a.scheduler, wait=wait, workers_wait=WORKERS_WAIT_S) as client:
        return plan_for_existing(client, trainer=TRAINER_BASE + model, blocksize=_size(a.blocksize, "--blocksize"),
                                 worker_model_bytes=model)


def _size_text(n: int) -> str:
    from ..sizes import format_size

    return format_size(n)


def _budget_here(need: int) -> str:
    """The smallest budget, in tenths of a GiB, whose share after the OS headroom (a quarter) holds ``need``."""
    from ..dataflow.plan import GiB

    tenths = -(-need * 4 * 10 // (3 * GiB)) + 1
    return f"{tenths / 10:.1f}GiB"


def _too_small_here(plan, model: int, need: int) -> UserError:
    """The budget cannot hold the loaded run and the reading tasks in this process: the budget that would."""
    return UserError(f"memory budget {_size_text(plan.budget)} is too small: this process needs "
                     f"{_size_text(need)} (the run's model, loaded, {_size_text(model)}, and the reading tasks) "
                     f"after {_size_text(plan.reserve)} of OS headroom",
                     f"use --memory-budget {_budget_here(need)} or more")


def _client_for(a: argparse.Namespace, plan, here: bool):
    """The client that runs predict's or evaluate's partitions: this process's threads, or a cluster."""
    from ..dataflow.cluster import WORKERS_WAIT_S, open_cluster
    from ..dataflow.inprocess import InProcessClient

    wait = ClusterConfig(**({"scheduler_wait": a.scheduler_wait} if a.scheduler_wait else {})).wait_seconds()
    return (InProcessClient(plan.workers * plan.threads) if here else
            open_cluster(plan, scheduler=a.scheduler, wait=wait, workers_wait=WORKERS_WAIT_S))


def _keep(text: str | None) -> tuple[tuple[str, ...], bool]:
    if text is None:
        return (), False
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise UserError("--keep: no column named", "e.g. --keep id or --keep id,source or --keep all")
    return ((), True) if names == ("all",) else (names, False)


def _refuse_texts_not_given_once(a: argparse.Namespace) -> None:
    """predict reads its texts from --text or from --input, one of the two: neither, or both,
    is refused with a command that works."""
    run = shlex.quote(a.run)
    if not a.text and not a.input:
        raise UserError("predict needs texts: --text TEXT (repeatable) or --input DATA --output URL",
                        f"e.g. lancetnic-flow predict {run} --text 'a great match last night', or "
                        f"lancetnic-flow predict {run} --input data.csv --output predictions.csv")
    if a.text and a.input:
        raise UserError("predict reads its texts from --text or from --input, not both",
                        "drop --text to predict the rows of --input, or drop --input (and --output) "
                        "to predict the texts typed")


# What the run's summary and the docs write where a text goes (``--text '...'``): typed as it is, it was
# predicted as a text of no word, status empty_text, as if the run could not read the user's text.
PLACEHOLDERS = ("...", "…")


def refuse_placeholder(texts: list[str], command: str) -> None:
    """A ``--text`` that is the summary's placeholder, copied as printed: refused, naming where the text goes."""
    if any(t.strip() in PLACEHOLDERS for t in texts):
        raise UserError("--text '...' stands for your own text (the run's summary prints it so), and '...' holds "
                        "no word to predict", f"put the text in its place, e.g. {command} --text 'a great match "
                        "last night'")


def cmd_predict(a: argparse.Namespace, report) -> int:
    from ..data.checks import checked_source
    from ..data.sources import Columns
    from ..runs.loading import read_run_json

    _refuse_texts_not_given_once(a)
    if a.text:
        _refuse_input_options(a)
        refuse_placeholder(a.text, f"lancetnic-flow predict {shlex.quote(a.run)}")
    if a.input and not a.output:
        raise UserError("--input needs --output URL", "e.g. --output predictions.jsonl, .csv or .parquet")
    _refuse_idle_wait(a)
    _check_cluster_options(a)
    if a.top_k is not None and a.top_k < 1:
        raise UserError(f"--top-k must be ≥ 1, got {a.top_k}", "e.g. --top-k 3, or drop it")
    if a.threshold is not None and not 0.0 < a.threshold < 1.0:
        raise UserError(f"--threshold must be between 0 and 1, got {a.threshold}", "e.g. --threshold 0.3")
    keep, keep_all = _keep(a.keep)
    so = parse_storage_options(a.storage_option)
    refuse_local_storage_options(so, {"RUN": a.run, "--input": a.input, "--output": a.output})
    run_so = options_for(a.run, so)
    # A wrong run folder or input is exit 2 before torch loads and before a cluster starts.
    meta, config = read_run_json(a.run, run_so)
    if a.text:
        return _predict_texts(a, report, run_so)
    from ..runs.outputs import check_label_sets_written_whole, check_output_place, output_format

    output_format(a.output)
    # An unwritable --output: exit 2 now, not after every row is predicted.
    check_writable(a.output, options_for(a.output, so), "--output", folder=False)
    data = config.get("data") or {}
    cols = Columns(text=tuple(a.text_column or data.get("text") or ("text",)),
                   numeric=tuple(data.get("numeric") or ()), keep=keep, keep_all=keep_all, all_rows=True,
                   encoding=text_encoding(a.encoding or data.get("encoding")),
                   delimiter=csv_delimiter(a.delimiter or data.get("delimiter")))
    cols.refuse_named_twice({"text": "--text-column" if a.text_column else "the run's --text",
                             "numeric": "the run's --numeric", "keep": "--keep"})
    plan, src, here, where = _planned_inputs(   # rows as the inputs list them
        a, _run_model_bytes(a.run, run_so, meta),
        lambda size: checked_source(a.input, a.format, so, size, cols, in_order=True))
    check_output_place(a.output, so, [f.url for f in src.files])
    if not a.force:
        refuse_existing_file(a.output, options_for(a.output, so), f"--output {a.output}", "predict")
    _refuse_idle_reading(a, cols, src, so)
    say_decided(report, src)
    from ..data.checks import first_columns
    from ..runs.loading import weights_stamp
    from ..runs.predict import predict_files, predictor

    # Damaged weights fail here, once, not on every worker; the tasks of this process use this same copy.
    pred = predictor(absolute(a.run), run_so, weights_stamp(absolute(a.run), run_so))
    pred.check_asks(a.top_k, a.threshold)
    if pred.multilabel:
        check_label_sets_written_whole(a.output, pred.labels)
    _check_kept_names(cols, first_columns(src, so, cols.encoding, cols.delimiter), pred.output_names(a.top_k))
    with _client_for(a, plan, here) as client:
        out = predict_files(client, absolute(a.run), src, cols, a.output, storage_options=so, run_options=run_so,
                            chunk_bytes=plan.partition, window=plan.in_flight, top_k=a.top_k,
                            threshold=a.threshold, force=True)   # an existing file: refused above, as --force asks
    out["where"] = where
    if report.json is not None:
        report.json("predicted", out)
    report.say(predicted_line(out), markup=False, highlight=False, soft_wrap=True)
    return 0


def _refuse_idle_reading(a: argparse.Namespace, cols, src, so: dict) -> None:
    """``--encoding`` and ``--delimiter`` given where they decode or split nothing in the
    inputs (nor, for ``--delimiter``, a CSV output's fields) are refused; the run's own apply
    where they do, unsaid."""
    from ..data.idle_options import refuse_idle_delimiter, refuse_idle_encoding
    from ..runs.outputs import output_format

    if a.encoding is not None:
        refuse_idle_encoding(cols, src, storage_options=so, named=a.encoding)
    if a.delimiter is not None and output_format(a.output) != "csv":   # a CSV output is written with it
        refuse_idle_delimiter(cols, src)


def _predict_texts(a: argparse.Namespace, report, run_so: dict) -> int:
    """``predict --text``: one JSON line (or ``prediction`` event) per text, then the warnings
    of texts read only to --max-len and of texts holding no term the run reads."""
    from ..features.vectorize import cut_rows
    from ..runs.predict import Predictor, cut_message, unread_message

    pred = Predictor(a.run, run_so)
    cut: list = []   # texts read only to the run's --max-len: a warning line, as --input's count
    log = getattr(report, "json", None)
    predicted = pred.predict(a.text, top_k=a.top_k, threshold=a.threshold, cut=cut)
    for text, p in zip(a.text, predicted):
        if log is not None:   # --json-log: each prediction is an event; to stdout, the event is the line
            log("prediction", {"text": text, **p})
            if report.view is None:
                continue
        print(json.dumps({"text": text, **p}, ensure_ascii=False))
    longer = int(cut_rows(cut, 0).sum())
    if longer:
        report("warning", {"message": cut_message(longer, pred.run.features.max_len)})
    unread = [t for t, p in zip(a.text, predicted) if p["status"] == "empty_text"]
    if unread:   # the text is there: its status alone read as if none had been given
        report("warning", {"message": unread_message(unread, pred.run.features)})
    return 0


# What only reading --input uses, and its value when not given: with --text each would do nothing.
INPUT_ONLY = {"output": None, "force": False, "text_column": None, "keep": None, "format": "auto", "encoding": None,
              "delimiter": None,
              "memory_budget": None, "workers": None, "worker_threads": None, "scheduler": None,
              "scheduler_wait": None, "blocksize": None, "run_on": "auto"}


def _check_cluster_options(a: argparse.Namespace) -> None:
    """predict's and evaluate's memory and cluster options, checked as train's are: a size or
    count of 0 read as "not given" (--memory-budget 0, --blocksize 0, --worker-threads 0 planned
    as the defaults without a word), and --workers 0 ended in an internal error."""
    ClusterConfig(memory_budget=a.memory_budget, workers=a.workers, threads=a.worker_threads, blocksize=a.blocksize,
                  run_on=a.run_on).validate()


def _refuse_idle_wait(a: argparse.Namespace) -> None:
    """``--scheduler-wait`` without an existing cluster to wait for: refused, not ignored."""
    from ..dataflow.cluster import scheduler_address

    if a.scheduler_wait and not scheduler_address(a.scheduler):
        raise UserError(f"--scheduler-wait {a.scheduler_wait} is how long a lost scheduler of an existing cluster is "
                        "waited for, and this command starts its own (no --scheduler)",
                        "add --scheduler ADDRESS, or drop --scheduler-wait")


def _refuse_input_options(a: argparse.Namespace) -> None:
    """``predict --text``: the options of reading and writing files, given, are refused, not ignored."""
    given = ["--" + k.replace("_", "-") for k, unset in INPUT_ONLY.items() if getattr(a, k, unset) != unset]
    if given:
        raise UserError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --input DATA; --text "
                        "predicts the texts given here, printed one JSON line each (redirect them to keep them: "
                        "> predictions.jsonl)", f"drop {', '.join(given)}, or predict a file: --input DATA "
                        "--output URL")


def _run_options(a: argparse.Namespace) -> dict:
    """The storage options that open the run folder RUN, the one path of the command
    (refused where RUN is local: they would open nothing)."""
    so = parse_storage_options(a.storage_option)
    refuse_local_storage_options(so, {"RUN": a.run})
    return options_for(a.run, so)


def cmd_explain(a: argparse.Namespace, report) -> int:
    from ..runs.loading import read_run_json

    if not a.text:
        raise UserError("explain needs at least one --text TEXT", "e.g. lancetnic-flow explain RUN --text 'a late "
                        "goal won the match'")
    if a.top < 1:
        raise UserError(f"--top must be ≥ 1, got {a.top}", "e.g. --top 10")
    refuse_placeholder(a.text, f"lancetnic-flow explain {shlex.quote(a.run)}")
    run_so = _run_options(a)
    # A wrong run folder is exit 2 before anything loads; a sequence model, once its kind is read.
    meta, _ = read_run_json(a.run, run_so)
    from ..runs.explain import Decomposition

    if meta.get("net", "ScalpelNet") != "ScalpelNet":
        Decomposition(meta, {})   # the UserError saying what is and is not available
    from ..runs.predict import Predictor

    pred = Predictor(a.run, run_so)
    log = getattr(report, "json", None)
    for text, doc in zip(a.text, pred.explain(a.text, top=a.top, label=a.label)):
        if log is not None:   # --json-log: each explanation is an event, as predict's and evaluate's results are
            log("explained", {"text": text, **doc})
            if report.view is None:   # to stdout: the console view is off, the event is the result
                continue
        if a.json:
            print(json.dumps({"text": text, **doc}, ensure_ascii=False))
        else:
            print(explained_lines(text, doc))
    return 0


def explained_lines(text: str, doc: dict) -> str:
    """One explanation as a few readable lines: the prediction, then each term's contribution."""
    short = text if len(text) <= 60 else text[:59] + "…"
    if doc["status"] != "ok":
        return f"{short!r}: not predicted ({doc['status']})"
    method = "exact" if doc["method"] == "exact" else "local: exact at this text only"
    if "label" in doc:
        head = f"{short!r} → {doc['label']} (probability {doc['probability']:.3f}): logit {doc['logit']:.4g}"
    else:
        head = f"{short!r} → value {_in_units(doc['value'])}"
    bias = f"{doc['bias']:+.4g}" if "label" in doc else _in_units(doc["bias"], "+")
    lines = [f"{head} = bias {bias} + the terms' contributions ({method})"]
    if "labels" in doc and doc["label"] not in doc["labels"]:   # a multilabel run's, below its threshold
        lines[0] += f"; not predicted (the row's labels: {', '.join(map(str, doc['labels'])) or 'none'})"
    lines += _term_lines(doc)
    if "value_explained" in doc:   # a multitask run's value, explained in its own terms
        v = doc["value_explained"]
        lines.append(f"  and value {_in_units(doc['value'])} = bias {_in_units(v['bias'], '+')} + the terms' "
                     f"contributions ({method})")
        lines += _term_lines(v)
    return "\n".join(lines)


def _in_units(x: float, sign: str = "") -> str:
    """A value in the target's units to the terms' four decimals, whatever its size: four
    significant digits made a target near 1e6 read ``value 1e+06 = bias +1e+06`` beside
    contributions of a few thousandths."""
    digits = len(str(int(abs(x)))) if math.isfinite(x) else 0
    return f"{x:{sign}.{digits + 4}g}"


def _term_lines(doc: dict) -> list[str]:
    lines = []
    for t in doc["terms"]:
        where = "" if t["feature"] is None else f", feature {t['feature']}"
        lines.append(f"  {t['contribution']:+9.4f}  {t['term']}  (value {t['value']:.4g} × weight "
                     f"{t['weight']:.4g}{where})")
    others = doc["terms_total"] - len(doc["terms"])
    if others:
        lines.append(f"  {doc['rest']:+9.4f}  {others:,} other term{'s' if others != 1 else ''}")
    if not doc["terms_total"]:
        lines.append("  no term of the text is a feature of the run: the bias alone")
    return lines


def say_decided(report, src) -> None:
    """The formats the inputs' starts decided, in train's words (``decided  format fasttext: …``), and the
    planner's warnings (files left out of a folder, a link read once), as train says them, on stderr."""
    for w in src.warnings:
        if report.json is not None:
            report.json("warning", {"message": w})
        if not report.quiet:
            report.say(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)
    for s in src.sniffed:
        if not s.news:
            continue
        if report.json is not None:
            report.json("decided", {"what": "format", "message": s.message()})
        if not report.quiet:
            report.say(f"decided  {s.message()}", markup=False, highlight=False, soft_wrap=True)


def _check_kept_names(cols, have: list[str] | None, outputs: list[str]) -> None:
    """Kept input columns must not take the name of an output column (checked before any work)."""
    kept = cols.kept(have or []) if (cols.keep or cols.keep_all) else ["text"]
    clash = [c for c in kept if c in outputs]
    if clash:
        raise UserError(f"the input column {clash[0]!r} has the name of a prediction column "
                        f"({', '.join(outputs)})", "keep other columns (--keep COL,...), or rename that column")


def predicted_line(out: dict) -> str:
    """``wrote 4 rows to p.csv: 2 predicted, 2 not (1 empty_text, 1 malformed; see the status column)``"""
    line = f"wrote {counted(out['rows_written'], 'row')} to {out['output']}: {out['predicted']:,} predicted"
    bad = out["not_predicted"]
    if bad:
        why = ", ".join(f"{n:,} {k}" for k, n in sorted(bad.items(), key=lambda kv: -kv[1]))
        line += f", {sum(bad.values()):,} not ({why}; see the status column)"
    return line + noted_note(out.get("noted", {}))


def noted_note(noted: dict) -> str:
    """``; 300 --numeric values that are not numbers …`` for the rows read changed, where there are some."""
    from ..features.vectorize import TRUNCATED

    words = ""
    n = noted.get("unreadable_numeric")
    if n:
        words += (f"; {counted(n, '--numeric value')} that {verb(n, 'is not a number', 'are not numbers')} (a "
                  "decimal comma, text) read as the training mean, as a missing one is (unreadable_numeric)")
    n = noted.get("unreadable_target")
    if n:
        words += (f"; {counted(n, '--target value')} that {verb(n, 'is not a number', 'are not numbers')} (a "
                  "decimal comma, text, nan, inf) skipped as missing_target (unreadable_target)")
    n = noted.get("label_as_run")
    if n:
        words += f"; {counted(n, 'label')} read as the run's spelling of the same value (label_as_run)"
    n = noted.get(TRUNCATED)
    if n:
        words += (f"; {counted(n, 'row')} held more tokens than the model's --max-len: it read the first ones "
                  f"({TRUNCATED})")
    return words


def _refuse_unread_columns(a: argparse.Namespace, kind: str) -> None:
    """``evaluate``: a column option the run's task does not score, given, is refused, not ignored."""
    what = {"regress": "a value", "multitask": "a label and a value", "multilabel": "a set of labels"}.get(
        kind, "one label a row")
    for flag, value, reads in (("--label", a.label, kind != "regress"),
                               ("--target", a.target, kind in ("regress", "multitask")),
                               ("--label-sep", a.label_sep, kind == "multilabel")):
        if value is not None and not reads:
            raise UserError(f"{flag} {value}: this {kind} run predicts {what}, so evaluate would not read it",
                            f"drop {flag}")


def cmd_evaluate(a: argparse.Namespace, report) -> int:
    from ..data.checks import checked_source
    from ..data.sources import Columns
    from ..registry import task_kind
    from ..runs.loading import read_run_json

    so = parse_storage_options(a.storage_option)
    refuse_local_storage_options(so, {"RUN": a.run, "DATA": a.data, "--plots": a.plots})
    run_so = options_for(a.run, so)
    # A wrong run folder or input is exit 2 before torch loads and before a cluster starts.
    meta, config = read_run_json(a.run, run_so)
    kind, data = task_kind(meta), config.get("data") or {}
    _refuse_unread_columns(a, kind)
    _refuse_idle_wait(a)
    _check_cluster_options(a)
    cols = Columns(text=tuple(a.text or data.get("text") or ("text",)),
                   label=(a.label or data.get("label") or "label") if kind != "regress" else None,
                   target=(a.target or data.get("target")) if kind in ("regress", "multitask") else None,
                   numeric=tuple(data.get("numeric") or ()), multilabel=kind == "multilabel",
                   label_sep=(a.label_sep or data.get("label_sep")) if kind == "multilabel" else None,
                   encoding=text_encoding(a.encoding or data.get("encoding")),
                   delimiter=csv_delimiter(a.delimiter or data.get("delimiter")))
    cols.refuse_named_twice({role: f"--{role}" if getattr(a, role, None) else f"the run's --{role}"
                             for role in ("text", "label", "target", "numeric")})
    plan, src, here, where = _planned_inputs(a, _run_model_bytes(a.run, run_so, meta),
                                             lambda size: checked_source(a.data, a.format, so, size, cols))
    from ..data.idle_options import refuse_idle_label_sep

    if a.label_sep is not None:   # the run's own separator applies where it splits something, unsaid
        refuse_idle_label_sep(cols, src, storage_options=so)
    _refuse_idle_reading(a, cols, src, so)
    if a.plots:   # before the rows are scored: a place that cannot take the charts would lose the result
        from ..runs.outputs import check_plots_place, refuse_earlier_plots

        check_plots_place(a.plots, options_for(a.plots, so), a.run)   # a run's charts are its validation's
        check_writable(a.plots, options_for(a.plots, so), "--plots", folder=True)
        if not a.force:
            refuse_earlier_plots(a.plots, options_for(a.plots, so))
    elif a.force:
        raise UserError("--force replaces an earlier evaluation's files in --plots DIR, and no --plots is given",
                        "drop --force, or add --plots DIR")
    say_decided(report, src)
    from ..runs.evaluate import check_label_sets_split, check_scored, evaluate_files
    from ..runs.loading import weights_stamp
    from ..runs.predict import predictor

    # The tasks of this process score with this same copy of the run.
    run = predictor(absolute(a.run), run_so, weights_stamp(absolute(a.run), run_so)).run
    task = run.task()
    with _client_for(a, plan, here) as client:
        out, merged = evaluate_files(client, absolute(a.run), src, cols, storage_options=so, run_options=run_so,
                                     chunk_bytes=plan.partition, window=plan.in_flight)
    check_scored(a.data, out["rows"], cols)
    check_label_sets_split(out, run.features.labels, cols)
    if a.label_sep is not None:   # the run's own separator is said where it splits nothing: only one given
        _say_separator(report, cols.label_sep, out["rows"].get("label_sep", {}))
    out["where"] = where
    if a.plots:
        from ..runs.plots import write_plots

        reg = merged.reg if merged is not None else None
        out["plots"] = write_plots(a.plots, metrics=out, labels=run.features.labels if task.classifies else None,
                                   sample=(reg.true, reg.pred) if reg is not None else None)
    out["labels"] = run.features.labels
    if report.json is not None:
        report.json("evaluated", out)
    if a.json:
        if report.view is not None:   # with --json-log to stdout the event is the object: stdout holds events alone
            print(json.dumps(out))
    else:
        report.say(evaluated_line(out), markup=False, soft_wrap=True)
        if out.get("plots"):
            report.say(f"plots in {a.plots}", markup=False)
    return 0


def evaluated_line(out: dict) -> str:
    """``evaluate``'s result line: its scores, each as the run's summary shows it, then its rows."""
    shown = [f"{k} {BY_KEY['val_' + k].shown(out[k])}" for k in ("accuracy", "micro_f1", "macro_f1",
             "subset_accuracy", "mae", "rmse", "r2", "loss") if out.get(k) is not None]
    return (" · ".join(shown) + f" · {counted(out['rows']['evaluated'], 'row')}" + skipped_note(out["rows"])
            + unseen_note(out) + noted_note(out["rows"].get("noted", {})) + read_as_note(out))


def _say_separator(report, sep: str | None, counts: dict[str, int]) -> None:
    """evaluate's warnings of a ``--label-sep`` that split no label, or met lists whose items hold it."""
    from ..data.readers.labels import separator_warnings
    from ..options import said

    for message in separator_warnings(sep, counts, "rows.label_sep of --json"):
        report("warning", {"message": said(message, "cli")})


def skipped_note(rows: dict) -> str:
    """`` of 8,000 read (31 skipped: 20 missing_label, 7 malformed, 4 undecodable)``, or nothing:
    the rows not scored, as `predict` names the rows it could not predict."""
    skipped = {k: n for k, n in (rows.get("skipped") or {}).items() if n}
    if not skipped:
        return ""
    why = ", ".join(f"{n:,} {k}" for k, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    return f" of {rows.get('read', 0):,} read ({sum(skipped.values()):,} skipped: {why})"


def unseen_note(out: dict) -> str:
    """`` (12 with a label the run never saw, scored as wrong: 'x' 9, 'y' 3)``, or nothing."""
    labels = out.get("unseen_labels") or {}
    if not labels:
        return ""
    named = ", ".join(f"{k!r} {v:,}" for k, v in list(labels.items())[:5]) + (", …" if len(labels) > 5 else "")
    return (f" ({out['rows'].get('unseen_label', 0):,} with a label the run never saw, scored as "
            f"{'missed' if 'micro_f1' in out else 'wrong'}: {named})")


def read_as_note(out: dict) -> str:
    """`` (read as the run's: 1.0 as 1 139, 2.0 as 2 190)``, or nothing."""
    pairs = out.get("labels_read_as") or {}
    if not pairs:
        return ""
    return " (read as the run's: " + ", ".join(f"{k} {v:,}" for k, v in list(pairs.items())[:5]) + \
        (", …" if len(pairs) > 5 else "") + ")"


def cmd_make_data(a: argparse.Namespace, report) -> int:
    from ..data.synth import write_corpus

    if a.rows <= 0:
        raise UserError(f"--rows must be > 0, got {a.rows}", "e.g. --rows 100000")
    if a.classes < 2:
        raise UserError(f"--classes must be ≥ 2, got {a.classes}", "e.g. --classes 4 (the default)")
    so = parse_storage_options(a.storage_option)
    refuse_local_storage_options(so, {"OUT": a.out})
    check_writable(a.out, options_for(a.out, so), "make-data", folder=False)   # exit 2, not an internal error
    from ..runs.outputs import check_output_place

    check_output_place(a.out, options_for(a.out, so), [], flag="make-data")   # a run's own file: never, --force or not
    if not a.force:
        refuse_existing_file(a.out, options_for(a.out, so), f"make-data {a.out}", "make-data")
    _made(report, a.out, write_corpus(a.out, a.rows, classes=a.classes, seed=a.seed, multilabel=a.multilabel,
                                      storage_options=so, delimiter=a.delimiter))
    return 0


def _made(report, out: str, info: dict) -> None:
    """A generated corpus, told: the ``made`` event, and a line (make-data, a workflow's make_data)."""
    if report.json is not None:
        report.json("made", {"output": str(out), **info})
    split = f", fields split by {info['delimiter']!r}" if info.get("delimiter") else ""
    report.say(f"wrote {counted(info['rows'], 'row')} to {out} ({info['format']}{split})", markup=False)


def cmd_demo(a: argparse.Namespace, report) -> int:
    from ..config import DataConfig, OutputConfig, TrainConfig, TrainingConfig
    from ..data.synth import write_corpus
    from ..events import Events
    from ..runs.predict import Predictor

    # Before any work, named as typed: --rows 0 trained on a header-only corpus and blamed its --format,
    # --rows -5 said "rows must be" after making the folder, --epochs 0 was refused once the corpus was written.
    for flag, value, default in (("--rows", a.rows, 50_000), ("--epochs", a.epochs, 2)):
        if value < 1:
            raise UserError(f"demo {flag} must be ≥ 1, got {value}", f"e.g. {flag} {default} (the default), or drop {flag}")
    os.makedirs(a.dir, exist_ok=True)
    data = os.path.join(a.dir, f"demo-{a.rows}.csv")
    if not os.path.exists(data):
        if not report.quiet:   # a milestone: --quiet leaves the summary and the sample predictions
            report.say(f"generating {counted(a.rows, 'row')} → {data}", markup=False)
        write_corpus(data + ".tmp.csv", a.rows, classes=4, seed=0)
        os.replace(data + ".tmp.csv", data)
    events = Events(words="cli")
    events.subscribe(report)
    from ..training.orchestrator import train

    res = train(TrainConfig(data=DataConfig(train=[data]), training=TrainingConfig(epochs=a.epochs),
                            output=OutputConfig(out=os.path.join(a.dir, "runs"))), events)
    pred = Predictor(res.run)
    import pyarrow.csv as pacsv

    sample = pacsv.open_csv(data, read_options=pacsv.ReadOptions(use_threads=False)).read_next_batch().slice(0, 3)
    for text, label, p in zip(sample["text"].to_pylist(), sample["label"].to_pylist(),
                              pred.predict(sample["text"].to_pylist())):
        report.console.print(f"  {text[:60]!r}… → {p['label']} ({p['probability']:.2f}), true {label}", markup=False)
    return 0


def cmd_run(a: argparse.Namespace, report) -> int:
    from .workflow import prepare_workflow

    # The workflow's fields become the configuration directly, as declared
    # (options.py), and train with this command's report (so --quiet/--json-log apply).
    return train_config(prepare_workflow(a.workflow, a.set, lambda out, info: _made(report, out, info)), report,
                        "workflow")


def cmd_serve(a: argparse.Namespace, report) -> int:
    import math

    from ..runs.loading import read_run_json
    from ..runs.serve import MAX_QUEUE, require_serve
    from ..sizes import parse_size

    if a.max_batch < 1:
        raise UserError(f"--max-batch must be ≥ 1, got {a.max_batch}", "e.g. --max-batch 1000")
    if a.max_queue < 1:
        raise UserError(f"--max-queue must be ≥ 1, got {a.max_queue}", "e.g. --max-queue 100")
    if a.max_connections < 1:
        raise UserError(f"--max-connections must be ≥ 1, got {a.max_connections}", "e.g. --max-connections 500")
    if a.max_queue >= a.max_connections and a.max_queue != MAX_QUEUE:
        # Each connection sends one request at a time: the connections refuse first, the queue never would.
        raise UserError(f"--max-queue {a.max_queue} would never refuse a request: at most --max-connections "
                        f"{a.max_connections} connections are open, each sending one request at a time",
                        f"give --max-queue below --max-connections (e.g. --max-queue {max(1, a.max_connections // 5)}"
                        f"), or raise --max-connections above {a.max_queue}")
    if not (a.body_timeout > 0 and math.isfinite(a.body_timeout)):
        raise UserError(f"--body-timeout must be a number of seconds > 0, got {a.body_timeout}",
                        "e.g. --body-timeout 30")
    max_body = parse_size(a.max_body, "--max-body")
    if max_body < 1:
        raise UserError(f"--max-body must be at least 1 byte, got {a.max_body}", "e.g. --max-body 64MiB")
    if not 0 <= a.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {a.port}", "e.g. --port 8000")
    require_serve()
    run_so = _run_options(a)
    # A wrong run folder is exit 2 before the port opens; damaged weights, once loading finds them.
    read_run_json(a.run, run_so)
    from ..runs.serve import Model, app, listen, serve

    sock = listen(a.host, a.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    if report.json is not None:
        report.json("serving", {"run": str(a.run), "url": url, "max_batch": a.max_batch, "max_body": max_body,
                                "max_queue": a.max_queue, "max_connections": a.max_connections})
    report.say(f"serving {a.run} at {url} (POST /predict, POST /explain, GET /health; Ctrl-C stops), "
                         "loading the run",
                         markup=False, highlight=False, soft_wrap=True)
    # Whoever waits for the line (a supervisor, a test) reads it before the first request.
    report.console.file.flush()
    # The port is open (connections wait in its backlog) and the run loads in a thread:
    # GET /health answers 503 "loading" meanwhile, so a supervisor can tell a server
    # loading a large run from a dead one.
    model = Model(a.run, run_so)
    application = app(model, max_batch=a.max_batch, max_body=max_body, max_queue=a.max_queue,
                      body_timeout=a.body_timeout, wait=None)

    def ready(m) -> None:
        if m.error is None:
            if report.json is not None:
                report.json("ready", {"run": str(a.run), "seconds": round(m.seconds, 3)})
            report.say(f"ready: {a.run} loaded in {m.seconds:.1f} s", markup=False, highlight=False,
                                 soft_wrap=True)
            report.console.file.flush()

    model.when_done(ready)
    serve(application, sock, log_level="warning" if getattr(a, "quiet", False) else "info", model=model,
          max_connections=a.max_connections, head_timeout=a.body_timeout)
    if model.error is not None:
        raise model.error
    if report.json is not None:
        report.json("stopped", {"run": str(a.run)})
    report.say(f"stopped serving {a.run}", markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_export(a: argparse.Namespace, report) -> int:
    from ..runs.export import check_onnx_name, require_onnx
    from ..runs.loading import read_run_json

    if (a.onnx is None) == (a.compact is None):
        raise UserError("export writes one thing: " + ("--onnx FILE or --compact DIR, not both" if a.onnx else
                        "say which: --onnx FILE (an ONNX graph) or --compact DIR (a copy with 8-bit weights)"),
                        f"lancetnic-flow export {a.run} --onnx model.onnx")
    refuse_local_storage_options(parse_storage_options(a.storage_option),
                                 {"RUN": a.run, "--onnx": a.onnx, "--compact": a.compact})
    if a.compact is not None:
        if a.force:   # it would do nothing: a copy never replaces a folder
            raise UserError(f"--force replaces an existing --onnx FILE; --compact {a.compact} is written to a new "
                            "folder, and never replaces one", "drop --force, and name a folder that does not exist "
                            "yet (or remove the old copy first)")
        return _export_compact(a, report)
    require_onnx()
    so = parse_storage_options(a.storage_option)
    run_so = options_for(a.run, so)
    read_run_json(a.run, run_so)
    check_writable(a.onnx, options_for(a.onnx, so), "--onnx", folder=False)
    from ..runs.outputs import check_output_place

    check_output_place(a.onnx, options_for(a.onnx, so), [], flag="--onnx")   # the run's own files: never
    check_onnx_name(a.onnx)
    if not a.force:
        refuse_existing_file(a.onnx, options_for(a.onnx, so), f"--onnx {a.onnx}", "export")
    from ..runs.export import export_onnx

    out = export_onnx(a.run, a.onnx, so, run_so)
    if report.json is not None:
        report.json("exported", out)
    report.say(f"wrote {out['onnx']} ({out['bytes']:,} bytes): inputs {', '.join(out['inputs'])}; "
                         f"outputs {', '.join(out['outputs'])}; onnxruntime agrees with the model to "
                         f"{out['difference']:.1g}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _export_compact(a: argparse.Namespace, report) -> int:
    from ..runs.compact import compact_run
    from ..runs.loading import read_run_json

    so = parse_storage_options(a.storage_option)
    run_so, out_so = options_for(a.run, so), options_for(a.compact, so)
    read_run_json(a.run, run_so)
    if a.compact.rstrip("/") == a.run.rstrip("/"):
        raise UserError(f"--compact {a.compact} is the run itself; the copy goes to a folder of its own",
                        f"lancetnic-flow export {a.run} --compact {a.run.rstrip('/')}-int8")
    check_writable(a.compact, out_so, "--compact", folder=True)   # first: an unknown protocol, no credentials
    fs, path = url_to_fs(a.compact, **out_so)
    if fs.exists(path) and (not fs.isdir(path) or fs.ls(path, detail=False)):
        raise UserError(f"--compact {a.compact} exists and is not an empty folder; the copy is written to a new one",
                        "name a folder that does not exist yet")
    out = compact_run(a.run, a.compact, run_so, out_so)
    if report.json is not None:
        report.json("exported", out)
    report.say(f"wrote {out['run']}: weights {out['bytes']:,} bytes (the run's: {out['source_bytes']:,}); "
                         f"{', '.join(out['matrices'])} in 8 bits, each weight within {out['max_error']:.2%} of its "
                         f"column's largest; measure the accuracy with `lancetnic-flow evaluate {out['run']} DATA`",
                         markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_tune(a: argparse.Namespace, report) -> int:
    from ..config import parse_duration
    from ..events import Events
    from ..runs.folder import check_output_places

    # A bad budget, cap, option, path or column: exit 2 before Optuna, torch or a cluster load.
    budget = parse_duration(a.time_budget, "time_budget")
    if a.trials is not None and a.trials < 1:
        raise UserError(f"--trials must be ≥ 1, got {a.trials}", "e.g. --trials 20, or drop it")
    if not a.data:
        raise UserError("tune needs training data", "e.g. lancetnic-flow tune data/train.csv --time-budget 10m")
    from ..dataflow.cluster import scheduler_address

    given = _train_config(a)
    cfg = given.validate()
    check_output_places(cfg)
    if not scheduler_address(cfg.cluster.scheduler):
        from ..data.checks import check_training_inputs

        check_training_inputs(cfg)
    from ..training.tune import require_optuna, tune

    require_optuna()
    events = Events(words="cli")
    events.subscribe(report)
    res = tune(given, time_budget=budget, trials=a.trials, events=events)
    if report.view is not None and not report.quiet:   # not with --quiet or --json-log to stdout
        from ..ui.tune_lines import trials_table

        report.console.print(trials_table(res.trials, cfg.training.monitor))
    return 0


COMMANDS = {"run": cmd_run, "train": cmd_train, "predict": cmd_predict, "explain": cmd_explain,
            "evaluate": cmd_evaluate,
            "make-data": cmd_make_data, "demo": cmd_demo, "serve": cmd_serve, "export": cmd_export,
            "tune": cmd_tune}
