"""`--cache none`: the workers featurise every epoch afresh and no shard is
written, and the run is the run a cache gives.

The promise: with the same seed, `--cache none` trains the same weights
(model.safetensors byte for byte), the same rows, epochs and validation
metrics as a run with a shard cache; it writes no shard, says so on the
console and in metrics.json (`cache: "none"`), resumes after Ctrl-C to the
metrics of a run never stopped, trains here from an existing cluster's
features with `--train-on client`, and trains on the workers too: `--ddp`'s
ranks and `--scheduler`'s trainer task featurise their own share each
epoch, to the weights the same ranks train from a cache; `tune` (whose
trials read shards) is refused naming the option."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.events import Events
from lancetnic_flow.training.checkpoints import CHECKPOINT
from lancetnic_flow.training.orchestrator import train
from lancetnic_flow.training.resume import resume_config
from lancetnic_flow.training.stop import TrainingInterrupted

from helpers import CLUSTER, assert_user_error, cli, make_config
from servers import dask_processes
from test_resume import _interrupt_at


def outcome(run: Path) -> dict:
    m = json.loads((run / "metrics.json").read_text())
    return {"rows": m["rows"], "val": (m["val_loss"], m["val_accuracy"]),
            "epochs": [(e["train_loss"], e["val_loss"], e["val_accuracy"]) for e in m["epochs"]],
            "weights": hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest()}


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("where", [
    [],                                                              # hashed words, featurised in this process
    ["--features", "tfidf", "--val", "VAL", "--run-on", "cluster", *CLUSTER],   # a vocabulary, on a LocalCluster
])
def test_cache_none_trains_the_cached_runs_weights_and_writes_no_shard(data_dir, tmp_path, where):
    val = data_dir / "nocache-val.csv"
    if not val.exists():
        write_corpus(str(val), 300, classes=4, seed=7)
    where = [str(val) if a == "VAL" else a for a in where]
    common = [data_dir / "nocache.csv", "--epochs", "3", "--seed", "5", "--out", tmp_path / "runs", *where]
    if not (data_dir / "nocache.csv").exists():
        write_corpus(str(data_dir / "nocache.csv"), 2500, classes=4, seed=11)
    cached = cli("train", *common, "--name", "cached", "--cache", tmp_path / "cache", cwd=tmp_path)
    assert cached.returncode == 0, cached.stdout + cached.stderr
    fresh = cli("train", *common, "--name", "fresh", "--cache", "none", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr

    runs = tmp_path / "runs"
    assert outcome(runs / "fresh") == outcome(runs / "cached")
    assert files_under(runs / "cached") == files_under(runs / "fresh")
    # Not a shard anywhere: the run folders only, no default cache, no folder named none.
    assert sorted(p.name for p in runs.iterdir()) == ["cached", "fresh"]
    assert not (tmp_path / "none").exists() and any((tmp_path / "cache").rglob("*.npz"))
    m = json.loads((runs / "fresh" / "metrics.json").read_text())
    assert m["cache"] == "none" and m["decided"]["cache"] == "none" and m["client_shard_reads"] == 0
    assert json.loads((runs / "cached" / "metrics.json").read_text())["cache"].startswith(str(tmp_path / "cache"))
    out = fresh.stdout + fresh.stderr
    assert "no shard cache (--cache none)" in out and "training epoch 3/3 (featurising afresh: no cache)" in out
    assert json.loads((runs / "fresh" / "config.json").read_text())["output"]["cache"] == "none"


def test_cache_none_resumes_after_ctrl_c_to_the_metrics_of_a_cached_run_never_stopped(client, small_corpus,
                                                                                         tmp_path):
    """Stopped in epoch 2, whose partitions are featurised again and replayed up to the checkpoint."""
    def config(name: str, cache: str | None):
        cfg = make_config(small_corpus, tmp_path, epochs=3)
        cfg.output.name, cfg.output.cache, cfg.training.checkpoint_every = name, cache, "off"
        return cfg

    ref = train(config("ref", str(tmp_path / "cache")), client=client)
    with pytest.raises(TrainingInterrupted):
        train(config("stopped", "none"), _interrupt_at(2, 4), client=client)
    run = tmp_path / "runs" / "stopped"
    assert (run / CHECKPOINT).exists() and not (tmp_path / "runs" / ".cache").exists()
    res = train(resume_config(str(run)), client=client, resume=str(run))
    assert res.metrics["cache"] == "none" and not (run / CHECKPOINT).exists()
    assert outcome(run) == outcome(Path(ref.run))


@pytest.mark.slow
def test_cache_none_resumed_on_another_plan_replays_the_partitions_it_trained_to_the_unstopped_weights(data_dir,
                                                                                                         tmp_path):
    """--workers and --memory-budget may change on --resume, and the plan cuts the inputs: the
    stopped epoch was featurised from 4 MiB partitions, the resumed one from 1 MiB ones, and the
    replay of the batches trained before the checkpoint trained some rows twice and others not
    (the same row counts, other weights and losses). The run cuts them as it did."""
    corpus = data_dir / "nine_mib.csv"
    if not corpus.exists():
        write_corpus(str(corpus), 30_000, classes=4, seed=5)

    def config(name: str):
        cfg = make_config(corpus, tmp_path, epochs=3, mode="hashing", max_features=None)
        cfg.model.name, cfg.output.name, cfg.output.cache = "ScalpelMC", name, "none"
        cfg.training.batch_size, cfg.training.checkpoint_every = 256, "off"
        cfg.cluster.memory_budget, cfg.cluster.workers, cfg.cluster.run_on = 6 * 2**30, 1, "process"
        return cfg

    ref = train(config("ref"))
    with pytest.raises(TrainingInterrupted):
        train(config("stopped"), _interrupt_at(2, 30, rows=256))
    run = tmp_path / "runs" / "stopped"
    planned = []
    events = Events()
    events.subscribe(lambda kind, e: planned.append(e["plan"]["partition"]) if kind == "plan" else None)
    train(resume_config(str(run), workers=2, memory_budget=5 * 2**29), events, resume=str(run))
    assert planned == [1 << 20]   # this session's plan cuts smaller partitions than the run's 4 MiB
    assert outcome(run) == outcome(Path(ref.run))


def _ranks_config(corpus, tmp_path: Path, name: str, cache: str, model: str, mode: str):
    from lancetnic_flow.config import (ClusterConfig, DataConfig, FeatureConfig, ModelConfig, OutputConfig,
                                       TrainConfig, TrainingConfig)

    features = FeatureConfig(mode=mode, buckets=2**16) if mode == "hashing" else FeatureConfig(mode=mode,
                                                                                              max_features=5000)
    return TrainConfig(data=DataConfig(train=[str(corpus)]), features=features, model=ModelConfig(name=model, hidden=32 if model != "LinearSVM" else None),
                       training=TrainingConfig(epochs=2, ddp=2, device="cpu", checkpoint_every="off"),
                       cluster=ClusterConfig(blocksize=64 * 1024),   # several partitions to deal to the ranks
                       output=OutputConfig(out=str(tmp_path / "runs"), name=name, cache=cache))


@pytest.mark.parametrize("model, mode", [("LinearSVM", "hashing"),   # weights averaged; raw counts finished
                                         ("ScalpelMC", "tfidf")])    # gradients exchanged; a fitted vocabulary
def test_ddp_ranks_without_a_cache_featurise_their_share_to_the_cached_ranks_weights_and_write_no_shard(
        client, small_corpus, tmp_path, model, mode):
    cached = train(_ranks_config(small_corpus, tmp_path, "cached", str(tmp_path / "cache"), model, mode),
                   client=client)
    seen: list[dict] = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(e) if kind == "decided" and e.get("what") == "cache" else None)
    fresh = train(_ranks_config(small_corpus, tmp_path, "fresh", "none", model, mode), events, client=client)
    runs = tmp_path / "runs"
    assert outcome(runs / "fresh") == outcome(runs / "cached")
    assert fresh.metrics["ddp"]["replica_digests"] == cached.metrics["ddp"]["replica_digests"]
    assert fresh.metrics["cache"] == "none" and fresh.metrics["rows"] == cached.metrics["rows"]
    assert "featurised afresh, by the 2 ranks, each its own share" in seen[0]["message"]
    assert sorted(p.name for p in runs.iterdir()) == ["cached", "fresh"]
    assert not list((runs / "fresh").rglob("*.npz")) and any((tmp_path / "cache").rglob("*.npz"))


def test_cache_none_with_tune_is_refused_naming_the_option(small_corpus, tmp_path):
    assert_user_error(cli("tune", small_corpus, "--cache", "none", cwd=tmp_path),
                      "--cache none: tune's trials read the featurised shards")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_with_an_existing_scheduler_cache_none_trains_here_from_the_workers_features(small_corpus, tmp_path):
    """Real `dask scheduler` and `dask worker` processes: the trainer task on the cluster featurises each
    epoch itself; with --train-on client the workers featurise every epoch for this process; both train the
    cached run's weights."""
    (tmp_path / "cluster").mkdir()
    with dask_processes(tmp_path / "cluster", "1GiB", workers=1) as (address, _):
        common = [small_corpus, "--epochs", "2", "--scheduler", address, "--out", tmp_path / "runs"]
        for name, cache, where in (("cached", tmp_path / "cache", "client"), ("fresh", "none", "client"),
                                   ("task", "none", "auto")):
            r = cli("train", *common, "--train-on", where, "--name", name, "--cache", cache, cwd=tmp_path)
            assert r.returncode == 0, r.stdout + r.stderr
    assert "featurised afresh, by the trainer task on the cluster" in r.stdout + r.stderr
    runs = tmp_path / "runs"
    assert outcome(runs / "fresh") == outcome(runs / "cached") == outcome(runs / "task")
    assert json.loads((runs / "task" / "metrics.json").read_text())["trained_on"] != \
        json.loads((runs / "fresh" / "metrics.json").read_text())["trained_on"]
    assert sorted(p.name for p in runs.iterdir()) == ["cached", "fresh", "task"] and not (tmp_path / "none").exists()
