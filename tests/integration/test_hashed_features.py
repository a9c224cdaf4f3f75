"""The default features: words and word pairs hashed into buckets, weighted by
the buckets' idf, counted once by the fit pass and finished when a shard is
read; the compiled kernels agree with scikit-learn's tokenizer and with the
reference implementations; runs written by earlier versions keep their
meaning."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

from lancetnic_flow.config import ADDED_FIELDS, FeatureConfig, TrainConfig
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.dataflow.manifest import cache_key, entry_key
from lancetnic_flow.dataflow.shards import count_partition, load_shard
from lancetnic_flow.features import kernels
from lancetnic_flow.features.fit import finish_fit
from lancetnic_flow.features.hashing import legacy_hashes, unit_interval
from lancetnic_flow.features.split import validation_mask
from lancetnic_flow.features.tokenize import terms_of, text_buffers, tokenize
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.features.vocab import smooth_idf

TEXTS = [
    "The quick brown fox -- jumps over the lazy dog!! The fox again.",
    "Café crème, naïve résumé; Straße & Ärger über Öl — “quoted” words…",
    "日本語 テキスト と English words, mixed: 日本語 again",
    "Numbers 2024 and 3.14; x y z single letters, snake_case stays, kebab-case splits",
    "Ελληνικά γράμματα και русский текст тоже работают",
    "emoji 🙂 between words 🙂 are not tokens",
    "", "!!! ???", "a b c", "the the the the repeated repeated",
]


def sklearn_tokens(text: str) -> list[str]:
    return re.findall(r"(?u)\b\w\w+\b", text.lower())


def test_the_compiled_tokenizer_finds_scikit_learns_tokens_in_any_script():
    terms = tokenize(pa.array(TEXTS))
    got = [[] for _ in TEXTS]
    for t, r in zip(terms.terms.to_pylist(), terms.rows):
        got[r].append(t)
    assert got == [sklearn_tokens(t) for t in TEXTS]


def test_a_rows_bag_counts_its_words_and_word_pairs_exactly():
    """The kernel's per-row counts equal the counts of the reference terms (words, then adjacent pairs)."""
    texts = pa.array(TEXTS * 3)
    data, offsets = text_buffers(texts)
    big = 2**40   # no two terms share a bucket
    row_offsets, ids, counts, tokens = kernels.bags(data, offsets, kernels.word_table(), 2, 2, big,
                                                    np.zeros(2, np.uint64), np.full(2, -1, np.int64))
    ref = terms_of(texts, 2)
    d, o = text_buffers(ref.terms, lowercase=False)
    keys = (kernels.term_keys(d, o) % np.uint64(big)).astype(np.int64)
    want = {}
    for r, k in zip(ref.rows, keys):
        want[(int(r), int(k))] = want.get((int(r), int(k)), 0) + 1
    rows = np.repeat(np.arange(len(texts)), np.diff(row_offsets))
    have = {(int(r), int(k)): float(c) for r, k, c in zip(rows, ids, counts)}
    assert have == want
    assert tokens == len(tokenize(texts).terms)


def test_hashed_tfidf_values_equal_scikit_learns_tfidf_transformer_on_the_same_counts():
    f = FittedFeatures(mode="hashing", ngrams=2, sublinear_tf=True, buckets=2**12)
    raw = f.counts(pa.array(TEXTS))
    counts = sp.csr_matrix((raw.values, raw.indices, raw.offsets), shape=(len(TEXTS), f.buckets))
    df = np.bincount(raw.indices, minlength=f.buckets)
    f.idf = smooth_idf(df, len(TEXTS))
    ours = f.weigh(raw)
    theirs = TfidfTransformer(sublinear_tf=True).fit_transform(counts)
    mine = sp.csr_matrix((ours.values, ours.indices, ours.offsets), shape=theirs.shape)
    assert abs(mine - theirs).max() < 1e-6
    # and the same rows as transform_texts gives
    again = f.transform_texts(pa.array(TEXTS))
    np.testing.assert_allclose(again.values, ours.values, rtol=1e-6)


