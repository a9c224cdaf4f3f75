"""The fit pass: what the features must know about the whole corpus.

Each partition yields a :class:`FitStats` — document frequencies of its
terms, label counts, running moments of numeric columns — and partials are
merged pairwise by a Dask tree reduction. Pruning (``min_df``, ``max_df``,
``max_features``) happens once, after the merge, so the vocabulary does not
depend on how the corpus was partitioned.

Memory: a partial holds one row per *distinct* term of its partitions
(term bytes + 8), never per token; the merged table is bounded by the
corpus' distinct terms (unigrams, plus bigrams when asked).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .tokenize import Terms, compiled_kernels


@dataclass
class Moments:
    """Count, mean and sum of squared deviations (Chan et al. merge)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, x: np.ndarray) -> "Moments":
        x = x[~np.isnan(x)]
        if not len(x):
            return cls()
        mean = float(x.mean())
        return cls(len(x), mean, float(((x - mean) ** 2).sum()))

    def merge(self, other: "Moments") -> "Moments":
        if not other.n:
            return self
        if not self.n:
            return other
        n = self.n + other.n
        d = other.mean - self.mean
        return Moments(n, self.mean + d * other.n / n, self.m2 + other.m2 + d * d * self.n * other.n / n)

    @property
    def std(self) -> float:
        return float(np.sqrt(self.m2 / self.n)) if self.n > 1 else 1.0


@dataclass
class FitStats:
    """What one or more partitions contribute to the fit."""

    docs: int = 0
    terms: pa.Table | None = None  # columns: term (string), df (int64), tf (int64: corpus count)
    buckets: np.ndarray | None = None   # hashing: document frequency of each bucket (int64)
    labels: dict[str, int] = field(default_factory=dict)
    val_labels: dict[str, int] = field(default_factory=dict)   # labels of the validation rows
    numeric: dict[str, Moments] = field(default_factory=dict)
    rows_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    bytes_read: int = 0
    results: list = field(default_factory=list)   # the shards a counting pass wrote (dataflow's PartitionResults)


def document_frequencies(terms: Terms) -> pa.Table:
    """Per distinct term, the number of rows it occurs in (vectorised)."""
    if not len(terms.terms):
        return pa.table({"term": pa.array([], pa.string()), "df": pa.array([], pa.int64()),
                         "tf": pa.array([], pa.int64())})
    enc = terms.terms.dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n_terms = len(enc.dictionary)
    df, ordered = compiled_kernels().row_document_frequencies(np.ascontiguousarray(terms.rows, np.int64), codes,
                                                              n_terms)
    if not ordered:   # rows out of order for some term (not made by terms_of): count distinct pairs by a sort
        pairs = np.unique(terms.rows * n_terms + codes)
        df = np.bincount(pairs % n_terms, minlength=n_terms)
    tf = np.bincount(codes, minlength=n_terms)  # corpus count: scikit-learn ranks max_features by it
    return pa.table({"term": enc.dictionary.cast(pa.string()), "df": pa.array(df, pa.int64()),
                     "tf": pa.array(tf, pa.int64())})


def _add_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def merge_stats(parts: list[FitStats]) -> FitStats:
    """Merge partials; associative, so any tree of merges gives one result."""
    parts = [p for p in parts if p is not None]
    out = FitStats()
    tables = [p.terms for p in parts if p.terms is not None and p.terms.num_rows]
    if tables:
        t = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if len(tables) > 1:
            t = t.group_by("term").aggregate([("df", "sum"), ("tf", "sum")]).rename_columns(["term", "df", "tf"])
        out.terms = t
    dfs = [p.buckets for p in parts if p.buckets is not None]
    if dfs:
        out.buckets = dfs[0].copy()
        for d in dfs[1:]:
            out.buckets += d
    for p in parts:
        out.docs += p.docs
        out.labels = _add_counts(out.labels, p.labels)
        out.val_labels = _add_counts(out.val_labels, p.val_labels)
        out.results += p.results
        for k, m in p.numeric.items():
            out.numeric[k] = out.numeric.get(k, Moments()).merge(m)
        out.rows_read += p.rows_read
        out.skipped = _add_counts(out.skipped, p.skipped)
        out.tokens += p.tokens
        out.bytes_read += p.bytes_read
    return out


def prune(terms: pa.Table, docs: int, *, min_df: float = 1, max_df: float = 1.0,
          max_features: int | None = None) -> tuple[pa.StringArray, np.ndarray]:
    """Apply scikit-learn's pruning rules; return (sorted terms, their df).

    ``min_df``/``max_df`` are counts when integers ≥ 1 given as int, fractions
    of documents when floats. Ties at the ``max_features`` cut are broken by
    term, so the result is a pure function of the merged counts.
    """
    def bound(x: float) -> float:
        return x * docs if isinstance(x, float) and x <= 1.0 else x

    if terms is None or not terms.num_rows:
        return pa.array([], pa.string()), np.zeros(0, np.int64)
    df = terms["df"]
    keep = pc.and_(pc.greater_equal(df, bound(min_df)), pc.less_equal(df, bound(max_df)))
    t = terms.filter(keep)
    if max_features is not None and t.num_rows > max_features:
        t = t.filter(pa.array(_top_by_count(t, max_features)))
    t = t.sort_by([("term", "ascending")])
    return t["term"].combine_chunks().cast(pa.string()), t["df"].to_numpy().astype(np.int64)


def _top_by_count(terms: pa.Table, k: int) -> np.ndarray:
    """A mask of the ``k`` terms with the highest corpus count, ties broken by
    term: what sorting every term by (count descending, term) and taking the
    first ``k`` keeps, with only the terms tied at the cut sorted as strings
    (a sort of millions of bigram strings took most of the pruning)."""
    tf = terms["tf"].to_numpy()
    cut = np.partition(tf, len(tf) - k)[len(tf) - k]   # the k-th highest count
    keep = tf > cut
    tied = np.flatnonzero(tf == cut)
    need = k - int(keep.sum())
    if need >= len(tied):
        keep[tied] = True
    else:
        by_term = pc.array_sort_indices(terms["term"].take(pa.array(tied)).combine_chunks(), order="ascending")
        keep[tied[by_term.to_numpy()[:need]]] = True
    return keep


def smooth_idf(df: np.ndarray, docs: int) -> np.ndarray:
    """scikit-learn's ``smooth_idf=True``: ln((1 + n) / (1 + df)) + 1."""
    return (np.log((1.0 + docs) / (1.0 + df)) + 1.0).astype(np.float32)
