"""runs/explain.py and features/names.py: a prediction's terms and their
contributions, and the bucket names of top_terms.csv.

Runs are built here from known weights (a LinearSVM scored in NumPy, Scalpel
networks with ReLU or identity layers, a sequence model), plus one tiny run
trained in this process on a corpus whose classes each have an obvious word.
Checked: a text's contributions, the rest and the bias sum to the logit (or
value) the predictor computes, for a hashed text whose terms collide in a
bucket too; the terms read from a text are exactly those the transform
counts; the bucket sample is bounded and merges associatively; a sequence
model's explain is a UserError saying it is not available."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.features.names import (PER_BUCKET, bounded, bucket_labels, merge_names, sample_names,
                                           text_terms)
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.runs.linear_scores import LinearScores
from lancetnic_flow.runs.loading import LoadedRun
from lancetnic_flow.runs.predict import Predictor

TEXTS = ["the late goal won the match", "a new phone with a faster chip and a faster screen", "goal goal chip",
         "", "völlig unbekannte Wörter", "x"]
LABELS = ["sports", "tech", "politics"]
TOL = 1e-4


def _sum(doc: dict) -> float:
    return sum(t["contribution"] for t in doc["terms"]) + doc["rest"] + doc["bias"]


def linear_run(buckets: int = 8, seed: int = 0, **features) -> Predictor:
    """A LinearSVM run (hashing, word pairs) with random weights, scored in NumPy: few buckets, so terms collide."""
    rng = np.random.default_rng(seed)
    f = FittedFeatures(mode="hashing", buckets=buckets, ngrams=2, labels=list(LABELS), **features)
    state = {"input.weight": rng.normal(size=(buckets, len(LABELS))).astype(np.float32),
             "input.bias": rng.normal(size=len(LABELS)).astype(np.float32),
             "logit_scale": np.float32(2.5)}
    meta = {"net": "ScalpelNet", "model": "LinearSVM", "task": "classify",
            "kwargs": {"dim": buckets, "classes": len(LABELS), "regress": False, "hidden": 64, "layers": 0,
                       "dropout": 0.2, "numeric": 0, "activation": "relu", "pooling": "weighted", "margin": True}}
    return Predictor(LoadedRun("mem://linear", {"data": {"text": ["text"]}}, f, None, meta, {},
                               linear=LinearScores(state)))


def net_run(layers: int, activation: str, pooling: str = "weighted", regress: bool = False, classes: int = 3,
            numeric: int = 0, mode: str = "hashing") -> Predictor:
    """A Scalpel network in torch with random weights (and random biases: zero ones would hide a bias error)."""
    import torch

    from lancetnic_flow.models.scalpel import ScalpelNet

    torch.manual_seed(layers * 10 + numeric)
    if mode == "hashing":
        f = FittedFeatures(mode="hashing", buckets=64, ngrams=2, labels=LABELS[:classes])
    else:
        vocab = pa.array(sorted({"chip", "faster", "goal", "match", "phone", "the", "won", "late goal"}))
        f = FittedFeatures(mode="tfidf", ngrams=2, vocabulary=vocab, idf=np.linspace(1, 2, len(vocab)).astype(
            np.float32), labels=LABELS[:classes])
    if regress:
        f.target = (10.0, 3.0)
    f.numeric = {f"n{i}": (0.0, 1.0) for i in range(numeric)}
    net = ScalpelNet(f.dim, classes, regress, hidden=8, layers=layers, dropout=0.3, numeric=numeric,
                     activation=activation, pooling=pooling).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    meta = {"net": "ScalpelNet", "model": "custom", "kwargs": net.config}
    data = {"text": ["text"], "numeric": list(f.numeric)}
    return Predictor(LoadedRun("mem://net", {"data": data}, f, net, meta, {}))


def raw_outputs(pred: Predictor, data) -> dict[str, np.ndarray]:
    return pred.outputs(pred.feature_rows(data))


def test_a_linear_runs_contributions_and_bias_sum_to_the_logit_it_predicts():
    pred = linear_run()
    logits = raw_outputs(pred, TEXTS)["logits"]
    out = pred.explain(TEXTS, top=3)
    assert [d["status"] for d in out] == ["ok", "ok", "ok", "empty_text", "ok", "empty_text"]
    for row, doc in enumerate(out):
        if doc["status"] != "ok":
            assert doc["terms"] is None and doc["label"] is None
            continue
        k = LABELS.index(doc["label"])
        assert k == int(np.argmax(logits[row])) and doc["method"] == "exact"
        assert doc["logit"] == pytest.approx(float(logits[row, k]), abs=1e-6)
        assert _sum(doc) == pytest.approx(float(logits[row, k]), abs=TOL)
        assert len(doc["terms"]) <= 3
        sizes = [abs(t["contribution"]) for t in doc["terms"]]
        assert sizes == sorted(sizes, reverse=True)
        for t in doc["terms"]:   # value × weight, the weight the model's (× its logit scale)
            assert t["contribution"] == pytest.approx(t["value"] * t["weight"])
            w = pred.run.linear.weight[t["feature"], k] * pred.run.linear.scale
            assert t["weight"] == pytest.approx(float(w), rel=1e-6)
    # Any label, not only the predicted one: each of its logits decomposes.
    for label in LABELS:
        doc = pred.explain(TEXTS[:1], label=label)[0]
        assert doc["label"] == label
        assert _sum(doc) == pytest.approx(float(logits[0, LABELS.index(label)]), abs=TOL)


def test_terms_of_a_text_that_share_a_bucket_each_carry_their_own_value():
    pred = linear_run(buckets=2)   # 2 buckets: a text's terms collide
    text = "goal goal chip match"
    doc = pred.explain([text], top=100)[0]
    block = pred.feature_rows([text])
    by_bucket: dict[int, list] = {}
    for t in doc["terms"]:
        by_bucket.setdefault(t["feature"], []).append(t)
    assert any(len(ts) > 1 for ts in by_bucket.values())      # a collision happened
    names = {t["term"] for t in doc["terms"]}
    assert {"goal", "chip", "match", "goal goal", "goal chip", "chip match"} <= names
    assert len(names) == len(doc["terms"])                     # each term once, with its own entry
    for i, v in zip(block.indices.tolist(), block.values.tolist()):
        ts = by_bucket[i]
        assert sum(t["value"] for t in ts) == pytest.approx(v, rel=1e-6)   # the bucket's value, split
        counts = {t["term"]: t["count"] for t in ts}
        total = sum(counts.values())
        for t in ts:   # by each term's count in the text: "goal" twice, the rest once
            assert t["value"] == pytest.approx(v * counts[t["term"]] / total, rel=1e-6)
    assert next(t for t in doc["terms"] if t["term"] == "goal")["count"] == 2
    assert doc["rest"] == pytest.approx(0.0, abs=1e-9)
    assert _sum(doc) == pytest.approx(float(raw_outputs(pred, [text])["logits"][0, LABELS.index(doc["label"])]),
                                      abs=TOL)


@pytest.mark.parametrize("layers,activation,pooling,regress,numeric,mode,method", [
    (2, "relu", "weighted", True, 2, "hashing", "local"),       # ScalpelMTSK-like: ReLU, numeric inputs
    (1, "relu", "weighted", False, 0, "tfidf", "local"),        # ScalpelMC over a vocabulary
    (1, "identity", "mean", False, 0, "hashing", "exact"),      # FastTextBag: mean of the rows, linear
    (0, "relu", "weighted", True, 0, "hashing", "exact"),       # no hidden layer, a value head too
])
def test_a_networks_contributions_sum_to_each_of_its_outputs(layers, activation, pooling, regress, numeric, mode,
                                                             method):
    import pandas as pd

    pred = net_run(layers, activation, pooling, regress=regress, numeric=numeric, mode=mode)
    data = pd.DataFrame({"text": TEXTS[:3] + TEXTS[4:5], **{f"n{i}": [0.5, -1.0, 2.0, 0.0] for i in range(numeric)}})
    raw = raw_outputs(pred, data)
    for label in LABELS:
        for row, doc in enumerate(pred.explain(data, top=2, label=label)):
            assert doc["method"] == method
            assert _sum(doc) == pytest.approx(float(raw["logits"][row, LABELS.index(label)]), abs=TOL)
            if numeric:
                every = pred.explain(data.iloc[[row]], top=1000, label=label)[0]["terms"]
                assert {"[numeric] n0", "[numeric] n1"} <= {t["term"] for t in every}
    if mode == "tfidf":   # a vocabulary feature is named by its entry
        vocab = pred.run.features.vocabulary.to_pylist()
        terms = pred.explain(["the late goal"], top=100)[0]["terms"]
        assert {t["term"] for t in terms} == {"the", "goal", "late goal"} and all(vocab[t["feature"]] == t["term"]
                                                                          for t in terms)


def test_a_regressors_value_is_its_terms_and_bias_in_the_targets_units():
    pred = net_run(1, "relu", regress=True, classes=0)
    values = pred.predict_values(TEXTS[:3])
    for v, doc in zip(values, pred.explain(TEXTS[:3])):
        assert "label" not in doc and doc["value"] == pytest.approx(float(v), rel=1e-5)
        assert _sum(doc) == pytest.approx(float(v), abs=1e-3)


def test_a_multitask_run_explains_its_value_too_in_the_targets_units():
    """A multitask run (ScalpelMTSK) predicts a label and a value; explain gave the label's
    decomposition alone. Its value now comes with its own: terms, rest and bias summing to the
    value predict gives, as a regressor's do; a row it cannot predict has no value either."""
    import pandas as pd

    pred = net_run(2, "relu", regress=True, numeric=2)
    data = pd.DataFrame({"text": TEXTS[:3] + [""], "n0": [0.5, -1.0, 2.0, 0.0], "n1": [1.0, 0.0, -2.0, 1.0]})
    rows = pred.predict(data)
    docs = pred.explain(data, top=2)
    for row, doc in zip(rows[:3], docs[:3]):
        assert doc["label"] == row["label"] and doc["value"] == pytest.approx(row["value"], rel=1e-5)
        assert _sum(doc["value_explained"]) == pytest.approx(row["value"], abs=1e-3)
        assert doc["value_explained"]["method"] == "local" and len(doc["value_explained"]["terms"]) == 2
    assert docs[3] == {"status": "empty_text", "label": None, "terms": None, "value": None}
    assert "value_explained" not in net_run(1, "relu", regress=True, classes=0).explain(TEXTS[:1])[0]