def test_word_pair_counts_match_scikit_learns_bigram_count_vectorizer():
    texts = ["new york is new york", "york new", "a new day in new york"]
    f = FittedFeatures(mode="hashing", ngrams=2, buckets=2**40)
    raw = f.counts(pa.array(texts))
    cv = CountVectorizer(ngram_range=(1, 2)).fit(texts)
    m = cv.transform(texts)
    # the multiset of counts per row is the same (the columns differ: hashes against a vocabulary)
    for i in range(len(texts)):
        a = sorted(raw.values[raw.offsets[i]:raw.offsets[i + 1]].tolist())
        b = sorted(m[i].data.tolist())
        assert a == b


def test_the_validation_split_reads_the_whole_text():
    """Templated texts that differ only in the middle no longer land on one side together."""
    texts = pa.array([f"{'header ' * 20} case {i} {'footer ' * 20}" for i in range(4000)])
    share = validation_mask(pa.table({"text": texts}), 0.1).mean()
    assert 0.08 < share < 0.12
    u = unit_interval(pa.array(["same", "same", "other"]))
    assert u[0] == u[1] != u[2]


def test_a_raw_shard_finished_equals_the_transform_of_its_rows(tmp_path):
    """The counting fit pass writes raw counts (labels by name, targets unscaled);
    finished with the fitted features, they are exactly transform's rows."""
    data = tmp_path / "d.csv"
    write_corpus(str(data), 3000, classes=4, seed=5)
    cols = Columns(text=("text",), label="label", target="target")
    fc = FeatureConfig(mode="hashing", buckets=2**14, analyzer="word")
    part = plan_source([str(data)], blocksize=2**30).partitions[0]
    stats = count_partition(part, None, columns=cols, fcfg=fc, shard_dir=str(tmp_path / "shards"),
                            storage_options={}, cache_options={}, chunk_bytes=2**30, val_fraction=0.1)
    features = finish_fit(stats, fc, cols)
    (res,) = stats.results
    assert res.rows_read == 3000 and res.train_rows + res.val_rows == 3000
    table = pacsv.read_csv(data).select(["text", "label", "target"])
    is_val = validation_mask(table, 0.1)
    want = features.transform(table.filter(pa.array(~is_val)))
    train = [s for s in res.shards if s.split == "train"]
    assert len(train) == 1 and train[0].raw
    got = features.finish(load_shard(train[0], {}))
    np.testing.assert_array_equal(got.offsets, want.offsets)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
    np.testing.assert_array_equal(got.labels, want.labels)
    np.testing.assert_allclose(got.targets, want.targets, rtol=1e-6)
    # idf from the training rows' document frequencies
    assert features.idf is not None and len(features.idf) == fc.buckets


def test_hashing_features_written_by_an_earlier_version_keep_their_buckets():
    """features.json without a version (format 1) buckets terms with the old hash, so old runs predict as trained."""
    old = FittedFeatures.from_json('{"mode": "hashing", "ngrams": 1, "lowercase": true, "sublinear_tf": false, '
                                   '"buckets": 1024, "max_len": 256, "labels": ["a", "b"], "label_counts": [1, 1], '
                                   '"target": null, "numeric": {}, "docs": 2, "vocabulary": null, "idf": null}')
    assert old.version == 1
    block = old.transform_texts(pa.array(["fox dog fox"]))
    expected = sorted((legacy_hashes(pa.array(["fox", "dog"])) % np.uint64(1024)).astype(int).tolist())
    assert sorted(block.indices.tolist()) == expected


def test_idf_round_trips_through_features_json_as_base64():
    f = FittedFeatures(mode="hashing", buckets=8, idf=np.arange(8, dtype=np.float32) / 3)
    back = FittedFeatures.from_json(f.to_json())
    np.testing.assert_array_equal(back.idf, f.idf)
    assert back.version == 3


