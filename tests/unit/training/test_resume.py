"""training/resume.py: ``--resume`` reads the configuration a run was started
with from its config.json, stamped with its run format or written before it
was, and refuses a damaged one, or one of a newer run format, in words."""
from __future__ import annotations

import json

import pytest

from lancetnic_flow.config import DataConfig, TrainConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.folder import write_config, write_json
from lancetnic_flow.storage import join
from lancetnic_flow.training.resume import resume_config


def test_resume_reads_config_json_with_or_without_its_format_stamp(tmp_path):
    cfg = TrainConfig(data=DataConfig(train=["x.csv"]))
    run = str(tmp_path / "run")
    write_config(run, cfg.to_dict())
    assert "format_version" in json.loads((tmp_path / "run" / "config.json").read_text())
    want = json.loads(json.dumps(cfg.to_dict()))   # as JSON holds it: tuples are lists
    assert json.loads(json.dumps(resume_config(run).to_dict())) == want
    write_json(join(run, "config.json"), cfg.to_dict())   # a run started before config.json carried its format
    assert json.loads(json.dumps(resume_config(run).to_dict())) == want


def test_resume_refuses_a_truncated_or_newer_config_json_naming_it(tmp_path):
    run = str(tmp_path / "run")
    write_config(run, TrainConfig(data=DataConfig(train=["x.csv"])).to_dict())
    path = tmp_path / "run" / "config.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "format_version": 3, "written_by": "lancetnic_flow 9.0.0"}))
    with pytest.raises(UserError, match=f"{path} was written by lancetnic_flow 9.0.0 in run format 3") as e:
        resume_config(run)
    assert "upgrade lancetnic_flow" in e.value.hint
    path.write_text(json.dumps(doc)[:50])
    with pytest.raises(UserError, match=f"{path} is damaged: it is truncated"):
        resume_config(run)
    path.unlink()
    with pytest.raises(UserError, match="not a run folder"):
        resume_config(run)


def test_resume_of_a_misspelled_run_names_the_runs_beside_it(tmp_path):
    write_config(str(tmp_path / "runs" / "first"), TrainConfig(data=DataConfig(train=["x.csv"])).to_dict())
    with pytest.raises(UserError, match="there is no such folder") as e:
        resume_config(str(tmp_path / "runs" / "frist"))
    assert "did you mean 'first'?" in e.value.hint


def test_resume_on_an_existing_cluster_drops_the_local_cluster_size_the_run_was_started_with(tmp_path, monkeypatch):
    from lancetnic_flow.config import ClusterConfig

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    run = str(tmp_path / "run")
    write_config(run, TrainConfig(data=DataConfig(train=["x.csv"]),
                                  cluster=ClusterConfig(workers=3, threads=2, memory_budget=6 << 30)).to_dict())
    local = resume_config(run).cluster
    assert (local.workers, local.threads, local.memory_budget) == (3, 2, 6 << 30)   # the same LocalCluster again
    ext = resume_config(run, scheduler="tcp://h:8786")
    assert (ext.cluster.workers, ext.cluster.threads) == (None, None)   # the cluster's own workers
    assert ext.cluster.memory_budget is None                            # and their own limits
    ext.validate()                                                  # not refused as --workers on a cluster
    assert resume_config(run, scheduler="tcp://h:8786", workers=4).cluster.workers == 4   # given again: kept
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    assert resume_config(run).cluster.workers is None


def test_resume_config_counts_the_cluster_sizes_given_to_it_as_given_and_the_runs_own_as_not(tmp_path):
    from lancetnic_flow.config import ClusterConfig

    run = str(tmp_path / "run")
    write_config(run, TrainConfig(data=DataConfig(train=["x.csv"]), cluster=ClusterConfig(workers=3)).to_dict())
    assert resume_config(run).given == frozenset()
    assert resume_config(run, memory_budget=4 << 30, threads=2).given == {"cluster.memory_budget", "cluster.threads"}


