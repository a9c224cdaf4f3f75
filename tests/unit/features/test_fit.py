"""features/fit.py: a partition's fit statistics count its training rows'
labels, numbers and terms; partials of any partitioning merge and finish
into the same vocabulary, idf, labels (most frequent first) and scalers."""
from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.features.fit import (bucket_frequencies, finish_fit, fit_partition, held_out_partition,
                                         known_labels, table_stats)
from lancetnic_flow.features.hashing import hash_strings
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.features.split import Holdout, validation_mask
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.features.vocab import FitStats, Moments, merge_stats, smooth_idf

COLS = Columns(text=("text",), label="label", target="target")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label", "target"])
        for i in range(300):
            w.writerow([f"word{i % 13} word{i % 7} common row{i}", ["a", "b", "b", "c"][i % 4], i % 10])
    return path


def fit(path, blocksize, fcfg, val_fraction=0.2):
    plan = plan_source([str(path)], blocksize=blocksize)
    parts = [fit_partition(p, COLS, fcfg, {}, blocksize, val_fraction) for p in plan.partitions]
    return plan, merge_stats(parts)


def test_table_stats_count_training_labels_validation_labels_and_numbers():
    table = pa.table({"text": ["x"] * 4, "label": ["a", "b", "a", "c"], "target": [1.0, 3.0, 5.0, 100.0]})
    train = np.array([True, True, True, False])
    s = table_stats(table, train, ())
    assert s.docs == 3 and s.labels == {"a": 2, "b": 1} and s.val_labels == {"c": 1}
    assert s.numeric["target"].mean == 3.0


def test_bucket_frequencies_count_each_training_row_once_per_bucket():
    counts = RowBlock(np.array([0, 2, 2, 3], np.int32), np.array([0, 2, 3, 4], np.int64),
                      np.array([2, 1, 5, 1], np.float32))
    assert bucket_frequencies(counts, np.array([True, True, False]), 4).tolist() == [1, 0, 2, 0]


def test_the_fit_does_not_depend_on_how_the_file_is_partitioned(corpus):
    fcfg = FeatureConfig(mode="tfidf", ngrams=2, min_df=2, analyzer="word")
    one_plan, one = fit(corpus, 2**30, fcfg)
    many_plan, many = fit(corpus, 1_000, fcfg)
    assert len(one_plan.partitions) == 1 and len(many_plan.partitions) > 5
    a, b = finish_fit(one, fcfg, COLS), finish_fit(many, fcfg, COLS)
    assert a.vocabulary.equals(b.vocabulary) and a.labels == b.labels and a.docs == b.docs
    np.testing.assert_array_equal(a.idf, b.idf)
    assert a.target == pytest.approx(b.target)


def test_the_finished_vocabulary_and_idf_are_scikit_learns_on_the_training_rows(corpus):
    fcfg = FeatureConfig(mode="tfidf", ngrams=2, min_df=2, analyzer="word")
    _, stats = fit(corpus, 1_000, fcfg)
    f = finish_fit(stats, fcfg, COLS)
    texts = [r["text"] for r in csv.DictReader(open(corpus))]
    mask = validation_mask(pa.table({"text": pa.array(texts)}), 0.2)
    train = [t for t, v in zip(texts, mask) if not v]
    tv = TfidfVectorizer(ngram_range=(1, 2), min_df=2).fit(train)
    assert f.vocabulary.to_pylist() == sorted(tv.vocabulary_)
    np.testing.assert_allclose(f.idf, tv.idf_[[tv.vocabulary_[t] for t in f.vocabulary.to_pylist()]], rtol=1e-6)
    assert f.docs == len(train)


HASHED_TRAIN = ["the cat sat on the mat", "the dog sat", "cats and dogs", "dogs and cats sat", "the mat"]
HASHED_HELD = ["the cat sat on the sofa", "zebras graze far away", "the dog and the zebra sat", "the mat"]


def hashed_fit(buckets: int = 2**20):
    fcfg = FeatureConfig(mode="hashing", ngrams=2, buckets=buckets, idf=True, sublinear_tf=True, analyzer="word")
    counts = FittedFeatures(mode="hashing", ngrams=2, buckets=buckets).counts(pa.array(HASHED_TRAIN))
    stats = FitStats(docs=len(HASHED_TRAIN),
                     buckets=bucket_frequencies(counts, np.ones(len(HASHED_TRAIN), bool), buckets))
    return finish_fit(stats, fcfg, Columns(text=("text",))), stats


