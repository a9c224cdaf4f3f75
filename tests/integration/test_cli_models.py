"""Every model and every task trains, evaluates and predicts through the
`lancetnic-flow` command, run as real subprocesses.

tests/integration/test_models.py builds and trains every model × task combination (24
today) in process and checks that models named for a task (ScalpelMC,
ScalpelReg, ScalpelMTSK) build the same network for the same task;
tests/integration/test_tasks.py trains one of each network and task end to end through
the Python API. Here the user's path is checked: `make-data` writes the
corpus (with a numeric `target` column), then per combination `train --model M [--task T]`,
`evaluate RUN DATA --json` and `predict RUN --input DATA --output out.jsonl`.
Each must exit 0, the model must have learned (accuracy well above the
majority class, RMSE below the RMSE of predicting the mean), and predictions
must carry the fields of the task and equal the run's own in-process
predictions (what `predict --text` prints; that command is tests/integration/test_cli.py's).

The combinations through the CLI: every registered model in its own task,
given without `--task` (so `--model ScalpelReg` alone must regress), plus
whatever task a network family (ScalpelNet, SequenceNet) would otherwise not
do through the CLI, given with `--task`. Combinations come from the registry
(`MODELS[name].tasks`), so a new model or task is covered without editing
this file; every model does every task today, so the refused command lines
are those the configuration can not serve (a sequence model on TF-IDF rows, a
regression without a target, ...).

Cost: 28 CLI processes (9 combinations), each paying ~2.5 CPU seconds of
imports (torch, distributed) before it starts. They share the session's Dask
cluster (`--scheduler`: no LocalCluster start per command) and one shard
cache (runs that read the same features and columns featurise once), and run
three at a time; each combination's three commands stay in order. About a
minute on two cores, so the matrix is marked slow (`make test-fast` leaves
it out; `make test` runs it). The rest of the file takes seconds.
"""
from __future__ import annotations

import csv
import json
import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from lancetnic_flow.config import TASKS
from lancetnic_flow.models import MODELS

from helpers import assert_user_error, cli, model_task_pairs, templated_csv


def cli_combos() -> list[tuple[str, str]]:
    """Each model in its own task, then for each network family every task it
    does that no combination so far gives it, on the family's first model."""
    combos = [(m, spec.task) for m, spec in MODELS.items()]
    for m, spec in MODELS.items():
        for t in spec.tasks:
            if not any(MODELS[c].net == spec.net and ct == t for c, ct in combos):
                combos.append((m, t))
    return combos


ALL = [(m, t) for m, spec in MODELS.items() for t in TASKS if t in spec.tasks]
COMBOS = cli_combos()
SEQUENCE = {m for m, spec in MODELS.items() if spec.net == "SequenceNet"}
ROWS = 2000
# Small and fast: sequence models on 48 tokens of 32-wide embeddings and states.
SMALL = ["--epochs", "3", "--hidden", "32", "--max-features", "5000",
         "--batch-size", "64", "--threads", "1"]   # the session cluster plans them: no --memory-budget
# a bag of terms has no sequence to cut nor token embeddings: refused there
SEQUENCE_SMALL = ["--max-len", "48", "--embed", "32"]
# Keys each prediction carries beyond the text, per task: --text prints the
# Predictor's dicts, --input writes the output columns.
TEXT_KEYS = {"classify": {"status", "label", "probability"}, "regress": {"status", "value"},
             "multitask": {"status", "label", "probability", "value"}}
INPUT_KEYS = {"classify": {"status", "predicted", "probability"}, "regress": {"status", "predicted_value"},
              "multitask": {"status", "predicted", "probability", "predicted_value"}}
PARALLEL = 3   # commands at once: each spends part of its time waiting on the cluster


def lr_for(model: str) -> list:
    """Rates at which each family learns the 2,000-row corpus in 3 epochs (LinearSVM's
    is --sparse-lr, its own default: it refuses --lr)."""
    if model == "LinearSVM":
        return []
    return ["--lr", 0.02 if model in SEQUENCE and model not in ("LancetMC", "LancetReg") else 0.03]


