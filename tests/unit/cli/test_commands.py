"""cli/commands.py: ``train --resume RUN`` refuses every option it cannot change
that the command line typed with another value than the run's, the parser's
default included, and accepts the run's own values and where the data and
the cluster are."""
from __future__ import annotations

import json
import os
import re

import pytest

import lancetnic_flow.training.orchestrator as orchestrator
from lancetnic_flow.cli import commands
from lancetnic_flow.cli.commands import cmd_train
from lancetnic_flow.cli.parser import build_parser, given_dests, with_negative_values
from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.folder import write_config
from lancetnic_flow.storage import refuse_existing_file


@pytest.fixture
def resume(tmp_path, monkeypatch):
    """``train --resume RUN ARGS`` as ``main`` hands it over, on a run started with
    --epochs 3 --seed 5 --model ScalpelMC --no-lowercase; training itself is a stub
    that records the configuration it was given."""
    run = tmp_path / "runs" / "r"
    saved = TrainConfig(data=DataConfig(train=["d.csv"]), features=FeatureConfig(lowercase=False),
                        model=ModelConfig(name="ScalpelMC"), training=TrainingConfig(epochs=3, seed=5),
                        output=OutputConfig(out=str(tmp_path / "runs"), name="r"))
    write_config(str(run), saved.to_dict())
    trained = []
    monkeypatch.setattr(orchestrator, "train", lambda cfg, events, resume=None: trained.append(cfg))

    def go(*args: str):
        argv = ["train", "--resume", str(run), *args]
        a = build_parser().parse_args(with_negative_values(argv))
        a.given = given_dests(argv, "train")
        cmd_train(a, lambda *event: None)
        return trained.pop()
    return go


def test_resume_refuses_options_typed_at_the_parsers_defaults_that_differ_from_the_runs(resume):
    with pytest.raises(UserError) as e:
        resume("--epochs", "10", "--seed", "0", "--model", "auto")
    assert "--epochs, --model, --seed cannot change" in e.value.message
    assert "(the run's: --epochs 3, --model ScalpelMC, --seed 5)" in e.value.message
    with pytest.raises(UserError, match=r"--lowercase cannot change \(the run's: --no-lowercase\)"):
        resume("--lowercase")
    with pytest.raises(UserError, match=r"--val-fraction cannot change \(the run's: --val-fraction 0.1\)"):
        resume("--val-fraction", "0")
    with pytest.raises(UserError, match="DATA cannot change"):
        resume("other.csv")


def test_resume_accepts_the_runs_own_values_and_where_the_data_and_cluster_are(resume):
    cfg = resume("d.csv", "--epochs", "3", "--seed", "5", "--model", "ScalpelMC", "--no-lowercase")
    assert (cfg.training.epochs, cfg.training.seed, cfg.model.name) == (3, 5, "ScalpelMC")
    cfg = resume("--workers", "4", "--worker-threads", "2", "--memory-budget", "2GiB", "--scheduler",
                 "tcp://h:8786", "--scheduler-wait", "5s", "--quiet")
    assert (cfg.cluster.workers, cfg.cluster.threads, cfg.cluster.scheduler) == (4, 2, "tcp://h:8786")
    assert cfg.training.epochs == 3


def test_resume_refuses_storage_options_where_the_run_and_its_paths_are_local(resume):
    with pytest.raises(UserError) as e:
        resume("--storage-option", "anon=true")
    assert re.search(r"--storage-option anon opens remote storage .* every path here is local "
                     r"\(the run .*runs/r; the data d.csv; --out .*runs\)", e.value.said("cli")[0])


def test_resume_keeps_storage_options_for_a_run_in_remote_storage(tmp_path, monkeypatch):
    run = "memory://unit-commands-resume/runs/r"
    saved = TrainConfig(data=DataConfig(train=["memory://unit-commands-resume/d.csv"]),
                        output=OutputConfig(out="memory://unit-commands-resume/runs", name="r"))
    write_config(run, saved.to_dict())
    trained = []
    monkeypatch.setattr(orchestrator, "train", lambda cfg, events, resume=None: trained.append(cfg))
    argv = ["train", "--resume", run, "--storage-option", "anon=true"]
    a = build_parser().parse_args(argv)
    a.given = given_dests(argv, "train")
    cmd_train(a, lambda *event: None)
    assert trained[0].data.storage_options == {"anon": True}


LOCAL_COMMANDS = {
    "predict": ["predict", "RUN", "--input", "d.csv", "--output", "p.csv"],
    "predict --text": ["predict", "RUN", "--text", "a cat"],
    "evaluate": ["evaluate", "RUN", "d.csv", "--plots", "plots"],
    "explain": ["explain", "RUN", "--text", "a cat"],
    "serve": ["serve", "RUN"],
    "export --onnx": ["export", "RUN", "--onnx", "m.onnx"],
    "export --compact": ["export", "RUN", "--compact", "small"],
    "make-data": ["make-data", "d.csv", "--rows", "10"],
}


