"""Which terms a feature id stands for: the terms read from a text, and a
bounded sample that names hashed buckets.

* :func:`text_terms` — every term of some texts (word n-grams, or the
  character n-grams of ``char``/``char_wb``), as strings with the row and
  feature id of each: the same terms, keys and ids the transform counts
  (:mod:`.kernels`), read again as strings. For explaining a few texts
  (``Predictor.explain``): strings are made per term, which the transform's
  hot loop never does. Hashing needs no reverse map here: the terms come
  from the text itself.
* :func:`sample_names` / :func:`merge_names` — the hashing fit pass's
  bucket names (``FitStats.names``): for the first :data:`SAMPLE_ROWS`
  training rows of each chunk (:data:`CHAR_SAMPLE_ROWS` for character n-grams), the terms of each bucket with their counts,
  kept to at most :data:`PER_BUCKET` terms a bucket (the most frequent) and
  :data:`MOST` entries in all (the most frequent). A sample of rows, not
  every row: reading every row's terms as strings again would double the
  pass's tokenisation; the rows read per chunk are bounded, so the cost is.
  Merging is a group-by of (bucket, term) summing counts, then the same two
  bounds: associative and commutative up to the bounds, whatever the tree of
  merges. So a partial holds at most ``MOST`` rows of (bucket, term bytes,
  count), a few MiB, however large the corpus; a term cut from one partial
  loses that partial's count (the counts are approximate, which only orders
  the names shown). A bucket with no sampled term is shown as ``#bucket``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UserError
from .tokenize import TokenizedTexts, compiled_kernels, prepare, terms_of, text_buffers

# Training rows of a chunk whose terms are read for the bucket names: words are read by
# Arrow's kernels (~25 ms for 1,024 rows of ~60 words), character n-grams in Python
# (~0.6 s for 1,024 such rows, a string each), so fewer rows for those.
SAMPLE_ROWS = 1024
CHAR_SAMPLE_ROWS = 128
# Terms kept per bucket, and entries kept in all, by count.
PER_BUCKET = 3
MOST = 100_000

SCHEMA = pa.schema([("bucket", pa.int64()), ("term", pa.string()), ("count", pa.int64())])


@dataclass
class TextTerms:
    """The terms of some rows: ``terms[i]`` came from row ``rows[i]`` and is
    feature ``ids[i]`` (-1: not a feature, a term outside the vocabulary)."""

    terms: pa.StringArray
    ids: np.ndarray    # int64
    rows: np.ndarray   # int64
    n_rows: int


def _char_terms(texts: pa.Array, min_n: int, max_n: int, wb: bool) -> tuple[list[str], list[int]]:
    """scikit-learn's ``char`` / ``char_wb`` n-grams of prepared texts (whitespace
    runs collapsed to one space), as :func:`~.kernels.char_bags` finds them."""
    terms: list[str] = []
    rows: list[int] = []
    for r, text in enumerate(texts.to_pylist()):
        text = re.sub(r"\s\s+", " ", text or "")
        pieces = [f" {w} " for w in text.split()] if wb else [text]
        for p in pieces:
            for a in range(len(p)):
                for n in range(min_n, min(max_n, len(p) - a) + 1):
                    terms.append(p[a:a + n])
                    rows.append(r)
            if wb and len(p) < min_n:   # a word shorter than the shortest n-gram counts once, whole
                terms.append(p)
                rows.append(r)
    return terms, rows


def text_terms(features, texts: pa.Array | pa.ChunkedArray | TokenizedTexts) -> TextTerms:
    """Every term of ``texts`` as ``features`` (a :class:`~.vectorize.FittedFeatures`) reads
    them, with its feature id: a hashed bucket, or a vocabulary id. A registered tokenizer
    that returns tokens with spaces cannot be read back as words: no terms then (the ids
    are still explained, unnamed)."""
    words = texts if isinstance(texts, TokenizedTexts) else None   # the tokens its reader made
    texts = words.texts if words is not None else texts
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    texts = pc.fill_null(texts.cast(pa.string()), "")
    n = len(texts)
    k = compiled_kernels()
    if features.analyzer in ("char", "char_wb") and not features.tokenizer:
        prepared = prepare(texts, lowercase=features.lowering, normalize=features.normalize)
        strings, rows = _char_terms(prepared, features.ngram_min, features.ngrams, features.analyzer == "char_wb")
        terms = pa.array(strings, pa.string())
        rows_arr = np.asarray(rows, np.int64)
        data, offsets = text_buffers(terms, lowercase=False)
        keys = k.whole_hashes(data, offsets, np.ones(len(terms), np.uint8)) if len(terms) else np.zeros(0, np.uint64)
    else:
        try:
            found = terms_of(words if words is not None else texts, features.ngrams, lowercase=features.lowering,
                             ngram_min=features.ngram_min,
                             stop_words=features.stop_words, normalize=features.normalize,
                             tokenizer=features.tokenizer)
        except UserError:   # a tokenizer's token with a space: its n-grams cannot be split back into words
            return TextTerms(pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros(0, np.int64), n)
        terms, rows_arr = found.terms.cast(pa.string()), np.asarray(found.rows, np.int64)
        if features.mode == "hashing" and features.version < 2:
            from .hashing import legacy_hashes

            keys = legacy_hashes(terms)
        elif len(terms):
            keys = k.term_keys(*text_buffers(terms, lowercase=False))
        else:
            keys = np.zeros(0, np.uint64)
    if features.mode == "hashing":
        ids = (keys % np.uint64(max(features.buckets, 1))).astype(np.int64)
    else:
        first = 2 if features.mode == "ids" else 0
        vocab = features.vocabulary if features.vocabulary is not None else pa.array([], pa.string())
        found_ids = pc.fill_null(pc.index_in(terms, value_set=vocab), -1).to_numpy(zero_copy_only=False)
        ids = np.where(found_ids >= 0, found_ids.astype(np.int64) + first, -1)
    return TextTerms(terms, ids, rows_arr, n)


def empty_names() -> pa.Table:
    return SCHEMA.empty_table()


def bounded(table: pa.Table, per_bucket: int = PER_BUCKET, most: int = MOST) -> pa.Table:
    """``table`` (bucket, term, count; one row per pair) cut to the ``per_bucket``
    most frequent terms of each bucket and the ``most`` most frequent entries in all
    (ties by bucket, then term), sorted by bucket, then count descending."""
    if not table.num_rows:
        return empty_names()
    table = table.sort_by([("bucket", "ascending"), ("count", "descending"), ("term", "ascending")])
    b = table["bucket"].to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    rank = np.arange(len(b)) - np.repeat(starts, np.diff(np.append(starts, len(b))))
    table = table.filter(pa.array(rank < per_bucket))
    if table.num_rows > most:
        table = table.sort_by([("count", "descending"), ("bucket", "ascending"), ("term", "ascending")]) \
            .slice(0, most).sort_by([("bucket", "ascending"), ("count", "descending"), ("term", "ascending")])
    return table.combine_chunks()


def _counted(buckets: np.ndarray, terms: pa.Array, counts: np.ndarray | None = None) -> pa.Table:
    t = pa.table({"bucket": pa.array(buckets, pa.int64()), "term": terms.cast(pa.string()),
                  "count": pa.array(np.ones(len(buckets), np.int64) if counts is None else counts, pa.int64())})
    g = t.group_by(["bucket", "term"]).aggregate([("count", "sum")])
    return pa.table({"bucket": g["bucket"], "term": g["term"], "count": g["count_sum"]})


def sample_names(features, texts: pa.Array | pa.ChunkedArray | TokenizedTexts, rows: int | None = None) -> pa.Table:
    """The bucket names of the first ``rows`` of ``texts`` (hashing ``features``; default
    :data:`SAMPLE_ROWS`, :data:`CHAR_SAMPLE_ROWS` for character n-grams), bounded (:func:`bounded`)."""
    if rows is None:
        rows = CHAR_SAMPLE_ROWS if features.analyzer in ("char", "char_wb") and not features.tokenizer \
            else SAMPLE_ROWS
    texts = texts.slice(0, rows)
    if not len(texts):
        return empty_names()
    found = text_terms(features, texts)
    if not len(found.terms):
        return empty_names()
    return bounded(_counted(found.ids, found.terms))


def merge_names(tables: list[pa.Table | None]) -> pa.Table | None:
    """Partials' bucket names as one bounded table (None when none has any)."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    t = pa.concat_tables([x.select(["bucket", "term", "count"]).cast(SCHEMA) for x in tables])
    if not t.num_rows:
        return empty_names()
    return bounded(_counted(t["bucket"].to_numpy(), t["term"].combine_chunks(), t["count"].to_numpy()))


