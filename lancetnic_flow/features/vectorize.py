"""The transform: a partition's table → a :class:`RowBlock` of features.

Runs on Dask workers. Three modes:

* ``tfidf`` — scikit-learn's ``TfidfVectorizer`` semantics (smooth idf,
  optional sublinear tf, l2-normalised rows) over the fitted vocabulary;
* ``hashing`` — term counts in ``buckets`` hashed columns, l2-normalised;
  needs no vocabulary;
* ``ids`` — each row's token ids in order (0 = padding, 1 = unknown),
  truncated to ``max_len``, for sequence models.

Everything is numpy/Arrow array work: peak memory is a small multiple of the
partition's token count, never rows × vocabulary.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import hash_strings
from .rows import RowBlock
from .tokenize import Terms, terms_of, tokenize

PAD, UNK = 0, 1
# Rows tokenised at once: ~0.5M tokens, a few tens of MiB of working arrays.
PIECE_ROWS = 8192


@dataclass
class FittedFeatures:
    """Everything needed to turn raw rows into model inputs, JSON-serialisable."""

    mode: str = "tfidf"
    ngrams: int = 1
    lowercase: bool = True
    sublinear_tf: bool = False
    buckets: int = 2**18
    max_len: int = 256
    vocabulary: pa.StringArray | None = None
    idf: np.ndarray | None = None
    labels: list[str] = field(default_factory=list)
    label_counts: list[int] = field(default_factory=list)   # training rows per label, same order
    target: tuple[float, float] | None = None          # (mean, std)
    numeric: dict[str, tuple[float, float]] = field(default_factory=dict)
    docs: int = 0

    @property
    def dim(self) -> int:
        """Number of input ids the model's first layer must embed."""
        if self.mode == "hashing":
            return self.buckets
        n = len(self.vocabulary) if self.vocabulary is not None else 0
        return n + 2 if self.mode == "ids" else n

    # ---- transform -------------------------------------------------------
    def _ids(self, terms: pa.StringArray) -> np.ndarray:
        """Feature id per term (-1 = out of vocabulary); lookups run on the
        partition's distinct terms only, then map back with one take."""
        enc = terms.dictionary_encode()
        uniq = enc.dictionary
        if self.mode == "hashing":
            uid = (hash_strings(uniq) % np.uint64(self.buckets)).astype(np.int64)
        else:
            found = pc.index_in(uniq, value_set=self.vocabulary)
            uid = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        return uid[enc.indices.to_numpy(zero_copy_only=False)]

    def transform_texts(self, texts: pa.Array | pa.ChunkedArray) -> RowBlock:
        """Texts → feature rows (no labels), ``PIECE_ROWS`` rows at a time, so
        the working memory of tokenisation does not grow with the partition."""
        if len(texts) <= PIECE_ROWS:
            return self._piece(texts)
        return RowBlock.concat([self._piece(texts.slice(i, PIECE_ROWS)) for i in range(0, len(texts), PIECE_ROWS)])

    def _piece(self, texts: pa.Array | pa.ChunkedArray) -> RowBlock:
        if self.mode == "ids":
            return self._sequences(tokenize(texts, lowercase=self.lowercase))
        return self._bag(terms_of(texts, self.ngrams, lowercase=self.lowercase))

    def _bag(self, terms: Terms) -> RowBlock:
        n = terms.n_rows
        ids = self._ids(terms.terms) if len(terms.terms) else np.zeros(0, np.int64)
        ok = ids >= 0
        dim = max(self.dim, 1)
        keys, counts = np.unique(terms.rows[ok] * dim + ids[ok], return_counts=True)
        rows, cols = keys // dim, keys % dim
        tf = counts.astype(np.float32)
        if self.sublinear_tf:
            tf = 1.0 + np.log(tf)
        values = tf * self.idf[cols] if self.mode == "tfidf" else tf
        norms = np.sqrt(np.bincount(rows, weights=values.astype(np.float64) ** 2, minlength=n))
        values = (values / np.where(norms > 0, norms, 1.0)[rows]).astype(np.float32)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
        return RowBlock(cols.astype(np.int32), offsets, values)

    def _sequences(self, terms: Terms) -> RowBlock:
        n = terms.n_rows
        found = pc.index_in(terms.terms, value_set=self.vocabulary)
        ids = pc.fill_null(found, UNK - 2).to_numpy(zero_copy_only=False).astype(np.int64) + 2  # unknown -> UNK
        # tokenize() keeps rows in order, so rank within row = position.
        counts = np.bincount(terms.rows, minlength=n)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        keep = (np.arange(len(ids)) - starts) < self.max_len
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.minimum(counts, self.max_len), out=offsets[1:])
        return RowBlock(ids[keep].astype(np.int32), offsets)

    def transform(self, table: pa.Table) -> RowBlock:
        """A source chunk's table (text, label?, target?, numeric...) → rows."""
        block = self.transform_texts(table["text"])
        if "label" in table.column_names:
            block.labels = self.label_ids(table["label"])
        if "target" in table.column_names and self.target is not None:
            t = table["target"].to_numpy(zero_copy_only=False).astype(np.float64)
            block.targets = ((t - self.target[0]) / self.target[1]).astype(np.float32)
        if self.numeric:
            # A missing value (or column, e.g. predicting from bare texts) is
            # read as the training mean: 0 after standardising.
            n = table.num_rows
            cols = [np.zeros(n) if c not in table.column_names else
                    np.nan_to_num((table[c].to_numpy(zero_copy_only=False).astype(np.float64) - m) / s)
                    for c, (m, s) in self.numeric.items()]
            block.numeric = np.stack(cols, axis=1).astype(np.float32)
        return block

    def label_ids(self, labels: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Label strings → class index; -1 for a label unseen in training."""
        found = pc.index_in(labels, value_set=pa.array(self.labels, pa.string()))
        return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int32)

    # ---- persistence -----------------------------------------------------
    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in ("mode", "ngrams", "lowercase", "sublinear_tf", "buckets",
                                            "max_len", "labels", "label_counts", "target", "numeric", "docs")}
        d["vocabulary"] = self.vocabulary.to_pylist() if self.vocabulary is not None else None
        d["idf"] = self.idf.tolist() if self.idf is not None else None
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "FittedFeatures":
        d = json.loads(text)
        vocab = d.pop("vocabulary")
        idf = d.pop("idf")
        f = cls(**d)
        f.target = tuple(f.target) if f.target else None
        f.numeric = {k: tuple(v) for k, v in f.numeric.items()}
        f.vocabulary = pa.array(vocab, pa.string()) if vocab is not None else None
        f.idf = np.asarray(idf, np.float32) if idf is not None else None
        return f
