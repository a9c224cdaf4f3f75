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
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.evaluate import evaluate_partition
from lancetnic_flow.runs.predict import Predictor
from lancetnic_flow.training.orchestrator import train


def held_out(tmp, rows: int, seed: int, relabel, **corpus) -> str:
    """A corpus whose first 600 rows are ``train.csv`` and the rest ``held.csv``, its labels
    passed through ``relabel``; the held file's path."""
    write_corpus(str(tmp / "all.csv"), rows, classes=3, seed=seed, **corpus)
    table = pacsv.read_csv(tmp / "all.csv")
    pacsv.write_csv(table.slice(0, 600), tmp / "train.csv")
    held = table.slice(600).to_pydict()
    held["label"] = relabel(held["label"])
    pacsv.write_csv(pa.table(held), tmp / "held.csv")
    return str(tmp / "held.csv")


def trained(tmp, data: DataConfig, model: str, task: str) -> str:
    """A two-epoch run of ``model`` on ``data``, in this process; its folder."""
    cfg = TrainConfig(data=data, features=FeatureConfig(buckets=2**14), model=ModelConfig(name=model),
                      training=TrainingConfig(epochs=2, seed=0, task=task),
                      output=OutputConfig(out=str(tmp / "runs"), name=task, cache=str(tmp / "cache"), plots=False))
    return str(train(cfg).run)


def whole_file(path: str) -> Partition:
    size = len(open(path, "rb").read())
    return Partition(0, FileInfo(url=f"file://{path}", size=size, version="", format="csv", compression=None), 0, size)


@pytest.fixture(scope="module")
def multitask(tmp_path_factory) -> tuple[str, str]:
    """A ScalpelMTSK run on 600 rows, and 200 other rows whose first 40 carry a label it never saw."""
    tmp = tmp_path_factory.mktemp("mt")
    held = held_out(tmp, 800, 5, lambda labels: ["brand_new"] * 40 + labels[40:])
    data = DataConfig(train=[str(tmp / "train.csv")], label="label", target="target")
    return trained(tmp, data, "ScalpelMTSK", "multitask"), held


def test_a_multitask_runs_values_are_scored_on_every_evaluated_row_an_unseen_label_included(multitask):
    run, held = multitask
    columns = Columns(text=("text",), label="label", target="target")
    m, read, _, _ = evaluate_partition(whole_file(held), columns, run, {}, {}, 1 << 20)
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


def test_the_rows_of_a_label_the_run_never_saw_are_in_the_confusion_matrix_as_scikit_learn_has_them(multitask):
    # their 40 rows were in the accuracy and nowhere in the confusion matrix, which summed to 160 of 200
    from lancetnic_flow.models.metrics import cells_of, dense_confusion, with_unseen_rows

    run, held = multitask
    m, _, _, _ = evaluate_partition(whole_file(held), Columns(text=("text",), label="label", target="target"),
                                    run, {}, {}, 1 << 20)
    got = m.result()
    p = Predictor(run)
    rows = pacsv.read_csv(held).to_pydict()
    cells, names = with_unseen_rows(cells_of(got), p.labels, got)
    assert names == p.labels + ["brand_new"] and int(cells[:, 2].sum()) == 200
    predicted = [d["label"] for d in p.predict(rows["text"])]
    assert dense_confusion(cells, len(names)).tolist() == skm.confusion_matrix(rows["label"], predicted,
                                                                               labels=names).tolist()


@pytest.fixture(scope="module")
def label_sets(tmp_path_factory) -> tuple[str, str]:
    """A multilabel LinearSVM run on 600 rows, and 120 other rows of which some name a label it never
    saw, some twice in one row (``sports|brand_new|brand_new``)."""
    tmp = tmp_path_factory.mktemp("ml")
    new = ["brand_new", "brand_new|brand_new", "{}|brand_new|brand_new", "{}|brand_new|other_new|other_new"]
    held = held_out(tmp, 720, 6, lambda labels: [new[i % 4].format(x) if i < 40 else x for i, x in enumerate(labels)],
                    multilabel=True)
    data = DataConfig(train=[str(tmp / "train.csv")], label="label", label_sep="|")
    return trained(tmp, data, "LinearSVM", "multilabel"), held


def test_a_label_the_run_never_saw_named_twice_in_a_row_is_one_missed_label_as_scikit_learn_scores_the_set(
        label_sets):
    import numpy as np

    run, held = label_sets
    columns = Columns(text=("text",), label="label", label_sep="|", multilabel=True)
    m, _, _, _ = evaluate_partition(whole_file(held), columns, run, {}, {}, 1 << 20)
    got = m.result()
    rows = pacsv.read_csv(held).to_pydict()
    truth = [set(x.split("|")) for x in rows["label"]]
    predicted = [set(d["labels"]) for d in Predictor(run).predict(rows["text"])]
    names = sorted(set().union(*truth, *predicted))
    y, p = (np.array([[n in s for n in names] for s in sets]) for sets in (truth, predicted))
    assert got["unseen_labels"] == {"brand_new": 40, "other_new": 10}   # rows holding each, once a row
    for average in ("micro", "macro", "weighted"):
        for name, score in (("f1", skm.f1_score), ("precision", skm.precision_score), ("recall", skm.recall_score)):
            want = score(y, p, average=average, zero_division=0)
            assert got[f"{average}_{name}"] == pytest.approx(want, abs=1e-9), f"{average}_{name}"
    assert got["subset_accuracy"] == pytest.approx(skm.accuracy_score(y, p), abs=1e-9)


def test_label_sets_joined_by_a_separator_the_run_was_not_given_are_refused_naming_the_label_sep_to_pass():
    # a run trained on JSON lists, evaluated on a CSV of "sports|tech": each joined set read as one new label
    # scored every such row as missing all its labels (micro F1 0.39 where the labels split give 0.78)
    from lancetnic_flow.runs.evaluate import check_label_sets_split

    labels = ["sports", "tech", "politics"]
    sets = Columns(text=("text",), label="label", multilabel=True)
    out = {"unseen_labels": {"sports|tech": 89, "tech|politics": 57, "weather": 3}}
    with pytest.raises(UserError, match=r"'sports\|tech'") as err:
        check_label_sets_split(out, labels, sets)
    assert err.value.cli[1] == "pass --label-sep '|'"   # the command line's words; the caller's in each
    assert str(err.value).endswith("pass label_sep='|'")
    check_label_sets_split({"unseen_labels": {"weather": 3, "sports|weather": 2}}, labels, sets)   # new labels
    check_label_sets_split({}, labels, sets)
    check_label_sets_split(out, labels, Columns(text=("text",), label="label"))   # one label a row: a class