def bucket_labels(names: pa.Table | None, buckets: np.ndarray, sep: str = " | ") -> list[str]:
    """A name for each of ``buckets``: its sampled terms, most frequent first, joined by
    ``sep`` (``"goal | match"``), or ``#bucket`` when none was sampled."""
    buckets = np.asarray(buckets, np.int64)
    if names is None or not names.num_rows:
        return [f"#{b}" for b in buckets.tolist()]
    b = names["bucket"].to_numpy()
    lo = np.searchsorted(b, buckets, "left")
    hi = np.searchsorted(b, buckets, "right")
    # Only the asked buckets' terms become Python strings (the table holds up to MOST).
    counts = hi - lo
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    terms = names["term"].take(pa.array(starts + np.arange(counts.sum()))).to_pylist()
    ends = np.cumsum(counts).tolist()
    return [sep.join(terms[e - n:e]) if n else f"#{bk}" for bk, n, e in zip(buckets.tolist(), counts.tolist(), ends)]


def names_to_json(names: pa.Table | None) -> dict | None:
    """The names as a JSON object (a cache entry keeps them beside its features)."""
    if names is None:
        return None
    return {"bucket": names["bucket"].to_pylist(), "term": names["term"].to_pylist(),
            "count": names["count"].to_pylist()}


def names_from_json(doc: dict | None) -> pa.Table | None:
    if not isinstance(doc, dict):
        return None
    try:
        t = pa.table({"bucket": pa.array(doc["bucket"], pa.int64()), "term": pa.array(doc["term"], pa.string()),
                      "count": pa.array(doc["count"], pa.int64())})
    except (KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    return bounded(t)


__all__ = ["TextTerms", "text_terms", "sample_names", "merge_names", "bounded", "bucket_labels", "empty_names",
           "names_to_json", "names_from_json", "SAMPLE_ROWS", "CHAR_SAMPLE_ROWS", "PER_BUCKET", "MOST"]