def test_a_sequence_model_says_explain_is_not_available():
    import torch

    from lancetnic_flow.models import create_model

    torch.manual_seed(0)
    model, meta = create_model("LancetMC", dim=12, classes=2, regress=False, hidden=8, layers=1, dropout=0.0,
                               embed=8, numeric=0)
    f = FittedFeatures(mode="ids", vocabulary=pa.array([f"w{i}" for i in range(10)]), labels=["a", "b"])
    pred = Predictor(LoadedRun("mem://seq", {"data": {}}, f, model.eval(), meta, {}))
    assert pred.predict(["w1 w2"])[0]["status"] == "ok"      # it predicts ...
    with pytest.raises(UserError) as e:                        # ... and says why it does not explain
        pred.explain(["w1 w2"])
    assert "not available" in e.value.message and "sequence model" in e.value.message
    assert "LinearSVM" in e.value.hint


def test_bad_arguments_are_user_errors():
    pred = linear_run()
    assert pred.explain([]) == []
    with pytest.raises(UserError, match="not one of this run's labels"):
        pred.explain(["goal"], label="weather")
    with pytest.raises(UserError, match="top must be"):
        pred.explain(["goal"], top=0)


def test_a_label_named_in_another_spelling_of_a_value_the_run_holds_is_explained_as_the_runs():
    """``explain --label 1`` of a run whose label is 1.0 (a CSV's), or serve's JSON ``{"label": 1}``."""
    pred = linear_run()
    pred.labels = pred.run.features.labels = ["1.0", "2.0", "True"]
    for given, run in ((1, "1.0"), ("2", "2.0"), (" 2.00 ", "2.0"), ("true", "True"), (True, "True")):
        assert pred.explain(TEXTS[:1], label=given)[0]["label"] == run
    with pytest.raises(UserError, match="not one of this run's labels"):
        pred.explain(TEXTS[:1], label=3)