def test_hashed_features_weigh_a_held_out_rows_unseen_terms_0_as_scikit_learns_vocabulary_has_no_column_for_them():
    """A word pair no training row had lands in a bucket of document frequency 0: at the
    largest idf it took a share of the row's l2 norm and shrank every known term's value.
    Now each row's values are TfidfVectorizer's fitted on the training rows, held-out ones too."""
    f, _ = hashed_fit()
    tv = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(HASHED_TRAIN)
    for texts in (HASHED_TRAIN, HASHED_HELD):
        ours, theirs = f.transform_texts(pa.array(texts)), tv.transform(texts)
        for r in range(len(texts)):
            values = ours.values[ours.offsets[r]:ours.offsets[r + 1]]
            np.testing.assert_allclose(sorted(values[values != 0]), sorted(theirs[r].data), rtol=1e-5)
    row = f.transform_texts(pa.array(["zebras graze"]))
    assert len(row.values) and not row.values.any()   # nothing known: an empty row, not a division by 0


def test_hashed_training_rows_weigh_the_same_bytes_as_before_unseen_buckets_weighed_0():
    f, stats = hashed_fit(2**12)
    before = FittedFeatures(**{**f.__dict__, "idf": smooth_idf(stats.buckets, stats.docs)})
    assert (f.idf == 0).any()
    texts = pa.array(HASHED_TRAIN)
    assert f.transform_texts(texts).values.tobytes() == before.transform_texts(texts).values.tobytes()


def test_no_idf_with_a_vocabulary_gives_term_frequencies_alone_as_scikit_learns_use_idf_false(corpus):
    fcfg = FeatureConfig(mode="tfidf", ngrams=2, min_df=2, analyzer="word", idf=False, sublinear_tf=False)
    _, stats = fit(corpus, 1_000, fcfg)
    f = finish_fit(stats, fcfg, COLS)
    assert f.idf is None
    texts = [r["text"] for r in csv.DictReader(open(corpus))][:20]
    tv = TfidfVectorizer(ngram_range=(1, 2), use_idf=False, vocabulary=f.vocabulary.to_pylist())
    want = tv.fit_transform(texts).toarray()
    got = f.transform(pa.table({"text": pa.array(texts)}))
    dense = np.zeros_like(want)
    for r in range(len(texts)):
        a, b = got.offsets[r], got.offsets[r + 1]
        dense[r, got.indices[a:b]] = got.values[a:b]
    np.testing.assert_allclose(dense, want, rtol=1e-5, atol=1e-7)
    assert finish_fit(stats, FeatureConfig(mode="tfidf", min_df=2, analyzer="word"), COLS).idf is not None


def test_labels_are_ranked_most_frequent_first_ties_by_name_and_scalers_come_from_training_rows():
    stats = FitStats(docs=6, labels={"z": 2, "a": 2, "m": 5})
    stats.numeric["target"] = Moments.of(np.array([1.0, 3.0]))
    f = finish_fit(stats, FeatureConfig(mode="hashing", buckets=8, analyzer="word"), Columns(text=("text",), numeric=("n",)))
    assert f.labels == ["m", "a", "z"] and f.label_counts == [5, 2, 2]
    assert f.target == (2.0, 1.0) and f.numeric == {"n": (0.0, 1.0)}
    assert f.idf is None   # hashing without bucket counts: no idf


def test_max_features_defaults_to_100000_and_caps_the_vocabulary(corpus):
    fcfg = FeatureConfig(mode="tfidf", ngrams=1, max_features=5, analyzer="word")
    _, stats = fit(corpus, 2**30, fcfg)
    f = finish_fit(stats, fcfg, COLS)
    assert len(f.vocabulary) == 5 and "common" in f.vocabulary.to_pylist()


def test_the_held_out_pass_records_only_validation_rows_of_the_runs_classes(tmp_path):
    """A validation row of a label training never had is skipped (unknown_label)
    and never learned: the record of learned rows must not name it."""
    path = tmp_path / "val.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([["old one", "a"], ["old two", "b"], ["new one", "z"]])
    (part,) = plan_source([str(path)]).partitions
    cols, held = Columns(text=("text",), label="label"), Holdout(0.0, record=100)
    every = held_out_partition(part, "val", columns=cols, storage_options={}, chunk_bytes=2**20, val_fraction=held)
    known = held_out_partition(part, "val", columns=cols, storage_options={}, chunk_bytes=2**20, val_fraction=held,
                               labels=["a", "b"])
    assert len(every.held_out) == 3
    assert sorted(known.held_out.tolist()) == sorted(hash_strings(pa.array(["old one", "old two"])).tolist())


