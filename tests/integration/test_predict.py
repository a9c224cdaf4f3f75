"""Using a trained run: the Predictor from Python, prediction and evaluation
over Dask partitions, artifacts that are never unpickled, and the default
model (LinearSVM) predicted, evaluated and served without importing torch."""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
import torch

from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.evaluate import evaluate_files, evaluate_partition
from lancetnic_flow.runs.loading import load_run
from lancetnic_flow.runs.predict import Predictor, predict_files

from helpers import cli


def test_predictor_returns_labels_of_the_run_and_probabilities_that_sum_to_one(trained_run):
    pred = Predictor(trained_run.run)
    labels = set(trained_run.metrics["labels"])
    texts = ["a short text", "Völlig unbekannte Wörter!", "the the the"]
    out = pred.predict(texts)
    assert len(out) == len(texts)
    for p in out:
        assert p["status"] == "ok" and p["label"] in labels
        assert 0.0 <= p["probability"] <= 1.0
    proba = pred.predict_proba(texts)
    assert proba.shape == (len(texts), len(labels))
    assert ((proba >= 0) & (proba <= 1)).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    for p, row in zip(out, proba):
        assert p["label"] == pred.labels[int(row.argmax())]
        assert p["probability"] == pytest.approx(float(row.max()))
    assert pred.predict([]) == [] and pred.predict_proba([]).shape == (0, len(labels))


def test_predictor_keeps_a_row_without_text_in_place_with_its_status(trained_run):
    pred = Predictor(trained_run.run)
    texts = ["a short text", "", None, "   ", float("nan"), "the the the"]
    out = pred.predict(texts)
    assert [p["status"] for p in out] == ["ok"] + ["empty_text"] * 4 + ["ok"]
    assert all(p["label"] is None and p["probability"] is None for p in out[1:5])
    assert out[0]["label"] == pred.predict(["a short text"])[0]["label"]
    assert out[5]["label"] == pred.predict(["the the the"])[0]["label"]
    proba = pred.predict_proba(texts)
    assert proba.shape[0] == 6 and np.isnan(proba[1:5]).all() and not np.isnan(proba[[0, 5]]).any()


def test_predictor_agrees_with_the_labels_of_training_data(trained_run, corpus4):
    table = pacsv.read_csv(corpus4).slice(0, 1000)
    got = [p["label"] for p in Predictor(trained_run.run).predict(table["text"].to_pylist())]
    acc = np.mean(np.array(got) == np.array(table["label"].to_pylist()))
    assert acc > 0.85


def test_predict_files_writes_one_line_per_row_in_input_order(client, trained_run, corpus4, tmp_path):
    lines = corpus4.read_text().splitlines(keepends=True)
    data = tmp_path / "in.csv"
    data.write_text("".join(lines[:1501]))
    plan = plan_source([str(data)], blocksize=60_000)
    assert len(plan.partitions) >= 4
    out = tmp_path / "pred.jsonl"
    res = predict_files(client, trained_run.run, plan, Columns(text=("text",)), str(out), storage_options={},
                        run_options={}, chunk_bytes=2**20, window=2)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert res["rows_read"] == res["rows_written"] == len(rows) == 1500
    expected = pacsv.read_csv(data)["text"].to_pylist()
    assert [r["text"] for r in rows] == expected
    labels = set(trained_run.metrics["labels"])
    assert all(r["predicted"] in labels and 0 <= r["probability"] <= 1 for r in rows)


def test_predict_files_writes_csv_with_a_header_and_one_row_per_input_row(client, trained_run, small_corpus,
                                                                         tmp_path):
    plan = plan_source([str(small_corpus)], blocksize=100_000)
    assert len(plan.partitions) >= 3
    out = tmp_path / "pred.csv"
    res = predict_files(client, trained_run.run, plan, Columns(text=("text",)), str(out), storage_options={},
                        run_options={}, chunk_bytes=2**20, window=2)
    table = pacsv.read_csv(out)
    assert table.column_names == ["text", "status", "predicted", "probability"]
    assert set(table["status"].to_pylist()) == {"ok"}
    assert table.num_rows == res["rows_written"] == 2000
    assert table["text"].to_pylist() == pacsv.read_csv(small_corpus)["text"].to_pylist()
    assert set(table["predicted"].to_pylist()) <= set(trained_run.metrics["labels"])
    probs = table["probability"].to_numpy()
    assert ((probs >= 0) & (probs <= 1)).all()