def test_a_label_explain_cannot_use_is_named_as_each_caller_gives_it():
    """`explain REG_RUN --label x` hinted `leave label out`, the Python API's word, on the command line."""
    with pytest.raises(UserError) as e:
        net_run(1, "relu", regress=True, classes=0).explain(["goal"], label="sports")
    assert (e.value.message, e.value.hint) == ("label: this run is a regression model, it explains its value",
                                               "leave label out")
    assert e.value.cli == ("--label: this run is a regression model, it explains its value", "drop --label")
    with pytest.raises(UserError) as e:
        linear_run().explain(["goal"], label="weather")
    assert e.value.cli[0] == "--label 'weather' is not one of this run's labels"


# ---------------------------------------------------------------- the terms read from a text


@pytest.mark.parametrize("options", [dict(ngrams=1), dict(ngrams=3, ngram_min=2), dict(ngrams=2, stop_words=["the"]),
                                     dict(analyzer="char_wb", ngram_min=2, ngrams=4),
                                     dict(analyzer="char_wb", ngram_min=4, ngrams=5),
                                     dict(analyzer="char", ngram_min=1, ngrams=3), dict(normalize="nfkc")])
def test_the_terms_read_from_a_text_are_those_the_transform_counts(options):
    texts = pa.array(TEXTS + ["Ａ full-width  Ｔｅｘｔ\twith\n\ntabs", None, "one"])
    f = FittedFeatures(mode="hashing", buckets=2**10, **options)
    found = text_terms(f, texts)
    counts = f.counts(texts)
    for r in range(len(texts)):
        ids, n = np.unique(found.ids[found.rows == r], return_counts=True)
        o0, o1 = counts.offsets[r], counts.offsets[r + 1]
        assert np.array_equal(ids, counts.indices[o0:o1]) and np.array_equal(n, counts.values[o0:o1]), r


