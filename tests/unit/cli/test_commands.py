"""cli/commands.py: ``train --resume RUN`` refuses every option it cannot change
that the command line typed with another value than the run's, the parser's
default included, and accepts the run's own values and where the data and
the cluster are."""
from __future__ import annotations

import pytest

import lancetnic_flow.training.orchestrator as orchestrator
from lancetnic_flow.cli.commands import cmd_train
from lancetnic_flow.cli.parser import build_parser, given_dests, with_negative_values
from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.folder import write_config


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
                 "tcp://h:8786", "--scheduler-wait", "5s", "--storage-option", "anon=true", "--quiet")
    assert (cfg.cluster.workers, cfg.cluster.threads, cfg.cluster.scheduler) == (4, 2, "tcp://h:8786")
    assert cfg.data.storage_options == {"anon": True} and cfg.training.epochs == 3


def test_evaluates_line_names_the_rows_it_skipped_and_why():
    from lancetnic_flow.cli.commands import skipped_note

    rows = {"read": 8000, "evaluated": 7969, "skipped": {"malformed": 7, "undecodable": 4, "missing_label": 20}}
    assert skipped_note(rows) == " of 8,000 read (31 skipped: 20 missing_label, 7 malformed, 4 undecodable)"
    assert skipped_note({"read": 10, "evaluated": 10, "skipped": {}}) == ""
