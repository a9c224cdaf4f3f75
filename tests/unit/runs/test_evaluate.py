"""runs/evaluate.py: what evaluate scores on a partition is what scikit-learn
computes from the same run's predictions and the rows' answers, on a tiny
multi-task run trained here, in this process."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn import metrics as skm

from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig
from lancetnic_flow.data.sources import Columns, FileInfo, Partition
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.runs.evaluate import evaluate_partition
from lancetnic_flow.runs.predict import Predictor
from lancetnic_flow.training.orchestrator import train

@pytest.fixture(scope="module")
def multitask(tmp_path_factory) -> tuple[str, str]:
    """A ScalpelMTSK run on 600 rows, and 200 other rows whose first 40 carry a label it never saw."""
    tmp = tmp_path_factory.mktemp("mt")
    write_corpus(str(tmp / "all.csv"), 800, classes=3, seed=5)
    table = pacsv.read_csv(tmp / "all.csv")
    pacsv.write_csv(table.slice(0, 600), tmp / "train.csv")
    held = table.slice(600).to_pydict()
    held["label"] = ["brand_new"] * 40 + held["label"][40:]
    pacsv.write_csv(pa.table(held), tmp / "held.csv")
    cfg = TrainConfig(data=DataConfig(train=[str(tmp / "train.csv")], label="label", target="target"),
                      features=FeatureConfig(buckets=2**14), model=ModelConfig(name="ScalpelMTSK"),
                      training=TrainingConfig(epochs=2, seed=0, task="multitask"),
                      output=OutputConfig(out=str(tmp / "runs"), name="mt", cache=str(tmp / "cache"), plots=False))
    return str(train(cfg).run), str(tmp / "held.csv")

def test_a_multitask_runs_values_are_scored_on_every_evaluated_row_an_unseen_label_included(multitask):
    run, held = multitask
    size = len(open(held, "rb").read())
    part = Partition(0, FileInfo(url=f"file://{held}", size=size, version="", format="csv", compression=None), 0, size)
    m, read, _, _ = evaluate_partition(part, Columns(text=("text",), label="label", target="target"), run, {}, {},
                                       1 << 20)
    got = m.result()
    rows = pacsv.read_csv(held).to_pydict()
    p = Predictor(run)
    values = p.predict_values(rows["text"])
    labels = [d["label"] for d in p.predict(rows["text"])]
    assert read == got["rows"] == 200 and got["unseen_labels"] == {"brand_new": 40}
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(rows["label"], labels))
    assert got["mae"] == pytest.approx(skm.mean_absolute_error(rows["target"], values), rel=1e-5)
    assert got["rmse"] == pytest.approx(skm.root_mean_squared_error(rows["target"], values), rel=1e-5)
    assert got["r2"] == pytest.approx(skm.r2_score(rows["target"], values), rel=1e-5)