# ---------------------------------------------------------------- bucket names


def test_the_bucket_sample_is_bounded_per_bucket_and_in_all():
    f = FittedFeatures(mode="hashing", buckets=4)
    texts = pa.array([" ".join(f"w{i}x{j}" for i in range(50)) for j in range(40)])
    names = sample_names(f, texts)
    per = np.bincount(names["bucket"].to_numpy(), minlength=4)
    assert names.num_rows and per.max() <= PER_BUCKET and per.sum() == names.num_rows
    assert bounded(names, most=5).num_rows == 5
    # The rows read are bounded too: 2 rows give only their terms.
    two = sample_names(f, texts, rows=2)
    assert set(two["term"].to_pylist()) <= {f"w{i}x{j}" for i in range(50) for j in range(2)}
    # The kept terms are a bucket's most frequent.
    g = FittedFeatures(mode="hashing", buckets=1)
    top = sample_names(g, pa.array(["aa aa aa bb bb cc dd ee", "aa bb cc"]))
    assert top["term"].to_pylist() == ["aa", "bb", "cc"] and top["count"].to_pylist() == [4, 3, 2]


def test_bucket_samples_merge_by_summing_counts_in_any_order():
    f = FittedFeatures(mode="hashing", buckets=2**12)
    parts = [pa.array([f"goal match {j}{j}", "chip phone", f"vote {j}{j} law"]) for j in range(3)]
    a, b, c = (sample_names(f, p) for p in parts)
    whole = sample_names(f, pa.concat_arrays(parts))
    left, right = merge_names([merge_names([a, b]), c]), merge_names([a, merge_names([b, c])])
    assert left.equals(right) and left.equals(whole)
    assert dict(zip(left["term"].to_pylist(), left["count"].to_pylist()))["goal"] == 3
    assert merge_names([None, None]) is None and merge_names([None, a]).equals(a)
    # The fit pass's partials merge their names with the rest of their statistics.
    from lancetnic_flow.features.vocab import FitStats, merge_stats

    merged = merge_stats([FitStats(names=a), FitStats(), FitStats(names=b), FitStats(names=c)])
    assert merged.names.equals(whole) and merge_stats([FitStats()]).names is None
    # Past the bounds the merge stays bounded.
    tight = bounded(merge_names([a, b, c]), per_bucket=1, most=4)
    assert tight.num_rows == 4