@pytest.mark.parametrize("old_sep, given", [(None, True), (";", True), ("|", False)])
def test_a_resumed_continued_runs_label_sep_counts_as_given_where_it_is_not_the_old_runs(tmp_path, old_sep, given):
    # train NEW --init-from OLD --label-sep "|", stopped, --resume: its separator counted as taken from OLD
    from lancetnic_flow.config import label_sep_given

    old, run = str(tmp_path / "old"), str(tmp_path / "run")
    write_config(old, TrainConfig(data=DataConfig(train=["x.csv"], label_sep=old_sep)).to_dict())
    write_config(run, {**TrainConfig(data=DataConfig(train=["y.csv"], label_sep="|")).to_dict(),
                       "training": {**TrainConfig(data=DataConfig(train=["y.csv"])).to_dict()["training"],
                                    "init_from": old}})
    assert label_sep_given(resume_config(run)) is given


def test_resume_of_a_linear_svm_run_started_with_threads_in_this_process_drops_them_not_refused(tmp_path):
    # Runs of earlier versions took --threads for LinearSVM trained in this process, where it did nothing;
    # it is refused when typed now, and --resume of such a run has no option to drop it: it is dropped.
    from lancetnic_flow.config import ClusterConfig, ModelConfig, TrainingConfig
    from lancetnic_flow.resolve import resolve

    run = str(tmp_path / "run")
    write_config(run, TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="LinearSVM"),
                                  training=TrainingConfig(threads=4)).to_dict())
    cfg = resume_config(run)
    assert cfg.training.threads is None
    resolve(cfg)   # not refused
    ranks = str(tmp_path / "ranks")   # its --ddp ranks take the threads: kept
    write_config(ranks, TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="LinearSVM"),
                                    training=TrainingConfig(threads=4, ddp=2)).to_dict())
    assert resume_config(ranks).training.threads == 4
    task = str(tmp_path / "task")   # --train-on cluster's trainer task takes them: kept
    write_config(task, TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="LinearSVM"),
                                   cluster=ClusterConfig(train_on="cluster"),
                                   training=TrainingConfig(threads=4)).to_dict())
    assert resume_config(task).training.threads == 4
    assert resume_config(run, scheduler="tcp://h:8786").training.threads == 4   # a trainer task there too
    net = str(tmp_path / "net")   # a network takes them: kept
    write_config(net, TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="ScalpelMC"),
                                  training=TrainingConfig(threads=4)).to_dict())
    assert resume_config(net).training.threads == 4


def test_resuming_with_a_configuration_other_than_the_runs_is_refused_naming_each_option(tmp_path):
    """train(cfg, resume=RUN) went on with another --epochs or --sparse-lr than the run was started
    with, and its config.json then said so, as if the run had trained with them from the start."""
    from lancetnic_flow.config import ClusterConfig, TrainingConfig
    from lancetnic_flow.runs.loading import read_config
    from lancetnic_flow.training.orchestrator import saved_config
    from lancetnic_flow.training.resume import refuse_other_config

    run = str(tmp_path / "run")
    write_config(run, saved_config(TrainConfig(data=DataConfig(train=["x.csv"]), training=TrainingConfig(epochs=2),
                                               cluster=ClusterConfig(workers=3))))
    saved = read_config(run)
    same = resume_config(run, scheduler="tcp://h:8786", memory_budget=4 << 30)   # where it runs may change
    refuse_other_config(run, saved_config(same), saved)
    other = resume_config(run)
    other.training.epochs, other.training.sparse_lr = 5, 0.5
    with pytest.raises(UserError, match="changes epochs, sparse_lr .the run's: epochs=2, sparse_lr=None") as e:
        refuse_other_config(run, saved_config(other), saved)
    assert e.value.said("cli")[0].endswith("changes --epochs, --sparse-lr (the run's: --epochs 2, --sparse-lr (none))")
    cut = resume_config(run)
    cut.cluster.blocksize = 1 << 20   # how the inputs are cut is not where the run goes on
    with pytest.raises(UserError, match="changes blocksize"):
        refuse_other_config(run, saved_config(cut), saved)