def test_a_kept_column_of_bytes_is_written_whole_to_parquet_and_refused_by_csv_naming_parquet(client, trained_run,
                                                                                              tmp_path):
    # b"\xff\x01" and b"\xfe\x01" were both written as "\ufffd\x01": two ids read back as one
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = [b"\xff\x01", b"\xfe\x01", b"caf\xc3\xa9", None]
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a late goal", "the market fell", "new phone", "rain again"],
                             "id": pa.array(ids, pa.binary())}), data)
    plan = plan_source([str(data)])
    for name in ("pred.parquet", "pred.arrow"):
        res = predict_files(client, trained_run.run, plan, Columns(text=("text",), keep=("id",)), str(tmp_path / name),
                            storage_options={}, run_options={}, chunk_bytes=2**20, window=2)
        back = pq.read_table(tmp_path / name) if name.endswith("parquet") else \
            pa.ipc.open_file(str(tmp_path / name)).read_all()
        assert res["rows_written"] == 4 and back.column("id").to_pylist() == ids
    with pytest.raises(UserError, match="holds bytes that are not UTF-8") as e:
        predict_files(client, trained_run.run, plan, Columns(text=("text",), keep=("id",)), str(tmp_path / "p.csv"),
                      storage_options={}, run_options={}, chunk_bytes=2**20, window=2)
    assert "p.parquet" in e.value.hint and not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize("name", ["in.csv", "in.jsonl"])
def test_distinct_ids_of_bytes_that_are_not_utf8_in_a_text_file_are_kept_apart_or_refused(client, trained_run,
                                                                                          tmp_path, name):
    # "\xff1" and "\xfe1" were both written "\ufffd1" (the rows "undecodable", their ids merged)
    import pyarrow.parquet as pq

    data = tmp_path / name
    data.write_bytes(b"id,text\n\xff1,a late goal\n\xfe1,the market fell\n" if name.endswith("csv") else
                     b'{"id": "\xff1", "text": "a late goal"}\n{"id": "\xfe1", "text": "the market fell"}\n')
    plan = plan_source([str(data)])
    predict_files(client, trained_run.run, plan, Columns(text=("text",), keep=("id",)), str(tmp_path / "p.parquet"),
                  storage_options={}, run_options={}, chunk_bytes=2**20, window=2)
    assert pq.read_table(tmp_path / "p.parquet").column("id").to_pylist() == [b"\xff1", b"\xfe1"]
    with pytest.raises(UserError, match="holds bytes that are not UTF-8") as e:
        predict_files(client, trained_run.run, plan, Columns(text=("text",), keep=("id",)), str(tmp_path / "p.csv"),
                      storage_options={}, run_options={}, chunk_bytes=2**20, window=2)
    assert "p.parquet" in e.value.hint