@pytest.mark.parametrize("command", LOCAL_COMMANDS)
def test_a_storage_option_where_every_path_of_the_command_is_local_is_refused_naming_them(command, tmp_path,
                                                                                          monkeypatch):
    # each ran, the option passed to a local filesystem that reads none, and recorded nothing wrong
    monkeypatch.chdir(tmp_path)
    argv = [*LOCAL_COMMANDS[command], "--storage-option", "anon=true"]
    a = build_parser().parse_args(argv)
    with pytest.raises(UserError) as e:
        commands.COMMANDS[argv[0]](a, None)
    assert re.match(r"--storage-option anon opens remote storage .* every path here is local \((RUN RUN|OUT d.csv)",
                    e.value.said("cli")[0])
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("argv", [
    ["explain", "memory://unit-commands-so/none", "--text", "a"],
    ["predict", "RUN", "--input", "s3://b/d.csv", "--output", "p.csv"],
    ["evaluate", "RUN", "d.csv", "--plots", "gs://b/plots"],
    ["export", "RUN", "--onnx", "memory://unit-commands-so/m.onnx"],
])
def test_a_storage_option_is_kept_where_any_path_of_the_command_is_remote(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = build_parser().parse_args([*argv, "--storage-option", "anon=true"])
    with pytest.raises(Exception) as e:   # the run folder is missing: what the command says next
        commands.COMMANDS[argv[0]](a, None)
    assert "opens remote storage" not in str(e.value)


def test_resume_compares_paths_typed_relative_as_the_run_holds_them_absolute(resume, tmp_path, monkeypatch):
    """config.json holds --out absolute: `--resume RUN --out runs`, typed where runs is, is the run's own value."""
    monkeypatch.chdir(tmp_path)
    assert resume("--out", "runs").output.out == str(tmp_path / "runs")
    with pytest.raises(UserError, match="--out cannot change"):
        resume("--out", "elsewhere")


@pytest.fixture
def linear_run(tmp_path):
    """A small LinearSVM run folder and a CSV of texts to predict with it."""
    import numpy as np
    import pyarrow as pa
    import torch

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models.scalpel import ScalpelNet
    from lancetnic_flow.runs.folder import save_run

    model = ScalpelNet(2, classes=2, layers=0, dropout=0.0, margin=True)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor([[3.0, -3.0], [-3.0, 3.0]]))
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["cat", "dog"]), idf=np.ones(2, np.float32),
                              labels=["pos", "neg"])
    save_run(str(tmp_path / "run"), config={"data": {"text": ["text"], "label": "label"}}, features=features,
             model=model, model_meta={"model": "LinearSVM", "net": "ScalpelNet", "kwargs": model.config,
                                      "task": "classify"}, metrics={}, history=[])
    (tmp_path / "in.csv").write_text("text,label\na cat,pos\ndog dog,neg\n")
    return tmp_path


def test_predict_and_evaluate_on_workers_that_cannot_hold_the_loaded_model_are_refused_before_one_starts(
        linear_run, monkeypatch, capsys):
    import lancetnic_flow.cli.commands as commands
    import lancetnic_flow.dataflow.cluster as cluster
    from lancetnic_flow.cli.main import main

    monkeypatch.setattr(commands, "_run_model_bytes", lambda *a: 3 * 2**30)   # a 2^19 × 1,500-class LinearSVM
    monkeypatch.setattr(cluster, "open_cluster", lambda *a, **k: pytest.fail("a cluster was started"))
    run, data = str(linear_run / "run"), str(linear_run / "in.csv")
    for argv in (["predict", run, "--input", data, "--output", str(linear_run / "out.csv")],
                 ["evaluate", run, data]):
        assert main([*argv, "--run-on", "cluster", "--memory-budget", "8GiB"]) == 2
        err = capsys.readouterr().err
        assert "each holding the model's 3.0 GiB" in err
        assert "--memory-budget" in err and "or --run-on process (this process alone holds it)" in err
        assert main([*argv, "--run-on", "process", "--memory-budget", "4GiB"]) == 2
        assert "use --memory-budget" in capsys.readouterr().err


def test_predict_in_this_process_loads_the_run_once_for_the_checks_and_the_tasks(linear_run, monkeypatch):
    import lancetnic_flow.runs.predict as predict
    from lancetnic_flow.cli.main import main

    loads = []
    real = predict.load_run
    monkeypatch.setattr(predict, "load_run", lambda *a, **k: loads.append(a) or real(*a, **k))
    monkeypatch.setattr(predict, "_PREDICTORS", predict.HeldRuns())
    out = linear_run / "out.csv"
    assert main(["predict", str(linear_run / "run"), "--input", str(linear_run / "in.csv"), "--output", str(out),
                 "--run-on", "process", "--quiet"]) == 0
    assert len(loads) == 1 and out.read_text().count("\n") == 3
    assert main(["evaluate", str(linear_run / "run"), str(linear_run / "in.csv"), "--run-on", "process",
                 "--quiet"]) == 0
    assert len(loads) == 1


