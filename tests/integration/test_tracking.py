"""``--track tensorboard|mlflow``: per-epoch metrics, the options and the run
folder in an experiment tracker, read back with the trackers' own readers
(TensorBoard's EventAccumulator, MLflow's client) and compared with
metrics.json; a tracker that fails costs a warning, never the run; --resume
logs on into the same TensorBoard folder and MLflow run."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from lancetnic_flow.config import OutputConfig, parse_trackers
from lancetnic_flow.errors import UserError
from lancetnic_flow.events import Events
from lancetnic_flow.training.tracking import TRACKING_FILE, Tracking, epoch_scalars, flat_options, tensorboard_tag

from helpers import CLUSTER, assert_user_error, cli, make_config

pytest.importorskip("tensorboard")
pytest.importorskip("mlflow")


def _tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(s.step, s.value) for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _mlflow(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _run_id(run: Path) -> str:
    return json.loads((run / TRACKING_FILE).read_text())["mlflow"]["run_id"]


def _assert_epochs_match(history: dict[str, list[tuple[int, float]]], epochs: list[dict], tag=lambda k: k):
    """One point per epoch and metric, at step = the epoch, equal to metrics.json's epochs."""
    keys = epoch_scalars(epochs[0])
    assert {"train_loss", "val_loss", "val_accuracy", "rows_per_s", "lr"} <= set(keys)
    for key in keys:
        want = [(e["epoch"], e[key]) for e in epochs]
        got = sorted(history[tag(key)])
        assert [s for s, _ in got] == [s for s, _ in want], key
        # TensorBoard keeps float32.
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6), key


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """One CLI run with both trackers; MLflow in a SQLite file (its artifacts in ./mlruns of the run's cwd)."""
    tmp = tmp_path_factory.mktemp("tracked")
    assert cli("make-data", "data.csv", "--rows", "1500", cwd=tmp).returncode == 0
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    p = cli("train", "data.csv", "--epochs", "2", "--early-stopping", "0", *CLUSTER, "--out", "tracked",
            "--name", "r1", "--track", "tensorboard", "--track", "mlflow", cwd=tmp,
            env={"MLFLOW_TRACKING_URI": uri})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--track" not in p.stdout + p.stderr   # no tracker warned
    run = tmp / "tracked" / "r1"
    return run, uri, json.loads((run / "metrics.json").read_text())


def test_tensorboard_gets_a_scalar_per_epoch_and_metric_equal_to_metrics_json(tracked):
    run, _, metrics = tracked
    assert len(metrics["epochs"]) == 2
    scalars = _tensorboard_scalars(run / "tensorboard")
    _assert_epochs_match(scalars, metrics["epochs"], tensorboard_tag)
    assert "train/loss" in scalars and "val/accuracy" in scalars
    # The saved model's scores, at its epoch.
    assert scalars["best/val_accuracy"] == [(metrics["best_epoch"], pytest.approx(metrics["val_accuracy"]))]


def test_mlflow_gets_the_options_the_epochs_and_the_run_folder(tracked):
    run, uri, metrics = tracked
    client = _mlflow(uri)
    r = client.get_run(_run_id(run))
    assert r.info.status == "FINISHED" and r.info.run_name == "r1"
    assert client.get_experiment(r.info.experiment_id).name == "tracked"   # --out's folder name
    params = r.data.params
    assert params["training.epochs"] == "2" and params["model.name"] == "LinearSVM"   # what --model auto chose
    assert params["output.track"] == '["tensorboard", "mlflow"]' and json.loads(params["data.train"]) == ["data.csv"]
    history = {k: [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, k)]
               for k in epoch_scalars(metrics["epochs"][0])}
    _assert_epochs_match(history, metrics["epochs"])
    assert r.data.metrics["best_val_accuracy"] == pytest.approx(metrics["val_accuracy"])
    artifacts = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"model.safetensors", "model.json", "metrics.json", "config.json", "tensorboard"} <= artifacts
    # the charts too: the command line draws them after the run by default, after the upload they were missing
    charts = {p.name for p in run.glob("*.png")}
    assert charts and charts <= artifacts, (charts, artifacts)
    assert [a.path for a in client.list_artifacts(r.info.run_id, "tensorboard")] == \
        [f"tensorboard/{f}" for f in os.listdir(run / "tensorboard")]