@pytest.mark.parametrize("name", ["in.csv", "in.jsonl"])
def test_ids_of_bytes_that_are_not_utf8_in_a_later_block_write_the_same_parquet_at_every_blocksize(
        client, trained_run, tmp_path, name):
    # the first block wrote "id" as text and a later one held b"\xff7" (or "\ud800"): exit 2 at a small
    # --blocksize, the ids kept as bytes at a large one
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv = name.endswith("csv")
    rows = [(f"id{i}".encode(), f"a late goal {i}".encode()) for i in range(80)]
    rows[70] = (b"id\xff7", b"the market fell")
    rows[75] = (b"id\xfe7", b"the market fell") if csv else (b"id\\ud800", b"the market fell")
    data = tmp_path / name
    data.write_bytes(b"id,text\n" + b"".join(i + b"," + t + b"\n" for i, t in rows) if csv else
                     b"".join(b'{"id": "' + i + b'", "text": "' + t + b'"}\n' for i, t in rows))
    written = []
    for blocksize in (300, 2**20):
        for ext in ("parquet", "arrow"):
            out = tmp_path / f"p{blocksize}.{ext}"
            res = predict_files(client, trained_run.run, plan_source([str(data)], blocksize=blocksize),
                                Columns(text=("text",), keep=("id",)), str(out), storage_options={}, run_options={},
                                chunk_bytes=2**20, window=2)
            assert res["rows_written"] == 80
            written.append(pq.read_table(out) if ext == "parquet" else pa.ipc.open_file(str(out)).read_all())
    assert all(t.equals(written[0]) for t in written) and written[0].schema.field("id").type == pa.binary()
    ids = written[0].column("id").to_pylist()
    assert ids[0] == b"id0" and ids[70] == b"id\xff7" and len(set(ids)) == 80


def test_keep_all_of_json_lines_whose_later_objects_add_a_key_writes_the_same_file_at_every_blocksize(
        client, trained_run, tmp_path):
    # a small --blocksize stopped at the first block holding "extra" ("later input rows have columns the
    # first rows written lack"), a large one wrote the file
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"a late goal {i}"}) + "\n" for i in range(60))
                    + "".join(json.dumps({"id": i, "text": "new phone", "extra": f"x{i}"}) + "\n" for i in range(60, 64)))
    written = set()
    for blocksize in (200, 2**20):
        out = tmp_path / f"p{blocksize}.csv"
        res = predict_files(client, trained_run.run, plan_source([str(data)], blocksize=blocksize),
                            Columns(text=("text",), keep_all=True), str(out), storage_options={}, run_options={},
                            chunk_bytes=2**20, window=2)
        assert res["rows_written"] == 64
        written.add(out.read_text())
    assert len(written) == 1 and next(iter(written)).splitlines()[0].startswith("id,text,extra,status")


def test_keep_all_of_a_glob_of_json_lines_files_keeps_the_keys_of_every_file(client, trained_run, tmp_path):
    # only the first file's head decided the columns: "src" and "lang", in later files, stopped a CSV output
    folder = tmp_path / "in"
    folder.mkdir()
    for name, obj in (("a", {"id": 1, "text": "a late goal"}), ("b", {"id": 2, "text": "new phone", "src": "web"}),
                      ("c", {"lang": "en", "id": 3, "text": "the vote"})):
        (folder / f"{name}.jsonl").write_text(json.dumps(obj) + "\n")
    for ext in ("csv", "parquet"):
        out = tmp_path / f"p.{ext}"
        res = predict_files(client, trained_run.run, plan_source([str(folder / "*.jsonl")]),
                            Columns(text=("text",), keep_all=True), str(out), storage_options={}, run_options={},
                            chunk_bytes=2**20, window=2)
        assert res["rows_written"] == 3
    rows = pacsv.read_csv(tmp_path / "p.csv").to_pylist()
    assert list(rows[0])[:4] == ["id", "text", "src", "lang"]
    assert [(r["id"], r["src"], r["lang"]) for r in rows] == [(1, "", ""), (2, "web", ""), (3, "", "en")]


def test_evaluate_files_matches_the_predictor(client, trained_run, corpus4, tmp_path):
    lines = corpus4.read_text().splitlines(keepends=True)
    data = tmp_path / "eval.csv"
    data.write_text(lines[0] + "".join(lines[-800:]))
    plan = plan_source([str(data)], blocksize=50_000)
    out, _ = evaluate_files(client, trained_run.run, plan, Columns(text=("text",), label="label"),
                            storage_options={}, run_options={}, chunk_bytes=2**20, window=2)
    table = pacsv.read_csv(data)
    got = [p["label"] for p in Predictor(trained_run.run).predict(table["text"].to_pylist())]
    acc = float(np.mean(np.array(got) == np.array(table["label"].to_pylist())))
    assert out["rows"]["evaluated"] == out["rows"]["read"] == 800
    assert out["accuracy"] == pytest.approx(acc)
    assert 0 < out["macro_f1"] <= 1