def test_a_configuration_saved_before_new_options_reads_as_it_meant_then():
    """config.json of a run made before --idf and the sparse step: no idf, lazy Adam; its cache key unchanged."""
    cfg = TrainConfig.from_dict({"data": {"train": ["x.csv"]}, "features": {"mode": "hashing", "ngrams": 1},
                                 "training": {"epochs": 3}})
    assert cfg.features.idf is False and cfg.training.sparse_optimizer == "adam"
    assert set(ADDED_FIELDS) == {"features", "training"}
    src = plan_source([str(Path(__file__))], format="text", blocksize=2**20)
    cols = Columns(text=("text",))
    # The fields a configuration had before the added ones (idf, the tokenisation options).
    old = {k: v for k, v in FeatureConfig(mode="hashing", idf=False).__dict__.items() if k not in ADDED_FIELDS["features"]}
    from lancetnic_flow.dataflow.manifest import CACHE_VERSION, LOWER_REVISION
    import dataclasses

    from lancetnic_flow.formats import format_named

    # The text reader's own revisions (a BOM at a line's start stripped) re-key its entries, as any reader's do.
    reader = [("text", format_named("text").revision)] if format_named("text").revision else []
    kept = {**old, "lowercase": False}   # lower-casing's own revision aside (final sigma: below)
    parts = (CACHE_VERSION, src.fingerprint(), None, kept, dataclasses.astuple(cols)[:4], 0.1)   # Columns had 4 fields
    assert entry_key(src, None, {**kept, "idf": False}, cols, 0.1) == (
        cache_key(*parts, reader) if reader else cache_key(*parts))
    # An entry that lower-cased its text before a word's final capital sigma became ς is featurised again.
    assert entry_key(src, None, {**old, "idf": False}, cols, 0.1) == cache_key(
        CACHE_VERSION, src.fingerprint(), None, old, dataclasses.astuple(cols)[:4], 0.1,
        reader + [("lower", LOWER_REVISION)])


@pytest.mark.parametrize("buckets", [2**10, 1000])
def test_bucket_ids_stay_in_range_for_powers_of_two_and_others(buckets):
    f = FittedFeatures(mode="hashing", buckets=buckets)
    block = f.counts(pa.array(TEXTS * 10))
    assert block.indices.min() >= 0 and block.indices.max() < buckets


ANIMALS = ["cat", "dog", "horse", "mouse", "tiger", "zebra", "otter"]
ADJECTIVES = ["happy", "sad", "tall", "small", "quick", "slow", "loud"]
SHAPES = ["the {a} is {b}", "a {b} {a} sleeps", "my {a} looks {b} today", "that {a} was very {b}"]


def _templated_texts() -> list[tuple[str, float]]:
    """Texts of a few shapes × slot words, the target a function of the slots, shuffled."""
    import random

    texts = [(s.format(a=a, b=b), i + 0.5 * j) for s in SHAPES for i, a in enumerate(ANIMALS)
             for j, b in enumerate(ADJECTIVES)]
    random.Random(0).shuffle(texts)
    return texts


def _templated(path: Path, texts: list[tuple[str, float]], rows: int) -> Path:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "target"])
        for k in range(rows):
            w.writerow(texts[k % len(texts)])
    return path


def _train_regressor(tmp_path: Path, data: Path, name: str, cache: str, init_from: Path | None = None) -> Path:
    """ScalpelReg on ``data`` in this process, 2 epochs, seed 0, nothing held out."""
    from lancetnic_flow.config import ClusterConfig, DataConfig, ModelConfig, OutputConfig, TrainingConfig
    from lancetnic_flow.training.orchestrator import train

    cfg = TrainConfig(data=DataConfig(train=[str(data)], target="target", val_fraction=0.0),
                      model=ModelConfig(name="ScalpelReg"), cluster=ClusterConfig(run_on="process"),
                      training=TrainingConfig(epochs=2, seed=0, init_from=str(init_from) if init_from else None),
                      output=OutputConfig(out=str(tmp_path / "runs"), name=name, cache=str(tmp_path / cache),
                                          plots=False))
    return Path(train(cfg).run)