def _interrupt_at(epoch: int, batch: int, seen: list) -> Events:
    """Events that record every event and send a real SIGINT (a Ctrl-C) at ``batch`` of ``epoch``."""
    events = Events()

    def listener(kind: str, e: dict) -> None:
        seen.append((kind, e))
        if kind == "batch" and e["epoch"] == epoch and e["rows"] == batch * 128:
            os.kill(os.getpid(), signal.SIGINT)

    events.subscribe(listener)
    return events


def test_resume_logs_on_into_the_same_tensorboard_folder_and_mlflow_run(client, small_corpus, tmp_path,
                                                                         monkeypatch):
    from lancetnic_flow.training.orchestrator import train
    from lancetnic_flow.training.resume import resume_config
    from lancetnic_flow.training.stop import TrainingInterrupted

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    cfg = make_config(small_corpus, tmp_path, epochs=3)
    cfg.output.name, cfg.output.track, cfg.output.experiment = "stopped", ["tensorboard", "mlflow"], "exp"
    cfg.training.checkpoint_every = "off"   # only the Ctrl-C checkpoint
    seen: list = []
    with pytest.raises(TrainingInterrupted):
        train(cfg, _interrupt_at(2, 3, seen), client=client)
    run = tmp_path / "runs" / "stopped"
    mlflow = _mlflow(uri)
    run_id = _run_id(run)
    assert mlflow.get_run(run_id).info.status == "KILLED"
    assert [m.step for m in mlflow.get_metric_history(run_id, "val_loss")] == [1]
    assert _tensorboard_scalars(run / "tensorboard")["val/loss"][0][0] == 1

    res = train(resume_config(str(run)), events=_interrupt_at(0, 0, seen), client=client, resume=str(run))
    assert not [e for k, e in seen if k == "warning"], seen
    assert _run_id(run) == run_id
    r = mlflow.get_run(run_id)
    assert r.info.status == "FINISHED" and mlflow.get_experiment(r.info.experiment_id).name == "exp"
    epochs = res.metrics["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    history = {k: [(m.step, m.value) for m in mlflow.get_metric_history(run_id, k)] for k in epoch_scalars(epochs[0])}
    _assert_epochs_match(history, epochs)
    _assert_epochs_match(_tensorboard_scalars(run / "tensorboard"), epochs, tensorboard_tag)
    assert len(list((run / "tensorboard").iterdir())) == 2   # one event file per process, in one folder


def test_an_unreachable_mlflow_server_costs_one_warning_not_the_run(client, small_corpus, tmp_path, monkeypatch):
    from lancetnic_flow.training.orchestrator import train

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")   # nothing listens there
    cfg = make_config(small_corpus, tmp_path, epochs=2)
    cfg.output.track = ["mlflow", "tensorboard"]
    seen: list = []
    res = train(cfg, _interrupt_at(0, 0, seen), client=client)
    warnings = [e["message"] for k, e in seen if k == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("track mlflow stopped:"), warnings
    assert "training goes on without it" in warnings[0]
    assert len(res.metrics["epochs"]) == 2 and (Path(res.run) / "model.safetensors").exists()
    # The other tracker carried on.
    assert [s for s, _ in _tensorboard_scalars(Path(res.run) / "tensorboard")["val/loss"]] == [1, 2]


class _Fake:
    def __init__(self, name: str, fail_on: str | None = None):
        self.name, self.fail_on, self.calls = name, fail_on, []

    def _call(self, what: str, *args) -> None:
        self.calls.append(what)
        if what == self.fail_on:
            raise OSError(28, "No space left on device")

    def epoch(self, record):
        self._call("epoch")

    def finish(self, run, metrics):
        self._call("finish")

    def close(self, status):
        self._call(f"close {status}")


def test_a_failing_tracker_warns_once_is_closed_and_dropped_while_the_others_go_on():
    events = Events()
    warnings: list = []
    events.subscribe(lambda k, e: warnings.append(e["message"]) if k == "warning" else None)
    tracking = Tracking(events)
    bad, good = _Fake("tensorboard", fail_on="epoch"), _Fake("mlflow")
    tracking.add("tensorboard", lambda: bad)
    tracking.add("mlflow", lambda: good)
    tracking.add("mlflow", lambda: (_ for _ in ()).throw(RuntimeError("no server\nmore lines")))
    events.subscribe(tracking)
    for epoch in (1, 2):
        events.emit("epoch", epoch=epoch, train_loss=0.5)
    events.emit("done", run="runs/x", metrics={})
    tracking.end(None)   # after `done`: nothing more
    assert bad.calls == ["epoch", "close FAILED"] and good.calls == ["epoch", "epoch", "finish"]
    assert warnings[0] == "track mlflow stopped: RuntimeError: no server; training goes on without it"
    assert len(warnings) == 2 and warnings[1].startswith("track tensorboard stopped: OSError")


def test_an_interrupted_run_closes_its_trackers_as_killed():
    tracking = Tracking(Events())
    fake = _Fake("mlflow")
    tracking.add("mlflow", lambda: fake)
    tracking.end(KeyboardInterrupt())
    tracking.end(None)
    assert fake.calls == ["close KILLED"]


def test_tracker_names_are_checked_when_the_config_is():
    assert parse_trackers(["tensorboard,MLflow", "tensorboard"]) == ["tensorboard", "mlflow"]
    assert parse_trackers("mlflow") == ["mlflow"] and parse_trackers(None) == []
    with pytest.raises(UserError, match=r"'tensorbord' is not one of tensorboard, mlflow .*did you mean"):
        OutputConfig(track=["tensorbord"]).validate()


def test_a_missing_tracker_package_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(UserError) as err:
        parse_trackers(["mlflow"])
    assert "needs the mlflow package" in err.value.message and "lancetnic_flow[track]" in err.value.hint


def test_an_unknown_tracker_is_exit_2_on_the_command_line(small_corpus, tmp_path):
    assert_user_error(cli("train", small_corpus, "--track", "wandb", cwd=tmp_path), "'wandb' is not one of")


def test_a_workflow_tracks_with_the_same_option(tmp_path):
    from lancetnic_flow.cli.workflow import read_workflow

    wf = tmp_path / "wf.yaml"
    wf.write_text("train: data.csv\noutput:\n  track: [tensorboard, mlflow]\n  experiment: news\n")
    a = read_workflow(str(wf)).values
    assert a["track"] == ["tensorboard", "mlflow"] and a["experiment"] == "news"
    wf.write_text("train: data.csv\ntrack: tensorboard,mlflow\n")
    assert parse_trackers(read_workflow(str(wf)).values["track"]) == ["tensorboard", "mlflow"]


def test_options_flatten_to_dotted_parameters():
    flat = flat_options({"data": {"train": ["a.csv"], "storage_options": {}}, "training": {"lr": 0.01, "ddp": None}})
    assert flat == {"data.train": '["a.csv"]', "data.storage_options": "{}", "training.lr": 0.01, "training.ddp": None}


def test_an_estimator_tracks_with_track(client, small_corpus, tmp_path, monkeypatch):
    import pyarrow.csv as pacsv

    from lancetnic_flow.api.estimators import TextClassifier

    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    table = pacsv.read_csv(small_corpus)
    clf = TextClassifier(epochs=1, scheduler=client.scheduler.address, progress=False, out=str(tmp_path / "runs"),
                         track="tensorboard")
    clf.fit(table["text"].to_pylist(), table["label"].to_pylist())
    assert clf.get_params()["track"] == "tensorboard"
    assert [s for s, _ in _tensorboard_scalars(Path(clf.run_) / "tensorboard")["val/loss"]] == [1]
    assert TextClassifier(track="mlflow")._experiment() == "TextClassifier" and clf._experiment() is None
    assert TextClassifier()._experiment() is None   # no MLflow run, no experiment (refused: it would do nothing)


def test_a_remote_run_folder_gets_its_event_files_and_goes_to_mlflow(client, small_corpus, tmp_path, monkeypatch):
    """A run folder at an fsspec URL (memory:// here, s3:// in use): TensorBoard's local files are
    uploaded at the end, and MLflow's artifacts are a download of the folder."""
    import fsspec

    from lancetnic_flow.training.orchestrator import train

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    cfg = make_config(small_corpus, tmp_path, epochs=2)
    cfg.output.out, cfg.output.name, cfg.output.track = "memory://tracked-remote/runs", "r", ["tensorboard", "mlflow"]
    res = train(cfg, client=client)
    fs = fsspec.filesystem("memory")
    local = tmp_path / "tb"
    fs.get("/tracked-remote/runs/r/tensorboard/", str(local) + "/", recursive=True)
    _assert_epochs_match(_tensorboard_scalars(local), res.metrics["epochs"], tensorboard_tag)
    run_id = json.loads(fs.cat("/tracked-remote/runs/r/" + TRACKING_FILE))["mlflow"]["run_id"]
    mlflow = _mlflow(uri)
    assert {"model.safetensors", "metrics.json", "tensorboard"} <= {a.path for a in mlflow.list_artifacts(run_id)}
    assert mlflow.get_run(run_id).info.status == "FINISHED"


def test_an_epoch_logged_before_a_kill_and_trained_again_on_resume_is_logged_once(tmp_path, monkeypatch):
    """A process killed (SIGKILL) after epoch 2 was logged but before its checkpoint: the resumed run
    trains epoch 2 again and logged it a second time, in MLflow and TensorBoard alike (the history
    read [1, 2, 2, 3]). Now each epoch is one point: MLflow keeps the point it holds (its points
    cannot be replaced), TensorBoard's readers the resumed run's (the resumed writer purges from
    its first step)."""
    from lancetnic_flow.training.tracking import MlflowTracker, TensorBoardTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    cfg = make_config(tmp_path / "data.csv", tmp_path)
    cfg.output.experiment = "exp"
    run = tmp_path / "run"
    run.mkdir()

    def trackers(resumed: bool):
        return [TensorBoardTracker(str(run), {}, {"training.lr": 0.1}, resumed),
                MlflowTracker(cfg, str(run), {}, {"training.lr": 0.1}, resumed, Events())]

    stopped = trackers(False)
    for epoch in (1, 2):
        for t in stopped:
            t.epoch({"epoch": epoch, "train_loss": 1.0 / epoch, "val_loss": 2.0 / epoch, "t": 0.0})
    # killed here: no close, no checkpoint of epoch 2's end; the resume trains epoch 2 again
    resumed = trackers(True)
    for epoch, loss in ((2, 0.75), (3, 0.5)):
        for t in resumed:
            t.epoch({"epoch": epoch, "train_loss": loss, "val_loss": 2.0 / epoch, "t": 0.0})
    for t in resumed:
        t.finish(str(run), {})
    mlflow = _mlflow(uri)
    for key in ("train_loss", "val_loss"):
        assert [m.step for m in mlflow.get_metric_history(_run_id(run), key)] == [1, 2, 3], key
    scalars = _tensorboard_scalars(run / "tensorboard")
    assert [s for s, _ in scalars["val/loss"]] == [1, 2, 3]
    assert scalars["train/loss"] == [(1, 1.0), (2, 0.75), (3, 0.5)]   # epoch 2 as the resumed run trained it