# ---------------------------------------------------------------- safe artifacts


class _Plant:
    """Unpickling this creates ``path``: a stand-in for code in a planted file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _copy_run(trained_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained_run.run, run)
    load_run(str(run))  # the copy loads before tampering
    return run


def test_a_torch_pickle_in_place_of_the_safetensors_weights_is_refused(trained_run, tmp_path):
    run = _copy_run(trained_run, tmp_path)
    state = load_run(str(run)).model.state_dict()
    torch.save(state, run / "model.safetensors")
    with pytest.raises(UserError, match="safetensors"):
        load_run(str(run))
    with pytest.raises(UserError):
        Predictor(str(run))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_a_planted_pickle_is_never_executed_when_loading_a_run(trained_run, tmp_path, protocol):
    run = _copy_run(trained_run, tmp_path)
    marker = tmp_path / "pwned"
    (run / "model.safetensors").write_bytes(pickle.dumps(_Plant(str(marker)), protocol=protocol))
    with pytest.raises(UserError):
        load_run(str(run))
    assert not marker.exists()


def test_a_missing_run_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a lancetnic_flow run folder"):
        load_run(str(tmp_path / "nope"))


# ---------------------------------------------------------------- the default model without torch
# torch's import alone is 1.8–2.0 s on 2 cores: a LinearSVM run is scored in NumPy (runs/linear_scores.py).
# Whether torch was imported is only seen in a fresh interpreter: this process imported it long ago.


@pytest.fixture(scope="module")
def linear_run(small_corpus, tmp_path_factory) -> Path:
    """The defaults (LinearSVM) on 2,000 rows, trained in the calling process."""
    out = tmp_path_factory.mktemp("linear")
    p = cli("train", small_corpus, "--out", out, "--name", "svm", "--epochs", "2", "--no-plots", cwd=out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((out / "svm" / "model.json").read_text())["model"] == "LinearSVM"
    return out / "svm"


def _fresh(code: str, cwd: Path) -> str:
    """Run ``code`` in a new interpreter; it prints what it found, its last line whether torch was imported."""
    p = subprocess.run([sys.executable, "-c", "import sys\n" + code + "\nprint('torch' in sys.modules)"],
                       cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_the_default_model_predicts_evaluates_and_serves_without_importing_torch(linear_run, small_corpus,
                                                                                   tmp_path):
    out = _fresh(f"""
