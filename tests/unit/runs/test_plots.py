"""runs/plots.py: the plots and tables that apply to a run are written as real
PNG and CSV files (classification, multilabel, regression); past 60 classes a
chart keeps the classes that matter most; non-finite regression rows are left
out, and nothing is drawn for a sample without finite rows."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.models.metrics import ClassificationMetrics, MultiLabelMetrics
from lancetnic_flow.runs.plots import SHOW_ALL, regression, top_classes, write_plots

PNG = b"\x89PNG\r\n\x1a\n"
HISTORY = [{"epoch": 1, "train_loss": 0.9, "val_loss": 1.0, "val_accuracy": 0.5, "train_micro_f1": None},
           {"epoch": 2, "train_loss": 0.5, "val_loss": 0.7, "val_accuracy": 0.7}]


def names(paths) -> list[str]:
    return sorted(str(p).rsplit("/", 1)[-1] for p in paths)


def test_a_classification_run_gets_curves_confusion_per_class_and_distribution(tmp_path):
    m = ClassificationMetrics(3)
    m.update(np.array([0, 1, 2, 2, 1]), np.array([0, 2, 2, 2, 1]), 1.0)
    written = write_plots(str(tmp_path), history=HISTORY, metrics=m.result(), labels=["a", "b", "c"],
                          label_counts=[10, 20, 30])
    assert names(written) == ["accuracy.png", "class_distribution.png", "confusion_matrix.png", "loss.png",
                              "per_class.csv", "per_class.png"]
    for p in written:
        if p.endswith(".png"):
            assert (tmp_path / p.rsplit("/", 1)[-1]).read_bytes().startswith(PNG)
    rows = (tmp_path / "per_class.csv").read_text().splitlines()
    assert rows[0] == "label,precision,recall,f1,support" and rows[2] == "b,1.0000,0.5000,0.6667,2"


def test_a_multilabel_run_gets_per_label_tables_instead_of_a_confusion_matrix(tmp_path):
    m = MultiLabelMetrics(2)
    m.update(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]), 0.5)
    history = [{"epoch": 1, "train_loss": 0.5, "val_micro_f1": 0.6}]
    written = write_plots(str(tmp_path), history=history, metrics=m.result(), labels=["x", "y"], label_counts=[2, 1])
    assert names(written) == ["label_distribution.png", "loss.png", "micro_f1.png", "per_label.csv", "per_label.png"]


def test_without_charts_only_the_tables_are_written(tmp_path):
    m = ClassificationMetrics(3)
    m.update(np.array([0, 1, 2, 2, 1]), np.array([0, 2, 2, 2, 1]), 1.0)
    written = write_plots(str(tmp_path / "c"), history=HISTORY, metrics=m.result(), labels=["a", "b", "c"],
                          label_counts=[10, 20, 30], sample=(np.ones(3), np.ones(3)), charts=False)
    assert names(written) == ["per_class.csv"] and sorted(p.name for p in (tmp_path / "c").iterdir()) == ["per_class.csv"]
    ml = MultiLabelMetrics(2)
    ml.update(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]), 0.5)
    written = write_plots(str(tmp_path / "m"), history=HISTORY, metrics=ml.result(), labels=["x", "y"],
                          label_counts=[2, 1], charts=False)
    assert names(written) == ["per_label.csv"]


def test_a_regression_run_gets_a_scatter_and_residuals_of_its_finite_rows(tmp_path):
    true = np.array([1.0, 2.0, np.nan, 4.0])
    pred = np.array([1.5, np.inf, 3.0, 3.5])
    written = write_plots(str(tmp_path), history=[{"epoch": 1, "train_loss": 0.2}], sample=(true, pred))
    assert names(written) == ["loss.png", "regression_scatter.png", "residuals.png"]
    assert regression(np.array([np.nan]), np.array([1.0]), str(tmp_path / "s.png"), str(tmp_path / "r.png"), {}) == []


def test_curves_without_any_value_are_not_drawn(tmp_path):
    assert names(write_plots(str(tmp_path), history=[{"epoch": 1, "train_loss": 0.3}])) == ["loss.png"]


def test_past_show_all_classes_charts_keep_the_highest_scores_ties_by_id():
    assert top_classes(np.zeros(10), 10, 3).tolist() == list(range(10))     # few classes: all of them
    k = SHOW_ALL + 10
    score = np.zeros(k)
    score[[5, 40, 7]] = [3.0, 9.0, 3.0]
    assert top_classes(score, k, 4).tolist() == [40, 5, 7, 0]


@pytest.mark.parametrize("classes", [SHOW_ALL + 40])
def test_many_classes_still_give_every_class_in_the_table(tmp_path, classes):
    m = ClassificationMetrics(classes)
    true = np.arange(classes)
    m.update(true, (true + 1) % classes, 0.0)
    labels = [f"c{i}" for i in range(classes)]
    write_plots(str(tmp_path), metrics=m.result(), labels=labels)
    assert len((tmp_path / "per_class.csv").read_text().splitlines()) == classes + 1


@pytest.mark.parametrize("case", ["classes", "label_sets", "regression", "no_finite_rows", "no_curves"])
def test_the_files_a_run_names_before_drawing_are_the_files_drawn(tmp_path, case):
    # A run names its charts in metrics.json before a detached process draws them.
    from lancetnic_flow.runs.plots import plot_jobs, write_jobs

    kw: dict = {"history": HISTORY}
    if case == "classes":
        m = ClassificationMetrics(3)
        m.update(np.array([0, 1, 2, 2, 1]), np.array([0, 2, 2, 2, 1]), 1.0)
        kw.update(metrics=m.result(), labels=["a", "b", "c"], label_counts=[10, 20, 30])
    elif case == "label_sets":
        ml = MultiLabelMetrics(2)
        ml.update(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]), 0.5)
        kw.update(metrics=ml.result(), labels=["x", "y"], label_counts=[2, 1])
    elif case == "regression":
        kw.update(sample=(np.array([1.0, 2.0, np.nan]), np.array([1.5, 2.5, 3.0])))
    elif case == "no_finite_rows":
        kw.update(sample=(np.array([np.nan]), np.array([1.0])))
    else:
        kw.update(history=[{"epoch": 1}], sample=(np.zeros(0), np.zeros(0)))
    jobs = plot_jobs(str(tmp_path), **kw)
    named = names(f for j in jobs for f in j.files)
    write_jobs(jobs)
    assert named == sorted(p.name for p in tmp_path.iterdir())
    assert all(j.chart == (j.files[0].endswith(".png")) for j in jobs)
    # evaluate --plots refuses a folder holding an earlier evaluation's files by these names
    from lancetnic_flow.runs.outputs import EVALUATION_FILES

    kw.pop("history")
    assert set(names(f for j in plot_jobs(str(tmp_path), **kw) for f in j.files)) <= set(EVALUATION_FILES)


def test_the_per_class_table_lists_the_labels_the_run_never_had_as_scikit_learns_report_does(tmp_path):
    # the macro averages counted 'science' and 'health' (each scoring 0) and the table left them out:
    # its rows averaged 0.106 where the macro-F1 beside it said 0.071
    import csv

    from sklearn.metrics import classification_report

    labels = ["sports", "tech", "politics"]
    true = ["sports", "sports", "tech", "politics", "politics", "science", "science", "health"]
    pred = ["sports", "tech", "tech", "politics", "sports", "tech", "sports", "politics"]
    m = ClassificationMetrics(3)
    seen = [i for i, t in enumerate(true) if t in labels]
    m.update(np.array([labels.index(true[i]) for i in seen]), np.array([labels.index(pred[i]) for i in seen]), 1.0)
    m.update_unseen({"science": 2, "health": 1}, np.array([labels.index(pred[i]) for i in range(8) if i not in seen]))
    result = m.result()
    write_plots(str(tmp_path), metrics=result, labels=labels, charts=False)
    with open(tmp_path / "per_class.csv", newline="") as f:
        table = {r["label"]: r for r in csv.DictReader(f)}
    report = classification_report(true, pred, labels=sorted(set(true) | set(pred)), output_dict=True,
                                   zero_division=0)
    assert set(table) == set(true) | set(pred)
    for name, row in table.items():
        for key in ("precision", "recall", "f1"):
            assert float(row[key]) == pytest.approx(report[name][f"{key}-score" if key == "f1" else key], abs=1e-4)
        assert int(row["support"]) == report[name]["support"]
    assert np.mean([float(r["f1"]) for r in table.values()]) == pytest.approx(result["macro_f1"], abs=1e-4)
    assert result["macro_f1"] == pytest.approx(report["macro avg"]["f1-score"])


def test_the_confusion_chart_has_a_row_per_label_the_run_never_had_as_scikit_learns_matrix(tmp_path, monkeypatch):
    # evaluate on data with new labels drew a matrix without their rows: 'science' and 'health' were nowhere
    import pyarrow as pa
    from sklearn.metrics import confusion_matrix

    from lancetnic_flow.models.metrics import dense_confusion
    from lancetnic_flow.runs import plots

    labels = ["sports", "tech", "politics"]
    true = ["sports", "sports", "tech", "politics", "politics", "science", "health", "science"]
    pred = ["sports", "tech", "tech", "politics", "sports", "tech", "politics", "sports"]
    m = ClassificationMetrics(3)
    seen = [i for i, t in enumerate(true) if t in labels]
    new = [i for i in range(8) if i not in seen]
    m.update(np.array([labels.index(true[i]) for i in seen]), np.array([labels.index(pred[i]) for i in seen]), 1.0)
    m.update_unseen({"science": 2, "health": 1}, np.array([labels.index(pred[i]) for i in new]),
                    pa.array([true[i] for i in new]))
    drawn = {}
    monkeypatch.setattr(plots, "confusion_chart", lambda cells, names, url, o: drawn.update(cells=cells, names=names))
    write_plots(str(tmp_path), metrics=m.result(), labels=labels)
    assert drawn["names"] == labels + ["science", "health"]
    assert dense_confusion(drawn["cells"], 5).tolist() == confusion_matrix(true, pred, labels=drawn["names"]).tolist()


@pytest.mark.parametrize("sets", [False, True])
def test_the_per_class_chart_draws_the_labels_the_run_never_had_as_its_table_lists_them(tmp_path, monkeypatch, sets):
    # per_class.csv listed 'science' (F1 0), the chart titled "worst F1 first" left it out
    from lancetnic_flow.runs import plots

    labels = ["sports", "tech"]
    if sets:
        m = MultiLabelMetrics(2)
        m.update(np.array([[1, 0], [0, 1]]), np.array([[1, 0], [1, 1]]), 0.5, np.array([1, 0]))
        m.update_unseen({"science": 1})
    else:
        m = ClassificationMetrics(2)
        m.update(np.array([0, 1, 1]), np.array([0, 1, 0]), 1.0)
        m.update_unseen({"science": 2}, np.array([0, 1]))
    drawn = {}
    monkeypatch.setattr(plots, "per_class_chart", lambda scores, names, url, o, **kw: drawn.update(s=scores, n=names))
    result = m.result()
    write_plots(str(tmp_path), metrics=result, labels=labels)
    key = "per_label" if sets else "per_class"
    assert drawn["n"] == labels + ["science"]
    assert drawn["s"]["f1"] == list(result[key]["f1"]) + [0.0]
    assert drawn["s"]["support"] == list(result[key]["support"]) + [1 if sets else 2]
    rows = (tmp_path / f"{key}.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == drawn["n"]