def test_predict_writes_a_csv_output_with_the_delimiter_its_input_was_read_with(linear_run):
    # `--delimiter ';'` read the input and the output was written with commas; from JSON Lines, `--delimiter`
    # for the CSV output was refused as changing nothing
    import pyarrow.csv as pacsv

    from lancetnic_flow.cli.main import main

    (linear_run / "in.csv").write_text('id;text\n1;"a cat; ""quoted""\nline"\n2;dog dog\n')
    (linear_run / "in.jsonl").write_text('{"id": 1, "text": "a cat; a, dog"}\n')
    run = str(linear_run / "run")
    for data, out in (("in.csv", "a.csv"), ("in.jsonl", "b.csv")):
        assert main(["predict", run, "--input", str(linear_run / data), "--output", str(linear_run / out),
                     "--delimiter", ";", "--keep", "all", "--run-on", "process", "--quiet"]) == 0
    back = pacsv.read_csv(linear_run / "a.csv", parse_options=pacsv.ParseOptions(delimiter=";",
                                                                                 newlines_in_values=True))
    assert back.column_names[:3] == ["id", "text", "status"]
    assert back["text"].to_pylist() == ['a cat; "quoted"\nline', "dog dog"] and back["predicted"].to_pylist() == ["pos", "neg"]
    back = pacsv.read_csv(linear_run / "b.csv", parse_options=pacsv.ParseOptions(delimiter=";"))
    assert back["text"].to_pylist() == ["a cat; a, dog"] and back["status"].to_pylist() == ["ok"]


def test_evaluates_line_names_the_rows_it_skipped_and_why():
    from lancetnic_flow.cli.commands import skipped_note

    rows = {"read": 8000, "evaluated": 7969, "skipped": {"malformed": 7, "undecodable": 4, "missing_label": 20}}
    assert skipped_note(rows) == " of 8,000 read (31 skipped: 20 missing_label, 7 malformed, 4 undecodable)"
    assert skipped_note({"read": 10, "evaluated": 10, "skipped": {}}) == ""


def test_an_empty_resume_is_refused_rather_than_starting_a_new_run(tmp_path):
    argv = ["train", "d.csv", "--resume", ""]
    a = build_parser().parse_args(with_negative_values(argv))
    a.given = given_dests(argv, "train")
    with pytest.raises(UserError, match="--resume '': an empty value"):
        cmd_train(a, lambda *event: None)