from lancetnic_flow.runs.predict import Predictor
pred = Predictor({str(linear_run)!r})
print(pred.predict(["a late goal won the match", ""])[0]["status"])
from lancetnic_flow import TextClassifier
print(len(TextClassifier.load({str(linear_run)!r}).predict_proba(["a late goal won the match"])[0]))
from lancetnic_flow.cli.main import main
assert main(["predict", {str(linear_run)!r}, "--text", "a late goal"]) == 0
assert main(["predict", {str(linear_run)!r}, "--input", {str(small_corpus)!r}, "--output", "p.csv"]) == 0
assert main(["evaluate", {str(linear_run)!r}, {str(small_corpus)!r}, "--json"]) == 0
from lancetnic_flow.runs.serve import Model, Service, app
model = Model({str(linear_run)!r})
app(model)
print(Service(model, 10, 2**20, 10, None).answer(b'{{"texts": ["a late goal"]}}', "application/json").decode())
""", tmp_path)
    lines = out.strip().splitlines()
    assert lines[:2] == ["ok", "4"], out
    said = {k: v for line in lines if line.startswith("{") for k, v in json.loads(line).items()}
    assert said["text"] == "a late goal" and said["label"] and said["accuracy"] > 0.5, out
    assert said["predictions"][0]["status"] == "ok"
    assert len(pacsv.read_csv(tmp_path / "p.csv")) == 2000
    assert lines[-1] == "False", out


def test_evaluate_reports_the_linear_runs_hinge_on_raw_scores_as_its_val_loss_does_not_at_the_fitted_scale(
        linear_run, small_corpus):
    cols = Columns(text=("text",), label="label")
    (part,) = plan_source([str(small_corpus)], blocksize=2**30).partitions
    m, rows, _, _ = evaluate_partition(part, cols, str(linear_run), {}, {}, 2**26)
    pred = Predictor(str(linear_run))
    table = pacsv.read_csv(small_corpus)
    block = pred.run.features.transform(table)
    scaled = pred.outputs(block)["logits"].astype(np.float64)
    scale = float(json.loads((linear_run / "metrics.json").read_text())["calibration"]["scale"])
    t = -np.ones_like(scaled)
    t[np.arange(len(t)), block.labels.astype(np.int64)] = 1.0

    def hinge(z):
        return np.maximum(1.0 - t * z, 0.0).sum(1).mean()

    assert abs(scale - 1.0) > 0.05   # a fitted scale, so the two hinges differ
    assert m.result()["loss"] == pytest.approx(hinge(scaled / scale), rel=1e-4)
    assert abs(hinge(scaled) - hinge(scaled / scale)) > 0.01


def test_another_model_still_predicts_through_torch(trained_run, tmp_path):
    assert json.loads((Path(trained_run.run) / "model.json").read_text())["model"] == "ScalpelMC"
    out = _fresh(f"""
