"""Small data runs in the calling process: `train`, `evaluate` and `predict`
on a small file start no cluster and say so, and give the same model bytes,
metrics and predictions as on a LocalCluster; the estimators fit in-memory
data here, so joblib workers can run them (GridSearchCV with n_jobs=2); a
long-lived worker predicts with the weights a run folder holds now."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lancetnic_flow import TextClassifier, write_corpus

from helpers import assert_user_error, charts_drawn, cli, make_config

SEED = ["--seed", "0", "--epochs", "2", "--workers", "1", "--memory-budget", "3GiB"]


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, small_corpus):
    """The same small corpus trained in this process (auto) and on a LocalCluster."""
    d = tmp_path_factory.mktemp("where")
    out = {}
    for name, extra in (("here", []), ("cluster", ["--run-on", "cluster", "--no-plots"])):
        p = cli("train", small_corpus, *SEED, *extra, "--out", d / "runs", "--name", name, "--cache",
                d / f"cache-{name}", "--json-log", cwd=d)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        out[name] = _events(p.stdout)
        out[f"{name}-charts"] = charts_drawn(p.stdout)
    out["dir"] = d
    return out


def test_a_small_train_runs_in_this_process_and_says_so(runs):
    plan = next(e for e in runs["here"] if e["event"] == "plan")
    assert plan["where"].startswith("in this process") and "--run-on cluster" in plan["where"]
    assert plan["plan"]["in_process"] is True and plan["plan"]["workers"] == 0
    assert "featurising  in this process" in plan["text"]
    done = runs["here"][-1]
    assert done["event"] == "done" and done["metrics"]["memory"]["plan"]["in_process"] is True
    # no worker reported memory: nothing ran outside this process
    assert all(not e.get("workers") for e in runs["here"] if e["event"] == "memory")
    other = next(e for e in runs["cluster"] if e["event"] == "plan")
    assert other["where"] == "on a LocalCluster (--run-on cluster)" and other["plan"]["workers"] == 1
    assert any(e.get("workers") for e in runs["cluster"] if e["event"] == "memory")


def test_no_plots_writes_the_tables_without_charts(runs):
    d = runs["dir"] / "runs"
    assert (d / "here" / "confusion_matrix.png").exists() and (d / "here" / "per_class.csv").exists()
    assert not list((d / "cluster").glob("*.png")) and (d / "cluster" / "per_class.csv").exists()
    assert runs["cluster"][-1]["metrics"]["plots"] == ["per_class.csv", "top_terms.csv"]   # the tables alone


def test_in_process_and_cluster_runs_save_the_same_model_bytes_and_metrics(runs):
    d = runs["dir"] / "runs"
    assert (d / "here" / "model.safetensors").read_bytes() == (d / "cluster" / "model.safetensors").read_bytes()
    a, b = runs["here"][-1]["metrics"], runs["cluster"][-1]["metrics"]
    assert a["val_accuracy"] == b["val_accuracy"] and a["rows"] == b["rows"]


def test_evaluate_and_predict_of_a_small_file_run_in_this_process_with_the_cluster_s_answers(runs, small_corpus):
    d = runs["dir"]
    run = d / "runs" / "here"
    got = {}
    for where in ("auto", "cluster"):
        p = cli("evaluate", run, small_corpus, "--json", "--run-on", where, "--workers", "1", cwd=d)
        assert p.returncode == 0, p.stderr[-3000:]
        got[where] = json.loads(p.stdout)
        p = cli("predict", run, "--input", small_corpus, "--output", d / f"pred-{where}.csv", "--run-on", where,
                "--workers", "1", cwd=d)
        assert p.returncode == 0, p.stderr[-3000:]
    assert got["auto"]["where"].startswith("in this process")
    assert got["cluster"]["where"].startswith("on a LocalCluster")
    assert {k: v for k, v in got["auto"].items() if k != "where"} == \
        {k: v for k, v in got["cluster"].items() if k != "where"}
    here, there = pd.read_csv(d / "pred-auto.csv"), pd.read_csv(d / "pred-cluster.csv")
    assert len(here) == 2000 and here.equals(there)


def test_run_on_process_with_ddp_is_refused_before_any_work(tmp_path, small_corpus):
    p = cli("train", small_corpus, "--run-on", "process", "--ddp", "2", "--model", "ScalpelMC", "--out", tmp_path,
            cwd=tmp_path)
    assert_user_error(p, "--run-on process", "--ddp")


def test_a_long_lived_worker_predicts_with_the_weights_the_run_folder_holds_now(client, trained_run, data_dir,
                                                                               tmp_path):
    from lancetnic_flow.data.sources import Columns, plan_source
    from lancetnic_flow.runs.predict import Predictor, predict_files
    from lancetnic_flow.training.orchestrator import train



    two = data_dir / "two-classes.csv"
    write_corpus(str(two), 600, classes=2, seed=11)
    other = train(make_config(two, tmp_path / "b", epochs=1), client=client)
    folder = tmp_path / "run"
    shutil.copytree(trained_run.run, folder)
    # Small partitions: every worker of the shared cluster loads the first run.
    src = plan_source([str(two)], format="auto", storage_options={}, blocksize=4096)
    assert len(src.partitions) >= 8
    cols = Columns(text=("text",), all_rows=True)

    def predicted() -> list:
        out = tmp_path / "p.csv"
        predict_files(client, str(folder), src, cols, str(out), storage_options={}, run_options={},
                      chunk_bytes=1 << 20, window=4, force=True)
        return pd.read_csv(out)["predicted"].tolist()

    assert set(predicted()) <= set(Predictor(trained_run.run).labels)
    for f in ("model.json", "config.json", "features.json", "model.safetensors"):
        shutil.copyfile(f"{other.run}/{f}", folder / f)
    texts = pd.read_csv(two)["text"].tolist()
    assert predicted() == [p["label"] for p in Predictor(other.run).predict(texts)]


def test_grid_search_with_two_joblib_workers_fits_every_candidate(tmp_path):
    from sklearn.model_selection import GridSearchCV, cross_val_score

    path = tmp_path / "c.csv"
    write_corpus(str(path), 1200, classes=3, seed=5)
    frame = pd.read_csv(path)
    X, y = frame["text"].to_numpy(), frame["label"].to_numpy()
    est = TextClassifier(epochs=2, progress=False)
    gs = GridSearchCV(est, {"hidden": [16, 32]}, cv=2, n_jobs=2, error_score="raise").fit(X, y)
    assert np.isfinite(gs.cv_results_["mean_test_score"]).all() and 0.4 < gs.best_score_ <= 1
    # a temporary run folder gets no charts nobody would see; the estimator predicts all the same
    run = Path(gs.best_estimator_.run_)
    assert not list(run.glob("*.png")) and (run / "per_class.csv").exists()
    scores = cross_val_score(TextClassifier(epochs=2, progress=False, out=str(tmp_path / "cv")), X, y, cv=3,
                             n_jobs=2, error_score="raise")
    assert len(scores) == 3 and (scores > 0.4).all()


def test_the_default_model_trains_continues_and_the_estimator_fits_and_predicts_without_importing_torch_or_dask(
        tmp_path, small_corpus):
    """torch's import is most of a small run's time: a LinearSVM trained in
    one process (its checkpoints, --init-from and partial_fit included) never needs it."""
    code = f"""
