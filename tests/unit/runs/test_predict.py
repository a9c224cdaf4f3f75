"""runs/predict.py: a Predictor over a saved run gives one result per input
row, in order — label and probability (softmax), value in the target's
units, label sets by threshold for a multilabel run — and a status with
empty results for a row without usable text."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import torch

from lancetnic_flow.data.sources import Columns, FileInfo, Partition
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import TRUNCATED, FittedFeatures
from lancetnic_flow.models.lancet import SequenceNet
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.runs.folder import save_run
from lancetnic_flow.runs.predict import Predictor, predict_partition


def linear_run(path, *, classes=2, regress=True, task="multitask") -> str:
    """A linear model whose scores are known: "cat" → class 0 and +1, "dog" → class 1 and -1."""
    model = ScalpelNet(2, classes=classes, regress=regress, layers=0, dropout=0.0)
    weight = [[3.0, -3.0, 1.0], [-3.0, 3.0, -1.0]]
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor([row[:classes] + (row[2:] if regress else []) for row in weight]))
        model.input.bias.zero_()
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["cat", "dog"]), idf=np.ones(2, np.float32),
                              labels=["pos", "neg"][:classes], target=(10.0, 2.0) if regress else None)
    save_run(str(path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": task}, metrics={}, history=[])
    return str(path)


def test_each_row_gets_its_label_probability_and_value_in_order(tmp_path):
    pred = Predictor(linear_run(tmp_path / "run"))
    out = pred.predict(["a cat", "", "dog dog", None], top_k=2)
    assert [o["status"] for o in out] == ["ok", "empty_text", "ok", "empty_text"]
    assert out[0]["label"] == "pos" and out[2]["label"] == "neg"
    want = float(torch.softmax(torch.tensor([3.0, -3.0]), 0)[0])
    assert out[0]["probability"] == pytest.approx(want, rel=1e-5)
    assert out[0]["value"] == pytest.approx(12.0, rel=1e-5) and out[2]["value"] == pytest.approx(8.0, rel=1e-5)
    assert out[0]["top_labels"] == ["pos", "neg"] and out[1]["label"] is None and out[1]["top_labels"] is None


def test_top_k_past_the_labels_gives_each_label_once_and_no_column_past_the_last(tmp_path):
    pred = Predictor(linear_run(tmp_path / "run"))
    out = pred.predict(["a cat", "dog"], top_k=10**9)      # a huge k neither repeats a label nor hangs
    assert [o["top_labels"] for o in out] == [["pos", "neg"], ["neg", "pos"]]
    table = pred.predict_table(["a cat"], top_k=5)
    assert [c for c in table.column_names if c.startswith("label_")] == ["label_1", "label_2"]
    assert pred.output_names(5) == pred.output_names(2)


def test_probabilities_sum_to_one_and_unpredictable_rows_are_nan(tmp_path):
    pred = Predictor(linear_run(tmp_path / "run"))
    proba = pred.predict_proba(["cat", "", "dog"])
    np.testing.assert_allclose(proba[[0, 2]].sum(1), 1.0, rtol=1e-6)
    assert np.isnan(proba[1]).all()
    values = pred.predict_values(["cat", "dog", ""])
    np.testing.assert_allclose(values[:2], [12.0, 8.0], rtol=1e-5)
    assert np.isnan(values[2])


def test_a_classifier_has_no_values_and_a_regressor_no_probabilities(tmp_path):
    classifier = Predictor(linear_run(tmp_path / "c", regress=False, task="classify"))
    with pytest.raises(UserError, match="no value head"):
        classifier.predict_values(["cat"])
    regressor = Predictor(linear_run(tmp_path / "r", classes=0, task="regress"))
    with pytest.raises(UserError, match="regression model"):
        regressor.predict_proba(["cat"])
    assert regressor.predict(["dog"])[0]["value"] == pytest.approx(8.0, rel=1e-5)


def test_a_multilabel_run_gives_every_label_at_or_above_the_threshold_most_likely_first(tmp_path):
    pred = Predictor(linear_run(tmp_path / "m", regress=False, task="multilabel"))
    out = pred.predict(["cat", "cat dog", "", "words of neither"])
    assert out[0]["labels"] == ["pos"] and out[0]["probabilities"][0] == pytest.approx(float(torch.sigmoid(
        torch.tensor(3.0))), rel=1e-5)
    # scores 0 but for rounding (probabilities 0.5 each): a label is taken where its logit is ≥ 0, as evaluate takes it
    logits = pred.scores(pred.rows(["cat dog"]))[1]["logits"][0]
    assert sorted(out[1]["labels"]) == sorted(np.array(["pos", "neg"])[logits >= 0].tolist())
    assert out[3]["labels"] == ["pos", "neg"]   # no term: scores of exactly 0, tied, in label order
    assert out[2] == {"status": "empty_text", "labels": None, "probabilities": None}
    assert pred.predict(["cat"], threshold=0.999)[0]["labels"] == []


def test_a_table_is_scored_a_slice_of_rows_at_a_time_with_the_same_columns(tmp_path, monkeypatch):
    import lancetnic_flow.runs.predict as predict

    pred = Predictor(linear_run(tmp_path / "run", regress=False, task="classify"))
    texts = ["a cat", "", "dog dog", "cat dog cat", None, "dog"]
    whole = pred.predict_table(texts, top_k=2)
    monkeypatch.setattr(predict, "SCORE_CELLS", 4)   # 2 labels: 2 rows at a time
    seen = []
    scores = Predictor.scores
    monkeypatch.setattr(Predictor, "scores", lambda self, rows, cut=None: seen.append(rows.num_rows) or scores(self, rows, cut))
    sliced = pred.predict_table(texts, top_k=2)
    assert sliced.equals(whole) and max(seen) == 2 and sum(seen) == len(texts)


def test_predict_table_of_a_filtered_pandas_frame_keeps_its_index_so_assigning_the_answers_lines_up(tmp_path):
    import pandas as pd

    pred = Predictor(linear_run(tmp_path / "run", regress=False, task="classify"))
    df = pd.DataFrame({"text": ["cat", "dog", "", "dog cat dog", "cat cat"]}, index=[10, 3, 7, 0, 1]).iloc[1:]
    out = pred.predict_table(df)
    assert list(out.index) == [3, 7, 0, 1]
    df["predicted"] = out["predicted"]   # aligned by index, as pandas assigns
    assert df["predicted"].tolist()[:1] + df["predicted"].tolist()[2:] == ["neg", "neg", "pos"]
    assert df["predicted"].isna().tolist() == [False, True, False, False]


def sequence_run(path, max_len: int = 3) -> str:
    """A tiny LancetMCA run over the words cat, dog and sat that reads ``max_len`` tokens a row."""
    torch.manual_seed(0)
    model = SequenceNet(5, classes=2, embed=4, hidden=4, dropout=0.0, attention=True)
    features = FittedFeatures(mode="ids", vocabulary=pa.array(["cat", "dog", "sat"]), max_len=max_len,
                              labels=["pos", "neg"])
    save_run(str(path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "SequenceNet", "kwargs": model.config, "task": "classify"}, metrics={},
             history=[])
    return str(path)


def test_predict_counts_the_rows_a_sequence_run_reads_only_to_max_len_as_evaluate_does(tmp_path):
    run = sequence_run(tmp_path / "run")
    texts = ["cat dog sat cat", "cat dog", "", "dog dog dog dog dog", "sat sat sat"]
    data = tmp_path / "in.csv"
    pacsv.write_csv(pa.table({"text": texts}), data)
    size = data.stat().st_size
    part = Partition(0, FileInfo(url=f"file://{data}", size=size, version="", format="csv", compression=None), 0,
                     size)
    tables, read, statuses = predict_partition(part, Columns(text=("text",), all_rows=True), run, {}, {}, 1 << 20, None)
    assert read == 5 and sum(t.num_rows for t in tables) == 5
    # Two texts hold more than 3 tokens; "sat sat sat" holds exactly 3 and is read whole.
    assert statuses == {"empty_text": 1, f"noted:{TRUNCATED}": 2}
    # The count comes with the same answers: a cut row scored as its first 3 tokens alone.
    got = pa.concat_tables(tables)["probability"].to_pylist()
    want = Predictor(run).predict(["cat dog sat", "cat dog", "", "dog dog dog", "sat sat sat"])
    assert got[0] == pytest.approx(want[0]["probability"], abs=1e-6)
    assert got[3] == pytest.approx(want[3]["probability"], abs=1e-6)


LONG_TEXTS = ["cat dog sat cat", "cat dog", "", "dog dog dog dog dog", "sat sat sat"]


def test_the_python_api_says_the_texts_cut_at_max_len_once_per_call_as_predict_input_counts_them(tmp_path):
    """predict, predict_proba, predict_table and featurize count the texts a sequence run reads
    only to --max-len (``longer_than_max_len``) and say it in one RunWarning per call: the
    same count as ``predict --input`` notes for the same texts (2: "sat sat sat" is read whole)."""
    from lancetnic_flow.errors import RunWarning

    pred = Predictor(sequence_run(tmp_path / "run"))
    calls = [lambda: pred.predict(LONG_TEXTS, top_k=2), lambda: pred.predict_proba(LONG_TEXTS),
             lambda: pred.predict_table(LONG_TEXTS), lambda: pred.feature_rows(LONG_TEXTS)]
    for call in calls:
        pred.longer_than_max_len = -1
        with pytest.warns(RunWarning) as said:
            call()
        assert [str(w.message).split(" ")[0] for w in said] == ["2"]
        assert "--max-len 3" in str(said[0].message) and TRUNCATED in str(said[0].message)
        assert pred.longer_than_max_len == 2
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred.predict(["cat dog", "sat sat sat"])   # none cut: nothing said, the count back to 0
        assert pred.longer_than_max_len == 0
        cut: list = []
        pred.predict(LONG_TEXTS, cut=cut)          # a caller that counts: told through cut, nothing said
    assert int(np.concatenate(cut).sum()) == 2


def test_a_run_that_reads_every_term_says_nothing_of_max_len(tmp_path):
    import warnings

    pred = Predictor(linear_run(tmp_path / "run", regress=False, task="classify"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred.predict(["cat dog cat dog cat dog cat dog"] * 3)
    assert pred.longer_than_max_len == 0


def test_a_text_of_the_runs_stop_words_alone_is_empty_text_and_one_of_unknown_words_is_predicted(tmp_path):
    """`the of` under a run with stop words was `ok`, predicted from the bias alone: its analyzer
    reads no term there. A word outside the vocabulary is read, as scikit-learn's analyzer reads
    it, and finds no column: `ok`, as a word seen in no training row always was."""
    model = ScalpelNet(2, classes=2, regress=False, layers=0, dropout=0.0)
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["cat", "dog"]), idf=np.ones(2, np.float32),
                              labels=["pos", "neg"], stop_words=["of", "the"])
    save_run(str(tmp_path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": "classify"}, metrics={}, history=[])
    out = Predictor(str(tmp_path)).predict(["the of", "The OF the", "the cat", "zebra crossing"])
    assert [o["status"] for o in out] == ["empty_text", "empty_text", "ok", "ok"]


def test_texts_with_no_term_the_run_reads_are_named_as_present_but_unread_not_as_empty():
    # predict --text 'a' said only status empty_text, as if no text had been given
    from lancetnic_flow.runs.predict import unread_message

    one = unread_message(["a"], FittedFeatures(mode="tfidf", analyzer="word"))
    assert one == ("1 text ('a') holds no term the run reads (its word analyzer reads words of two or more letters "
                   "or digits), so it was not predicted (status empty_text)")
    many = unread_message(["!!", "x" * 50, "?", "-"], FittedFeatures(mode="hashing", analyzer="char_wb"))
    assert many.startswith(f"4 texts ('!!', '{'x' * 39}…', '?', …) hold no term the run reads (its char_wb analyzer")
    assert "so they were not predicted" in many
    pairs = unread_message(["one"], FittedFeatures(mode="hashing", analyzer="word", ngram_min=2, ngrams=3,
                                                    stop_words=["the"], tokenizer="mod:split"))
    assert "(its word analyzer reads the tokens of its tokenizer mod:split, not its stop words, 2 or more of them)" \
        in pairs


def test_an_argument_the_run_cannot_use_is_named_as_each_caller_gives_it(tmp_path):
    """`--top-k (top_k) ranks labels`: both names to every reader; now each its own."""
    pred = Predictor(linear_run(tmp_path / "run", classes=0, task="regress"))
    with pytest.raises(UserError) as e:
        pred.predict(["a cat"], top_k=2)
    assert (e.value.message, e.value.hint) == ("top_k ranks labels: this run is a regression model", "drop top_k")
    assert e.value.cli == ("--top-k ranks labels: this run is a regression model", "drop --top-k")
    with pytest.raises(UserError) as e:
        Predictor(linear_run(tmp_path / "one", regress=False, task="classify")).predict(["a cat"], threshold=0.3)
    assert e.value.message.startswith("threshold applies") and e.value.cli[0].startswith("--threshold applies")


def confident_run(path, task: str, numpy: bool = False) -> Predictor:
    """One word, "goal", whose logits put the labels far apart: in the order b, d, a, c (a float32
    softmax gives b 1.0 and the three others 0.0 alike), or for label sets d, b, c, a (sigmoids
    give d and b 1.0, c and a 0.0)."""
    from lancetnic_flow.runs.linear_scores import LinearScores
    from lancetnic_flow.runs.loading import LoadedRun

    logits = [-100.0, 300.0, -250.0, 150.0] if task == "classify" else [-250.0, 30.0, -200.0, 40.0]
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["goal"]), idf=np.ones(1, np.float32),
                              labels=["a", "b", "c", "d"], sublinear_tf=False)
    if numpy:   # a LinearSVM run, scored in NumPy
        state = {"input.weight": np.array([logits], np.float32), "input.bias": np.zeros(4, np.float32),
                 "logit_scale": np.float32(1.0)}
        meta = {"net": "ScalpelNet", "model": "LinearSVM", "task": task,
                "kwargs": {"dim": 1, "classes": 4, "regress": False, "hidden": 64, "layers": 0, "dropout": 0.0,
                           "numeric": 0, "activation": "relu", "pooling": "weighted", "margin": True}}
        return Predictor(LoadedRun(str(path), {"data": {"text": ["text"]}}, features, None, meta, {},
                                   linear=LinearScores(state)))
    model = ScalpelNet(1, classes=4, regress=False, layers=0, dropout=0.0)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor([logits]))
        model.input.bias.zero_()
    save_run(str(path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": task}, metrics={}, history=[])
    return Predictor(str(path))


@pytest.mark.parametrize("numpy", [False, True])
def test_labels_are_ranked_by_their_scores_where_float32_probabilities_round_them_alike(tmp_path, numpy):
    # top_k ranked by the probabilities: a confident model's unlikely labels all read 0.0, and were
    # listed by label order (a, c, d after b) where their scores put d second and c last
    pred = confident_run(tmp_path / "c", "classify", numpy)
    out = pred.predict(["goal"], top_k=4)[0]
    assert out["label"] == "b" and out["top_labels"] == ["b", "d", "a", "c"]
    assert out["top_probabilities"] == [1.0, 0.0, 0.0, 0.0]
    table = pred.predict_table(["goal"], top_k=3)
    assert [table[f"label_{i}"][0].as_py() for i in (1, 2, 3)] == ["b", "d", "a"]
    assert pred.explain(["goal"])[0]["label"] == "b"
    # a multilabel run's labels, taken and not: d and b read 1.0, d's score is the higher; c's above a's
    pred = confident_run(tmp_path / "m", "multilabel", numpy)
    out = pred.predict(["goal"], top_k=4)[0]
    assert out["labels"] == ["d", "b"] and out["top_labels"] == ["d", "b", "c", "a"]
    assert pred.predict_table(["goal"])["predicted"][0].as_py() == ["d", "b"]
    doc = pred.explain(["goal"])[0]
    assert doc["label"] == "d" and doc["labels"] == ["d", "b"]


def edge_run(path, numpy: bool) -> Predictor:
    """A multilabel run whose one word, "goal", puts each label's logit a float32 step below its
    threshold's (a, b, c) or on it (d): the thresholds 0.3, 0.5, 0.7 and 0.9."""
    from lancetnic_flow.models.tasks import label_cuts
    from lancetnic_flow.runs.linear_scores import LinearScores
    from lancetnic_flow.runs.loading import LoadedRun

    thresholds = [0.3, 0.5, 0.7, 0.9]
    cuts = label_cuts(thresholds)
    logits = [np.nextafter(c, np.float32(-np.inf)) for c in cuts[:3]] + [cuts[3]]
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["goal"]), idf=np.ones(1, np.float32),
                              labels=["a", "b", "c", "d"], sublinear_tf=False)
    kwargs = {"dim": 1, "classes": 4, "regress": False, "hidden": 64, "layers": 0, "dropout": 0.0,
              "numeric": 0, "activation": "relu", "pooling": "weighted", "margin": True}
    meta = {"net": "ScalpelNet", "model": "LinearSVM", "task": "multilabel", "kwargs": kwargs,
            "thresholds": thresholds}
    if numpy:
        state = {"input.weight": np.array([logits], np.float32), "input.bias": np.zeros(4, np.float32),
                 "logit_scale": np.float32(1.0)}
        return Predictor(LoadedRun(str(path), {"data": {"text": ["text"]}}, features, None, meta, {},
                                   linear=LinearScores(state)))
    model = ScalpelNet(1, classes=4, regress=False, layers=0, dropout=0.0)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor(np.array([logits], np.float32)))
        model.input.bias.zero_()
    save_run(str(path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": "multilabel",
                         "thresholds": thresholds}, metrics={}, history=[])
    return Predictor(str(path))


