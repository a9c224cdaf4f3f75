"""The fit pass: what the features must know about the whole corpus.

Each partition yields a :class:`FitStats` — document frequencies of its
terms, label counts, running moments of numeric columns — and partials are
merged pairwise by a Dask tree reduction. Pruning (``min_df``, ``max_df``,
``max_features``) happens once, after the merge, so the vocabulary does not
depend on how the corpus was partitioned.

A partial's terms are keyed by the 64-bit key the transform looks terms
up by (:func:`~.kernels.term_keys`) and sorted by it, so partials merge by
a sort of integers, never by hashing strings again. Two terms whose keys
collide (among a million distinct terms, a chance of about 3 in 10^8 that
any two do) are one term at fit and at transform alike.

Memory: a partial holds one row per *distinct* term of its partitions
(term bytes + 32), never per token; the merged table is bounded by the
corpus' distinct terms (unigrams, plus bigrams when asked).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .split import merge_hashes
from .tokenize import MIN_CHARS, Terms, compiled_kernels, stop_table, terms_of, text_buffers


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
        if x.min() == x.max():   # constant: its own value, no deviation (a computed mean can miss it by an ulp)
            return cls(len(x), float(x[0]), 0.0)
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
    terms: pa.Table | None = None  # key (uint64), term (string), df, tf (int64: corpus count); by key
    buckets: np.ndarray | None = None   # hashing: document frequency of each bucket (int64)
    # hashing: a bounded sample of each bucket's most frequent terms (bucket, term, count; names.py)
    names: pa.Table | None = None
    labels: dict[str, int] = field(default_factory=dict)
    val_labels: dict[str, int] = field(default_factory=dict)   # labels of the validation rows
    numeric: dict[str, Moments] = field(default_factory=dict)
    rows_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    bytes_read: int = 0
    results: list = field(default_factory=list)   # the shards a counting pass wrote (dataflow's PartitionResults)
    # The text hashes of the validation rows, when the pass records them (split.Holdout.record: up to
    # held_out_limit of them); past the limit None, and held_out_lost counts them.
    held_out: np.ndarray | None = None
    held_out_limit: int = 0
    held_out_lost: int = 0


def term_table(keys: np.ndarray, terms: pa.Array, df: np.ndarray, tf: np.ndarray) -> pa.Table:
    """A partial's terms as :attr:`FitStats.terms`: sorted by key."""
    k = compiled_kernels()
    order = k.key_order(np.ascontiguousarray(keys, np.uint64))
    data, offsets = k.take_strings(*text_buffers(terms, lowercase=False), order)
    strings = pa.Array.from_buffers(pa.string(), len(order), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                              pa.py_buffer(data)])
    return pa.table({"key": pa.array(keys[order], pa.uint64()), "term": strings,
                     "df": pa.array(df[order], pa.int64()), "tf": pa.array(tf[order], pa.int64())})


def _keyed(terms: pa.Table) -> pa.Table:
    """``terms`` with its key column, sorted by key (a table made without them: term, df, tf)."""
    if "key" in terms.column_names:
        return terms
    strings = terms["term"].combine_chunks().cast(pa.string())
    keys = compiled_kernels().term_keys(*text_buffers(strings, lowercase=False))
    return term_table(keys, strings, terms["df"].to_numpy(), terms["tf"].to_numpy())


def term_counts(texts: pa.Array | pa.ChunkedArray, *, ngram_min: int = 1, ngrams: int = 1, lowercase: bool = True,
                normalize: str = "none", stop_words: list[str] | None = None,
                tokenizer: str | None = None) -> tuple[pa.Table, int]:
    """The distinct word n-grams of some rows with their document and corpus
    counts (:attr:`FitStats.terms`), and how many n-grams occurred. The
    built-in tokenizer counts in one compiled pass that writes each distinct
    term's string once (:func:`~.kernels.term_stats`); a registered tokenizer's
    tokens go through :func:`terms_of` and :func:`document_frequencies`."""
    if tokenizer:
        terms = terms_of(texts, ngrams, lowercase=lowercase, ngram_min=ngram_min, stop_words=stop_words,
                         normalize=normalize, tokenizer=tokenizer)
        return document_frequencies(terms), len(terms.terms)
    k = compiled_kernels()
    keys, df, tf, data, offsets, occurrences = k.term_stats(
        *text_buffers(texts, lowercase=lowercase, normalize=normalize), k.word_table(), MIN_CHARS, ngram_min,
        ngrams, *stop_table(stop_words, lowercase, normalize))
    strings = pa.Array.from_buffers(pa.string(), len(keys), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(data)])
    return term_table(keys, strings, df, tf), int(occurrences)