def test_make_data_to_a_place_that_cannot_be_written_is_a_user_error(tmp_path):
    # a FileExistsError/NotADirectoryError/PermissionError traceback ("internal error", exit 1) before
    (tmp_path / "f").write_text("a file")
    a = build_parser().parse_args(["make-data", str(tmp_path / "f" / "x.csv"), "--rows", "10"])
    with pytest.raises(UserError, match="cannot write there"):
        commands.cmd_make_data(a, None)


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_scheduler_wait_without_an_existing_cluster_is_refused_by_predict_and_evaluate(command, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    a = build_parser().parse_args([command, "RUN", *(["--input", "d.csv", "--output", "p.csv"] if command == "predict"
                                                      else ["d.csv"]), "--scheduler-wait", "30s"])
    with pytest.raises(UserError, match="--scheduler-wait 30s .* starts its own"):
        commands._refuse_idle_wait(a)
    a.scheduler = "tcp://h:8786"
    commands._refuse_idle_wait(a)


@pytest.mark.parametrize("rows, argv, said", [
    ("", [], "no rows to evaluate in {data}\n  hint: the input holds a header only"),
    ("a cat,,\ndog dog,,\n", [], "no rows to evaluate in {data}: 2 rows read, 2 skipped (2 missing_label)\n"
                                 "  hint: the --label column 'label' must hold a value in every row"),
    ("a cat,pos,\ndog dog,neg,\n", ["--label", "note"], "2 skipped (2 missing_label)\n"
                                                        "  hint: the --label column 'note' must hold a value"),
])
def test_evaluate_that_scores_no_row_is_exit_2_naming_why_not_exit_0_with_no_scores(linear_run, capsys, rows, argv,
                                                                                  said):
    from lancetnic_flow.cli.main import main

    data = linear_run / "none.csv"
    data.write_text("text,label,note\n" + rows)
    assert main(["evaluate", str(linear_run / "run"), str(data), "--run-on", "process", "--json", *argv]) == 2
    out = capsys.readouterr()
    assert said.format(data=data) in out.err and out.out == ""


def test_predict_and_evaluate_lines_say_one_row_and_one_label_in_the_singular():
    out = {"rows_written": 1, "output": "p.csv", "predicted": 1, "not_predicted": {}, "noted": {"label_as_run": 1}}
    assert commands.predicted_line(out) == ("wrote 1 row to p.csv: 1 predicted; 1 label read as the run's spelling "
                                            "of the same value (label_as_run)")
    assert commands.predicted_line({**out, "rows_written": 2, "noted": {}}).startswith("wrote 2 rows to p.csv")


def test_an_evaluation_of_one_unscored_row_says_one_row():
    from lancetnic_flow.data.sources import Columns
    from lancetnic_flow.runs.evaluate import check_scored

    with pytest.raises(UserError, match="no rows to evaluate in d.csv: 1 row read, 1 skipped"):
        check_scored(["d.csv"], {"read": 1, "evaluated": 0, "skipped": {"missing_label": 1}},
                     Columns(text=("text",), label="label"))


def test_predict_and_evaluate_say_the_planners_warnings_as_train_does(capsys):
    # files left out of a folder (a README), a link read once: train said them, predict and evaluate did not
    from types import SimpleNamespace

    from lancetnic_flow.ui.report import ConsoleReport

    report = ConsoleReport(live=False)
    commands.say_decided(report, SimpleNamespace(warnings=["Skipped 1 file that is not data by its "
                                                           "extension: README."], sniffed=[]))
    report.close()
    assert "warning: Skipped 1 file that is not data by its extension: README." in capsys.readouterr().err


def test_explain_of_a_multitask_run_says_its_value_and_the_values_terms_after_the_labels():
    term = {"term": "goal", "feature": 3, "value": 0.5, "weight": 2.0, "contribution": 1.0}
    doc = {"status": "ok", "label": "sports", "probability": 0.9, "logit": 2.5, "method": "exact", "bias": 1.5,
           "terms": [term], "rest": 0.0, "terms_total": 1, "value": 7.25,
           "value_explained": {"method": "exact", "bias": 6.0, "terms": [{**term, "weight": 2.5, "contribution": 1.25}],
                               "rest": 0.0, "terms_total": 1}}
    lines = commands.explained_lines("a goal", doc).splitlines()
    assert lines[2] == "  and value 7.25 = bias +6 + the terms' contributions (exact)"
    assert "+1.2500  goal  (value 0.5 × weight 2.5, feature 3)" in lines[3]


def test_an_explained_label_a_multilabel_run_does_not_predict_is_said_to_be_not_predicted():
    doc = {"status": "ok", "label": "tech", "probability": 0.4, "logit": -0.4, "method": "exact", "bias": -0.4,
           "terms": [], "rest": 0.0, "terms_total": 0}
    assert "not predicted" not in commands.explained_lines("a text", doc)
    assert "not predicted" not in commands.explained_lines("a text", {**doc, "labels": ["tech", "sports"]})
    assert commands.explained_lines("a text", {**doc, "labels": []}).splitlines()[0].endswith(
        "; not predicted (the row's labels: none)")


def test_the_result_lines_say_a_count_of_one_in_the_singular():
    # predict --input of one row said "wrote 1 rows", a noted value "1 --numeric value(s) that are not numbers"
    line = commands.predicted_line({"rows_written": 1, "output": "p.csv", "predicted": 1, "not_predicted": {}})
    assert line == "wrote 1 row to p.csv: 1 predicted"
    assert commands.predicted_line({"rows_written": 3, "output": "p.csv", "predicted": 3,
                                    "not_predicted": {}}).startswith("wrote 3 rows to")
    one = commands.noted_note({"unreadable_numeric": 1, "label_as_run": 1, "longer_than_max_len": 1})
    assert "; 1 --numeric value that is not a number (a decimal comma" in one
    assert "; 1 label read as the run's spelling" in one and "; 1 row held more tokens" in one
    assert "; 2 --numeric values that are not numbers" in commands.noted_note({"unreadable_numeric": 2})


def test_evaluates_line_says_why_targets_that_are_no_number_were_skipped():
    # evaluate's "300 skipped: 300 missing_target" for a TSV of decimal commas never said the targets were there
    line = commands.noted_note({"unreadable_target": 300})
    assert line.startswith("; 300 --target values that are not numbers (a decimal comma")
    assert line.endswith("skipped as missing_target (unreadable_target)")


def test_make_data_refuses_to_replace_an_existing_file_unless_forced(tmp_path):
    # a user's own data/train.csv was silently replaced by a generated corpus
    own = tmp_path / "train.csv"
    own.write_text("text,label\nmy own row,mine\n")
    a = build_parser().parse_args(["make-data", str(own), "--rows", "10"])
    with pytest.raises(UserError, match="train.csv: the file already exists") as e:
        commands.cmd_make_data(a, None)
    assert "--force" in e.value.hint
    assert own.read_text() == "text,label\nmy own row,mine\n"
    said = []
    report = type("Report", (), {"json": None, "say": lambda self, text, **kw: said.append(text)})()
    assert commands.cmd_make_data(build_parser().parse_args(["make-data", str(own), "--rows", "10", "--force"]),
                                  report) == 0
    assert own.read_text().startswith("text,label,value,target") and said


def test_make_data_refuses_a_file_of_a_run_folder_even_forced(tmp_path):
    # make-data runs/x/history.csv --force replaced the run's own file with a generated corpus
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "model.json", "history.csv"):
        (run / name).write_text("kept")
    a = build_parser().parse_args(["make-data", str(run / "history.csv"), "--rows", "10", "--force"])
    with pytest.raises(UserError, match="make-data .*history.csv is a file of the run folder"):
        commands.cmd_make_data(a, None)
    assert (run / "history.csv").read_text() == "kept"


