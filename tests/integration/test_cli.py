"""The `lancetnic-flow` command, run as a real subprocess: make-data → train →
predict/evaluate, and user errors that exit 2 with one clear message and no
traceback (a traceback only with --debug)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lancetnic_flow import __version__

from helpers import CLUSTER, assert_user_error, cli


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """make-data then train, both through the CLI; shared by this module's tests."""
    d = tmp_path_factory.mktemp("cli")
    made = cli("make-data", "x.csv", "--rows", "2000", cwd=d)
    trained = cli("train", "x.csv", *CLUSTER, "--epochs", "3", "--lr", "0.01", "--out", d / "runs",
                  "--cache", d / "cache", "--name", "clirun", cwd=d)
    return d, made, trained, d / "runs" / "clirun"


def test_version_is_printed_by_the_module_and_the_script(tmp_path):
    p = cli("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"lancetnic-flow {__version__}"
    script = Path(sys.executable).with_name("lancetnic-flow")
    if script.exists():
        q = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
        assert q.returncode == 0 and __version__ in q.stdout
    h = cli("train", "--help", cwd=tmp_path)
    assert h.returncode == 0 and "--memory-budget" in h.stdout and "examples:" in h.stdout


def test_make_data_then_train_exits_0_and_prints_the_memory_plan_and_the_run(cli_run):
    d, made, trained, run = cli_run
    assert made.returncode == 0, made.stderr
    assert (d / "x.csv").exists() and "2,000 rows" in made.stdout + made.stderr
    out = trained.stdout + trained.stderr
    assert trained.returncode == 0, out
    assert "memory plan" in out and "budget 3.0 GiB" in out and "partition" in out
    assert str(run) in out
    assert {"config.json", "features.json", "model.json", "model.safetensors", "metrics.json",
            "history.csv"} <= {p.name for p in run.iterdir()}
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 2000 and len(metrics["epochs"]) == 3


def test_predict_texts_prints_one_json_line_per_text(cli_run):
    d, _, _, run = cli_run
    p = cli("predict", run, "--text", "ab", "--text", "b c d", "--text", "-- ! a", cwd=d)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    labels = set(json.loads((run / "features.json").read_text())["labels"])
    assert [x["text"] for x in lines] == ["ab", "b c d", "-- ! a"]
    # "b c d" and "-- ! a" hold no token of the default analyzer (two word characters or more): no answer
    assert [x["status"] for x in lines] == ["ok", "empty_text", "empty_text"]
    assert lines[0]["label"] in labels and 0 <= lines[0]["probability"] <= 1
    assert all(x["label"] is None for x in lines[1:])


def test_predict_into_a_reader_that_stops_early_ends_quietly_with_sigpipes_status(cli_run):
    """`predict RUN --text … | head -1` ended in "internal error: BrokenPipeError" (exit 1)."""
    import os
    import subprocess
    import sys

    d, _, _, run = cli_run
    texts = [a for i in range(3000) for a in ("--text", f"ab word{i}")]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.Popen([sys.executable, "-m", "lancetnic_flow", "predict", str(run), *texts], cwd=d, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()   # the reader stops, as head -1 does
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert json.loads(first)["text"] == "ab word0"
    assert err.strip() == "", err


def test_predict_input_writes_one_jsonl_line_per_input_row(cli_run):
    d, _, _, run = cli_run
    p = cli("predict", run, "--input", "x.csv", "--output", "out.jsonl", *CLUSTER, cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in (d / "out.jsonl").read_text().splitlines()]
    with open(d / "x.csv", newline="") as f:
        texts = [r["text"] for r in csv.DictReader(f)]
    assert len(rows) == 2000
    assert [r["text"] for r in rows] == texts
    assert all({"predicted", "probability"} <= set(r) and 0 <= r["probability"] <= 1 for r in rows)


def test_evaluate_prints_json_metrics(cli_run, client):
    # Through --scheduler: the session's cluster stands in for an existing one.
    d, _, _, run = cli_run
    e = cli("evaluate", run, "x.csv", "--json", "--scheduler", client.scheduler.address, cwd=d)
    assert e.returncode == 0, e.stdout + e.stderr
    m = json.loads(e.stdout)
    assert 0 <= m["accuracy"] <= 1 and 0 <= m["macro_f1"] <= 1
    assert m["rows"]["evaluated"] == m["rows"]["read"] == 2000
    assert m["labels"] == json.loads((run / "features.json").read_text())["labels"]


def test_missing_training_file_exits_2_with_one_message_and_no_traceback(tmp_path):
    p = cli("train", "nope.csv", *CLUSTER, "--out", tmp_path / "runs", cwd=tmp_path)
    assert_user_error(p, "nope.csv", "no such file")


# What the script runs (cli.main), in a fresh interpreter that reports afterwards whether torch was imported.
NO_TORCH = ("import sys\nfrom lancetnic_flow.cli import main\nrc = main(sys.argv[1:])\n"
            "print('torch imported:', 'torch' in sys.modules)\nsys.exit(rc)")


def assert_user_error_without_torch(cwd: Path, args, needle: str) -> None:
    p = subprocess.run([sys.executable, "-c", NO_TORCH, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert_user_error(p, needle)
    assert "torch imported: False" in p.stdout, (args, p.stdout)


def test_a_bad_path_format_column_or_option_is_refused_before_torch_is_imported(tmp_path):
    """`train` checks its inputs before it loads the trainer: a typo comes
    back at once instead of after torch's import (about 2 s)."""
    (tmp_path / "x.csv").write_text("text,label\nhello world,a\nbye world,b\n")
    cases = {("x.csv", "--label", "topic"): "'topic'", ("x.csv", "--format", "parquet"): "parquet",
             ("nothing-*.csv",): "no files match", ("x.csv", "--model", "ScalpelReg"): "--target",
             ("x.csv", "--val", "missing.csv"): "missing.csv",
             # one column in two roles: read as words and as a number, or the label read as text
             ("x.csv", "--numeric", "text"): "--numeric text: it is also the run's --text column",
             ("x.csv", "--text", "label"): "--label label: it is also the run's --text column"}
    for args, needle in cases.items():
        assert_user_error_without_torch(tmp_path, ("train", *args, "--out", "runs"), needle)
    assert not (tmp_path / "runs").exists()


def test_predict_and_evaluate_refuse_a_wrong_run_folder_or_input_before_torch_is_imported(cli_run):
    d, _, _, run = cli_run
    cases = {("predict", "no-run", "--text", "hi"): "not a lancetnic_flow run folder",
             ("predict", run, "--input", "nothing.csv", "--output", "o.jsonl"): "nothing.csv",
             ("predict", run, "--input", "x.csv", "--text-column", "body", "--output", "o.jsonl"): "'body'",
             # --text prints its predictions: an --output given with it would be left unwritten.
             ("predict", run, "--text", "hi", "--output", "o.jsonl"): "--output applies to --input DATA",
             ("evaluate", "no-run", "x.csv"): "not a lancetnic_flow run folder",
             ("evaluate", run, "nothing.csv"): "nothing.csv",
             ("evaluate", run, "x.csv", "--label", "topic"): "'topic'",
             ("evaluate", run, "x.csv", "--text", "label"): "'label' is both --text and the run's --label",
             # A column the run's task does not score: refused, not left unread.
             ("evaluate", run, "x.csv", "--target", "target"): "--target target: this classify run predicts one label"}
    for args, needle in cases.items():
        assert_user_error_without_torch(d, args, needle)
    assert not (d / "o.jsonl").exists()


# In-process through cli.main (the function the script runs): same exit status and output,
# without paying a fresh interpreter and torch import per case.


def run_main(capsys, *args) -> tuple[int, str]:
    from lancetnic_flow.cli import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_wrong_text_column_exits_2_and_lists_the_columns_of_the_file(cli_run, client, capsys):
    d, _, _, _ = cli_run
    code, out = run_main(capsys, "train", str(d / "x.csv"), "--text", "body", "--scheduler",
                         client.scheduler.address, "--out", d / "runs-bad")
    assert code == 2 and "Traceback" not in out and out.count("error:") == 1, out
    assert "'body'" in out and "the file has columns: 'text', 'label', 'value', 'target'" in out


def test_bad_format_exits_2_naming_the_formats(cli_run, capsys):
    d, _, _, _ = cli_run
    code, out = run_main(capsys, "train", str(d / "x.csv"), "--format", "xml")
    assert code == 2 and "Traceback" not in out and out.count("error:") == 1, out
    assert "'xml'" in out and "csv" in out and "jsonl" in out and "parquet" in out


def test_too_small_memory_budget_exits_2_and_says_what_would_fit(cli_run):
    d, _, _, _ = cli_run
    p = cli("train", "x.csv", "--memory-budget", "10MiB", cwd=d)
    assert_user_error(p, "too small", "--memory-budget")


def test_predict_with_a_missing_run_folder_exits_2(tmp_path):
    p = cli("predict", tmp_path / "no-such-run", "--text", "hello", cwd=tmp_path)
    assert_user_error(p, "no-such-run", "run folder")


def test_debug_shows_the_traceback_for_the_same_error(cli_run):
    d, _, _, _ = cli_run
    p = cli("train", "x.csv", "--memory-budget", "10MiB", "--debug", cwd=d)
    assert p.returncode != 0
    assert "Traceback" in p.stderr and "UserError" in p.stderr and "too small" in p.stderr


def test_a_run_name_new_run_dir_would_refuse_is_refused_before_any_work(tmp_path):
    """The config checks run names by the run folder's own rule, so `a+b` fails at once, not after the fit."""
    from lancetnic_flow.config import OutputConfig
    from lancetnic_flow.errors import UserError

    with pytest.raises(UserError, match="not a plain folder name"):
        OutputConfig(name="a+b").validate()
    OutputConfig(name="run-2026.11_30").validate()


def test_the_program_freezes_its_heap_only_when_it_ends_and_an_in_process_call_never(tmp_path):
    # The command line program skips the interpreter's last walk over every
    # object (gc.freeze as main() returns); a caller in a long-lived process
    # (a notebook, a test run) must keep a collectable heap.
    import gc

    from lancetnic_flow.cli import main

    assert main(["make-data", str(tmp_path / "a.csv"), "--rows", "20", "--quiet"]) == 0
    assert gc.get_freeze_count() == 0
    probe = ("import gc, sys; from lancetnic_flow.cli import main; "
             f"sys.argv = ['lancetnic-flow', 'make-data', {str(tmp_path / 'b.csv')!r}, '--rows', '20', '--quiet']; "
             "rc = main(); print(rc, gc.get_freeze_count() > 0)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["0", "True"], out.stderr
    assert (tmp_path / "b.csv").stat().st_size > 0


def test_predict_and_evaluate_on_an_existing_cluster_size_their_partitions_from_its_workers_limits(cli_run, client):
    """--scheduler: the partitions and the window come from the cluster's workers (each holding the
    loaded run), as train's do, not from this machine's budget; predicting there writes every row.
    The options that size a LocalCluster do nothing there and are refused."""
    import argparse
    import logging

    from distributed import LocalCluster

    from lancetnic_flow.cli import commands
    from lancetnic_flow.data.checks import checked_source
    from lancetnic_flow.data.sources import Columns
    from lancetnic_flow.dataflow.plan import MiB, plan_memory, worker_minimum
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.runs.weights_size import loaded_bytes

    d, _, _, run = cli_run
    model = 64 * MiB
    small = LocalCluster(n_workers=1, threads_per_worker=3, processes=True, memory_limit="700MiB",
                         dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        a = argparse.Namespace(scheduler=small.scheduler_address, scheduler_wait=None, memory_budget=None,
                               workers=None, worker_threads=None, blocksize=None, run_on="auto")
        cut = []

        def inputs(size):
            cut.append(size)
            return checked_source([str(d / "x.csv")], "auto", {}, size, Columns(text=("text",)), in_order=True)

        plan, src, here, _ = commands._planned_inputs(a, model, inputs)
        assert plan.external and not here and (plan.worker_limit, plan.threads) == (700 * MiB, 3)
        assert plan.partition == cut[0] == 1 * MiB < plan_memory(model_bytes=model).partition   # the laptop's: 4 MiB
        assert plan.in_flight == 6   # the cluster's threads, twice over
        for given in ({"memory_budget": "8GiB"}, {"workers": 2}, {"worker_threads": 2}):
            with pytest.raises(UserError, match="sizes the LocalCluster this command starts, and --scheduler"):
                commands._planned_inputs(argparse.Namespace(**{**vars(a), **given}), model, inputs)
        # This run's own network, loaded, leaves a 700 MiB worker no room for a task under its pause
        # line: refused before loading, naming a limit that holds it (it was killed predicting).
        loaded = loaded_bytes(str(run), {}, torch_network=True)
        assert worker_minimum(loaded) > 700 * MiB, loaded
        p = cli("predict", run, "--input", "x.csv", "--output", "refused.jsonl", "--scheduler",
                small.scheduler_address, cwd=d)
        assert_user_error(p, "the cluster's workers are too small for this run: 1 worker of 1 has a memory limit "
                             "of 700.0 MiB")
        assert "--memory-limit" in p.stderr and not (d / "refused.jsonl").exists()
    finally:
        small.close()
    # Predicting on an existing cluster writes every row (the session's: a 700 MiB worker running three
    # tasks beside torch and the loaded run sits at its limit on a loaded host).
    p = cli("predict", run, "--input", "x.csv", "--output", "small.jsonl", "--scheduler", client.scheduler.address,
            cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len((d / "small.jsonl").read_text().splitlines()) == 2000
