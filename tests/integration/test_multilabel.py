"""Multi-label classification (``--task multilabel``), end to end on real files
and real processes: label sets read from fastText tags, JSON lists and a
separator; a single-label task refusing rows with several labels (exit 2,
naming the file and ``--task multilabel``); a generated multi-label corpus
learnt through the CLI well above the most frequent label set on held-out
rows; ``evaluate --json`` printing its scores; ``Predictor`` returning label
sets. The CLI runs share the session's cluster (``--scheduler``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest
import torch

from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.errors import UserError
from lancetnic_flow.models import create_model
from lancetnic_flow.models.metrics import MultiLabelMetrics
from lancetnic_flow.models.tasks import Task
from lancetnic_flow.training import optim

from helpers import assert_user_error, cli

ROWS = 4000


def read(path: Path, **columns) -> tuple[dict, dict]:
    """Every row a reader keeps from ``path`` (as a dict of columns), and the skipped counts."""
    tables, skipped = [], {}
    for part in plan_source([str(path)]).partitions:
        for chunk in read_partition(part, Columns(text=("text",), label="label", **columns)):
            tables.append(chunk.table.to_pydict())
            for k, v in chunk.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
    return {k: sum((t[k] for t in tables), []) for k in tables[0]}, skipped


# ---------------------------------------------------------------- reading label sets


def test_label_sets_come_from_fasttext_tags_json_lists_and_a_separator_an_empty_list_is_a_set_a_blank_is_missing(
        tmp_path):
    ft = tmp_path / "a.ft"
    ft.write_text("__label__a __label__b first text\n__label__c second text\n__label__ no label\n")
    jl = tmp_path / "a.jsonl"
    jl.write_text('{"text": "first text", "label": ["a", "b"]}\n{"text": "second text", "label": ["c"]}\n'
                  '{"text": "no label", "label": []}\n')
    js = tmp_path / "json.csv"
    js.write_text('text,label\nfirst text,"[""a"", ""b""]"\nsecond text,c\nno label,[]\n')
    sep = tmp_path / "sep.csv"
    sep.write_text("text,label\nfirst text,a|b\nsecond text, c \nno label,\n")
    for path in (ft, jl, js, sep):
        rows, skipped = read(path, multilabel=True, label_sep="|" if path == sep else None)
        if path in (jl, js):   # an empty list: no label applies, every label a negative
            assert rows == {"text": ["first text", "second text", "no label"], "label": [["a", "b"], ["c"], []]}
            assert skipped == {}, path
            continue
        assert rows == {"text": ["first text", "second text"], "label": [["a", "b"], ["c"]]}, path
        assert skipped == {"missing_label": 1}, path


def test_a_json_list_in_a_csv_label_is_refused_by_a_single_label_task_but_a_bracketed_name_is_a_label(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text('text,label\nfirst,[deleted]\nsecond,"[""a"", ""b""]"\n')
    with pytest.raises(UserError) as err:
        read(p)
    assert str(p) in err.value.message and "task multilabel" in err.value.message
    assert "--task multilabel" in err.value.said("cli")[0]   # LabelListError.at keeps the command line's words
    q = tmp_path / "y.csv"
    q.write_text("text,label\nfirst,[deleted]\nsecond,b\n")
    assert read(q)[0]["label"] == ["[deleted]", "b"]


@pytest.mark.parametrize("name,content", [
    ("tags.ft", "__label__a __label__b some text\n__label__c more text\n"),
    ("lists.jsonl", '{"text": "some text", "label": ["a", "b"]}\n{"text": "more text", "label": ["c"]}\n'),
])
def test_a_single_label_task_given_several_labels_per_row_exits_2_naming_the_file_and_task_multilabel(
        client, tmp_path, name, content):
    (tmp_path / name).write_text(content * 50)
    p = cli("train", name, "--scheduler", client.scheduler.address, "--out", tmp_path / "runs", cwd=tmp_path)
    assert_user_error(p, name, "--task multilabel")


def test_label_sep_without_multilabel_and_a_classify_monitor_with_multilabel_are_user_errors():
    def cfg(**training):
        return TrainConfig(data=DataConfig(train=["x.csv"], label_sep="|"), training=TrainingConfig(**training))

    with pytest.raises(UserError, match="for task multilabel"):
        cfg().validate()
    # the default model, LinearSVM, monitors micro-F1 (its val_loss grows with its margins); a model of probabilities its loss
    assert cfg(task="multilabel").validate().training.monitor == "val_micro_f1"
    multilabel_mlp = cfg(task="multilabel")
    multilabel_mlp.model.name = "ScalpelMC"
    assert multilabel_mlp.validate().training.monitor == "val_loss"
    assert cfg(task="multilabel", monitor="val_micro_f1").validate().training.monitor == "val_micro_f1"
    with pytest.raises(UserError, match="does not fit"):
        cfg(task="multilabel", monitor="val_accuracy").validate()


# ---------------------------------------------------------------- loss and metrics


def test_multilabel_metrics_give_micro_and_macro_f1_subset_accuracy_and_per_label_scores():
    m = MultiLabelMetrics(3)
    true = np.array([[1, 1, 0], [0, 1, 0], [1, 0, 0], [0, 0, 0]], np.uint8)
    pred = np.array([[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]], np.uint8)
    half = MultiLabelMetrics(3)
    half.update(true[:2], pred[:2], 1.0)
    m.update(true[2:], pred[2:], 2.0)
    r = m.merge(half).result()
    # tp 3, fp 1, fn 1 pooled; label 0: F1 1, label 1: P 1 R .5, label 2: predicted, never true (F1 0, in macro)
    assert r["micro_f1"] == pytest.approx(0.75)
    assert r["macro_f1"] == pytest.approx((1.0 + 2 / 3 + 0.0) / 3)
    assert r["subset_accuracy"] == pytest.approx(0.5) and r["loss"] == pytest.approx(0.75)
    assert r["per_label"]["support"] == [2, 2, 0] and r["per_label"]["precision"][2] == 0.0


@pytest.mark.parametrize("name", ["ScalpelMC", "FastTextBag", "LancetMC", "LancetMCA_gru"])
def test_every_network_family_learns_label_sets_with_a_sigmoid_bce_loss_in_process(name):
    g = torch.Generator().manual_seed(0)
    rows, classes = 96, 3
    hot = (torch.rand(rows, classes, generator=g) < 0.4).float()
    hot[hot.sum(1) == 0, 0] = 1
    # A row holds the tokens of each of its labels (label c: ids 2+10c .. 11+10c), in random order.
    seqs = [torch.cat([torch.randint(2 + 10 * c, 12 + 10 * c, (4,), generator=g)
                       for c in range(classes) if hot[r, c]]).tolist() for r in range(rows)]
    idx = torch.tensor([i for s in seqs for i in s])
    off = torch.tensor([0] + list(np.cumsum([len(s) for s in seqs])[:-1]))
    vals = torch.ones(len(idx))
    model, _ = create_model(name, dim=40, classes=classes, regress=False, hidden=16, layers=1, dropout=0.0,
                            embed=16, numeric=0)
    task = Task("multilabel", classes=classes)
    opts = optim.make_optimizers(model, "adam", 0.03)
    losses = []
    for _ in range(60):
        loss = task.loss(model.train()(idx, off, vals), hot, None)
        optim.zero_grad(opts)
        loss.backward()
        optim.step(opts, model)
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], losses
    m = task.new_metrics()
    with torch.no_grad():
        m.update(model.eval()(idx, off, vals), hot.numpy().astype(np.uint8), None, 0.0)
    assert m.result()["micro_f1"] > 0.9


# ---------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """``make-data --multilabel`` through the CLI, cut into a training file and a held-out test file."""
    d = tmp_path_factory.mktemp("multilabel")
    made = cli("make-data", "all.csv", "--rows", ROWS, "--multilabel", cwd=d)
    assert made.returncode == 0, made.stdout + made.stderr
    lines = (d / "all.csv").read_text().splitlines(keepends=True)
    cut = 1 + ROWS * 3 // 4
    (d / "train.csv").write_text("".join(lines[:cut]))
    (d / "test.csv").write_text(lines[0] + "".join(lines[cut:]))
    return d


@pytest.fixture(scope="module")
def run(client, corpus) -> Path:
    p = cli("train", "train.csv", "--task", "multilabel", "--label-sep", "|", "--scheduler", client.scheduler.address,
            "--out", corpus / "runs", "--name", "ml", "--cache", corpus / "cache", "--quiet", cwd=corpus)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return corpus / "runs" / "ml"


def test_label_sets_joined_in_a_string_and_trained_as_one_label_a_row_are_named_with_the_option_that_learns_them(
        client, corpus, run):
    """Without --task multilabel, 'sports|tech' is a class of its own: the run says so and
    what to pass (it trains as asked); the multilabel run of the same file says nothing."""
    p = cli("train", "train.csv", "--epochs", "1", "--scheduler", client.scheduler.address, "--out",
            corpus / "runs", "--name", "joined", "--cache", corpus / "cache", "--no-plots", cwd=corpus)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = " ".join((p.stdout + p.stderr).split())
    assert "the labels look like sets joined by '|'" in out and "--task multilabel --label-sep '|'" in out
    assert "to a TextClassifier: y as lists of labels" in out   # the same advice in the Python caller's words
    decided = json.loads((corpus / "runs" / "joined" / "metrics.json").read_text())["decided"]
    assert decided["joined_labels"]["separator"] == "|"
    assert "joined_labels" not in json.loads((run / "metrics.json").read_text())["decided"]


def label_sets(path: Path) -> list[frozenset]:
    return [frozenset(s.split("|")) for s in pacsv.read_csv(path)["label"].to_pylist()]


def micro_f1(true: list[frozenset], pred: list[frozenset]) -> float:
    tp = sum(len(t & p) for t, p in zip(true, pred))
    return 2 * tp / (sum(map(len, true)) + sum(map(len, pred)))


def test_a_learnable_multilabel_corpus_trains_through_the_cli_and_beats_the_most_frequent_label_set_on_held_out_rows(
        client, corpus, run):
    e = cli("evaluate", run, "test.csv", "--json", "--scheduler", client.scheduler.address, cwd=corpus)
    assert e.returncode == 0, e.stdout[-3000:] + e.stderr[-3000:]
    scores = json.loads(e.stdout)
    assert {"micro_f1", "macro_f1", "subset_accuracy"} <= set(scores)
    assert scores["rows"]["evaluated"] == ROWS // 4 and scores.get("accuracy") is None
    train, test = label_sets(corpus / "train.csv"), label_sets(corpus / "test.csv")
    common = max(set(train), key=train.count)
    baseline = micro_f1(test, [common] * len(test))
    assert scores["micro_f1"] > baseline + 0.25, (scores["micro_f1"], baseline)
    assert scores["subset_accuracy"] > test.count(common) / len(test) + 0.2
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["task"] == "multilabel" and metrics["monitor"] == "val_micro_f1" and metrics["model"] == "LinearSVM"
    assert metrics["val_micro_f1"] is not None and len(metrics["per_label"]["f1"]) == 4
    assert {"per_label.png", "per_label.csv", "micro_f1.png"} <= set(metrics["plots"])
    assert "confusion_matrix.png" not in metrics["plots"]


def test_predictor_of_a_multilabel_run_returns_the_labels_at_or_above_their_thresholds_with_sigmoid_probabilities(
        run):
    from lancetnic_flow.runs.loading import load_run
    from lancetnic_flow.runs.predict import Predictor

    assert load_run(str(run)).task().kind == "multilabel"
    pred = Predictor(str(run))
    assert pred.multilabel
    saved = json.loads((run / "model.json").read_text())["thresholds"]
    assert len(saved) == 4 and pred.thresholds.tolist() == saved and all(0 < t < 1 for t in saved)
    texts = pacsv.read_csv(run.parent.parent / "test.csv")["text"].to_pylist()[:20]
    proba = pred.predict_proba(texts)
    assert proba.shape == (20, 4) and ((proba >= 0) & (proba <= 1)).all()
    assert not np.allclose(proba.sum(1), 1.0)     # a probability per label, not a distribution
    logits = pred.outputs(pred.feature_rows(texts))["logits"]   # ranked by, as probabilities may round alike
    for threshold, cut in ((None, np.asarray(saved)), (0.5, np.full(4, 0.5))):   # the run's own, or one for all
        out = pred.predict(texts, threshold=threshold)
        for row, p, z in zip(out, proba, logits):
            taken = [i for i in np.argsort(-z, kind="stable") if p[i] >= cut[i]]
            assert row["labels"] == [pred.labels[i] for i in taken]
            assert row["probabilities"] == pytest.approx([p[i] for i in taken])
    out = pred.predict(texts)
    assert sum(len(r["labels"]) for r in out) > 20      # some texts get several labels
    # The lowest threshold there is (0 itself is refused, as --threshold refuses it) takes every label.
    assert all(len(r["labels"]) == 4 for r in pred.predict(texts[:3], threshold=float(np.nextafter(0.0, 1.0))))
    assert pred.predict([""])[0] == {"status": "empty_text", "labels": None, "probabilities": None}


def test_multilabel_trains_on_ddp_ranks_with_the_same_loss_and_scores(client, corpus):
    # The MLP's ranks exchange gradients (LinearSVM's average weights: tests/integration/test_ddp.py).
    p = cli("train", "train.csv", "--task", "multilabel", "--label-sep", "|", "--ddp", "2", "--epochs", "2",
            "--model", "ScalpelMC",
            "--buckets", "65536", "--scheduler", client.scheduler.address, "--out", corpus / "runs", "--name", "ddp",
            "--cache", corpus / "cache", "--quiet", cwd=corpus)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    metrics = json.loads((corpus / "runs" / "ddp" / "metrics.json").read_text())
    assert metrics["task"] == "multilabel" and metrics["ddp"]
    assert metrics["val_micro_f1"] > 0.5 and metrics["val_subset_accuracy"] is not None


def test_predict_input_of_a_multilabel_run_writes_label_lists_in_jsonl_and_joined_labels_in_csv(client, corpus, run):
    from lancetnic_flow.runs.predict import Predictor

    src = corpus / "test.csv"
    expected = Predictor(str(run)).predict(pacsv.read_csv(src)["text"].to_pylist(), threshold=0.4)
    for out in ("pred.jsonl", "pred.csv"):
        p = cli("predict", run, "--input", src, "--output", out, "--threshold", "0.4", "--top-k", "2",
                "--scheduler", client.scheduler.address, cwd=corpus)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [json.loads(x) for x in (corpus / "pred.jsonl").read_text().splitlines()]
    assert len(rows) == len(expected) == ROWS // 4
    assert [r["predicted"] for r in rows] == [e["labels"] for e in expected]
    assert all(r["label_1"] == (r["predicted"] or [r["label_1"]])[0] for r in rows)
    table = pacsv.read_csv(corpus / "pred.csv", convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    joined = ["|".join(e["labels"]) for e in expected]
    assert [x or "" for x in table["predicted"].to_pylist()] == joined


@pytest.mark.parametrize("features", ["hashing", "tfidf"])
def test_rows_whose_label_set_repeats_a_label_are_kept_counted_and_named(tmp_path, features):
    lines = ["text,label"]
    for i in range(300):
        labels = ["sports", "tech"] if i % 3 else ["sports"]
        if i % 25 == 0:
            labels = labels + labels[:1]      # a label named twice: 12 rows
        lines.append(f"{' '.join(labels)} story number {i % 17},{'|'.join(labels)}")
    (tmp_path / "rep.csv").write_text("\n".join(lines) + "\n")
    p = cli("train", "rep.csv", "--task", "multilabel", "--label-sep", "|", "--features", features, "--epochs", "1",
            "--out", tmp_path / "runs", "--name", "r", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads((tmp_path / "runs" / "r" / "metrics.json").read_text())["rows"]
    assert rows["noted"] == {"repeated_label": 12} and rows["read"] == 300 and not rows["skipped"]
    assert rows["trained"] + rows["validated"] == 300
    assert "12 rows named a label twice in their label set" in p.stdout + p.stderr
    e = cli("evaluate", tmp_path / "runs" / "r", "rep.csv", "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    assert json.loads(e.stdout)["rows"]["noted"] == {"repeated_label": 12}


@pytest.fixture(scope="module")
def many_labels(tmp_path_factory):
    """135 labels in a file sorted by label: the sample the plan reads before the
    fit sees fewer than 64 of them, so the plan is made for 64 classes."""
    d = tmp_path_factory.mktemp("labels135")
    assert cli("make-data", "all.csv", "--rows", "6000", "--classes", "135", cwd=d).returncode == 0
    table = pacsv.read_csv(d / "all.csv")
    pacsv.write_csv(table.take(pc.sort_indices(table, [("label", "ascending")])), d / "m.csv")
    return d


LABELS135 = ["--task", "multilabel", "--label-sep", "|", "--workers", "2", "--run-on", "cluster", "--epochs", "1",
             "--model", "ScalpelMC"]
AT_4GIB = [*LABELS135, "--memory-budget", "4GiB"]


def test_a_model_a_little_over_its_planned_share_takes_rows_from_the_default_shuffle_buffer_and_says_so(
        many_labels):
    p = cli("train", "m.csv", *AT_4GIB, "--out", "runs", "--name", "fits", cwd=many_labels)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "the model with 135 classes needs" in out and "the shuffle buffer holds 19,000 rows instead of 20,000" in out
    cfg = json.loads((many_labels / "runs" / "fits" / "config.json").read_text())
    assert cfg["training"]["shuffle_buffer"] == 19_000    # what ran, so --resume runs it the same


def test_a_refused_model_names_only_options_that_change_what_was_short_each_with_a_value_that_fits(many_labels):
    import re

    p = cli("train", "m.csv", *AT_4GIB, "--shuffle-buffer", "19999", "--out", "runs", cwd=many_labels)
    out = assert_user_error(p, "the model with 135 classes needs", "--memory-budget 6.0GiB", "--buckets ")
    assert "--max-features" not in out    # hashed features have no vocabulary to cap
    fixes = re.findall(r"(--[a-z-]+) ([0-9][0-9.]*(?:GiB)?)", out.split("hint:")[1])
    assert len(fixes) >= 2
    for flag, value in fixes:             # each value named fits when the run is started again with it
        given = {"--shuffle-buffer": "19999", "--memory-budget": "4GiB", flag: value}
        args = [*LABELS135, *(a for kv in given.items() for a in kv)]
        q = cli("train", "m.csv", *args, "--out", "runs", cwd=many_labels)
        assert q.returncode == 0, (flag, value, q.stdout[-1500:] + q.stderr[-1500:])


def test_the_plan_is_made_for_the_labels_a_sample_shows_so_135_labels_keep_the_linear_model_at_4gib(tmp_path):
    assert cli("make-data", "m.csv", "--rows", "3000", "--classes", "135", "--multilabel", cwd=tmp_path).returncode == 0
    args = [a for a in AT_4GIB if a not in ("--model", "ScalpelMC")]
    p = cli("train", "m.csv", *args, "--out", "runs", "--name", "planned", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "decided  memory plan for " in out and "a sample of the training rows shows" in out
    metrics = json.loads((tmp_path / "runs" / "planned" / "metrics.json").read_text())
    assert metrics["model"] == "LinearSVM" and len(metrics["labels"]) == 135
    planned = metrics["decided"]["planned_classes"]
    assert planned["classes"] >= 135 and planned["classes"] > planned["sampled"] > 64
    assert metrics["memory"]["trainer_peak_rss_bytes"] <= metrics["memory"]["plan"]["trainer"]


def test_a_linear_multilabel_run_saves_a_threshold_per_label_that_predict_and_evaluate_use(tmp_path):
    """The default model for label sets is the linear SVM with one margin per label; the
    thresholds chosen on its validation rows go into model.json and decide every label."""
    from lancetnic_flow.runs.predict import Predictor

    assert cli("make-data", "all.csv", "--rows", "3000", "--multilabel", cwd=tmp_path).returncode == 0
    p = cli("train", "all.csv", "--task", "multilabel", "--label-sep", "|", "--epochs", "3", "--out", "runs",
            "--name", "svm", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    run = tmp_path / "runs" / "svm"
    meta = json.loads((run / "model.json").read_text())
    assert meta["model"] == "LinearSVM" and len(meta["thresholds"]) == 4
    assert len(set(meta["thresholds"])) > 1 and all(0 < t < 1 for t in meta["thresholds"])
    pred = Predictor(str(run))
    table = pacsv.read_csv(tmp_path / "all.csv")
    cuts = np.asarray(meta["thresholds"])
    proba = pred.predict_proba(table["text"].to_pylist())
    own = [{pred.labels[i] for i in np.flatnonzero(p >= cuts)} for p in proba]
    assert own != [{pred.labels[i] for i in np.flatnonzero(p >= 0.5)} for p in proba]   # the thresholds decide
    assert [set(r["labels"]) for r in pred.predict(table["text"].to_pylist()[:300])] == own[:300]
    e = cli("evaluate", run, "all.csv", "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    truth = [set(s.split("|")) for s in table["label"].to_pylist()]
    tp = sum(len(t & g) for t, g in zip(truth, own))
    assert json.loads(e.stdout)["micro_f1"] == pytest.approx(2 * tp / (sum(map(len, truth)) + sum(map(len, own))))


def test_a_runs_validation_figures_of_rows_with_new_labels_are_evaluates_on_the_same_file(client, tmp_path):
    """A --val file whose rows hold two labels training never had: the run's figures at its
    thresholds are evaluate's on that file, and its epoch figures (at 0.5) scikit-learn's with
    the new labels counted as missed ones, never left out (micro-F1 0.45 where evaluate gave 0.37)."""
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    from lancetnic_flow.runs.predict import Predictor

    for name, rows, classes in (("train.csv", "1500", "5"), ("val.csv", "400", "7")):
        made = cli("make-data", name, "--rows", rows, "--classes", classes, "--multilabel", "--seed", "1", cwd=tmp_path)
        assert made.returncode == 0, made.stderr
    p = cli("train", "train.csv", "--val", "val.csv", "--task", "multilabel", "--label-sep", "|", "--epochs", "6",
            "--scheduler", client.scheduler.address, "--out", "runs", "--name", "new", "--no-plots", "--quiet",
            cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = tmp_path / "runs" / "new"
    metrics = json.loads((run / "metrics.json").read_text())
    e = cli("evaluate", run, "val.csv", "--json", "--scheduler", client.scheduler.address, cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    ev = json.loads(e.stdout)
    assert metrics["unseen_labels"] == ev["unseen_labels"] and len(ev["unseen_labels"]) == 2
    at = metrics["val_at_thresholds"]
    assert at["rows"] == ev["rows"]["evaluated"] == 400
    for key in ("micro_f1", "macro_f1", "subset_accuracy"):
        assert at[key] == pytest.approx(ev[key], abs=1e-6), key
    truth = label_sets(tmp_path / "val.csv")
    names = sorted(set(metrics["labels"]).union(*truth))
    mlb = MultiLabelBinarizer(classes=names).fit([names])
    pred = Predictor(str(run)).predict(pacsv.read_csv(tmp_path / "val.csv")["text"].to_pylist(), threshold=0.5)
    t, g = mlb.transform(truth), mlb.transform([r["labels"] for r in pred])
    assert g.any() and metrics["best_epoch"] == 6   # the saved weights are the last epoch's, whose figures these are
    occurring = [i for i in range(len(names)) if t[:, i].any() or g[:, i].any()]
    assert metrics["val_micro_f1"] == pytest.approx(f1_score(t, g, average="micro"), abs=1e-6)
    assert metrics["val_macro_f1"] == pytest.approx(f1_score(t, g, average="macro", labels=occurring), abs=1e-6)
    assert metrics["val_subset_accuracy"] == pytest.approx(accuracy_score(t, g), abs=1e-6)


def test_a_val_file_joining_the_label_sets_of_a_run_trained_on_lists_is_refused_naming_label_sep_as_evaluate_does(
        tmp_path):
    """Training on JSON lists with a --val CSV of "sports|tech": each joined set was read as one label
    the run never had, every such row scored as missing all its labels, and the run finished with
    its validation figures at 0 and exit 0; evaluate of the same file exits 2 naming --label-sep."""
    write_corpus(str(tmp_path / "train.jsonl"), 1500, classes=4, seed=1, multilabel=True)
    write_corpus(str(tmp_path / "val.csv"), 300, classes=4, seed=2, multilabel=True)
    p = cli("train", "train.jsonl", "--val", "val.csv", "--task", "multilabel", "--epochs", "3", "--run-on", "process",
            "--out", "runs", "--name", "lists", "--no-plots", cwd=tmp_path)
    assert_user_error(p, "joins this run's labels by '|'", "'sports|tech'", "--label-sep '|'")
    assert not (tmp_path / "runs" / "lists" / "model.json").exists()
    assert "training epoch" not in p.stdout + p.stderr   # refused from the file's head, before any epoch
    p = cli("train", "train.jsonl", "--val", "val.csv", "--task", "multilabel", "--label-sep", "|", "--epochs", "1",
            "--run-on", "process", "--out", "runs", "--name", "split", "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "unseen_labels" not in json.loads((tmp_path / "runs" / "split" / "metrics.json").read_text())


def test_a_label_sep_that_split_no_label_past_the_files_head_is_warned_of_and_joined_strings_among_lists_are_named(
        tmp_path):
    """A JSON Lines file of lists longer than the head --label-sep's check reads trained with the
    separator doing nothing, silently (exit 0, no word); a few "sports|tech" strings among lists,
    trained without it, were each learned as a label of their own, silently. Both are said now."""
    write_corpus(str(tmp_path / "lists.jsonl"), 8000, classes=4, seed=1, multilabel=True)
    assert (tmp_path / "lists.jsonl").stat().st_size > (1 << 20)
    p = cli("train", "lists.jsonl", "--task", "multilabel", "--label-sep", "|", "--epochs", "1", "--run-on", "process",
            "--out", "runs", "--name", "idle", "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "--label-sep '|' split no label" in p.stdout + p.stderr
    assert "label_sep" not in json.loads((tmp_path / "runs" / "idle" / "metrics.json").read_text())["rows"]
    e = cli("evaluate", tmp_path / "runs" / "idle", "lists.jsonl", "--label-sep", "|", cwd=tmp_path)
    assert e.returncode == 0 and "--label-sep '|' split no label" in e.stderr, e.stdout + e.stderr
    lines = (tmp_path / "lists.jsonl").read_text().splitlines()
    mixed = [json.loads(x) for x in lines[:1500]]
    for row in mixed[::10]:
        row["label"] = "|".join(row["label"]) if len(row["label"]) > 1 else row["label"]
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mixed))
    p = cli("train", "mixed.jsonl", "--task", "multilabel", "--epochs", "1", "--run-on", "process",
            "--out", "runs", "--name", "mixed", "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "of this run are its other labels joined by '|'" in p.stdout + p.stderr and "pass --label-sep '|'" in \
        p.stdout + p.stderr


def test_a_linear_svm_label_set_run_leads_with_its_saved_models_figures_and_its_epoch_lines_name_their_margin(
        tmp_path):
    """Its epochs score each label at margin 0 and the saved model at per-label thresholds: the run
    said the first (micro-F1 far lower) as its result and the second a line below, unnamed."""
    write_corpus(str(tmp_path / "ml.csv"), 3000, classes=6, seed=3, multilabel=True)
    p = cli("train", "ml.csv", "--task", "multilabel", "--label-sep", "|", "--model", "LinearSVM", "--epochs", "2",
            "--run-on", "process", "--out", "runs", "--name", "svm", "--no-plots", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout + p.stderr
    assert out.count("· at margin 0 ·") == 2, out   # each epoch line
    metrics = json.loads((tmp_path / "runs" / "svm" / "metrics.json").read_text())
    assert list(metrics)[2] == "val_at_thresholds" and metrics["val_decided_at"] == "margin 0"
    assert all(e["val_decided_at"] == "margin 0" for e in metrics["epochs"])
    result = out[out.index("result"):]
    assert result.index("micro-F1 at the saved thresholds") < result.index("micro-F1 at margin 0"), result


def test_rows_whose_label_set_is_empty_are_trained_so_the_model_learns_to_give_a_row_no_label(client, tmp_path):
    # such rows were skipped as missing_label (and the linear model's step passed an empty set by):
    # every text then got some label, a weather report sports and tech at 0.8
    rng = np.random.default_rng(0)
    words = {"sports": "goal match team", "tech": "phone chip code", "politics": "vote law party"}
    rows = []
    for i in range(1500):
        if rng.random() < 0.3:
            rows.append({"text": f"weather sunny rain cloud {i % 7}", "labels": []})
        else:
            tags = list(rng.choice(list(words), size=int(rng.integers(1, 3)), replace=False))
            rows.append({"text": " ".join(words[t] for t in tags) + " news", "labels": tags})
    (tmp_path / "ml.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "ml.csv").write_text("text,labels\n" + "".join(
        f"{r['text']},{'|'.join(r['labels']) or '[]'}\n" for r in rows))
    p = cli("train", "ml.jsonl", "--task", "multilabel", "--label", "labels", "--epochs", "3", "--quiet",
            "--scheduler", client.scheduler.address, "--out", tmp_path / "runs", "--name", "empty", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    metrics = json.loads((tmp_path / "runs" / "empty" / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 1500 and not metrics["rows"]["skipped"]
    assert metrics["val_subset_accuracy"] > 0.9
    e = cli("evaluate", tmp_path / "runs" / "empty", "ml.csv", "--label", "labels", "--label-sep", "|", "--json",
            "--scheduler", client.scheduler.address, cwd=tmp_path)
    assert e.returncode == 0, e.stdout[-3000:] + e.stderr[-3000:]
    scores = json.loads(e.stdout)
    assert scores["rows"]["evaluated"] == 1500 and scores["subset_accuracy"] > 0.9
    q = cli("predict", tmp_path / "runs" / "empty", "--text", "weather sunny rain cloud 3", cwd=tmp_path)
    assert q.returncode == 0 and json.loads(q.stdout.strip().splitlines()[-1])["labels"] == []
