"""The Python API where people write Python: estimators in scikit-learn's
conventions over the real dataflow, scripts with and without a __main__
guard (real subprocesses), the README's example run as a script, and a real
Jupyter kernel."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lancetnic_flow import TextClassifier, TextRegressor, write_corpus
from lancetnic_flow.dataflow.main_guard import guarded
from lancetnic_flow.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def run_script(path: Path, cwd: Path, timeout: int = 240) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    p = subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - start


@pytest.fixture(scope="module")
def frame(data_dir) -> pd.DataFrame:
    path = data_dir / "api.csv"
    if not path.exists():
        write_corpus(str(path), 3000, classes=4, seed=3)
    return pd.read_csv(path)


@pytest.fixture(scope="module")
def fitted(client, frame) -> TextClassifier:
    clf = TextClassifier(epochs=3, scheduler=client.scheduler.address, progress=False)
    return clf.fit(frame["text"][:2500], frame["label"][:2500])


def test_estimator_parameters_follow_scikit_learn_so_clone_works():
    from sklearn.base import clone

    clf = TextClassifier(epochs=2, hidden=32, random_state=7)
    twin = clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    assert twin.get_params()["random_state"] == 7 and "predictor_" not in vars(twin)
    assert clf.set_params(epochs=4) is clf and clf.epochs == 4
    with pytest.raises(ValueError, match="'epoch' is not a parameter.*epochs"):
        clf.set_params(epoch=3)
    assert repr(TextRegressor(epochs=2)) == "TextRegressor(epochs=2)"


def test_grid_search_runs_the_estimator_over_folds(client, frame):
    from sklearn.model_selection import GridSearchCV

    est = TextClassifier(epochs=2, scheduler=client.scheduler.address, progress=False)
    gs = GridSearchCV(est, {"hidden": [16, 32]}, cv=2).fit(frame["text"][:1500].to_numpy(),
                                                           frame["label"][:1500].to_numpy())
    assert gs.best_params_["hidden"] in (16, 32) and 0.4 < gs.best_score_ <= 1
    assert gs.best_estimator_.hidden == gs.best_params_["hidden"]


def test_estimator_fits_a_pandas_series_and_predicts_every_row_in_order(fitted, frame):
    test = frame[2500:]
    assert list(fitted.classes_) and set(fitted.classes_) == set(frame["label"])
    assert fitted.score(test["text"], test["label"]) > 0.8
    texts = test["text"].tolist()[:4]
    messy = [texts[0], None, texts[1], "", texts[2]]
    got = fitted.predict(messy)
    assert got.shape == (5,) and got[1] is None and got[3] is None
    assert list(got[[0, 2, 4]]) == list(fitted.predict(texts[:3]))
    proba = fitted.predict_proba(messy)
    assert proba.shape == (5, len(fitted.classes_)) and np.isnan(proba[[1, 3]]).all()
    np.testing.assert_allclose(proba[[0, 2, 4]].sum(1), 1.0, rtol=1e-5)
    assert list(fitted.classes_[proba[[0, 2, 4]].argmax(1)]) == list(got[[0, 2, 4]])
    # the same rows as a DataFrame, an Arrow table, a NumPy array
    df = pd.DataFrame({"id": range(5), "text": messy})
    assert list(fitted.predict(df)) == list(got)
    assert list(fitted.predict(pa.table({"text": messy}))) == list(got)
    assert list(fitted.predict(np.array(messy, dtype=object))) == list(got)
    # a threshold picks a multilabel run's labels: here it would do nothing, so it is refused (it was ignored)
    with pytest.raises(UserError, match="applies to a multilabel run"):
        fitted.predict(texts, threshold=0.3)


def test_estimator_saves_a_run_folder_that_loads_and_predicts_the_same(fitted, frame, tmp_path):
    texts = frame["text"][2500:2600].tolist()
    fitted.save(tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").exists()
    again = TextClassifier.load(tmp_path / "model")
    assert list(again.predict(texts)) == list(fitted.predict(texts))
    assert list(again.classes_) == list(fitted.classes_)
    with pytest.raises(UserError, match="not fitted"):
        TextClassifier().predict(["x"])


def test_estimator_fits_a_dataframe_by_column_name_and_files_by_path(client, frame, data_dir):
    clf = TextClassifier(epochs=2, scheduler=client.scheduler.address, progress=False)
    assert clf.fit(frame[:2500], "label") is clf
    assert clf.score(frame[2500:], frame["label"][2500:]) > 0.75
    on_file = TextClassifier(epochs=2, scheduler=client.scheduler.address, progress=False)
    on_file.fit(str(data_dir / "api.csv"), "label")
    assert on_file.score(frame["text"][2500:], frame["label"][2500:]) > 0.75
    with pytest.raises(UserError, match="X has 10 rows but y has 9"):
        clf.fit(frame["text"][:10], frame["label"][:9])


def test_integer_labels_come_back_as_the_integers_given(client, frame):
    codes = {name: i for i, name in enumerate(sorted(set(frame["label"])))}
    y = frame["label"].map(codes).to_numpy()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        clf = TextClassifier(epochs=2, scheduler=client.scheduler.address, progress=False).fit(
            frame["text"][:2000], y[:2000])
    # integers are a classifier's classes, as in scikit-learn: no word of the command line's --target
    assert not [w for w in said if "holds numbers" in str(w.message)], [str(w.message) for w in said]
    assert sorted(clf.classes_) == sorted(codes.values())
    got = clf.predict(frame["text"][2000:2100])
    # integers of y's dtype, as scikit-learn's classifiers give them (an object array made its metrics fail)
    assert got.dtype == y.dtype and set(got.tolist()) <= set(codes.values())
    assert clf.score(frame["text"][2000:], y[2000:]) > 0.75


def test_partial_fit_continues_the_model_and_grows_its_classes(frame, tmp_path):
    """The first call trains on three labels; the second, on 150 rows of all four,
    continues it: the fourth label is added, the three keep what they learned (a model
    of those 150 rows alone scored 0.70 when this was written), the first run's folder
    is left as it was. Labels declared up front are in ``classes_`` from the first call."""
    train, test = frame[:2500], frame[2500:]
    labels = sorted(set(frame["label"]))
    first = train[:1200][train["label"][:1200].isin(labels[:3])]
    clf = TextClassifier(progress=False, out=str(tmp_path))
    assert clf.partial_fit(first["text"], first["label"]) is clf
    assert list(clf.classes_) == labels[:3]
    run, files = Path(clf.run_), {p: p.read_bytes() for p in Path(clf.run_).iterdir() if p.is_file()}
    old = test["label"].isin(labels[:3])
    before = clf.score(test["text"][old], test["label"][old])
    second = train[1200:1350]
    clf.partial_fit(second["text"], second["label"])
    assert list(clf.classes_) == labels and Path(clf.run_) != run
    meta = json.loads((run / "model.json").read_text())
    learned = meta["learned_rows"]["rows"]   # the first fit's validation rows
    # a call that adds a label starts the learning rate afresh: its new output row has learned nothing
    assert clf.metrics_["decided"]["init_from"] == {"run": str(run), "labels_kept": 3, "labels_added": [labels[3]],
                                                    "learned_rows": learned, "schedule_from_step": 0}
    assert meta["steps"] > 0
    assert clf.score(test["text"][old], test["label"][old]) >= before - 0.03
    assert clf.score(test["text"], test["label"]) > 0.78
    assert set(clf.predict(test["text"])) == set(labels)
    assert {p: p.read_bytes() for p in run.iterdir() if p.is_file()} == files
    # A parameter changed since: refused in partial_fit's words (they named init_from, a CLI's --init-from).
    with pytest.raises(UserError) as e:
        clf.set_params(buckets=1024).partial_fit(second["text"], second["label"])
    assert str(e.value).startswith(f"partial_fit continues the model the earlier calls fitted ({clf.run_})")
    assert "set_params(buckets=524288)" in e.value.hint and "init_from" not in str(e.value)
    clf.set_params(buckets=524288)
    declared = TextClassifier(progress=False).partial_fit(first["text"], first["label"], classes=[*labels, "other"])
    assert sorted(declared.classes_) == sorted([*labels, "other"])
    assert declared.predict_proba(test["text"][:3]).shape == (3, 5)
    with pytest.raises(UserError, match="y holds a label outside classes=: nope"):
        declared.partial_fit(["a text"] * 4, ["nope", labels[0], labels[1], labels[2]], classes=labels)
    declared.partial_fit(second["text"], second["label"])   # no classes: continues, the labels as they were
    assert sorted(declared.classes_) == sorted([*labels, "other"])
    # Declared without a row, the fourth label learned only "not me" in the first call: its rows come later.
    assert declared.score(test["text"], test["label"]) > 0.7 and labels[3] in set(declared.predict(test["text"]))


def test_without_progress_what_a_run_warns_of_reaches_the_caller_as_a_python_warning(frame, tmp_path):
    """Fed the rows it learned again, partial_fit trains on the validation rows its
    model learned instead of validating on them: the run warns, and with
    progress=False that warning is a RunWarning, not lost."""
    from lancetnic_flow import RunWarning

    rows = frame[:1500]
    clf = TextClassifier(progress=False, out=str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunWarning)   # the first call has nothing to warn of
        clf.partial_fit(rows["text"], rows["label"])
    first = clf.metrics_["rows"]["validated"]
    with pytest.warns(RunWarning, match=rf"{first:,} validation rows? the partial_fit model had learned"):
        clf.partial_fit(rows["text"], rows["label"])
    assert clf.metrics_["rows"]["noted"] == {"learned_by_init": first} and clf.metrics_["rows"]["validated"] == 0


def test_regressor_learns_a_target_from_numpy_arrays(client, frame):
    reg = TextRegressor(epochs=5, scheduler=client.scheduler.address, progress=False)
    reg.fit(frame["text"].to_numpy()[:2500], frame["target"].to_numpy()[:2500])
    assert reg.score(frame["text"][2500:], frame["target"][2500:]) > 0.1   # predicting the mean scores 0
    got = reg.predict(["a text", None])
    assert np.isfinite(got[0]) and np.isnan(got[1])


def test_classifier_given_lists_of_labels_is_multilabel(client, data_dir):
    path = data_dir / "api-ml.csv"
    write_corpus(str(path), 3000, classes=4, seed=4, multilabel=True)
    df = pd.read_csv(path)
    y = [s.split("|") for s in df["label"]]
    clf = TextClassifier(epochs=4, scheduler=client.scheduler.address, progress=False)
    clf.fit(df["text"][:2500], y[:2500])
    assert clf.multilabel_
    got = clf.predict(df["text"][2500:])
    assert all(isinstance(g, list) and set(g) <= set(clf.classes_) for g in got)
    common = max(set(map(tuple, map(sorted, y[:2500]))), key=lambda s: sum(sorted(t) == list(s) for t in y[:2500]))
    baseline = np.mean([sorted(t) == list(common) for t in y[2500:]])
    assert clf.score(df["text"][2500:], y[2500:]) > baseline + 0.1
    assert clf.predict_proba(df["text"][2500:2510]).shape == (10, len(clf.classes_))


@pytest.mark.parametrize("source,line,expected", [
    ("train()\n", 1, False),
    ('if __name__ == "__main__":\n    train()\n', 2, True),
    ("if '__main__' == __name__:\n    x = 1\n    train()\n", 3, True),
    ('def main():\n    train()\n\nmain()\n', 4, False),
    ('if __name__ == "__main__":\n    pass\ntrain()\n', 3, False),
])
def test_guard_detection_reads_the_calling_line_of_the_script(source, line, expected):
    assert guarded(source, line) is expected


def test_a_script_without_a_main_guard_stops_at_once_with_the_fix_when_its_run_starts_a_cluster(tmp_path):
    data = tmp_path / "d.csv"
    write_corpus(str(data), 500, seed=0)
    script = tmp_path / "noguard.py"
    script.write_text(textwrap.dedent(f"""\
        from lancetnic_flow import TextClassifier

        clf = TextClassifier(epochs=1, run_on="cluster").fit({str(data)!r}, "label")
        print("FITTED")
    """))
    p, took = run_script(script, tmp_path, timeout=120)
    assert p.returncode != 0 and "FITTED" not in p.stdout
    assert "noguard.py, line 3" in p.stderr and 'if __name__ == "__main__":' in p.stderr
    assert took < 30, f"took {took:.0f} s"


def test_a_script_without_a_main_guard_fits_small_data_in_process(tmp_path):
    # No cluster starts, so no worker process re-imports the script: the guard is not needed.
    data = tmp_path / "d.csv"
    write_corpus(str(data), 500, seed=0)
    script = tmp_path / "noguard.py"
    script.write_text(textwrap.dedent(f"""\
        from lancetnic_flow import TextClassifier

        clf = TextClassifier(epochs=1, progress=False).fit({str(data)!r}, "label")
        print("FITTED", len(clf.predict(["a text", "another"])))
    """))
    p, _ = run_script(script, tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "FITTED 2" in p.stdout


def test_the_readme_python_example_runs_as_a_script(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "data").mkdir()
    write_corpus(str(tmp_path / "data" / "train.csv"), 3000, seed=0)
    script = tmp_path / "example.py"
    script.write_text(code.replace("TextClassifier()", "TextClassifier(epochs=2)"))
    p, _ = run_script(script, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\['\w+' None\]", p.stdout), p.stdout
    assert (tmp_path / "models" / "news" / "model.json").exists()
    # progress is on by default: the milestones of the run reach stderr
    assert "training epoch 1/2" in p.stderr and "training finished" in p.stderr


def test_train_from_python_shows_progress_by_default_and_not_when_turned_off(tmp_path):
    data = tmp_path / "d.csv"
    write_corpus(str(data), 1500, seed=0)
    script = tmp_path / "quiet.py"
    script.write_text(textwrap.dedent(f"""\
        from lancetnic_flow import DataConfig, TrainConfig, TrainingConfig, OutputConfig, train

        if __name__ == "__main__":
            cfg = TrainConfig(data=DataConfig(train=[{str(data)!r}]), training=TrainingConfig(epochs=1),
                              output=OutputConfig(out={str(tmp_path / "runs")!r}))
            print("RUN", train(cfg, progress=False).run)
    """))
    p, _ = run_script(script, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "RUN" in p.stdout and "training epoch" not in p.stderr


def test_a_jupyter_kernel_fits_and_shows_progress_in_the_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    data = tmp_path / "d.csv"
    write_corpus(str(data), 1500, seed=0)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(f"""\
        from lancetnic_flow import TextClassifier
        clf = TextClassifier(epochs=2).fit({str(data)!r}, "label")
        print("PREDICTED", list(clf.predict(["a late goal", ""])))
    """))]
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    outputs = nb.cells[0].outputs
    shown = "\n".join(o.get("text") or o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "training epoch 2/2" in shown and "training finished" in shown
    assert re.search(r"PREDICTED \['\w+', None\]", shown), shown


def test_train_with_a_client_of_ones_own_refuses_local_cluster_sizes_that_would_do_nothing(client, small_corpus,
                                                                                           tmp_path):
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.training.orchestrator import train as run_training

    from helpers import make_config

    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.cluster.memory_budget = 8 << 30
    with pytest.raises(UserError, match="memory_budget 8.0 GiB sizes the LocalCluster a run starts, and the run was "
                                        "given a client"):
        run_training(cfg, client=client)
    assert not (tmp_path / "runs").exists()   # nothing read or written
