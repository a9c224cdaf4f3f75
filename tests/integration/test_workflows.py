"""Workflow files: every shipped workflow runs (on small data, through the
session cluster), and a bad file is refused with its file, line and field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lancetnic_flow.cli import main
from lancetnic_flow.cli.workflow import read_workflow, workflow_config
from lancetnic_flow.errors import UserError

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
LOCAL = ["quickstart", "multiclass", "binary-spam", "regression", "multitask", "hybrid", "lstm-attention", "ddp"]


@pytest.mark.parametrize("name", LOCAL)
def test_shipped_workflow_runs_on_small_data(name, client, tmp_path, capsys):
    data = tmp_path / f"{name}{''.join(Path(name).suffixes)}"
    make_data = read_workflow(str(WORKFLOWS / f"{name}.yaml")).make_data
    out = make_data["value"]["out"]
    suffix = "".join(Path(out).suffixes)
    data = tmp_path / f"data{suffix}"
    sets = [f"make_data.out={data}", f"make_data.rows={1500 if 'lstm' in name else 4000}", f"train={data}",
            "epochs=2", f"scheduler={client.scheduler.address}", f"out={tmp_path / 'runs'}",
            f"cache={tmp_path / 'cache'}"]
    if "lstm" in name:
        # Sequence models learn slowly on a CPU; their learning is proven in test_tasks.py.
        sets += ["max_len=24", "embed=16", "hidden=16", "epochs=2", "batch_size=64"]
    rc = main(["run", str(WORKFLOWS / f"{name}.yaml"), *sum([["--set", s] for s in sets], [])])
    assert rc == 0, capsys.readouterr().err
    runs = list((tmp_path / "runs").glob("*/metrics.json"))
    assert len(runs) == 1
    metrics = json.loads(runs[0].read_text())
    assert metrics["rows"]["read"] == metrics["rows"]["trained"] + metrics["rows"]["validated"] + \
        sum(metrics["rows"]["skipped"].values())
    epochs = metrics["epochs"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    if metrics["task"] in ("classify", "multitask") and "lstm" not in name:
        # Well above chance (4 classes: ~0.3 majority; 8 classes: ~0.17; 2 classes: ~0.55).
        assert metrics["val_accuracy"] > {"binary-spam": 0.75, "multiclass": 0.4}.get(name, 0.45)
    if metrics["task"] in ("regress", "multitask"):
        assert metrics["val_rmse"] < metrics["val_baseline_rmse"]
    if name == "ddp":
        assert metrics["ddp"]["ranks"] == 2 and len(set(metrics["ddp"]["replica_digests"])) == 1


def test_every_shipped_workflow_names_its_command_in_the_header():
    for path in WORKFLOWS.glob("*.yaml"):
        head = path.read_text().splitlines()[:8]
        assert any(f"lancetnic-flow run workflows/{path.name}" in line for line in head), path.name


def test_every_shipped_workflow_parses_into_a_configuration():
    for path in WORKFLOWS.glob("*.yaml"):
        cfg = workflow_config(read_workflow(str(path)))
        assert cfg.data.train


def _write(tmp_path, text: str) -> str:
    p = tmp_path / "wf.yaml"
    p.write_text(text)
    return str(p)


def test_unknown_field_names_file_line_and_field(tmp_path):
    path = _write(tmp_path, "train: x.csv\ntraining:\n  epochs: 2\n  epoch_count: 3\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"{path}:4" in str(e.value) and "training.epoch_count" in str(e.value)


def test_ill_typed_field_names_file_line_and_expected_type(tmp_path):
    path = _write(tmp_path, "train: x.csv\nmodel:\n  hidden: lots\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"{path}:3" in str(e.value) and "model.hidden" in str(e.value) and "integer" in str(e.value)


def test_invalid_yaml_and_missing_file_are_user_errors(tmp_path, capsys):
    path = _write(tmp_path, "train: [x.csv\n")
    assert main(["run", path]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_set_overrides_a_field_and_nested_storage_options(tmp_path):
    path = _write(tmp_path, "train: x.csv\nepochs: 5\nstorage_option:\n  anon: false\n")
    values = read_workflow(path, ["training.epochs=1",
                                  "storage_option.client_kwargs.endpoint_url=http://127.0.0.1:1"]).values
    assert values["epochs"] == 1
    assert values["storage_option"] == {"anon": False, "client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}


def test_run_name_with_dot_dot_cannot_escape_the_output_folder(tmp_path, capsys):
    path = _write(tmp_path, f"train: {tmp_path / 'x.csv'}\nname: ../../escape\n")
    assert main(["run", path]) == 2
    assert "name" in capsys.readouterr().err
    assert not (tmp_path.parent.parent / "escape").exists()


# ---------------------------------------------------------------- Python workflow scripts

SCRIPTS = ["custom_tokenizer", "custom_model", "custom_loop"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_python_workflow_script_trains_above_chance_in_a_subprocess(name, client, tmp_path):
    import re
    import subprocess
    import sys

    # The session cluster's workers, so the test starts no cluster of its own;
    # 4 classes: the majority class is ~0.3 of the rows.
    cmd = [sys.executable, str(WORKFLOWS / f"{name}.py"), "--data", str(tmp_path / "data.csv"), "--rows", "3000",
           "--epochs", "2", "--scheduler", client.scheduler.address]
    cmd += {"custom_loop": ["--blocksize", "256KiB", "--shards", str(tmp_path / "shards")],
            "custom_tokenizer": ["--blocksize", "256KiB", "--out", str(tmp_path / "runs")],
            "custom_model": ["--out", str(tmp_path / "runs")]}[name]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(re.findall(r"^epoch \d+ .*val_accuracy", r.stdout, re.M)) == 2, r.stdout
    accuracy = float(re.search(r"^val_accuracy ([0-9.]+)$", r.stdout, re.M).group(1))
    assert accuracy > 0.6, r.stdout
    if name == "custom_loop":
        assert list((tmp_path / "shards").glob("*.train.npz")), "the workers wrote the shards"
    else:
        metrics = json.loads((tmp_path / "runs" / name.replace("_", "-") / "metrics.json").read_text())
        assert metrics["val_accuracy"] == pytest.approx(accuracy, abs=1e-4)
    if name == "custom_model":
        meta = json.loads((tmp_path / "runs" / "custom-model" / "model.json").read_text())
        assert meta["net"] == "GatedBag" and meta["model"] == "GatedBagMC"
    if name == "custom_tokenizer":
        # The run records the registered tokenizer by name, and its vocabulary holds the script's subword pieces.
        features = json.loads((tmp_path / "runs" / "custom-tokenizer" / "features.json").read_text())
        assert features["tokenizer"] == "subwords"
        assert any(t.startswith("_") for t in features["vocabulary"][:200]), "the script's subword pieces"


def test_every_python_workflow_script_names_its_command_in_the_header():
    scripts = sorted(WORKFLOWS.glob("*.py"))
    assert {p.stem for p in scripts} >= set(SCRIPTS)
    for path in scripts:
        head = path.read_text().splitlines()[:8]
        assert any(f"python workflows/{path.name}" in line for line in head), path.name
        assert 'if __name__ == "__main__":' in path.read_text(), path.name