from lancetnic_flow.runs.predict import Predictor
print(Predictor({str(trained_run.run)!r}).predict(["a short text"])[0]["status"])
""", tmp_path)
    assert out.split() == ["ok", "True"]


def test_what_a_run_cannot_do_is_refused_not_ignored(tmp_path):
    """Before: ``predict --text --top-k`` on a regression run was an internal error (KeyError 'label_1',
    exit 1); a threshold given for a run that predicts one label a row (``--threshold``,
    ``Predictor.predict(threshold=)``, ``TextClassifier.predict(threshold=)``, serve's ``threshold``)
    was ignored without a word; ``--top-k`` with ``--text`` on a multilabel run gave no ranking."""
    from helpers import WORDS, assert_user_error, built_run

    text = " ".join(WORDS[:8])
    built_run("ScalpelReg", "regress", out=tmp_path / "reg")
    assert_user_error(cli("predict", tmp_path / "reg", "--text", text, "--top-k", "2", cwd=tmp_path),
                      "ranks labels: this run is a regression model", "--top-k")
    one = built_run("ScalpelMC", "classify", out=tmp_path / "one")
    with pytest.raises(UserError, match="applies to a multilabel run"):
        one.predict([text], threshold=0.3)
    with pytest.raises(UserError, match="applies to a multilabel run"):
        one.prediction_columns(one.rows([text]), threshold=0.3)
    assert_user_error(cli("predict", tmp_path / "one", "--text", text, "--threshold", "0.3", cwd=tmp_path),
                      "applies to a multilabel run", "--threshold")
    many = built_run("ScalpelMC", "multilabel")
    [row] = many.predict([text], top_k=2)
    assert len(row["top_labels"]) == 2 and row["top_probabilities"] == sorted(row["top_probabilities"], reverse=True)
    everything = many.predict([text], top_k=3)[0]
    assert row["top_labels"] == everything["top_labels"][:2] and set(everything["top_labels"]) == set(many.labels)
    assert row["labels"] == everything["labels"]   # the label set is still the thresholds'


def test_a_multilabel_runs_label_holding_the_csv_list_separator_is_refused_in_csv_and_written_whole_in_jsonl(
        tmp_path):
    """Before: a run whose label is ``sports|outdoor`` (a JSON list's label) wrote ``sports|outdoor|tech``
    beside two probabilities into a CSV, read back as three labels; now exit 2 before any work, naming
    the label and the formats that keep each row's labels a list."""
    from helpers import WORDS, assert_user_error, built_run

    built_run("ScalpelMC", "multilabel", out=tmp_path / "run", labels=["sports|outdoor", "tech", "politics"])
    (tmp_path / "in.csv").write_text("text\n" + "\n".join(" ".join(WORDS[i:i + 6]) for i in range(20)) + "\n")
    p = cli("predict", tmp_path / "run", "--input", tmp_path / "in.csv", "--output", tmp_path / "out.csv",
            "--run-on", "process", "--threshold", "0.01", cwd=tmp_path)
    assert_user_error(p, "'sports|outdoor'", ".jsonl")
    assert not (tmp_path / "out.csv").exists()
    p = cli("predict", tmp_path / "run", "--input", tmp_path / "in.csv", "--output", tmp_path / "out.jsonl",
            "--run-on", "process", "--threshold", "0.01", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert all(set(r["predicted"]) == {"sports|outdoor", "tech", "politics"} for r in rows)


def _serve_in_turn(runs: list[str], turns: int, sizes: int = 0) -> tuple[list[str], int, int]:
    """On a worker: the runs' predictors asked for in turn; the runs loaded, in order, the bytes
    kept and the worker's room for them. ``sizes``: each run counted as that many bytes."""
    import lancetnic_flow.runs.predict as predict
    from lancetnic_flow.runs.held_runs import room_for_runs, worker_memory

    loads: list[str] = []
    real_load, real_size = predict.load_run, predict.run_bytes
    predict.load_run = lambda *a, **k: loads.append(a[0]) or real_load(*a, **k)
    if sizes:
        predict.run_bytes = lambda *a, **k: sizes
    predict._PREDICTORS.clear()
    try:
        for _ in range(turns):
            for run in runs:
                predict.predictor(run, {}, "s")
        return loads, predict._PREDICTORS.bytes, room_for_runs(sizes or real_size(runs[0]), worker_memory())
    finally:
        predict.load_run, predict.run_bytes = real_load, real_size
        predict._PREDICTORS.clear()


def test_a_worker_serving_two_runs_in_turn_loads_each_once_and_keeps_them_within_its_room(
        client, trained_run, tmp_path):
    """Two commands for two runs sharing a worker made it read a whole model.safetensors on
    nearly every task (A, B, A, B ...); now each loads once while both fit the worker's room
    (its memory limit's band between Dask's target and spill lines beside the run served)."""
    a = str(trained_run.run)
    b = str(tmp_path / "copy")
    shutil.copytree(a, b)
    worker = sorted(client.scheduler_info()["workers"])[0]
    loads, held, room = client.submit(_serve_in_turn, [a, b], 3, workers=[worker], pure=False).result()
    assert loads == [a, b] and 0 < held <= room


def test_a_worker_whose_room_holds_fewer_runs_than_it_serves_keeps_within_it(client, trained_run, tmp_path):
    runs = [str(trained_run.run)]
    for i in range(3):
        runs.append(str(tmp_path / f"copy{i}"))
        shutil.copytree(runs[0], runs[-1])
    worker = sorted(client.scheduler_info()["workers"])[0]
    limit = client.scheduler_info()["workers"][worker]["memory_limit"]
    # The band ends at the spill line, before the pause line: stored results stay in memory, and
    # the runs kept leave a margin to the line past which the worker would run nothing.
    from lancetnic_flow.dataflow.plan import THRESHOLDS
    from lancetnic_flow.runs.held_runs import worker_memory

    assert client.submit(worker_memory, workers=[worker], pure=False).result() == (limit, THRESHOLDS["spill"])
    size = limit // 12   # the band (a tenth of the limit) beside the one served holds one more
    loads, held, room = client.submit(_serve_in_turn, runs, 2, size, workers=[worker], pure=False).result()
    assert held <= room and held == 2 * size
    assert len(loads) == 2 * len(runs)   # none fit beside the next in turn: each is loaded again
