"""`lancetnic-flow tune`: trials on the Dask workers from a cache featurised
once, the time budget kept, the final run trained with the best options, and
tune.json listing every trial (docs/tune.md)."""
from __future__ import annotations

import json
import sys

import pytest

from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.training import search

from helpers import assert_user_error, cli, make_config

pytest.importorskip("optuna")
BUDGET = 20


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_tune_runs_trials_on_the_workers_and_trains_the_best(client, small_corpus, tmp_path):
    log = tmp_path / "log.jsonl"
    p = cli("tune", small_corpus, "--time-budget", f"{BUDGET}s", "--buckets", "65536", "--scheduler",
            client.scheduler.address, "--out", tmp_path / "runs", "--name", "tuned", "--json-log", log, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    run = tmp_path / "runs" / "tuned"
    doc = json.loads((run / "tune.json").read_text())
    trials = doc["trials"]
    # The live view: a line per finished trial, the defaults' first, then the outcome and the table.
    assert "trial 0 (defaults)" in p.stderr and "best options" in p.stderr and "trials by val_accuracy" in p.stderr
    assert [t["number"] for t in trials] == list(range(len(trials))) and len(trials) >= 2
    done = [t for t in trials if t["state"] == "complete"]
    workers = set(client.scheduler_info()["workers"])
    for t in done:   # run on the cluster's workers, never in the trainer
        assert t["worker"] in workers and t["pid"] != doc["trainer_pid"], t
        assert t["value"] is not None and len(t["curve"]) == t["epochs_run"] and t["seconds"] > 0
    # Trial 0 trains the defaults; the best is marked once, and is the best value.
    assert trials[0]["defaults"] and trials[0]["params"] == {   # LinearSVM's (--model auto)
        "sparse_lr": 0.3, "epochs": 10, "batch_size": 512, "ngrams": 2}
    best = [t for t in trials if t["best"]]
    assert len(best) == 1 and best[0]["number"] == doc["best"]
    assert best[0]["value"] == max(t["value"] for t in done) == doc["best_value"]
    # The budget holds the fit passes and the trials (a trial still running at the deadline stops there).
    assert doc["search_seconds"] <= BUDGET + 8, doc["search_seconds"]
    # Featurised once per n-gram setting; the final run reads the cache.
    events = _events(log)
    fitted = [e for e in events if e["event"] == "fitted"]
    assert [e.get("cached", False) for e in fitted] == [False, False, True], fitted
    # Each entry's features line names its setting; the final run's read of its entry prints none.
    assert [e.get("ngrams") for e in fitted] == [2, 1, None] and fitted[2]["announced"], fitted
    features = [line for line in p.stderr.splitlines() if line.startswith(("features", "dask dashboard"))]
    assert len(features) == len(set(features)) == 3, features
    # The final run's plan counts what the search left in this process (docs/memory.md).
    left = [e for e in events if e["event"] == "decided" and e.get("what") == "final_plan"]
    plan = json.loads((run / "metrics.json").read_text())["memory"]["plan"]
    assert len(left) == 1 and plan["held"] == left[0]["held"] and left[0]["rss"] > 0
    assert sorted(doc["cache_entries"]) == ["1", "2"] and all(e["featurised"] for e in doc["cache_entries"].values())
    assert len([d for d in (tmp_path / "runs" / ".cache").iterdir() if d.is_dir()]) == 2
    # The final run: the best options, a finished folder that predicts.
    config = json.loads((run / "config.json").read_text())
    assert config["training"]["sparse_lr"] == pytest.approx(best[0]["params"]["sparse_lr"])
    assert config["features"]["ngrams"] == best[0]["params"]["ngrams"]
    from lancetnic_flow.runs.predict import Predictor

    out = Predictor(str(run)).predict(["a match and a goal", "a new phone"])
    assert len(out) == 2 and all(o["label"] for o in out)


def test_tune_from_python_with_a_trial_cap_and_a_fitted_vocabulary(client, corpus2, tmp_path):
    from lancetnic_flow import Events, tune

    seen = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append((kind, e)))
    res = tune(make_config(corpus2, tmp_path, epochs=2), time_budget="2m", trials=3, events=events, client=client)
    assert len(res.trials) == 3 and res.defaults["number"] == 0 and res.best["best"]
    assert len([e for k, e in seen if k == "trial"]) == 3
    # --features tfidf: a fit pass and a featurisation pass per n-gram setting, then none for the final run.
    assert [e.get("cached", False) for k, e in seen if k == "fitted"] == [False, False, True]
    kinds = [k for k, _ in seen]
    assert "featurized" in kinds and kinds.index("trial") > max(i for i, k in enumerate(kinds) if k == "featurized")
    assert (tmp_path / "runs" / res.run.rsplit("/", 1)[-1] / "tune.json").exists()
    # The final run trains the best trial's options on the same shards: the same curve, up to thread order.
    assert res.metrics["val_loss"] == pytest.approx(res.best["value"], rel=0.02)


