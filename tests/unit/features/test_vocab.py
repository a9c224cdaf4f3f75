"""features/vocab.py: term counts equal scikit-learn's document and corpus
counts; merging partials in any grouping equals counting the whole; pruning
follows scikit-learn's min_df / max_df / max_features rules with ties broken
by term; running moments merge exactly; smooth idf is scikit-learn's."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from lancetnic_flow.features.tokenize import terms_of
from lancetnic_flow.features.vocab import (FitStats, Moments, bucket_idf, document_frequencies, merge_stats,
                                           merge_terms, prune, seen_filled, smooth_idf, term_counts, unseen_zeroed)

TEXTS = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "dogs and cats", "the the the end",
         "mat mat cat", "on and on"]


def counts_of(table: pa.Table) -> dict[str, tuple[int, int]]:
    return dict(zip(table["term"].to_pylist(), zip(table["df"].to_pylist(), table["tf"].to_pylist())))


def sk_counts(texts, ngrams=(1, 1)) -> dict[str, tuple[int, int]]:
    cv = CountVectorizer(ngram_range=ngrams)
    x = cv.fit_transform(texts)
    df = (x > 0).sum(axis=0).A1
    tf = x.sum(axis=0).A1
    return {t: (int(df[i]), int(tf[i])) for t, i in cv.vocabulary_.items()}


@pytest.mark.parametrize("ngrams", [1, 2, 3])
def test_term_counts_equal_scikit_learns_document_and_corpus_counts(ngrams):
    table, occurrences = term_counts(pa.array(TEXTS), ngrams=ngrams)
    assert counts_of(table) == sk_counts(TEXTS, (1, ngrams))
    assert occurrences == sum(tf for _, tf in counts_of(table).values())
    keys = table["key"].to_numpy()
    assert (np.diff(keys.astype(np.float64)) >= 0).all()   # sorted by key


def test_document_frequencies_of_terms_equal_the_compiled_counts():
    fast, _ = term_counts(pa.array(TEXTS), ngrams=2)
    slow = document_frequencies(terms_of(pa.array(TEXTS), 2))
    assert counts_of(slow) == counts_of(fast)
    assert slow["key"].to_pylist() == fast["key"].to_pylist()


@pytest.mark.parametrize("groups", [[7], [1] * 7, [3, 4], [2, 2, 3]])
def test_merging_partials_in_any_grouping_equals_counting_the_whole(groups):
    whole, _ = term_counts(pa.array(TEXTS), ngrams=2)
    parts, start = [], 0
    for g in groups:
        parts.append(term_counts(pa.array(TEXTS[start:start + g]), ngrams=2)[0])
        start += g
    merged = merge_terms(parts)
    assert merged.equals(whole)
    # and merge_stats over a tree of merges
    stats = [FitStats(docs=g, terms=p, labels={"x": g}, rows_read=g) for g, p in zip(groups, parts)]
    left = merge_stats([merge_stats(stats[:1]), merge_stats(stats[1:])])
    assert left.terms.equals(whole) and left.docs == 7 and left.labels == {"x": 7} and left.rows_read == 7


def test_merge_terms_accepts_tables_without_their_key_column():
    a, _ = term_counts(pa.array(TEXTS[:3]))
    b, _ = term_counts(pa.array(TEXTS[3:]))
    assert merge_terms([a.drop(["key"]), b]).equals(merge_terms([a, b]))


@pytest.mark.parametrize("kw", [dict(min_df=2), dict(max_df=0.5), dict(min_df=2, max_df=3), dict(max_features=5),
                                dict(min_df=0.3)])
def test_prune_keeps_scikit_learns_vocabulary(kw):
    table, _ = term_counts(pa.array(TEXTS))
    terms, df = prune(table, len(TEXTS), **kw)
    cv = CountVectorizer(**kw).fit(TEXTS)
    assert terms.to_pylist() == sorted(cv.vocabulary_)
    assert df.tolist() == [sk_counts(TEXTS)[t][0] for t in terms.to_pylist()]


def test_prune_breaks_ties_at_the_max_features_cut_by_term():
    table = pa.table({"term": ["b", "a", "c", "d"], "df": [1, 1, 1, 1], "tf": [5, 3, 3, 3]})
    terms, _ = prune(table, 4, max_features=2)
    assert terms.to_pylist() == ["a", "b"]
    assert prune(None, 0)[0].to_pylist() == []


def test_moments_merge_equals_the_moments_of_the_concatenation():
    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, 50), rng.normal(-1, 5, 17)
    m = Moments.of(a).merge(Moments.of(b))
    both = np.concatenate([a, b])
    assert m.n == 67 and m.mean == pytest.approx(both.mean()) and m.std == pytest.approx(both.std())
    assert Moments.of(np.array([np.nan, 1.0, 3.0])).mean == 2.0
    assert Moments().merge(Moments.of(a)) == Moments.of(a) and Moments.of(np.array([])).std == 1.0


def test_smooth_idf_is_scikit_learns():
    tv = TfidfVectorizer().fit(TEXTS)
    table, _ = term_counts(pa.array(TEXTS))
    terms, df = prune(table, len(TEXTS))
    order = [tv.vocabulary_[t] for t in terms.to_pylist()]
    np.testing.assert_allclose(smooth_idf(df, len(TEXTS)), tv.idf_[order], rtol=1e-6)


def test_a_bucket_no_training_row_holds_has_idf_0_and_every_other_bucket_its_smooth_idf():
    df = np.array([0, 1, 5, 0, 7])
    idf = bucket_idf(df, 7)
    assert idf.dtype == np.float32 and idf[0] == 0.0 and idf[3] == 0.0
    assert np.array_equal(idf[[1, 2, 4]], smooth_idf(df[[1, 2, 4]], 7))


@pytest.mark.parametrize("docs", [1, 7, 1_000, 2_500_000, 10**9])
def test_an_idf_fitted_before_gets_0_for_exactly_the_buckets_no_training_row_held(docs):
    """A run saved before unseen buckets weighed 0 holds smooth_idf(0, docs) there: told
    from every other bucket's value exactly, so reading it gives what a fit gives now."""
    df = np.array([0, 1, 2, 3, 0, docs // 2, docs, 0])
    df = np.minimum(df, docs)
    assert unseen_zeroed(smooth_idf(df, docs), docs).tobytes() == bucket_idf(df, docs).tobytes()
    # read again (or a run fitted now): nothing more changes
    assert unseen_zeroed(bucket_idf(df, docs), docs).tobytes() == bucket_idf(df, docs).tobytes()


def test_a_continued_run_keeps_its_idf_and_weighs_buckets_only_the_new_data_holds_as_before():
    """Before unseen buckets weighed 0, the old run's idf held smooth_idf(0, docs) there,
    and a continued run learned its new words at that value: it still does."""
    old, new = np.array([1.5, 0.0, 2.0, 0.0], np.float32), np.array([3.0, 1.25, 0.0, 0.0], np.float32)
    assert seen_filled(old, new, 12).tolist() == [1.5, smooth_idf(np.zeros(1), 12)[0], 2.0, 0.0]


def test_the_moments_of_a_constant_column_are_its_value_and_no_deviation_whatever_its_digits():
    """A computed mean of 4,000 copies of 0.1 can miss 0.1 by an ulp, leaving a spread of about
    1e-17 that standardised the target by it; a constant column has none."""
    m = Moments.of(np.full(4000, 0.1)).merge(Moments.of(np.full(3, 0.1)))
    assert (m.mean, m.m2, m.std) == (0.1, 0.0, 0.0)