def document_frequencies(terms: Terms) -> pa.Table:
    """Per distinct term, the number of rows it occurs in (vectorised), as :attr:`FitStats.terms`."""
    if not len(terms.terms):
        return term_table(np.zeros(0, np.uint64), pa.array([], pa.string()), np.zeros(0, np.int64),
                          np.zeros(0, np.int64))
    enc = terms.terms.dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n_terms = len(enc.dictionary)
    df, ordered = compiled_kernels().row_document_frequencies(np.ascontiguousarray(terms.rows, np.int64), codes,
                                                              n_terms)
    if not ordered:   # rows out of order for some term (not made by terms_of): count distinct pairs by a sort
        pairs = np.unique(terms.rows * n_terms + codes)
        df = np.bincount(pairs % n_terms, minlength=n_terms)
    tf = np.bincount(codes, minlength=n_terms)  # corpus count: scikit-learn ranks max_features by it
    strings = enc.dictionary.cast(pa.string())
    return term_table(compiled_kernels().term_keys(*text_buffers(strings, lowercase=False)), strings, df, tf)


def merge_terms(tables: list[pa.Table]) -> pa.Table:
    """Partials' terms → one row per key, df and tf summed, the string the
    first partial holding the key gave it. A stable sort of the keys: the
    partials are each sorted, so it merges runs."""
    tables = [_keyed(t) for t in tables]
    if len(tables) == 1:
        return tables[0]
    keys = np.concatenate([t["key"].to_numpy() for t in tables])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if len(keys) else np.zeros(0, np.int64)
    sums = {c: np.add.reduceat(np.concatenate([t[c].to_numpy() for t in tables])[order], first)
            if len(first) else np.zeros(0, np.int64) for c in ("df", "tf")}
    # One contiguous copy of the partials' strings, then one take: Arrow's take across chunks
    # resolves each index's chunk and ran 3-4x slower (0.07 vs 0.02 s for 8 Debian partials).
    strings = pa.concat_arrays([c for t in tables for c in t["term"].cast(pa.string()).chunks])
    return pa.table({"key": pa.array(keys[first], pa.uint64()), "term": strings.take(pa.array(order[first])),
                     "df": pa.array(sums["df"], pa.int64()), "tf": pa.array(sums["tf"], pa.int64())})


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
        out.terms = merge_terms(tables)
    dfs = [p.buckets for p in parts if p.buckets is not None]
    if dfs:
        out.buckets = dfs[0].copy()
        for d in dfs[1:]:
            out.buckets += d
    if any(p.names is not None for p in parts):
        from .names import merge_names

        out.names = merge_names([p.names for p in parts])
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
    _merge_held_out(out, parts)
    return out


def _merge_held_out(out: FitStats, parts: list[FitStats]) -> None:
    out.held_out_limit = max((p.held_out_limit for p in parts), default=0)
    if not out.held_out_limit:
        return
    recorded = [p.held_out for p in parts if p.held_out is not None]
    out.held_out_lost = sum(p.held_out_lost for p in parts)
    if out.held_out_lost:
        out.held_out_lost += sum(len(h) for h in recorded)
        return
    out.held_out, out.held_out_lost = merge_hashes(recorded, out.held_out_limit)


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


def bucket_idf(df: np.ndarray, docs: int) -> np.ndarray:
    """Hashed buckets' idf: :func:`smooth_idf`, and 0 for a bucket no training row
    holds. Such a bucket's weight learned nothing, and smoothing gives it the
    largest idf: in a held-out row its share of the l2 norm only shrinks every
    known term's value. At 0 it counts as a vocabulary's unseen term does
    (scikit-learn's ``TfidfVectorizer`` has no column for it)."""
    return np.where(np.asarray(df) > 0, smooth_idf(df, docs), np.float32(0.0)).astype(np.float32)


def unseen_zeroed(idf: np.ndarray, docs: int) -> np.ndarray:
    """An idf :func:`smooth_idf` made of ``docs`` training rows' bucket counts, as
    :func:`bucket_idf` makes it: the buckets at the idf of no row (df 0) at 0. The
    idf is strictly decreasing in df, so only those buckets hold that value."""
    unseen = smooth_idf(np.zeros(1), docs)[0]
    return np.where(idf == unseen, np.float32(0.0), idf).astype(np.float32)


def seen_filled(idf: np.ndarray, new_idf: np.ndarray, docs: int) -> np.ndarray:
    """A continued run's bucket idf: the run it continues keeps its own (its weights
    learned on inputs weighed by it, ``docs`` training rows); a bucket only the new
    data's training rows hold (0 in ``idf``, not in ``new_idf``) takes the idf of no
    row of those ``docs``, the value it had before such buckets weighed 0, so the
    new words in it are learned as they were. Buckets neither holds stay at 0."""
    unseen = smooth_idf(np.zeros(1), docs)[0]
    return np.where(idf > 0, idf, np.where(new_idf > 0, unseen, np.float32(0.0))).astype(np.float32)