def test_make_data_writes_into_an_existing_named_pipe_without_force(tmp_path):
    # a named pipe a reader holds is how make-data feeds a reader: not a file to protect
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    refuse_existing_file(str(fifo), {}, f"make-data {fifo}", "make-data")


@pytest.mark.parametrize("command", ["predict", "explain"])
@pytest.mark.parametrize("placeholder", ["...", "…", " ... "])
def test_the_summarys_text_placeholder_copied_as_printed_is_refused_naming_where_the_text_goes(command, placeholder):
    # the run's summary prints `predict RUN --text '...'`; copied, it predicted '...' as empty_text
    a = build_parser().parse_args([command, "runs/r1", "--text", "a fine text", "--text", placeholder])
    with pytest.raises(UserError, match=r"--text '\.\.\.' stands for your own text") as e:
        commands.COMMANDS[command](a, None)
    assert e.value.hint == f"put the text in its place, e.g. lancetnic-flow {command} runs/r1 --text 'a great match " \
                           "last night'"


def test_predict_text_warns_of_texts_with_no_term_the_run_reads(tmp_path, monkeypatch):
    # predict --text 'a' printed status empty_text alone, as if no text had been given
    import lancetnic_flow.runs.loading as loading
    import lancetnic_flow.runs.predict as predict
    from lancetnic_flow.features.vectorize import FittedFeatures

    class Pred:
        def __init__(self, *args):
            self.run = type("Run", (), {"features": FittedFeatures(mode="tfidf", analyzer="word")})()

        def predict(self, texts, **kw):
            return [{"status": "ok" if len(t) > 2 else "empty_text", "label": None} for t in texts]

    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({}, {}))
    monkeypatch.setattr(predict, "Predictor", Pred)
    seen = []
    report = type("Report", (), {"json": None, "view": None, "__call__": lambda self, k, e: seen.append((k, e))})()
    a = build_parser().parse_args(["predict", "RUN", "--text", "a", "--text", "good words"])
    assert commands.cmd_predict(a, report) == 0
    assert seen == [("warning", {"message": predict.unread_message(["a"], Pred().run.features)})]


@pytest.mark.parametrize("flag, value", [("--rows", "0"), ("--rows", "-5"), ("--epochs", "0")])
def test_demo_refuses_rows_or_epochs_below_one_before_any_work_naming_the_flag(tmp_path, flag, value):
    # demo --rows 0 trained on a header-only corpus and blamed its --format; --rows -5 said "rows must be"
    # after making the folder; --epochs 0 was refused once the corpus was written
    a = build_parser().parse_args(with_negative_values(["demo", "--dir", str(tmp_path / "demo"), flag, value]))
    with pytest.raises(UserError) as e:
        commands.cmd_demo(a, None)
    assert e.value.message == f"demo {flag} must be ≥ 1, got {value}"
    assert e.value.hint.startswith(f"e.g. {flag} ") and not (tmp_path / "demo").exists()


@pytest.mark.parametrize("command", ["predict", "evaluate"])
@pytest.mark.parametrize("flag", ["--memory-budget", "--blocksize", "--workers", "--worker-threads"])
def test_predict_and_evaluate_refuse_a_size_or_count_of_zero_as_train_does(command, flag, tmp_path, monkeypatch):
    # --memory-budget 0, --blocksize 0 and --worker-threads 0 were planned as not given, without a word;
    # --workers 0 ended in an internal ZeroDivisionError
    import lancetnic_flow.runs.loading as loading

    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({"task": "classify"}, {"data": {}}))
    monkeypatch.setattr(commands, "_planned_inputs", lambda *args: pytest.fail("planned with a zero"))
    data = str(tmp_path / "d.csv")
    argv = ([command, "RUN", "--input", data, "--output", str(tmp_path / "p.csv")] if command == "predict"
            else [command, "RUN", data]) + [flag, "0"]
    with pytest.raises(UserError) as e:
        commands.COMMANDS[command](build_parser().parse_args(argv), None)
    assert e.value.said("cli")[0] == f"{flag}: must be > 0, got 0"


class _Reached(Exception):
    """Raised by a stand-in for the step after an output's checks: the checks let it through."""


