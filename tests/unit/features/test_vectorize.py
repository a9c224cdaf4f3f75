"""features/vectorize.py: FittedFeatures' rows equal scikit-learn's
(TfidfVectorizer over a fitted vocabulary; HashingVectorizer-style counts
l2-normalised), ids keep token order with 0 padding and 1 unknown, labels map
to class ids (-1 unseen), targets and numbers are standardised, raw shards
finish into transform's rows, and the features round trip through JSON."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from lancetnic_flow.features import vectorize
from lancetnic_flow.features.vectorize import PAD, UNK, FittedFeatures, text_options

TEXTS = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "dogs and cats", "", "mat mat cat"]


def dense(block, dim) -> np.ndarray:
    out = np.zeros((len(block), dim), np.float32)
    for i in range(len(block)):
        s, e = block.offsets[i], block.offsets[i + 1]
        out[i, block.indices[s:e]] = block.values[s:e]
    return out


@pytest.mark.parametrize("sublinear", [False, True])
@pytest.mark.parametrize("ngrams", [1, 2])
def test_tfidf_rows_equal_scikit_learns_tfidf_vectorizer(ngrams, sublinear):
    tv = TfidfVectorizer(ngram_range=(1, ngrams), sublinear_tf=sublinear).fit(TEXTS)
    vocab = sorted(tv.vocabulary_)
    f = FittedFeatures(mode="tfidf", ngrams=ngrams, sublinear_tf=sublinear, vocabulary=pa.array(vocab),
                       idf=tv.idf_[[tv.vocabulary_[t] for t in vocab]].astype(np.float32))
    got = dense(f.transform_texts(pa.array(TEXTS)), f.dim)
    want = tv.transform(TEXTS).toarray()[:, [tv.vocabulary_[t] for t in vocab]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_hashing_rows_are_l2_normalised_bucket_counts():
    f = FittedFeatures(mode="hashing", ngrams=1, buckets=16)
    counts = f.counts(pa.array(["cat cat dog", ""]))
    block = f.transform_texts(pa.array(["cat cat dog", ""]))
    assert sorted(counts.values[counts.offsets[0]:counts.offsets[1]].tolist()) == [1.0, 2.0]
    row = block.values[block.offsets[0]:block.offsets[1]]
    np.testing.assert_allclose(np.sort(row), np.array([1, 2]) / np.sqrt(5), rtol=1e-6)
    assert block.offsets[2] == block.offsets[1] and f.dim == 16


def test_ids_keep_token_order_map_unknown_to_1_and_truncate_at_max_len():
    f = FittedFeatures(mode="ids", vocabulary=pa.array(["cat", "dog", "sat"]), max_len=3)
    block = f.transform_texts(pa.array(["dog sat zebra cat", "cat", ""]))
    assert block.values is None
    assert block.offsets.tolist() == [0, 3, 4, 4]
    assert block.indices.tolist() == [3, 4, UNK, 2]   # vocabulary ids start after PAD and UNK
    assert f.dim == 5 and PAD == 0


def test_transform_names_the_rows_a_sequence_model_reads_cut_at_max_len_piece_by_piece(monkeypatch):
    from lancetnic_flow.features import vectorize

    monkeypatch.setattr(vectorize, "PIECE_ROWS", 2)   # three pieces: the masks join in row order
    f = FittedFeatures(mode="ids", vocabulary=pa.array(["cat", "dog", "sat"]), max_len=3)
    cut: list = []
    block = f.transform(pa.table({"text": ["dog sat zebra cat", "cat", "", "ab cd ef gh", "cat dog sat"]}), cut)
    assert len(cut) == 3 and vectorize.cut_rows(cut, len(block)).tolist() == [True, False, False, True, False]
    bag = FittedFeatures(mode="hashing", buckets=8)
    cut = []
    bag.transform(pa.table({"text": ["a b c d e f g h"]}), cut)   # a bag reads every term: nothing cut
    assert vectorize.cut_rows(cut, 1).tolist() == [False]


def test_transform_maps_labels_to_class_ids_and_standardises_targets_and_numbers():
    f = FittedFeatures(mode="hashing", buckets=8, labels=["pos", "neg"], target=(10.0, 2.0),
                       numeric={"n": (1.0, 0.5), "missing": (3.0, 1.0)})
    table = pa.table({"text": ["a b", "c d", "e f"], "label": ["neg", "pos", "new"], "target": [12.0, 8.0, 10.0],
                      "n": [1.5, None, 0.0]})
    block = f.transform(table)
    assert block.labels.tolist() == [1, 0, -1]
    np.testing.assert_allclose(block.targets, [1.0, -1.0, 0.0])
    np.testing.assert_allclose(block.numeric, [[1.0, 0.0], [0.0, 0.0], [-2.0, 0.0]])


def test_a_raw_block_finished_equals_the_transform_and_drops_unseen_labels():
    f = FittedFeatures(mode="hashing", ngrams=2, buckets=64, labels=["b", "a"], target=(1.0, 2.0),
                       idf=np.linspace(1, 2, 64).astype(np.float32), sublinear_tf=True)
    table = pa.table({"text": ["x y x", "y z", "z z z", "w"], "label": ["a", "b", "zz", "a"],
                      "target": [1.0, 3.0, 5.0, -1.0]})
    got = f.finish(f.raw(table))
    want = f.transform(table).take(np.array([0, 1, 3]))
    assert got.labels.tolist() == want.labels.tolist() == [1, 0, 1]
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
    np.testing.assert_allclose(got.targets, want.targets, rtol=1e-6)


def test_label_sets_become_multi_hot_rows_in_the_run_label_order():
    f = FittedFeatures(mode="hashing", buckets=8, labels=["x", "y"])
    table = pa.table({"text": ["a b", "c d"], "label": pa.array([["y"], ["x", "q"]], pa.list_(pa.string()))})
    assert f.transform(table).labels.tolist() == [[0, 1], [1, 0]]
    assert f.finish(f.raw(table)).labels.tolist() == [[0, 1], [1, 0]]


def test_many_rows_are_transformed_piece_by_piece_to_the_same_rows(monkeypatch):
    f = FittedFeatures(mode="hashing", ngrams=2, buckets=32)
    texts = pa.array([f"w{i % 7} w{i % 5} w{i % 3}" for i in range(50)])
    whole = f.transform_texts(texts)
    monkeypatch.setattr(vectorize, "PIECE_ROWS", 7)
    pieces = f.transform_texts(texts)
    np.testing.assert_array_equal(pieces.offsets, whole.offsets)
    np.testing.assert_array_equal(pieces.indices, whole.indices)


def test_fitted_features_survive_a_json_round_trip():
    f = FittedFeatures(mode="tfidf", ngrams=2, vocabulary=pa.array(["a", "b"]), idf=np.array([1.5, 2.0], np.float32),
                       labels=["x"], label_counts=[3], target=(1.0, 2.0), numeric={"n": (0.0, 1.0)}, docs=3,
                       stop_words=["the"], ngram_min=2)
    back = FittedFeatures.from_json(f.to_json())
    assert back.vocabulary.equals(f.vocabulary) and back.idf.dtype == np.float32
    np.testing.assert_array_equal(back.idf, f.idf)
    for name in ("mode", "ngrams", "labels", "label_counts", "target", "numeric", "docs", "stop_words", "ngram_min"):
        assert getattr(back, name) == getattr(f, name), name


def test_features_json_from_before_format_2_reads_as_version_1_and_default_tokenisation():
    old = '{"mode": "hashing", "ngrams": 1, "lowercase": true, "sublinear_tf": false, "buckets": 16, ' \
          '"max_len": 256, "labels": [], "label_counts": [], "target": null, "numeric": {}, "docs": 0, ' \
          '"vocabulary": null, "idf": [1.0, 2.0]}'
    f = FittedFeatures.from_json(old)
    assert f.version == 1 and f.analyzer == "word" and f.stop_words is None
    assert f.idf.tolist() == [1.0, 2.0]
    # format 1's hashing buckets come from legacy_hashes: the same counts, other buckets
    assert f.counts(pa.array(["cat dog"])).values.sum() == 2


def test_text_options_turn_the_english_stop_words_into_their_list():
    class Options:
        ngrams, lowercase, stop_words = 2, True, "english"

    opts = text_options(Options())
    assert "the" in opts["stop_words"] and opts["ngrams"] == 2 and opts["analyzer"] == "word"
    Options.stop_words = ["b", "a", "b"]
    assert text_options(Options())["stop_words"] == ["a", "b"]


def test_a_run_of_an_earlier_feature_format_lower_cases_as_it_did_so_its_terms_still_match():
    # features of format 2 hold "καλοσ" for "ΚΑΛΟΣ": read with str.lower's ς they lost every such term
    def rows(version: int, stop=None) -> list[list[int]]:
        block = FittedFeatures(mode="hashing", buckets=2**20, ngrams=1, version=version, stop_words=stop).counts(
            pa.array(["ΚΑΛΟΣ", "καλος", "καλοσ", "Movie night"]))
        return [sorted(block.indices[block.offsets[i]:block.offsets[i + 1]].tolist()) for i in range(4)]

    new, old = rows(3), rows(2)
    assert new[0] == new[1] != new[2] and old[0] == old[2] != old[1]
    assert len(rows(3, ["Movie"])[3]) == 1 and len(rows(2, ["Movie"])[3]) == 2   # stop words: as each format read them


def test_a_label_set_row_keeps_the_count_and_names_of_its_labels_training_never_had_transformed_or_finished():
    """A label left out of a validation row's set is still counted: per row (``missed``) and,
    for the block, by name with its rows; the counting fit pass's raw shard finishes to the same."""
    f = FittedFeatures(mode="hashing", buckets=8, labels=["x", "y"])
    table = pa.table({"text": ["a b", "c d", "e", "f g"],
                      "label": pa.array([["y"], ["x", "q"], ["q", "r"], ["r"]], pa.list_(pa.string()))})
    for block in (f.transform(table), f.finish(f.raw(table))):
        assert block.labels.tolist() == [[0, 1], [1, 0], [0, 0], [0, 0]]
        assert block.missed.tolist() == [0, 1, 2, 1] and block.missed.dtype == np.int32
        assert block.missed_by_label() == {"q": 2, "r": 2}
    known = pa.table({"text": ["a"], "label": pa.array([["x"]], pa.list_(pa.string()))})
    assert f.transform(known).missed.tolist() == [0] and f.transform(known).missed_by_label() == {}