@dataclass
class Outcome:
    """What the four commands of one combination returned."""
    run: Path
    train: subprocess.CompletedProcess
    evaluate: subprocess.CompletedProcess | None = None
    predict_input: subprocess.CompletedProcess | None = None
    output: Path | None = None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[dict]]:
    """`make-data` through the CLI: 2,000 rows, 4 classes, text/label/value/target."""
    d = tmp_path_factory.mktemp("cli-models")
    made = cli("make-data", "x.csv", "--rows", ROWS, cwd=d)
    assert made.returncode == 0, made.stdout + made.stderr
    with open(d / "x.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == ROWS and {"text", "label", "target"} <= set(rows[0])
    return d, rows


@pytest.fixture(scope="module")
def outcomes(client, corpus) -> dict[tuple[str, str], Outcome]:
    """Every combination's train → evaluate → predict --text → predict --input."""
    d, rows = corpus
    sched = ["--scheduler", client.scheduler.address]

    def pipeline(model: str, task: str) -> Outcome:
        name = f"{model}-{task}"
        own = [] if task == MODELS[model].task else ["--task", task]      # the model's own task: implied
        # A model without a hidden layer refuses --hidden: SMALL's width is the others'.
        small = list(SMALL) if not any(r.field == "model.hidden" for r in MODELS[model].refuses) else [
            x for i, x in enumerate(SMALL) if "--hidden" not in (
            x, SMALL[i - 1])]
        small += SEQUENCE_SMALL if model in SEQUENCE else []
        value = ["--target", "target"] if task in ("regress", "multitask") else []   # refused where unread
        o = Outcome(d / "runs" / name, cli("train", "x.csv", "--model", model, *own, *value,
                                           *lr_for(model), *small, *sched, "--out", d / "runs",
                                           "--name", name, "--cache", d / "cache", cwd=d))
        if o.train.returncode != 0:
            return o
        o.evaluate = cli("evaluate", o.run, "x.csv", "--json", *sched, cwd=d)
        o.output = d / f"{name}.jsonl"
        o.predict_input = cli("predict", o.run, "--input", "x.csv", "--output", o.output, *sched, cwd=d)
        return o

    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {c: pool.submit(pipeline, *c) for c in COMBOS}
        return {c: f.result() for c, f in futures.items()}


def ok(p: subprocess.CompletedProcess | None, what: str) -> str:
    assert p is not None, f"{what} did not run"
    assert p.returncode == 0, f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def test_the_cli_combinations_give_every_model_its_own_task_and_every_family_every_task():
    assert set(COMBOS) <= set(ALL) and len(set(COMBOS)) == len(COMBOS)
    assert {(m, MODELS[m].task) for m in MODELS} <= set(COMBOS)
    assert {(MODELS[m].net, t) for m, t in COMBOS} == {(MODELS[m].net, t) for m, t in ALL}
    # multilabel runs on every classifier and is tested on its own (tests/integration/test_multilabel.py)
    assert {t for _, t in COMBOS} == set(TASKS) - {"multilabel"}


def test_every_model_with_every_task_it_does_is_built_and_trained_in_process():
    IN_PROCESS = model_task_pairs()
    assert sorted(IN_PROCESS) == sorted(ALL)


def test_train_help_names_every_registered_model_and_every_task(capsys):
    from lancetnic_flow.cli import main

    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(m in text for m in MODELS), text
    assert "classify|regress|multitask" in text


@pytest.mark.slow
@pytest.mark.parametrize("model,task", COMBOS, ids=[f"{m}-{t}" for m, t in COMBOS])
def test_every_model_and_task_trains_evaluates_and_predicts_through_the_cli(outcomes, corpus, model, task):
    _, rows = corpus
    o = outcomes[(model, task)]
    ok(o.train, "train")
    assert str(o.run) in o.train.stdout + o.train.stderr
    m = json.loads((o.run / "metrics.json").read_text())
    assert (m["task"], m["model"], m["rows"]["read"]) == (task, model, ROWS)
    losses = [e["train_loss"] for e in m["epochs"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses

    # ---- learned: evaluate on the file (mostly training rows) and the run's own held-out rows
    ev = json.loads(ok(o.evaluate, "evaluate").strip().splitlines()[-1])
    assert ev["rows"]["evaluated"] == ROWS
    labels = [r["label"] for r in rows]
    targets = [float(r["target"]) for r in rows]
    majority = max(labels.count(x) for x in set(labels)) / ROWS
    seq = model in SEQUENCE
    if task != "regress":
        assert majority < 0.4
        assert ev["accuracy"] > majority + (0.3 if seq else 0.45), (ev["accuracy"], majority)
        assert m["val_accuracy"] > majority + (0.2 if seq else 0.35), (m["val_accuracy"], majority)
        assert ev["labels"] == m["labels"] and sorted(m["labels"]) == sorted(set(labels))
    else:
        assert ev.get("accuracy") is None and m["val_accuracy"] is None
    if task != "classify":
        assert ev["rmse"] < 0.9 * ev["baseline_rmse"], (ev["rmse"], ev["baseline_rmse"])
        if not seq:
            # An LSTM regressing from 1,800 rows barely generalises (LancetMC multitask: val RMSE
            # 0.97 × the mean's); held-out regression of sequence models is tests/integration/test_tasks.py's.
            assert m["val_rmse"] < 0.95 * m["val_baseline_rmse"], (m["val_rmse"], m["val_baseline_rmse"])
    else:
        assert ev.get("rmse") is None and m["val_rmse"] is None

    # ---- the run's own predictions, in process (what `predict --text` prints): the task's fields only
    from lancetnic_flow.runs.predict import Predictor

    texts = [r["text"] for r in rows[:3]]
    lines = [{"text": t, **p} for t, p in zip(texts, Predictor(str(o.run)).predict(texts))]
    assert all(set(x) == {"text"} | TEXT_KEYS[task] for x in lines), lines
    for x in lines:
        if "label" in x:
            assert x["label"] in m["labels"] and 1 / len(m["labels"]) <= x["probability"] <= 1
        if "value" in x:
            assert math.isfinite(x["value"]) and min(targets) - 1 < x["value"] < max(targets) + 1

    # ---- predict --input: one row per input row, in order, the task's columns
    ok(o.predict_input, "predict --input")
    out = [json.loads(x) for x in o.output.read_text().splitlines()]
    assert [r["text"] for r in out] == [r["text"] for r in rows]
    assert all(set(r) == {"text"} | INPUT_KEYS[task] for r in out), out[0]
    # the workers' predictions equal the local ones, and they score what evaluate scored
    for x, r in zip(lines, out):
        if "label" in x:
            assert r["predicted"] == x["label"] and r["probability"] == pytest.approx(x["probability"], abs=1e-5)
        if "value" in x:
            assert r["predicted_value"] == pytest.approx(x["value"], rel=1e-4, abs=1e-4)
    if task != "regress":
        acc = sum(r["predicted"] == y for r, y in zip(out, labels)) / ROWS
        assert acc == pytest.approx(ev["accuracy"], abs=1e-9)
    if task != "classify":
        rmse = math.sqrt(sum((r["predicted_value"] - t) ** 2 for r, t in zip(out, targets)) / ROWS)
        assert rmse == pytest.approx(ev["rmse"], rel=1e-3)


# ---------------------------------------------------------------- refused command lines
# Through cli.main, the function the `lancetnic-flow` script runs: the same
# exit status and message as a subprocess, and these fail in validation,
# before any cluster or data is touched.

REFUSED = [
    (["--model", "LancetMC", "--features", "tfidf"], ["model LancetMC reads --features ids, not tfidf"]),
    (["--model", "LancetReg", "--task", "multitask", "--target", "target", "--features", "hashing"],
     ["model LancetReg reads --features ids, not hashing"]),
    (["--model", "ScalpelMC", "--features", "ids"], ["model ScalpelMC reads --features hashing/tfidf, not ids"]),
    (["--model", "ScalpelReg"], ["--task regress needs a numeric target column", "--target"]),
    (["--model", "LancetReg"], ["--task regress needs a numeric target column", "--target"]),
    (["--model", "ScalpelMC", "--task", "multitask"], ["--task multitask needs a numeric target column"]),
    (["--model", "FastTextBag", "--task", "rank"], ["'rank'", "classify", "regress", "multitask"]),
    (["--model", "ScalpelMTSk"], ["'ScalpelMTSk'", "ScalpelMTSK"]),
    (["--model", "ScalpelReg", "--target", "target", "--monitor", "val_accuracy"],
     ["--monitor val_accuracy does not fit --task regress"]),
    (["--model", "LancetMCA", "--task", "classify", "--monitor", "val_rmse"],
     ["--monitor val_rmse does not fit --task classify"]),
]


@pytest.mark.parametrize("args,needles", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_model_task_or_features_combination_the_config_cannot_serve_exits_2_with_one_message(
        tmp_path, capsys, args, needles):
    from lancetnic_flow.cli import main

    code = main(["train", str(tmp_path / "never-read.csv"), *args, "--out", str(tmp_path / "runs")])
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert code == 2, out
    assert "Traceback" not in out and out.count("error:") == 1, out
    for n in needles:
        assert n in out, out
    assert not (tmp_path / "runs").exists()


def test_a_refused_combination_exits_2_from_the_real_script_too(tmp_path):
    p = cli("train", "never-read.csv", "--model", "LancetMCA_gru", "--features", "tfidf", cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out and out.count("error:") == 1, out
    assert "model LancetMCA_gru reads --features ids, not tfidf" in out and "ids" in out


def test_a_target_alone_regresses_and_a_templated_text_learns_its_value_instead_of_the_mean(client, tmp_path):
    """`train --target COL` with the defaults on a short, templated text: every
    row is "value w<k> thing<j>", the target k plus noise. Each term is in a
    tenth of the rows or more, so a batch adds up many examples' steps for it;
    at the input rows' old rate (2.5 per example) the run diverged and settled
    on the mean (R² -0.02), the label-less file was refused as missing a label
    column, and a file with a label trained a classifier, the target unread."""
    path = templated_csv(tmp_path / "templated.csv")
    run = tmp_path / "runs" / "templated"
    p = cli("train", path, "--target", "y", "--scheduler", client.scheduler.address, "--out", tmp_path / "runs",
            "--name", "templated", "--quiet", cwd=tmp_path)
    ok(p, "train --target y")
    m = json.loads((run / "metrics.json").read_text())
    assert m["task"] == "regress"
    assert m["val_r2"] > 0.5, m["val_r2"]     # a ridge regression on the same TF-IDF: 0.99
    assert m["val_rmse"] < 0.7 * m["val_baseline_rmse"]


@pytest.mark.parametrize("task", ["regress", "multitask"])
def test_a_few_texts_repeated_train_a_regressor_that_predicts_their_values_not_nonsense(client, tmp_path, task):
    """Three texts, twenty times each, targets 0/1/2, two epochs, no validation rows: one
    batch shorter than --batch-size, every term in twenty of its rows. Before, the input rows
    stepped 512/60 times their per-example rate and summed twenty agreeing examples' steps:
    the run predicted 5.7 for a target of 1 (R² -11 on its own rows), and at ten epochs the mean."""
    texts = ["the cat sat on the mat", "dogs run fast in the park", "stock prices fell sharply today"]
    (tmp_path / "tiny.csv").write_text("text,label,y\n" + "".join(
        f"{texts[i % 3]},{'abc'[i % 3]},{i % 3}\n" for i in range(60)))
    p = cli("train", "tiny.csv", "--target", "y", "--task", task, "--epochs", "2", "--val-fraction", "0",
            "--scheduler", client.scheduler.address, "--name", "tiny", "--quiet", cwd=tmp_path)
    ok(p, "train a few texts")
    e = cli("evaluate", "runs/tiny", "tiny.csv", "--json", "--scheduler", client.scheduler.address, cwd=tmp_path)
    ok(e, "evaluate a few texts")
    assert json.loads(e.stdout)["r2"] >= 0.9, e.stdout   # a ridge regression on the same TF-IDF: 0.998


def test_a_regression_that_trained_to_its_mean_says_so_and_which_rates_to_lower(client, tmp_path):
    """Input rows at twenty times their rate on a few texts repeated: the run collapses to
    predicting the mean (every hidden unit dead). Before, it finished as any other run."""
    texts = ["the cat sat on the mat", "dogs run fast in the park", "stock prices fell sharply today"]
    (tmp_path / "tiny.csv").write_text("text,y\n" + "".join(f"{texts[i % 3]},{i % 3}\n" for i in range(60)))
    p = cli("train", "tiny.csv", "--target", "y", "--epochs", "10", "--val-fraction", "0", "--sparse-lr", "20",
            "--scheduler", client.scheduler.address, "--name", "mean", cwd=tmp_path)
    ok(p, "train to the mean")
    out = p.stdout + p.stderr
    assert "warning: the saved model fits its training rows no better than their mean" in out, out
    assert "--sparse-lr" in out and "--epochs" in out


def test_a_run_whose_loss_becomes_nan_exits_2_saying_it_diverged_and_which_rates_to_lower(client, tmp_path):
    """Before: the epochs went on in nan and the run ended in an internal error
    from drawing a histogram of nan residuals (exit 1, `ValueError`)."""
    path = templated_csv(tmp_path / "templated.csv", rows=2000)
    p = cli("train", path, "--target", "y", "--layers", "0", "--sparse-lr", "100", "--scheduler",
            client.scheduler.address, "--out", tmp_path / "runs", "--name", "nan", cwd=tmp_path)
    out = assert_user_error(p, "training diverged", "after epoch", "--sparse-lr", "--clip-grad")
    assert "internal error" not in out
    assert not (tmp_path / "runs" / "nan" / "model.json").exists()   # no finished run


def test_rows_longer_than_max_len_are_counted_by_train_and_evaluate_and_paths_are_this_folders(client, tmp_path):
    """A sequence model reads a row's first --max-len tokens: every row with more is
    counted (rows.noted.longer_than_max_len), in training and validation rows alike,
    and by evaluate; before, the cut was silent."""
    words = {"a": ["apple", "grape", "melon", "peach"], "b": ["stone", "brick", "slate", "gravel"]}
    rows, longer = [], 0
    for i in range(300):
        label = "ab"[i % 2]
        n = 12 if i % 3 == 0 else 4   # a third of the rows hold more than --max-len 6 tokens
        longer += n > 6
        rows.append((" ".join(words[label][(i + j) % 4] for j in range(n)), label))
    (tmp_path / "long.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    p = cli("train", "long.csv", "--model", "LancetMC", "--max-len", "6", "--embed", "16", "--hidden", "16",
            "--epochs", "1", "--no-plots", "--scheduler", client.scheduler.address, "--out", "runs", "--name", "r",
            cwd=tmp_path)
    ok(p, "train --max-len 6")
    assert f"{longer:,} rows held more tokens than --max-len 6" in " ".join((p.stdout + p.stderr).split())
    m = json.loads((tmp_path / "runs" / "r" / "metrics.json").read_text())
    assert m["rows"]["validated"] > 0 and m["rows"]["noted"] == {"longer_than_max_len": longer}
    # The workers run in another folder than this command: the relative --out's cache holds the shards they
    # wrote (they landed in the workers' folder), and evaluate's relative run folder is found (it was not).
    assert list((tmp_path / "runs" / ".cache").glob("*/shards/*.npz"))
    p = cli("evaluate", "runs/r", "long.csv", "--json", "--scheduler", client.scheduler.address, cwd=tmp_path)
    ok(p, "evaluate")
    assert json.loads(p.stdout.strip().splitlines()[-1])["rows"]["noted"] == {"longer_than_max_len": longer}