def test_tunes_final_run_on_its_own_cluster_is_planned_from_the_memory_budget(small_corpus, tmp_path):
    # the search's LocalCluster was planned from --memory-budget, and its final run was then planned as
    # someone else's cluster: no budget, its model never checked against the trainer's share
    p = cli("tune", small_corpus, "--time-budget", "30s", "--trials", "1", "--workers", "1", "--epochs", "1",
            "--memory-budget", "3GiB", "--buckets", "65536", "--out", tmp_path / "runs", "--name", "own", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    plan = json.loads((tmp_path / "runs" / "own" / "metrics.json").read_text())["memory"]["plan"]
    assert plan["budget"] == 3 * 2**30 and not plan["external"] and plan["workers"] == 1, plan
    assert "existing cluster" not in p.stderr and "the cluster it was given" in p.stderr


@pytest.mark.parametrize("budget", ["soon", "0", "-5m", "10 minutes"])
def test_a_bad_time_budget_is_exit_2(tmp_path, small_corpus, budget):
    p = cli("tune", small_corpus, "--time-budget", budget, "--out", tmp_path / "runs", cwd=tmp_path, timeout=60)
    assert_user_error(p, "--time-budget", "10m")


def test_a_bad_trial_cap_is_exit_2(tmp_path, small_corpus):
    assert_user_error(cli("tune", small_corpus, "--trials", "0", cwd=tmp_path, timeout=60), "--trials")


def test_the_space_fits_the_model_and_holds_the_defaults():
    def space_of(name, analyzer="word", **training):
        # The space is built once the sample decided --analyzer auto (tune.py's base run): words here.
        cfg = TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name=name),
                          features=FeatureConfig(analyzer=analyzer), training=TrainingConfig(**training)).validate()
        space = search.search_space(cfg)
        first = search.initial(cfg, space)
        for p in space:   # trial 0's values are inside their ranges
            v = first[p.name]
            assert v in p.choices if p.kind == "choice" else p.low <= v <= p.high, (name, p, v)
        assert search.apply(cfg, first).to_dict() == cfg.to_dict()   # trial 0 trains exactly the defaults
        return {p.name for p in space}

    assert space_of("ScalpelMC") == {"lr", "sparse_lr", "hidden", "epochs", "batch_size", "dropout", "ngrams"}
    assert space_of("FastTextBag") == {"lr", "sparse_lr", "hidden", "epochs", "batch_size"}   # pairs, no dropout
    assert space_of("LancetMC") == {"lr", "hidden", "epochs", "batch_size", "dropout"}        # ids: no n-grams
    assert space_of("LinearSVM") == {"sparse_lr", "epochs", "batch_size", "ngrams"}   # --lr does not move its step
    assert space_of("auto") == space_of("LinearSVM")
    assert "sparse_lr" in space_of("ScalpelMC", lr=0.2, epochs=40)   # given values widen the ranges
    assert "ngrams" not in space_of("LinearSVM", analyzer="char_wb")    # word pairs mean nothing to characters


def test_without_optuna_the_error_names_the_extra(monkeypatch):
    from lancetnic_flow.training.tune import require_optuna

    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(UserError) as err:
        require_optuna()
    assert "lancetnic_flow[tune]" in err.value.hint


def test_options_the_data_refuses_stop_tune_before_any_trial_naming_the_option(client, small_corpus, tmp_path):
    # --class-loss bce on 4 classes: every trial failed with it until the budget was spent, then
    # "no trial finished an epoch within the time budget ... raise --time-budget"
    from lancetnic_flow import Events, tune

    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.model.name, cfg.training.class_loss = "ScalpelMC", "bce"
    seen = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(kind))
    with pytest.raises(UserError, match="class_loss bce needs exactly 2 classes"):
        tune(cfg, time_budget="1m", events=events, client=client)
    assert "trial" not in seen