def test_unseen_hashed_buckets_leave_training_byte_for_byte_and_stop_diluting_held_out_rows(tmp_path, monkeypatch):
    """A held-out text's word pairs no training row had weigh 0: training is the same bytes
    (every training bucket has a row), a cache entry and a run fitted before read as fitted
    now, and the held-out texts' predictions, no longer pulled to the mean, score better."""
    from lancetnic_flow import Predictor
    from lancetnic_flow.features import fit as fit_module

    texts = _templated_texts()
    data, held = _templated(tmp_path / "train.csv", texts[:60], 1200), texts[60:]
    with monkeypatch.context() as m:   # as runs were fitted before: every bucket's smooth idf
        m.setattr(fit_module, "bucket_idf", smooth_idf)
        before = _train_regressor(tmp_path, data, "before", "cache")
    after, cached = _train_regressor(tmp_path, data, "after", "fresh"), _train_regressor(tmp_path, data, "cached", "cache")
    assert (before / "model.safetensors").read_bytes() == (after / "model.safetensors").read_bytes()
    assert (cached / "features.json").read_bytes() == (after / "features.json").read_bytes()
    assert (after / "model.safetensors").read_bytes() == (cached / "model.safetensors").read_bytes()

    def r2(run_dir: Path) -> float:
        values = np.array([r["value"] for r in Predictor(str(run_dir)).predict([t for t, _ in held])])
        truth = np.array([v for _, v in held])
        return 1.0 - ((values - truth) ** 2).sum() / ((truth - truth.mean()) ** 2).sum()

    now = r2(after)
    assert r2(before) == now   # a run saved before reads its unseen buckets at 0 too
    with monkeypatch.context() as m:
        m.setattr(FittedFeatures, "zero_unseen", lambda self: None)
        assert r2(before) < now - 0.02


def test_a_run_continued_on_new_words_trains_the_bytes_it_trained_before_unseen_buckets_weighed_0(
        tmp_path, monkeypatch):
    """The new data's words in buckets the old run never held are learned at the idf they
    had before (the largest): a continued run's training rows, so its weights, are unchanged."""
    from lancetnic_flow.features import fit as fit_module

    texts = _templated_texts()
    old_data, new_data = _templated(tmp_path / "a.csv", texts[:60], 600), _templated(tmp_path / "b.csv", texts[60:], 600)
    with monkeypatch.context() as m:
        m.setattr(fit_module, "bucket_idf", smooth_idf)
        m.setattr(FittedFeatures, "zero_unseen", lambda self: None)
        old = _train_regressor(tmp_path, old_data, "old", "cache-old")
        then = _train_regressor(tmp_path, new_data, "then", "cache-old", init_from=old)
    now = _train_regressor(tmp_path, new_data, "now", "cache-now",
                           init_from=_train_regressor(tmp_path, old_data, "old-now", "cache-now"))
    assert (then / "model.safetensors").read_bytes() == (now / "model.safetensors").read_bytes()


def test_a_linear_svm_that_learns_its_validation_rows_saves_the_run_it_saved_before_unseen_buckets_weighed_0(
        tmp_path, monkeypatch, small_corpus):
    """Its twin learns the validation rows, whose words no training row had: they are weighed
    as before (the idf of no row), so it learns them, and the saved run (weights, idf) is the
    same bytes as before; loaded, that idf is kept, its buckets' weights learned at it."""
    from lancetnic_flow.config import ClusterConfig, DataConfig, OutputConfig, TrainingConfig
    from lancetnic_flow.features import fit as fit_module
    from lancetnic_flow.runs.loading import load_run
    from lancetnic_flow.training.orchestrator import train

    def run(name: str) -> Path:
        cfg = TrainConfig(data=DataConfig(train=[str(small_corpus)]), cluster=ClusterConfig(run_on="process"),
                          training=TrainingConfig(epochs=2, seed=0),
                          output=OutputConfig(out=str(tmp_path / "runs"), name=name, cache=str(tmp_path / name),
                                              plots=False))
        return Path(train(cfg).run)

    with monkeypatch.context() as m:
        m.setattr(fit_module, "bucket_idf", smooth_idf)
        before = run("before")
    now = run("now")
    assert json.loads((now / "config.json").read_text())["training"]["learn_val"] is True
    for name in ("model.safetensors", "features.json"):
        assert (before / name).read_bytes() == (now / name).read_bytes(), name
    saved = FittedFeatures.from_json((now / "features.json").read_text())
    assert load_run(str(now)).features.idf.tobytes() == saved.idf.tobytes()