def test_a_bucket_is_named_by_its_sampled_terms_or_by_its_number():
    names = bounded(pa.table({"bucket": pa.array([3, 3, 7], pa.int64()), "term": ["goal", "match", "chip"],
                              "count": pa.array([5, 2, 1], pa.int64())}))
    assert bucket_labels(names, [3, 7, 9]) == ["goal | match", "chip", "#9"]
    assert bucket_labels(None, [1]) == ["#1"]


# ---------------------------------------------------------------- a trained run


def _separable(path: Path, rows: int = 240) -> None:
    rng = np.random.default_rng(0)
    filler = [f"filler{i}" for i in range(30)]
    words = {"sports": "goal", "tech": "chip", "politics": "vote"}
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        for i in range(rows):
            label = LABELS[i % 3]
            text = list(rng.choice(filler, 6)) + [words[label]]
            rng.shuffle(text)
            w.writerow([" ".join(text), label])


@pytest.fixture(scope="module")
def separable_run(tmp_path_factory) -> str:
    from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig, TrainingConfig
    from lancetnic_flow.training.orchestrator import train

    tmp = tmp_path_factory.mktemp("separable")
    _separable(tmp / "c.csv")
    cfg = TrainConfig(data=DataConfig(train=[str(tmp / "c.csv")]), features=FeatureConfig(buckets=2**12),
                      model=ModelConfig(), training=TrainingConfig(epochs=3, seed=0),
                      output=OutputConfig(out=str(tmp / "runs"), name="sep", cache=str(tmp / "cache"), plots=False))
    return str(train(cfg).run)