def _predict_to(tmp_path, monkeypatch, output: str, *extra: str):
    """``predict RUN --input d.csv --output OUTPUT`` run up to the work itself (a stand-in run)."""
    import lancetnic_flow.runs.loading as loading

    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood words,a\n")
    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({"task": "classify"}, {"data": {}}))
    monkeypatch.setattr(commands, "_run_model_bytes", lambda *args: 0)
    monkeypatch.setattr(commands, "_planned_inputs", lambda a, model, inputs: (None, inputs(1 << 20), True, "here"))
    monkeypatch.setattr(commands, "say_decided", lambda *args: (_ for _ in ()).throw(_Reached()))
    a = build_parser().parse_args(["predict", "RUN", "--input", str(data), "--output", output, *extra])
    commands.cmd_predict(a, type("Report", (), {"json": None, "say": lambda self, *x, **k: None})())


def test_predict_refuses_to_replace_an_existing_output_file_unless_forced(tmp_path, monkeypatch):
    # predict --output p.csv replaced an existing p.csv without a word, where make-data refused
    old = tmp_path / "p.csv"
    old.write_text("my earlier predictions\n")
    with pytest.raises(UserError, match=r"--output .*p.csv: the file already exists; predict does not replace") as e:
        _predict_to(tmp_path, monkeypatch, str(old))
    assert "--force" in e.value.hint and old.read_text() == "my earlier predictions\n"
    with pytest.raises(_Reached):
        _predict_to(tmp_path, monkeypatch, str(old), "--force")
    with pytest.raises(_Reached):   # a new file needs no --force
        _predict_to(tmp_path, monkeypatch, str(tmp_path / "new.csv"))


def test_predict_refuses_its_own_input_as_output_even_forced(tmp_path, monkeypatch):
    with pytest.raises(UserError, match=r"--output .*d.csv is the input .*d.csv"):
        _predict_to(tmp_path, monkeypatch, str(tmp_path / "d.csv"), "--force")


def test_export_onnx_refuses_an_existing_file_unless_forced_and_a_runs_own_file_always(tmp_path, monkeypatch):
    # export --onnx FILE replaced any file, the run's own model.json or its weights too
    import lancetnic_flow.runs.export as export
    import lancetnic_flow.runs.loading as loading

    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({}, {}))
    monkeypatch.setattr(export, "require_onnx", lambda: None)
    monkeypatch.setattr(export, "export_onnx", lambda *args: (_ for _ in ()).throw(_Reached()))
    run = tmp_path / "run"
    run.mkdir()
    for name in ("model.json", "config.json", "model.safetensors"):
        (run / name).write_text("kept")
    old = tmp_path / "m.onnx"
    old.write_text("an earlier export")

    def export_to(out, *extra):
        commands.cmd_export(build_parser().parse_args(["export", str(run), "--onnx", str(out), *extra]), None)

    with pytest.raises(UserError, match="m.onnx: the file already exists; export does not replace") as e:
        export_to(old)
    assert "--force" in e.value.hint and old.read_text() == "an earlier export"
    with pytest.raises(_Reached):
        export_to(old, "--force")
    for name in ("model.json", "model.safetensors"):
        with pytest.raises(UserError, match=f"--onnx .*{name} is a file of the run folder"):
            export_to(run / name, "--force")
        assert (run / name).read_text() == "kept"
    with pytest.raises(_Reached):   # a new file in the run folder is the user's
        export_to(run / "model.onnx")


def test_export_refuses_an_onnx_name_of_another_format_before_any_work(tmp_path, monkeypatch):
    # `export RUN --onnx x.json` wrote an ONNX graph there
    import lancetnic_flow.runs.export as export
    import lancetnic_flow.runs.loading as loading

    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({}, {}))
    monkeypatch.setattr(export, "require_onnx", lambda: None)
    monkeypatch.setattr(export, "export_onnx", lambda *args: (_ for _ in ()).throw(_Reached()))
    argv = ["export", str(tmp_path / "run"), "--onnx"]
    with pytest.raises(UserError, match="--onnx .*x.json: the name says a .json file"):
        commands.cmd_export(build_parser().parse_args([*argv, str(tmp_path / "x.json")]), None)
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(_Reached):
        commands.cmd_export(build_parser().parse_args([*argv, str(tmp_path / "x.onnx")]), None)


@pytest.mark.parametrize("plots", [None, "earlier"])
def test_evaluate_force_is_refused_without_plots_and_earlier_plots_without_force(plots, tmp_path, monkeypatch):
    # evaluate --plots DIR replaced an earlier evaluation's tables and charts without a word
    import lancetnic_flow.runs.loading as loading

    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood words,a\n")
    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({"task": "classify"}, {"data": {}}))
    monkeypatch.setattr(commands, "_run_model_bytes", lambda *args: 0)
    monkeypatch.setattr(commands, "_planned_inputs", lambda a, model, inputs: (None, inputs(1 << 20), True, "here"))
    argv = ["evaluate", "RUN", str(data)]
    if plots:
        (tmp_path / plots).mkdir()
        (tmp_path / plots / "confusion_matrix.png").write_bytes(b"png")
        argv += ["--plots", str(tmp_path / plots)]
    else:
        argv += ["--force"]
    with pytest.raises(UserError, match="no --plots is given" if plots is None else
                       "already holds an evaluation's confusion_matrix.png"):
        commands.cmd_evaluate(build_parser().parse_args(argv), None)