@pytest.mark.parametrize("numpy", [False, True])
def test_a_label_a_float32_step_from_its_threshold_is_decided_by_predict_explain_and_evaluate_alike(tmp_path, numpy):
    # predict compared float32 probabilities with float64 thresholds, evaluate logits with the
    # thresholds' logits: sigmoid rounds a logit a step below 0 to 0.5, so predict took b and evaluate not
    from lancetnic_flow.models.metrics import MultiLabelMetrics
    from lancetnic_flow.models.tasks import TaskMetrics, label_cuts

    pred = edge_run(tmp_path / "edge", numpy)
    logits = pred.scores(pred.rows(["goal"]))[1]["logits"]
    evaluated = TaskMetrics(MultiLabelMetrics(4), None, label_cuts(pred.thresholds.tolist()))
    evaluated.update({"logits": logits}, np.array([[0, 0, 0, 1]], np.uint8), None, 0.0)
    assert evaluated.result()["subset_accuracy"] == 1.0   # evaluate takes d alone
    assert pred.predict(["goal"])[0]["labels"] == ["d"]
    assert pred.predict_table(["goal"])["predicted"][0].as_py() == ["d"]
    assert pred.explain(["goal"])[0]["labels"] == ["d"]


@pytest.mark.parametrize("task", ["classify", "multilabel"])
def test_explain_gives_each_label_the_probability_predict_gives_it_bit_for_bit(tmp_path, task):
    # explain took a torch run's probabilities in NumPy, predict in torch: about 1 in 2 differed in the last bit
    words = ["w%d" % i for i in range(12)]
    model = ScalpelNet(len(words), classes=5, regress=False, layers=0, dropout=0.0)
    with torch.no_grad():
        model.input.weight.copy_(torch.from_numpy(np.random.default_rng(1).normal(size=(12, 5)).astype(np.float32) * 3))
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(words), idf=np.ones(len(words), np.float32),
                              labels=list("abcde"))
    save_run(str(tmp_path / "r"), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": task}, metrics={}, history=[])
    pred = Predictor(str(tmp_path / "r"))
    rng = np.random.default_rng(2)
    texts = [" ".join(rng.choice(words, 4)) for _ in range(60)]
    got = [(d["label"], d["probability"]) for d in pred.explain(texts)]
    proba = pred.predict_proba(texts)
    want = [(d["label"], float(proba[i, pred.labels.index(d["label"])])) for i, d in enumerate(pred.explain(texts))]
    assert got == want
    if task == "classify":
        assert got == [(d["label"], d["probability"]) for d in pred.predict(texts)]


def test_storage_options_for_a_run_on_this_machines_disk_are_refused_naming_it(tmp_path):
    # they went to the local filesystem, which reads none, and the run loaded as if they had opened it
    run = linear_run(tmp_path / "run")
    with pytest.raises(UserError, match=r"storage_options anon opens remote storage .* every path here is local "
                                        r"\(the run .*run\)"):
        Predictor(run, {"anon": True})
    assert Predictor(run, {}).labels == Predictor(run).labels


def test_a_worker_that_predicts_for_many_runs_keeps_one_loaded_not_every_run_it_served(tmp_path, monkeypatch):
    """A long-lived worker kept each run it predicted for (one per folder), past the room the
    plan gives it, until Dask paused it and it ran nothing more. Outside a worker's known
    limit the room is one run's."""
    import lancetnic_flow.runs.predict as predict

    monkeypatch.setattr(predict, "_PREDICTORS", predict.HeldRuns())
    runs = [linear_run(tmp_path / f"run{i}") for i in range(3)]
    first = predict.predictor(runs[0], {}, "a")
    assert predict.predictor(runs[0], {}, "a") is first   # the same run: reused, not loaded again
    for run in runs[1:]:
        predict.predictor(run, {}, "a")
    assert list(predict._PREDICTORS) == [(runs[2], "a")]
    assert predict.predictor(runs[0], {}, "a") is not first   # loaded again, in the last one's place
    assert list(predict._PREDICTORS) == [(runs[0], "a")]


def test_a_worker_serving_two_runs_in_turn_loads_each_once_when_both_fit_its_room(tmp_path, monkeypatch):
    """Two commands for two runs sharing a worker made it load a run on nearly every task
    (A, B, A, B ...), each reading its whole model.safetensors again."""
    import lancetnic_flow.runs.predict as predict

    monkeypatch.setattr(predict, "_PREDICTORS", predict.HeldRuns())
    monkeypatch.setattr(predict, "worker_memory", lambda: (4 << 30, 0.8))
    loads = []
    real = predict.load_run
    monkeypatch.setattr(predict, "load_run", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    a, b = linear_run(tmp_path / "a"), linear_run(tmp_path / "b")
    for _ in range(3):
        predict.predictor(a, {}, "s")
        predict.predictor(b, {}, "s")
    assert loads == [a, b]


def test_a_worker_keeps_no_more_loaded_runs_than_its_room_however_many_it_served(tmp_path, monkeypatch):
    import lancetnic_flow.runs.predict as predict
    from lancetnic_flow.runs.held_runs import room_for_runs, run_bytes

    runs = [linear_run(tmp_path / f"run{i}") for i in range(6)]
    size = run_bytes(runs[0])
    limit = int(size * 2.5 / (0.8 - 0.6))   # the band between target and pause: two and a half runs
    monkeypatch.setattr(predict, "_PREDICTORS", predict.HeldRuns())
    monkeypatch.setattr(predict, "worker_memory", lambda: (limit, 0.8))
    for run in runs:
        predict.predictor(run, {}, "s")
        assert predict._PREDICTORS.bytes <= room_for_runs(size, (limit, 0.8))
    assert list(predict._PREDICTORS) == [(r, "s") for r in runs[-3:]]


def test_a_run_folder_written_again_is_loaded_again_and_its_old_copy_dropped(tmp_path, monkeypatch):
    import lancetnic_flow.runs.predict as predict

    monkeypatch.setattr(predict, "_PREDICTORS", predict.HeldRuns())
    monkeypatch.setattr(predict, "worker_memory", lambda: (4 << 30, 0.8))
    run = linear_run(tmp_path / "run")
    first = predict.predictor(run, {}, "old")
    assert predict.predictor(run, {}, "new") is not first
    assert list(predict._PREDICTORS) == [(run, "new")]


def test_predict_files_refuses_an_existing_output_unless_force_and_never_replaces_an_input(tmp_path):
    # the Python API replaced an earlier result without a word, where `predict --output` refuses it
    from types import SimpleNamespace

    from lancetnic_flow.runs.predict import predict_files

    data = tmp_path / "data.csv"
    data.write_text("text\nhello there\n")
    old = tmp_path / "old.csv"
    old.write_text("an earlier result\n")
    plan = SimpleNamespace(files=[SimpleNamespace(url=f"file://{data}")], partitions=[])
    kw = dict(storage_options={}, run_options={}, chunk_bytes=1 << 20, window=2)
    with pytest.raises(UserError, match="already exists") as e:   # before any task: no client needed
        predict_files(None, str(tmp_path / "run"), plan, Columns(text=("text",)), str(old), **kw)
    assert "force=True" in e.value.hint and "--force" not in str(e.value)
    with pytest.raises(UserError, match="is the input") as e:   # force replaces a result, never what is read
        predict_files(None, str(tmp_path / "run"), plan, Columns(text=("text",)), str(data), force=True, **kw)
    assert "--output" not in str(e.value) and str(e.value).startswith("output ")   # the keyword a caller typed
    with pytest.raises(UserError, match="no rows to predict"):   # force=True: past the refusal, to the rows
        predict_files(None, str(tmp_path / "run"), plan, Columns(text=("text",)), str(old), force=True, **kw)
    assert old.read_text() == "an earlier result\n" and data.read_text() == "text\nhello there\n"
