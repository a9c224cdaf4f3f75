"""Features: TF-IDF equals scikit-learn, pruning equals scikit-learn, hashing is
stable across processes, ids keep order; and the fit pass does not depend on
how the corpus was partitioned."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.features.fit import finish_fit, fit_features
from lancetnic_flow.features.hashing import hash_strings, unit_interval
from lancetnic_flow.features.split import validation_mask
from lancetnic_flow.features.tokenize import terms_of
from lancetnic_flow.features.vectorize import PAD, UNK, FittedFeatures
from lancetnic_flow.features.vocab import FitStats, document_frequencies

from helpers import transform_in_worker, worker_hashes

CORPUS = [
    "The quick brown fox -- jumps over the lazy dog!!",
    "Don't panic: the fox, the dog, and the cat... all jump.",
    "Café crème, naïve résumé; Straße & Ärger über Öl.",
    "日本語 テキスト と English words, mixed: 日本語 again",
    "Numbers 2024 and 3.14 count as tokens; x y z single letters do not.",
    "snake_case_words stay whole, kebab-case-words split apart",
    "Ελληνικά γράμματα και русский текст тоже работают",
    "the the the the repeated repeated words for tf",
    "   leading and trailing spaces   ",
    "URL https://example.com/path?q=1&r=two and e-mail me@example.org",
    "emoji 🙂 between words 🙂 should not be tokens",
    "fox dog cat bird fox dog cat fox dog fox",
]
COLUMNS = Columns(text=("text",), label="label")


def fitted_on(texts: list[str], **kw) -> FittedFeatures:
    """The fit pass on one in-memory 'partition' (no cluster)."""
    # scikit-learn's TfidfVectorizer defaults: words only, raw tf.
    fcfg = FeatureConfig(**{"mode": "tfidf", "ngrams": 1, "sublinear_tf": False, **kw})
    terms = terms_of(pa.array(texts), 1 if fcfg.mode == "ids" else fcfg.ngrams, lowercase=fcfg.lowercase)
    stats = FitStats(docs=len(texts), terms=document_frequencies(terms))
    return finish_fit(stats, fcfg, Columns(text=("text",)))


def as_csr(block, dim: int) -> sp.csr_matrix:
    return sp.csr_matrix((block.values, block.indices, block.offsets), shape=(len(block), dim))


def assert_same_matrix(ours: sp.csr_matrix, theirs: sp.csr_matrix) -> None:
    assert ours.shape == theirs.shape
    diff = abs(ours.astype(np.float64) - theirs.astype(np.float64))
    assert (diff.max() if diff.nnz else 0.0) <= 1e-6


# ---------------------------------------------------------------- TF-IDF vs scikit-learn


@pytest.mark.parametrize("ngrams,sublinear", [(1, False), (2, False), (1, True), (2, True)])
def test_tfidf_rows_equal_sklearn_tfidfvectorizer(ngrams, sublinear):
    f = fitted_on(CORPUS, ngrams=ngrams, sublinear_tf=sublinear)
    sk = TfidfVectorizer(ngram_range=(1, ngrams), sublinear_tf=sublinear, dtype=np.float64)
    theirs = sk.fit_transform(CORPUS)
    vocab = sorted(sk.vocabulary_, key=sk.vocabulary_.get)
    assert f.vocabulary.to_pylist() == vocab
    np.testing.assert_allclose(f.idf, sk.idf_, rtol=1e-6)
    ours = as_csr(f.transform_texts(pa.array(CORPUS)), f.dim)
    assert_same_matrix(ours, theirs)
    # And on texts the fit never saw (out-of-vocabulary terms are dropped, rows renormalised).
    unseen = ["A new fox appears, unseen words everywhere", "", "zz", "dog dog cat"]
    assert_same_matrix(as_csr(f.transform_texts(pa.array(unseen)), f.dim), sk.transform(unseen))


@pytest.mark.parametrize("kw", [
    {"min_df": 2},
    {"max_df": 0.25},
    {"min_df": 2, "max_df": 0.5},
    {"max_df": 3},
])
def test_min_df_max_df_pruning_gives_sklearns_vocabulary(kw):
    f = fitted_on(CORPUS, **kw)
    sk = TfidfVectorizer(**kw).fit(CORPUS)
    assert f.vocabulary.to_pylist() == sorted(sk.vocabulary_)
    np.testing.assert_allclose(f.idf, sk.idf_, rtol=1e-6)


def test_max_features_keeps_sklearns_vocabulary():
    # Document frequency and corpus term frequency rank the same here and the cut has no tie.
    texts = ["alpha beta gamma delta", "alpha beta gamma", "alpha beta epsilon", "alpha zeta",
             "alpha beta gamma eta", "theta"]
    f = fitted_on(texts, max_features=3)
    sk = TfidfVectorizer(max_features=3).fit(texts)
    assert f.vocabulary.to_pylist() == sorted(sk.vocabulary_) == ["alpha", "beta", "gamma"]
    np.testing.assert_allclose(f.idf, sk.idf_, rtol=1e-6)


def test_max_features_ranks_terms_by_corpus_frequency_like_sklearn():
    # scikit-learn ranks by total term count over the corpus ("rare" occurs 5 times in one
    # document, "common" once in each of 3 documents): it keeps "rare".
    texts = ["rare rare rare rare rare common", "common other", "common other"]
    sk = TfidfVectorizer(max_features=1).fit(texts)
    assert sorted(sk.vocabulary_) == ["rare"]
    f = fitted_on(texts, max_features=1)
    assert f.vocabulary.to_pylist() == ["rare"]


def _prune_by_sorting_every_term(terms: pa.Table, max_features: int) -> list[str]:
    """The cut as first written: sort all terms by (count descending, term), keep the first."""
    idx = pa.compute.sort_indices(terms, sort_keys=[("tf", "descending"), ("term", "ascending")])
    return sorted(terms.take(idx[:max_features])["term"].to_pylist())


@pytest.mark.parametrize("seed,n,k,spread", [(0, 500, 50, 3), (1, 2000, 1999, 2), (2, 300, 1, 1),
                                             (3, 1000, 400, 1000), (4, 64, 63, 1)])
def test_max_features_cut_keeps_exactly_the_terms_a_full_sort_keeps_ties_broken_by_term(seed, n, k, spread):
    # Counts drawn from a small range make large ties at the cut (spread 1: every count equal).
    rng = np.random.default_rng(seed)
    words = sorted({"".join(rng.choice(list("abcdé z"), rng.integers(1, 8))) for _ in range(3 * n)})[:n]
    tf = rng.integers(1, spread + 1, len(words))
    terms = pa.table({"term": pa.chunked_array([words[:len(words) // 2], words[len(words) // 2:]], pa.string()),
                      "df": pa.array(tf), "tf": pa.array(tf)})
    from lancetnic_flow.features.vocab import prune
    kept, df = prune(terms, docs=10_000, max_features=k)
    assert kept.to_pylist() == _prune_by_sorting_every_term(terms, k)
    assert len(kept) == min(k, len(words)) and len(df) == len(kept)


def test_merged_statistics_sum_each_terms_counts_over_partials_in_any_grouping():
    rng = np.random.default_rng(5)
    words = [f"w{i} x" if i % 3 else f"w{i}" for i in range(400)]
    partials, want_df, want_tf = [], {}, {}
    for _ in range(6):
        chosen = sorted(set(rng.choice(words, 150).tolist()))
        df = rng.integers(1, 9, len(chosen))
        tf = df + rng.integers(0, 5, len(chosen))
        for w, d, t in zip(chosen, df, tf):
            want_df[w] = want_df.get(w, 0) + int(d)
            want_tf[w] = want_tf.get(w, 0) + int(t)
        partials.append(FitStats(docs=10, terms=pa.table({"term": pa.array(chosen, pa.string()),
                                                          "df": pa.array(df), "tf": pa.array(tf)})))
    from lancetnic_flow.features.vocab import merge_stats
    for merged in (merge_stats(partials),
                   merge_stats([merge_stats(partials[:2]), merge_stats(partials[2:5]), partials[5]])):
        got = merged.terms.to_pydict()
        assert dict(zip(got["term"], got["df"])) == want_df
        assert dict(zip(got["term"], got["tf"])) == want_tf
        assert len(got["term"]) == len(set(got["term"])) and merged.docs == 60
        assert merged.terms.schema.field("df").type == pa.int64()


def _sorted_frequencies(terms) -> dict:
    """Document frequencies the slow, obvious way: distinct (row, term) pairs."""
    pairs = {(r, t) for r, t in zip(terms.rows.tolist(), terms.terms.to_pylist())}
    out: dict = {}
    for _, t in pairs:
        out[t] = out.get(t, 0) + 1
    return out


@pytest.mark.parametrize("ngrams", [1, 2, 3])
def test_document_frequencies_count_each_term_once_per_row_like_distinct_pairs(ngrams):
    rng = np.random.default_rng(ngrams)
    words = ["w%d" % i for i in range(40)]
    texts = [" ".join(rng.choice(words, rng.integers(0, 30))) for _ in range(300)] + CORPUS
    terms = terms_of(pa.array(texts), ngrams)
    got = document_frequencies(terms).to_pydict()
    assert dict(zip(got["term"], got["df"])) == _sorted_frequencies(terms)
    # Rows out of order for a term (not what terms_of makes) take the sorting path, same counts.
    order = rng.permutation(len(terms.terms))
    shuffled = type(terms)(terms=terms.terms.take(pa.array(order)), rows=terms.rows[order], n_rows=terms.n_rows)
    got = document_frequencies(shuffled).to_pydict()
    assert dict(zip(got["term"], got["df"])) == _sorted_frequencies(terms)


def _sklearn_counts(texts: list[str], low: int, high: int, stop) -> tuple[dict, dict]:
    """scikit-learn's CountVectorizer: each term's document frequency and corpus count."""
    from sklearn.feature_extraction.text import CountVectorizer

    X = CountVectorizer(ngram_range=(low, high), stop_words=stop)
    m = X.fit_transform(texts)
    names = X.get_feature_names_out()
    df = np.asarray((m > 0).sum(axis=0)).ravel()
    tf = np.asarray(m.sum(axis=0)).ravel()
    return dict(zip(names, df.tolist())), dict(zip(names, tf.tolist()))


@pytest.mark.parametrize("low,high,stop", [(1, 1, None), (1, 2, None), (2, 3, None), (1, 3, "english")])
def test_the_compiled_fit_counter_gives_scikit_learns_document_and_corpus_counts(low, high, stop):
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from lancetnic_flow.features.vocab import term_counts

    rng = np.random.default_rng(high)
    words = ["w%d" % i for i in range(60)] + ["the", "fox", "日本語", "café"]
    # Rows of words seen often, rows where every n-gram is new (long unique words: the
    # string buffer's bound), empty and blank rows, and CORPUS's Unicode and punctuation.
    texts = ([" ".join(rng.choice(words, rng.integers(0, 40))) for _ in range(400)]
             + [" ".join(f"{'long' * 30}{i}x{j}" for j in range(25)) for i in range(20)]
             + ["", "   ", "a b c"] + CORPUS)
    words_stop = sorted(ENGLISH_STOP_WORDS) if stop else None
    table, occurrences = term_counts(pa.array(texts), ngram_min=low, ngrams=high, stop_words=words_stop)
    want_df, want_tf = _sklearn_counts(texts, low, high, stop)
    got = table.to_pydict()
    assert dict(zip(got["term"], got["df"])) == want_df
    assert dict(zip(got["term"], got["tf"])) == want_tf
    assert occurrences == sum(want_tf.values())
    # Sorted by the key the transform looks each term up by.
    keys = np.array(got["key"], np.uint64)
    assert (np.diff(keys.astype(np.float64)) >= 0).all() and len(set(got["key"])) == len(keys)
    from lancetnic_flow.features import kernels
    from lancetnic_flow.features.tokenize import text_buffers

    assert (kernels.term_keys(*text_buffers(table["term"].combine_chunks(), lowercase=False)) == keys).all()
    # The same table the string path (terms → dictionary → counts) makes.
    old = document_frequencies(terms_of(pa.array(texts), high, ngram_min=low, stop_words=words_stop))
    assert old.equals(table)


def test_merging_keyed_partials_equals_counting_the_whole_at_once():
    from lancetnic_flow.features.vocab import merge_stats, term_counts

    rng = np.random.default_rng(7)
    words = ["w%d" % i for i in range(300)]
    texts = [" ".join(rng.choice(words, rng.integers(0, 30))) for _ in range(900)]
    whole, _ = term_counts(pa.array(texts), ngrams=2)
    parts = [FitStats(terms=term_counts(pa.array(texts[i:i + 97]), ngrams=2)[0]) for i in range(0, 900, 97)]
    for merged in (merge_stats(parts), merge_stats([merge_stats(parts[:3]), merge_stats(parts[3:])]),
                   merge_stats(parts[::-1])):
        assert merged.terms.equals(whole)


# ---------------------------------------------------------------- hashing


def test_hashing_gives_the_same_bucket_for_a_term_in_another_process(client):
    terms = ["fox", "dog", "日本語", "café", "a" * 100, "a" * 99 + "b", "", "x y", "the"]
    here = [int(h) for h in hash_strings(pa.array(terms))]
    there = client.submit(worker_hashes, terms, pure=False).result()
    assert here == there
    assert len(set(here)) == len(terms)  # distinct terms, distinct hashes
    # the transform in a worker process puts the same terms in the same buckets
    f = FittedFeatures(mode="hashing", buckets=1024)
    local = f.transform_texts(pa.array(CORPUS))
    remote = client.submit(transform_in_worker, f, CORPUS, pure=False).result()
    np.testing.assert_array_equal(local.indices, remote.indices)
    np.testing.assert_array_equal(local.offsets, remote.offsets)
    np.testing.assert_array_equal(local.values, remote.values)


def test_hashing_rows_are_l2_normalised_term_counts():
    f = FittedFeatures(mode="hashing", buckets=2**18)
    block = f.transform_texts(pa.array(CORPUS + ["", "!!"]))
    m = as_csr(block, f.dim)
    norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
    np.testing.assert_allclose(norms[: len(CORPUS)], 1.0, rtol=1e-5)
    assert norms[-1] == 0 and norms[-2] == 0  # no tokens, empty row
    # "the the the the repeated repeated words for tf": counts 4,2,1,1,1 -> 4/sqrt(23)
    row = m[7].toarray().ravel()
    assert np.isclose(row.max(), 4 / np.sqrt(23), rtol=1e-5)
    assert (block.indices < f.buckets).all() and (block.indices >= 0).all()


def test_hash_strings_depends_on_the_whole_short_string_and_is_stable():
    h = hash_strings(pa.array(["ab", "ba", "abc", "ab"]))
    assert h[0] == h[3] and len({int(x) for x in h[:3]}) == 3
    u = unit_interval(pa.array([f"row {i}" for i in range(5000)]))
    assert ((u >= 0) & (u < 1)).all()
    assert 0.45 < u.mean() < 0.55


# ---------------------------------------------------------------- ids


def test_ids_keep_token_order_map_unknown_to_1_and_truncate_at_max_len():
    f = fitted_on(["alpha beta gamma", "delta"], mode="ids", max_len=4)
    vocab = f.vocabulary.to_pylist()
    assert vocab == ["alpha", "beta", "delta", "gamma"]
    ids = {t: i + 2 for i, t in enumerate(vocab)}
    assert f.dim == len(vocab) + 2 and PAD == 0 and UNK == 1
    block = f.transform_texts(pa.array(["gamma alpha unknownword beta", "Delta, delta!", "",
                                        "alpha beta gamma delta alpha beta"]))
    assert block.values is None
    rows = [block.indices[block.offsets[i]:block.offsets[i + 1]].tolist() for i in range(len(block))]
    assert rows[0] == [ids["gamma"], ids["alpha"], UNK, ids["beta"]]
    assert rows[1] == [ids["delta"], ids["delta"]]
    assert rows[2] == []
    assert rows[3] == [ids["alpha"], ids["beta"], ids["gamma"], ids["delta"]]  # cut at max_len=4


def test_fitted_features_survive_a_json_round_trip():
    f = fitted_on(CORPUS, ngrams=2, sublinear_tf=True)
    f.labels = ["b", "a"]
    g = FittedFeatures.from_json(f.to_json())
    assert g.vocabulary.to_pylist() == f.vocabulary.to_pylist() and g.labels == ["b", "a"]
    a, b = f.transform_texts(pa.array(CORPUS)), g.transform_texts(pa.array(CORPUS))
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.values, b.values)
    json.loads(f.to_json())  # plain JSON


# ---------------------------------------------------------------- partition invariance


def _fit(client, path, blocksize, **kw):
    plan = plan_source([str(path)], blocksize=blocksize)
    fcfg = FeatureConfig(**{"analyzer": "word", **kw})   # as a run decides it for words
    fitted, stats = fit_features(client, plan.partitions, COLUMNS, fcfg, storage_options={},
                                 chunk_bytes=64 * 2**20, val_fraction=0.1)
    return plan, fitted, stats


def _blocksize_for(path, n: int) -> int:
    size = path.stat().st_size
    return -(-size // n)  # ceil: exactly n byte ranges


@pytest.mark.parametrize("kw", [
    {"max_features": 20_000},
    {"ngrams": 2, "max_features": 5_000, "min_df": 2, "max_df": 0.5, "sublinear_tf": True},
])
def test_vocabulary_idf_and_labels_are_the_same_for_1_and_17_partitions(client, corpus4, kw):
    plan1, one, stats1 = _fit(client, corpus4, 2**30, **kw)
    plan17, many, stats17 = _fit(client, corpus4, _blocksize_for(corpus4, 17), **kw)
    assert len(plan1.partitions) == 1
    assert len(plan17.partitions) == 17
    assert one.dim > 1000
    assert one.vocabulary.to_pylist() == many.vocabulary.to_pylist()
    np.testing.assert_array_equal(one.idf, many.idf)
    assert one.labels == many.labels and len(one.labels) == 4
    assert one.docs == many.docs == stats1.docs == stats17.docs
    assert stats1.rows_read == stats17.rows_read == 8000
    assert stats1.labels == stats17.labels


def test_validation_split_of_a_row_does_not_depend_on_partitioning(corpus4):
    def masks_and_texts(blocksize):
        plan = plan_source([str(corpus4)], blocksize=blocksize)
        texts, masks = [], []
        for part in plan.partitions:
            for chunk in read_partition(part, COLUMNS):
                texts += chunk.table["text"].to_pylist()
                masks.append(validation_mask(chunk.table, 0.1))
        return len(plan.partitions), texts, np.concatenate(masks)

    n1, texts1, m1 = masks_and_texts(2**30)
    n17, texts17, m17 = masks_and_texts(_blocksize_for(corpus4, 17))
    assert (n1, n17) == (1, 17)
    assert texts1 == texts17 and len(texts1) == 8000
    np.testing.assert_array_equal(m1, m17)
    assert 0.07 < m1.mean() < 0.13  # about val_fraction
    # a row's split is a function of its text alone
    table = pa.table({"text": pa.array(texts1[:50][::-1])})
    np.testing.assert_array_equal(validation_mask(table, 0.1), m1[:50][::-1])