def test_the_top_term_of_a_separable_corpus_is_its_obvious_word(separable_run):
    pred = Predictor(separable_run)
    assert pred.run.linear is not None   # the default model, LinearSVM
    for text, label, word in [("filler1 goal filler2", "sports", "goal"), ("chip filler3 filler4", "tech", "chip"),
                              ("filler5 filler6 vote", "politics", "vote")]:
        doc = pred.explain([text])[0]
        assert doc["label"] == label and doc["terms"][0]["term"] == word, doc
        assert doc["terms"][0]["contribution"] > 0
    with open(Path(separable_run) / "top_terms.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert set(rows[0]) == {"class", "rank", "terms", "weight", "feature"}
    first = {r["class"]: r["terms"] for r in rows if r["rank"] == "1"}
    assert first == {"sports": "goal", "tech": "chip", "politics": "vote"}
    assert not (Path(separable_run) / "top_terms.png").exists()   # plots=False: the table alone


@pytest.mark.parametrize("seed", range(6))
def test_the_running_top_rows_are_each_columns_heaviest_in_any_chunking_ties_to_the_lower_id(seed):
    from lancetnic_flow.runs.explain import keep_top_rows

    rng = np.random.default_rng(seed)
    rows, cols, k = int(rng.integers(1, 120)), int(rng.integers(1, 5)), int(rng.integers(1, 25))
    # Few distinct weights: ties at the k-th place in most columns.
    w = rng.integers(-3, 4, (rows, cols)).astype(np.float64) if seed % 2 else rng.normal(size=(rows, cols))
    chunk = int(rng.integers(1, 40))
    best_w, best_i = np.full((min(k, rows), cols), -np.inf), np.full((min(k, rows), cols), -1, np.int64)
    for start in range(0, rows, chunk):
        keep_top_rows(np.ascontiguousarray(w[start:start + chunk]), start, best_w, best_i)
    for j in range(cols):
        kept = sorted(zip(-best_w[:, j], best_i[:, j]))
        want = sorted(zip(-w[:, j], range(rows)))[:k]
        assert [int(i) for _, i in kept] == [i for _, i in want] and [-x for x, _ in kept] == [-x for x, _ in want]


def test_top_terms_name_the_top_rows_they_are_given_and_compute_them_otherwise():
    # A --ddp run's rank 0 finds the top rows on the weights it sends; the trainer only names them.
    from lancetnic_flow.runs.explain import Decomposition, top_rows, top_terms

    rng = np.random.default_rng(3)
    meta = {"net": "ScalpelNet", "kwargs": {"dim": 16, "classes": 3, "regress": False, "layers": 0,
                                            "margin": True}}
    state = {"input.weight": rng.normal(size=(16, 3)).astype(np.float32),
             "input.bias": np.zeros(3, np.float32), "logit_scale": np.float32(2.0)}
    dec = Decomposition(meta, state)
    f = FittedFeatures(mode="hashing", buckets=16, ngrams=1, labels=list(LABELS))
    best_w, best_i = top_rows(dec, per_class=4)
    assert best_w.shape == best_i.shape == (4, 3)
    for j in range(3):   # each class's four largest weights (× the logit scale), ids ascending on ties
        assert sorted(best_w[:, j], reverse=True) == pytest.approx(sorted(state["input.weight"][:, j] * 2.0)[::-1][:4])
    computed = top_terms(dec, f, per_class=4)
    assert top_terms(dec, f, per_class=4, top=(best_w, best_i)) == computed
    given = top_terms(dec, f, per_class=4, top=(best_w[:, ::-1].copy(), best_i[:, ::-1].copy()))
    assert [r["feature"] for r in given if r["class"] == LABELS[0]] == \
        [r["feature"] for r in computed if r["class"] == LABELS[2]]


def test_a_multilabel_runs_explanation_is_of_a_label_it_predicts_and_names_the_set_predict_gives():
    # it explained the most probable label, which a multilabel run need not predict (below its own
    # threshold) while it predicts another: explain said 'sports' where predict said ['tech']
    pred = linear_run()
    pred.run.meta["task"] = "multilabel"
    pred = Predictor(pred.run)
    texts = [t for t in TEXTS if t]
    proba = pred.predict_proba(texts)
    top = [LABELS[int(np.argmax(p))] for p in proba if not np.isnan(p).any()]
    pred.thresholds = np.array([0.999 if label == top[0] else 0.0 for label in LABELS])
    for doc, said in zip(pred.explain(texts), pred.predict(texts)):
        if said["status"] != "ok":
            continue
        assert doc["labels"] == said["labels"] and doc["label"] == said["labels"][0] != top[0]
        assert _sum(doc) == pytest.approx(doc["logit"], abs=TOL)
    pred.thresholds = np.ones(len(LABELS))   # none predicted: the most probable, and no label in the set
    doc = pred.explain(texts[:1])[0]
    assert doc["labels"] == [] and doc["label"] == top[0]
    assert pred.explain(texts[:1], label="politics")[0]["labels"] == []


def test_explain_and_predict_refuse_a_top_the_command_line_refuses_and_take_numpys_integers():
    pred = linear_run()
    for bad in (2.7, "x", 0):
        with pytest.raises(UserError, match="top must be a whole number"):
            pred.explain(TEXTS[:1], top=bad)
        with pytest.raises(UserError, match="top_k must be a whole number"):
            pred.predict(TEXTS[:1], top_k=bad)
    assert len(pred.explain(TEXTS[:1], top=np.int64(2))[0]["terms"]) == 2
    assert len(pred.predict(TEXTS[:1], top_k=np.int64(2))[0]["top_labels"]) == 2


@pytest.mark.parametrize("classes", [0, 3])
def test_the_value_explained_is_the_value_predict_gives_to_its_last_digit_around_a_large_mean(classes):
    """A target of 1e6 plus small noise: explain's value was the float32 output scaled in
    float32, 1000000.0 for every text where predict gives 1000000.0026, 999999.9979, ..."""
    pred = net_run(1, "relu", regress=True, classes=classes)
    pred.run.features.target = (1e6, 0.01)
    values = pred.predict_values(TEXTS[:3])
    docs = pred.explain(TEXTS[:3])
    assert [d["value"] for d in docs] == values.tolist()
    assert len(set(values.tolist())) == 3