def test_known_labels_keeps_the_rows_of_a_label_the_run_holds_in_another_spelling():
    """Such a row validates as the run's label, so a model that learns the validation rows learns it."""
    table = pa.table({"text": ["x", "y", "z"], "label": ["1", "2.0", "9"]})
    assert known_labels(table, ["1.0", "2.0"]).tolist() == [True, True, False]


def test_known_labels_keeps_every_row_without_classes_or_of_label_sets():
    table = pa.table({"text": ["x", "y", "z"], "label": ["a", None, "q"]})
    assert known_labels(table, ["a"]).tolist() == [True, False, False]
    assert known_labels(table, None).all()
    assert known_labels(pa.table({"text": ["x"]}), ["a"]).all()   # a regression's rows
    sets = pa.table({"text": ["x", "y"], "label": pa.array([["a"], ["q"]], pa.list_(pa.string()))})
    assert known_labels(sets, ["a"]).all()


def test_the_fitted_event_says_the_features_the_run_trains_with_a_continued_runs_not_the_passs(corpus):
    """A continued run printed the pass's own vocabulary and labels (`features 571 inputs · 3 classes`)
    while it trained its old run's 3,415 inputs and 4 classes; from the cache it printed those."""
    import dataclasses

    from lancetnic_flow.dataflow.inprocess import InProcessClient
    from lancetnic_flow.events import Events
    from lancetnic_flow.features import fit as fit_module

    events, said = Events(), []
    events.subscribe(lambda kind, e: said.append(e) if kind == "fitted" else None)

    def old_runs(fitted):
        return dataclasses.replace(fitted, vocabulary=["w%d" % i for i in range(7)], labels=[*fitted.labels, "x"],
                                   label_counts=[*fitted.label_counts, 0])

    with InProcessClient(threads=1) as client:
        fitted, _ = fit_module.fit_features(client, plan_source([str(corpus)]).partitions, COLS,
                                            FeatureConfig(mode="tfidf", analyzer="word"), storage_options={},
                                            chunk_bytes=1 << 20, val_fraction=0.2, events=events, relabel=old_runs)
    assert fitted.dim == 7 and fitted.labels[-1] == "x"
    assert (said[0]["vocabulary"], said[0]["labels"]) == (7, len(fitted.labels))


def test_a_fit_in_this_process_reports_each_partition_as_it_finishes_not_after_the_merge(corpus, monkeypatch):
    """The in-process pool runs tasks in order without priorities: progress
    counted by tasks queued behind the merge came all at once at the end (the
    dashboard showed "fit 0/N" for the whole pass)."""
    import threading

    from lancetnic_flow.dataflow.inprocess import InProcessClient
    from lancetnic_flow.events import Events
    from lancetnic_flow.features import fit as fit_module

    plan = plan_source([str(corpus)], blocksize=2048)
    total = len(plan.partitions)
    assert total >= 3
    counted, merged = threading.Event(), threading.Event()
    merge = fit_module._merge_fit

    def merge_after_progress(parts):
        counted.wait(timeout=5)   # the merge goes on once every partition was reported (or never was)
        out = merge(parts)
        merged.set()
        return out

    monkeypatch.setattr(fit_module, "_merge_fit", merge_after_progress)
    events, seen = Events(), []

    def listen(kind, e):
        if kind == "progress":
            seen.append((e["done"], merged.is_set()))
            if e["done"] == total:
                counted.set()

    events.subscribe(listen)
    with InProcessClient(threads=1) as client:
        fitted, stats = fit_module.fit_features(client, plan.partitions, COLS, FeatureConfig(mode="tfidf", analyzer="word"),
                                                storage_options={},
                                                chunk_bytes=2048, val_fraction=0.2, events=events)
    assert [d for d, _ in seen] == list(range(1, total + 1))
    assert not any(after for _, after in seen)   # every one reported before the merge ran
    assert stats.rows_read == 300


def test_a_constant_target_keeps_scale_0_so_every_prediction_is_its_value_exactly():
    """A target of one value standardised at scale 1 left the network's few thousandths on every
    prediction (3.005 to 3.025 for 3.0); at scale 0 a prediction is the mean, exactly."""
    stats = FitStats(docs=4)
    stats.numeric["target"] = Moments.of(np.full(4000, 0.1)).merge(Moments.of(np.full(7, 0.1)))
    f = finish_fit(stats, FeatureConfig(mode="hashing", buckets=8, analyzer="word"), Columns(text=("text",)))
    assert f.target == (0.1, 0.0)