def test_export_refuses_force_with_compact_as_it_would_replace_nothing(tmp_path):
    a = build_parser().parse_args(["export", str(tmp_path / "run"), "--compact", str(tmp_path / "c"), "--force"])
    with pytest.raises(UserError, match="--force replaces an existing --onnx FILE; --compact .* never replaces"):
        commands.cmd_export(a, None)


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_predict_and_evaluate_refuse_an_encoding_for_parquet_strings_alone(command, tmp_path, monkeypatch):
    # --encoding latin-1 on Parquet of strings read them as without it, without a word
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lancetnic_flow.runs.loading as loading

    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": ["good words"], "label": ["a"]}), data)
    monkeypatch.setattr(loading, "read_run_json", lambda run, so=None: ({"task": "classify"}, {"data": {}}))
    monkeypatch.setattr(commands, "_run_model_bytes", lambda *args: 0)
    monkeypatch.setattr(commands, "_planned_inputs", lambda a, model, inputs: (None, inputs(1 << 20), True, "here"))
    argv = ([command, "RUN", "--input", str(data), "--output", str(tmp_path / "p.csv")] if command == "predict"
            else [command, "RUN", str(data)]) + ["--encoding", "latin-1"]
    a = build_parser().parse_args(argv)
    run = commands.cmd_predict if command == "predict" else commands.cmd_evaluate
    with pytest.raises(UserError) as e:
        run(a, type("Report", (), {"json": None, "say": lambda self, *x, **k: None})())
    # the command line prints e.cli
    assert e.value.cli[0].startswith("--encoding latin-1: it decodes text files and Parquet/Arrow columns of bytes")
    assert e.value.cli[1] == "drop --encoding"


@pytest.mark.parametrize("command, said", [("train", "raise --max-len"), ("run", "raise max_len")])
def test_a_runs_warnings_name_flags_under_train_and_the_files_keys_under_run(command, said, tmp_path, monkeypatch):
    """A warning of a run named `--max-len` to a workflow run, whose file holds `max_len:`."""
    data = tmp_path / "d.csv"
    data.write_text("text,label\na b,x\nc d,y\n")
    flow = tmp_path / "flow.yaml"
    flow.write_text(f"data:\n  train: {data}\noutput:\n  out: {tmp_path / 'runs'}\n")
    monkeypatch.setattr(orchestrator, "train", lambda cfg, events, resume=None: events.emit(
        "warning", message="raise {features.max_len}"))
    argv = ["run", str(flow)] if command == "run" else ["train", str(data), "--out", str(tmp_path / "runs")]
    a = build_parser().parse_args(with_negative_values(argv))
    a.given = given_dests(argv, command)
    seen = []
    commands.COMMANDS[command](a, lambda kind, e: seen.append(e["message"]))
    assert seen == [said]


def test_an_explained_value_near_a_large_mean_is_said_to_the_terms_decimals():
    # a target near 1e6: "value 1e+06 = bias +1e+06" beside contributions of a few thousandths
    term = {"term": "goal", "feature": 3, "value": 0.5, "weight": 0.0084, "contribution": 0.0042}
    doc = {"status": "ok", "value": 1000000.0036837, "method": "local", "bias": 999999.9994837,
           "terms": [term], "rest": 0.0, "terms_total": 1}
    first = commands.explained_lines("a goal", doc).splitlines()[0]
    assert first == "'a goal' → value 1000000.0037 = bias +999999.9995 + the terms' contributions (local: " \
                    "exact at this text only)"
    mt = {"status": "ok", "label": "sports", "probability": 0.9, "logit": 2.5, "method": "exact", "bias": 1.5,
          "terms": [], "rest": 0.0, "terms_total": 0, "value": -2500000.125,
          "value_explained": {"method": "exact", "bias": -2500000.5, "terms": [], "rest": 0.375, "terms_total": 0}}
    assert commands.explained_lines("a goal", mt).splitlines()[2] == \
        "  and value -2500000.125 = bias -2500000.5 + the terms' contributions (exact)"


def test_evaluates_line_shows_a_target_in_small_units_errors_not_zero():
    # "mae 0.0000 · rmse 0.0000" for a target in units of 1e-6, as if every value were exact
    out = {"mae": 7.736e-07, "rmse": 9.709e-07, "r2": 0.3528, "loss": 0.6489, "rows": {"evaluated": 1000}}
    assert commands.evaluated_line(out) == "mae 7.736e-07 · rmse 9.709e-07 · r2 0.3528 · loss 0.6489 · 1,000 rows"
    assert commands.evaluated_line({"accuracy": 0.872, "loss": 1.5, "rows": {"evaluated": 2}}) == \
        "accuracy 0.8720 · loss 1.5000 · 2 rows"