def test_a_constant_targets_scale_0_standardises_targets_at_scale_1_not_to_nan():
    f = FittedFeatures(mode="hashing", buckets=8, target=(3.0, 0.0))
    block = f.transform(pa.table({"text": ["a b", "c d"], "target": [3.0, 4.5]}))
    np.testing.assert_array_equal(block.targets, [0.0, 1.5])


def test_zero_unseen_and_weigh_unseen_turn_a_hashed_idf_between_before_and_now():
    """zero_unseen: an idf fitted before (smooth idf of df 0 for a bucket no row held) as one fitted
    now (0 there); weigh_unseen: back, for a model that learns rows the idf never counted."""
    from lancetnic_flow.features.vocab import bucket_idf, smooth_idf

    df = np.array([0, 4, 1, 0])
    before = FittedFeatures(mode="hashing", buckets=4, docs=6, idf=smooth_idf(df, 6))
    before.zero_unseen()
    assert before.idf.tobytes() == bucket_idf(df, 6).tobytes()
    before.weigh_unseen(6)
    assert before.idf.tobytes() == smooth_idf(df, 6).tobytes()
    vocabulary = FittedFeatures(mode="tfidf", vocabulary=pa.array(["a"]), idf=np.ones(1, np.float32), docs=0)
    vocabulary.zero_unseen()
    assert vocabulary.idf.tolist() == [1.0]   # a vocabulary holds no unseen term: left as it is