import sys
from lancetnic_flow.cli.main import main
assert main(["train", {str(small_corpus)!r}, "--epochs", "2", "--checkpoint-every", "3", "--out", "runs",
             "--name", "r", "--no-plots"]) == 0
print("dask" in sys.modules)   # a run in this process has no use for Dask: its import is not paid
import pandas as pd
from lancetnic_flow import TextClassifier
frame = pd.read_csv({str(small_corpus)!r})
clf = TextClassifier(epochs=2, progress=False).fit(frame["text"][:1500], frame["label"][:1500])
print(len(clf.predict(frame["text"][1500:])), clf.score(frame["text"][1500:], frame["label"][1500:]) > 0.5)
assert main(["train", {str(small_corpus)!r}, "--epochs", "1", "--init-from", "runs/r", "--out", "runs",
             "--name", "r2", "--no-plots"]) == 0
more = TextClassifier(epochs=1, progress=False)
more.partial_fit(frame["text"][:800], frame["label"][:800])
more.partial_fit(frame["text"][800:1500], frame["label"][800:1500])
print(more.score(frame["text"][1500:], frame["label"][1500:]) > 0.5)
print("torch" in sys.modules)
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    assert lines[-4:] == ["False", f"{len(pd.read_csv(small_corpus)) - 1500} True", "True", "False"], \
        p.stdout[-2000:]
    run = tmp_path / "runs" / "r"
    assert json.loads((run / "model.json").read_text())["model"] == "LinearSVM"
    assert json.loads((run / "metrics.json").read_text())["calibration"]["scale"] != 1.0


@pytest.mark.parametrize("model", ["LinearSVM", "ScalpelMC", "LancetMC", "LinearSVM multilabel"])
def test_kept_shards_train_every_kind_of_model_to_the_weights_of_reading_them_each_epoch(
        tmp_path, small_corpus, monkeypatch, model):
    """Finished shards kept between epochs are shared by every epoch: a model
    that changed a batch's rows in place would train later epochs on other
    rows. Arrays (LinearSVM, on labels and on label sets), a bag network and
    a sequence network, kept or read again, end at the same weights byte for byte."""
    from lancetnic_flow.training import orchestrator
    from lancetnic_flow.training.orchestrator import train

    from lancetnic_flow.config import ClusterConfig, DataConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig

    data, task = DataConfig(train=[str(small_corpus)]), None
    if model.endswith("multilabel"):
        model, task = "LinearSVM", "multilabel"
        write_corpus(str(tmp_path / "sets.csv"), 3000, multilabel=True, seed=2)
        data = DataConfig(train=[str(tmp_path / "sets.csv")], label_sep="|")

    def run(name: str) -> tuple[bytes, dict]:
        cfg = TrainConfig(data=data, model=ModelConfig(name=model), cluster=ClusterConfig(run_on="process"),
                          training=TrainingConfig(epochs=3, seed=0, task=task),
                          output=OutputConfig(out=str(tmp_path / "runs"), name=name, cache=str(tmp_path / name),
                                              plots=False))
        res = train(cfg)
        return (Path(res.run) / "model.safetensors").read_bytes(), res.metrics

    kept, kept_metrics = run("kept")
    assert kept_metrics["shards_kept"]["shards"] > 0 and kept_metrics["shards_kept"]["bytes"] > 0
    monkeypatch.setattr(orchestrator, "KEEP_MAX", 0)
    read, read_metrics = run("read")
    assert read_metrics["shards_kept"]["shards"] == 0
    assert kept == read
    assert kept_metrics["val_accuracy"] == read_metrics["val_accuracy"]


def test_the_plan_line_of_a_file_smaller_than_a_partition_gives_its_size_not_the_plans(runs, small_corpus):
    plan = next(e for e in runs["here"] if e["event"] == "plan")
    line = plan["text"].splitlines()[1]
    size = small_corpus.stat().st_size
    assert size < plan["plan"]["partition"]   # the plan's, in its dict: what the tasks may read at most
    assert f"partition {size / 1024:.1f} KiB (peak" in line