@pytest.mark.parametrize("command, event", [("predict", "prediction"), ("explain", "explained")])
def test_predict_and_explain_of_texts_log_each_result_to_json_log_and_to_stdout_only_the_events(
        command, event, linear_run, capsys):
    # the log was written empty: every result went to stdout alone
    from lancetnic_flow.cli.main import main

    run, log = str(linear_run / "run"), str(linear_run / "log.jsonl")
    assert main([command, run, "--text", "a cat", "--text", "dog", "--json-log", log]) == 0
    printed = capsys.readouterr().out.splitlines()
    logged = [json.loads(line) for line in open(log)]
    assert [(e["event"], e["text"], e["label"]) for e in logged] == [(event, "a cat", "pos"), (event, "dog", "neg")]
    assert len(printed) == (2 if command == "predict" else 2 + sum(len(e["terms"]) for e in logged))
    assert main([command, run, "--text", "a cat", "--json-log"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["event"] == event


def test_evaluate_json_with_json_log_to_stdout_prints_the_evaluated_event_alone(linear_run, capsys):
    # stdout held the event and then the same metrics as a bare object: a reader of events met a line of no event
    from lancetnic_flow.cli.main import main

    run, data = str(linear_run / "run"), str(linear_run / "in.csv")
    assert main(["evaluate", run, data, "--run-on", "process", "--json", "--json-log"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e.get("event") for e in lines] == ["evaluated"] and lines[0]["rows"]["evaluated"] == 2
    assert main(["evaluate", run, data, "--run-on", "process", "--json"]) == 0   # alone: the metrics' object
    [line] = capsys.readouterr().out.splitlines()
    assert "event" not in json.loads(line) and json.loads(line)["rows"]["evaluated"] == 2


@pytest.mark.parametrize("argv, refused", [
    (["--max-queue", "600"], True), (["--max-queue", "40", "--max-connections", "40"], True),
    (["--max-queue", "39", "--max-connections", "40"], False), (["--max-connections", "40"], False)])
def test_serve_refuses_a_max_queue_the_connection_bound_never_lets_it_reach(argv, refused, tmp_path):
    # each connection sends one request at a time: past --max-connections a request is refused before the queue
    a = build_parser().parse_args(["serve", str(tmp_path / "none"), *argv])
    with pytest.raises(UserError) as e:
        commands.cmd_serve(a, None)
    assert ("would never refuse a request" in e.value.message) == refused


@pytest.mark.parametrize("quiet", [False, True])
def test_demo_says_it_generates_its_corpus_except_with_quiet(tmp_path, monkeypatch, capsys, quiet):
    # --quiet printed the `generating` milestone all the same
    import types

    import lancetnic_flow.runs.predict as predict
    from lancetnic_flow.cli.main import main

    monkeypatch.setattr(orchestrator, "train", lambda cfg, events: types.SimpleNamespace(run="r"))
    monkeypatch.setattr(predict, "Predictor", lambda run: types.SimpleNamespace(
        predict=lambda texts: [{"label": "x", "probability": 0.5} for _ in texts]))
    assert main(["demo", "--rows", "20", "--dir", str(tmp_path), *(["--quiet"] if quiet else [])]) == 0
    err = capsys.readouterr().err
    assert ("generating 20 rows" in err) is not quiet and err.count("→ x (0.50)") == 3


@pytest.mark.parametrize("argv, said", [
    ([], "predict needs texts: --text TEXT (repeatable) or --input DATA --output URL\n"
         "  hint: e.g. lancetnic-flow predict 'runs/my run' --text 'a great match last night', or "
         "lancetnic-flow predict 'runs/my run' --input data.csv --output predictions.csv"),
    (["--text", "hi", "--input", "d.csv", "--output", "p.csv"],
     "predict reads its texts from --text or from --input, not both\n  hint: drop --text"),
])
def test_predict_without_texts_or_with_both_sources_is_told_a_command_that_works(argv, said):
    """`predict runs/first` alone was told `predict needs either --text TEXT... or --input DATA
    --output URL` with no hint, and the same when both were given, which it does not say."""
    a = build_parser().parse_args(["predict", "runs/my run", *argv])
    with pytest.raises(UserError) as e:
        commands.cmd_predict(a, None)
    assert f"{e.value.message}\n  hint: {e.value.hint}".startswith(said)


@pytest.mark.parametrize("argv", [["predict", "RUN", "--text", "a match", "--top-k", "0"],
                                  ["make-data", "d.csv", "--rows", "0"], ["make-data", "d.csv", "--rows", "5",
                                                                          "--classes", "1"]])
def test_a_refused_count_says_what_would_work(argv):
    # --top-k 0, make-data --rows 0 and --classes 1 were refused with no hint
    a = build_parser().parse_args(argv)
    with pytest.raises(UserError) as e:
        commands.COMMANDS[argv[0]](a, None)
    assert e.value.hint and e.value.hint.startswith("e.g. --")
