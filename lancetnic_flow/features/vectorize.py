"""The transform: a partition's table → a :class:`RowBlock` of features.

Runs on Dask workers. Three modes:

* ``hashing`` — terms (words, and word pairs with ``ngrams=2``; any word
  n-gram range; or character n-grams with ``analyzer="char"``/``"char_wb"``)
  counted in ``buckets`` hashed columns, needing no vocabulary; with ``idf``, weighted
  by the inverse document frequency of each bucket (scikit-learn's
  ``HashingVectorizer`` + ``TfidfTransformer``); rows l2-normalised;
* ``tfidf`` — scikit-learn's ``TfidfVectorizer`` semantics (smooth idf,
  optional sublinear tf, l2-normalised rows) over a fitted vocabulary;
* ``ids`` — each row's token ids in order (0 = padding, 1 = unknown),
  truncated to ``max_len``, for sequence models.

Terms are found, hashed and counted per row by one compiled pass
(:mod:`.kernels`), after the same preprocessing everywhere (Unicode
normalisation, lower-casing), with the same stop words and tokenizer: the
tokenisation options are fields of :class:`FittedFeatures`, stored in
``features.json``, so fit, train, predict, evaluate and serve apply them alike; a fitted vocabulary is an open-addressing table from the
terms' hashes to their ids, built once per process. Peak memory is a small
multiple of the partition's bytes, never rows × vocabulary.

``counts`` and ``weigh`` split the transform in two: the fit pass of
``hashing`` features writes term counts to the shards (the corpus is
tokenised once) and the idf, known only when the pass ends, is applied when
a shard is read.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import legacy_hashes
from .label_values import in_run_names
from .labelsets import chunk_multi_hot, is_label_sets, left_out, multi_hot, remap, unseen_per_row
from .packing import float_planes, float_unplanes
from .rows import RowBlock
from .vocab import smooth_idf, unseen_zeroed
from ..stop_words import ENGLISH
from ..data.usable import TOKENS_COLUMN
from .tokenize import (MIN_CHARS, PER_CHARACTER, Terms, TokenizedTexts, compiled_kernels, custom_tokens, stop_table,
                       terms_of, text_buffers, texts_of)

PAD, UNK = 0, 1
# Rows tokenised at once: a few MiB of text, so the kernels' working arrays stay small.
PIECE_ROWS = 8192
# 3: text lower-cased as str.lower (a word's final capital sigma → ς), stop words
# read as the text (normalised, lower-cased). 2: the compiled tokenizer and
# whole-string hashes, each character lowered alone, stop words as written.
# 1 (runs written before): hashing features used legacy_hashes; vocabulary
# and ids modes read the same.
VERSION = 3


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
    idf: np.ndarray | None = None       # tfidf: per vocabulary term; hashing: per bucket, or None (no idf)
    labels: list[str] = field(default_factory=list)
    label_counts: list[int] = field(default_factory=list)   # training rows per label, same order
    target: tuple[float, float] | None = None          # (mean, std)
    numeric: dict[str, tuple[float, float]] = field(default_factory=dict)
    docs: int = 0
    version: int = VERSION
    # Tokenisation (absent from runs written before them: these defaults are what those runs did).
    analyzer: str = "word"              # word | char | char_wb (scikit-learn's)
    ngram_min: int = 1                  # n-grams from ngram_min to ngrams
    normalize: str = "none"             # Unicode normalisation before lower-casing: none | nfkc | …
    stop_words: list[str] | None = None   # word analyzers: tokens left out before n-grams
    tokenizer: str | None = None        # a registered tokenizer's name (lancetnic_flow/tokenizers.py)

    @property
    def dim(self) -> int:
        """Number of input ids the model's first layer must embed."""
        if self.mode == "hashing":
            return self.buckets
        n = len(self.vocabulary) if self.vocabulary is not None else 0
        return n + 2 if self.mode == "ids" else n

    def __getstate__(self) -> dict:
        # The lookup table is rebuilt where it is used, not shipped with the features.
        return {k: v for k, v in self.__dict__.items() if k not in ("_table", "_stop")}

    # ---- the vocabulary's lookup table --------------------------------------
    def _lookup(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, values) of the term-hash → id table; an empty one for hashing."""
        table = self.__dict__.get("_table")
        if table is None:
            if self.mode == "hashing" or self.vocabulary is None or not len(self.vocabulary):
                table = (np.zeros(2, np.uint64), np.full(2, -1, np.int64))
            else:
                data, offsets = text_buffers(self.vocabulary, lowercase=False)
                first = 2 if self.mode == "ids" else 0
                k = compiled_kernels()
                table = k.build_table(k.term_keys(data, offsets),
                                      np.arange(first, first + len(self.vocabulary), dtype=np.int64))
            self.__dict__["_table"] = table
        return table

    def _stop_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, values) of the stop words' token keys: a set the kernels look tokens up in."""
        table = self.__dict__.get("_stop")
        if table is None:
            table = self.__dict__["_stop"] = (stop_table(self.stop_words, self.lowering, self.normalize)
                                               if self.version >= 3 else stop_table(self.stop_words, False))
        return table

    def _buffers(self, texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        return text_buffers(texts, lowercase=self.lowering, normalize=self.normalize)

    def _token_keys(self, texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """A registered tokenizer's tokens as (keys, row offsets): a token's key is its
        whole-string hash, the key the built-in tokenizer gives the same token."""
        terms = custom_tokens(texts, self.tokenizer, lowercase=self.lowering, normalize=self.normalize)
        data, offsets = text_buffers(terms.terms, lowercase=False)
        keys = compiled_kernels().whole_hashes(data, offsets, np.ones(len(terms.terms), np.uint8))
        row_offsets = np.zeros(terms.n_rows + 1, np.int64)
        np.cumsum(np.bincount(terms.rows, minlength=terms.n_rows), out=row_offsets[1:])
        return keys, row_offsets

    # ---- transform -------------------------------------------------------
    def transform_texts(self, texts: pa.Array | pa.ChunkedArray, cut: list | None = None) -> RowBlock:
        """Texts → feature rows (no labels), ``PIECE_ROWS`` rows at a time, so
        the working memory of tokenisation does not grow with the partition.
        ``cut`` (a list; sequence mode): each piece's mask of the rows that held
        more than ``max_len`` tokens is appended to it (:func:`cut_rows` joins them)."""
        if self.mode != "ids":
            return self.weigh(self.counts(texts))
        return self._pieces(texts, lambda piece: self._sequences(piece, cut))

    def counts(self, texts: pa.Array | pa.ChunkedArray) -> RowBlock:
        """Texts → rows of raw term counts (ids sorted within a row), before any weighting."""
        return self._pieces(texts, self._legacy_counts if self._legacy_hashing else self._counts)

    def _pieces(self, texts: pa.Array | pa.ChunkedArray, piece) -> RowBlock:
        if len(texts) <= PIECE_ROWS:
            return piece(texts)
        return RowBlock.concat([piece(texts.slice(i, PIECE_ROWS)) for i in range(0, len(texts), PIECE_ROWS)])

    def _counts(self, texts: pa.Array | pa.ChunkedArray) -> RowBlock:
        buckets = self.buckets if self.mode == "hashing" else 0
        k = compiled_kernels()
        if self.tokenizer:
            keys, key_offsets = self._token_keys(texts)
            row_offsets, ids, counts = k.key_bags(keys, key_offsets, self.ngram_min, self.ngrams, buckets,
                                                  *self._lookup(), *self._stop_table())
        elif self.analyzer != "word":
            row_offsets, ids, counts = k.char_bags(*self._buffers(texts), self.ngram_min, self.ngrams,
                                                   self.analyzer == "char_wb", buckets, *self._lookup())
        else:
            row_offsets, ids, counts, _ = k.word_bags(*self._buffers(texts), k.word_table(), MIN_CHARS,
                                                      self.ngram_min, self.ngrams, buckets, *self._lookup(),
                                                      *self._stop_table())
        return RowBlock(ids.astype(np.int32), row_offsets, counts)

    def _sequences(self, texts: pa.Array | pa.ChunkedArray, cut: list | None = None) -> RowBlock:
        k = compiled_kernels()
        if self.tokenizer:
            keys, key_offsets = self._token_keys(texts)
            row_offsets, ids, longer = k.key_sequences(keys, key_offsets, self.max_len, *self._lookup(), UNK,
                                                       *self._stop_table())
        else:
            row_offsets, ids, longer = k.sequences(*self._buffers(texts), k.word_table(), MIN_CHARS, self.max_len,
                                                   *self._lookup(), UNK, *self._stop_table())
        if cut is not None:
            cut.append(longer)
        return RowBlock(ids.astype(np.int32), row_offsets)

    @property
    def lowering(self) -> bool | str:
        """How this run lower-cases text (tokenize.prepare's ``lowercase``): as its feature format did."""
        return (PER_CHARACTER if self.version < 3 else True) if self.lowercase else False

    @property
    def _legacy_hashing(self) -> bool:
        return self.mode == "hashing" and self.version < 2

    def _legacy_counts(self, texts: pa.Array | pa.ChunkedArray) -> RowBlock:
        """Feature format 1's hashing: the same tokens, bucketed by :func:`legacy_hashes`."""
        terms: Terms = terms_of(texts, self.ngrams, lowercase=self.lowering)
        n = terms.n_rows
        if len(terms.terms):
            enc = terms.terms.dictionary_encode()
            uid = (legacy_hashes(enc.dictionary) % np.uint64(self.buckets)).astype(np.int64)
            ids = uid[enc.indices.to_numpy(zero_copy_only=False)]
        else:
            ids = np.zeros(0, np.int64)
        keys, counts = np.unique(terms.rows * self.buckets + ids, return_counts=True)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(keys // self.buckets, minlength=n), out=offsets[1:])
        return RowBlock((keys % self.buckets).astype(np.int32), offsets, counts.astype(np.float32))

    def weigh(self, block: RowBlock) -> RowBlock:
        """Raw counts → the model's values: tf (``1 + log tf`` when sublinear),
        times the idf when there is one, rows l2-normalised. Returns a new block."""
        from .row_kernels import tf_table, weigh_counts, weigh_rows

        counts = block.values.astype(np.float32, copy=False)
        values = np.empty(len(counts), np.float32)
        idf = self.idf.astype(np.float32, copy=False) if self.idf is not None else np.ones(1, np.float32)
        if self.idf is not None and len(block.indices) and int(block.indices.max()) >= len(idf):
            # The kernel does not check bounds: rows of other features must not read past the idf.
            raise ValueError(f"a row holds feature {int(block.indices.max())}, past these features' {len(idf)}")
        if not weigh_counts(block.indices, block.offsets, counts, tf_table(self.sublinear_tf), idf,
                            self.idf is not None, values):
            tf = 1.0 + np.log(counts) if self.sublinear_tf else counts
            weigh_rows(block.indices, block.offsets, tf, idf, self.idf is not None, values)
        return RowBlock(block.indices, block.offsets, values, block.labels, block.targets, block.numeric)

    def finish(self, raw: RowBlock) -> RowBlock:
        """A raw shard of the counting fit pass (counts, labels by name, raw
        targets and numeric columns) → the rows :meth:`transform` would have
        made. A label the run holds in another spelling of its value is read as
        the run's. Validation rows whose label the training rows never had are dropped
        (the fit counted them as skipped, ``unknown_label``); in a label set
        such a label is only left out, and counted (``missed``, as :meth:`transform` does)."""
        block = self.weigh(raw)
        # A name the run holds in another spelling of its value is the run's (the fit pass noted it).
        names = None if raw.label_names is None else np.array(in_run_names(raw.label_names.tolist(), self.labels),
                                                               dtype=str)
        if names is not None and raw.labels.ndim == 2:   # label sets: multi-hot over the chunk's names
            block.set_missed(*left_out(raw.labels, names, self.labels))
            block.labels, block.label_names = remap(raw.labels, names, self.labels), None
        elif names is not None:
            known = self.label_ids(pa.array(names.tolist(), pa.string()))
            labels = np.where(raw.labels >= 0, known[np.maximum(raw.labels, 0)], -1).astype(np.int32)
            block.labels, block.label_names = labels, None
            if (labels < 0).any():
                block = block.take(np.flatnonzero(labels >= 0))
        if block.targets is not None and self.target is not None:
            block.targets = ((block.targets - self.target[0]) / (self.target[1] or 1.0)).astype(np.float32)
        if block.numeric is not None and self.numeric:
            mean = np.array([m for m, _ in self.numeric.values()])
            std = np.array([s for _, s in self.numeric.values()])
            block.numeric = np.nan_to_num((block.numeric - mean) / std).astype(np.float32)
        return block

    def raw(self, table: pa.Table) -> RowBlock:
        """A chunk's table → a raw shard's rows: term counts, labels by name (this
        chunk's own dictionary), targets and numeric columns unscaled."""
        block = self.counts(self.texts(table))
        if "label" in table.column_names and is_label_sets(table["label"]):
            block.labels, block.label_names = chunk_multi_hot(table["label"])
        elif "label" in table.column_names:
            enc = table["label"].combine_chunks().dictionary_encode() if table.num_rows else None
            block.labels = (enc.indices.to_numpy(zero_copy_only=False).astype(np.int32) if enc is not None
                            else np.zeros(0, np.int32))
            block.label_names = np.array(enc.dictionary.to_pylist() if enc is not None else [], dtype=str)
        # float64 until finished: standardised then, as transform does, to the same float32.
        if "target" in table.column_names:
            block.targets = table["target"].to_numpy(zero_copy_only=False).astype(np.float64)
        numeric = [c for c in table.column_names if c not in ("text", "label", "target", TOKENS_COLUMN)]
        if numeric:
            block.numeric = np.stack([table[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in numeric],
                                     axis=1)
        return block

    def transform(self, table: pa.Table, cut: list | None = None) -> RowBlock:
        """A source chunk's table (text, label?, target?, numeric...) → rows;
        ``cut`` as :meth:`transform_texts` takes it."""
        block = self.transform_texts(self.texts(table), cut)
        if "label" in table.column_names and is_label_sets(table["label"]):
            block.labels = multi_hot(table["label"], self.labels)
            block.set_missed(*unseen_per_row(table["label"], self.labels))
        elif "label" in table.column_names:
            block.labels = self.label_ids(table["label"])
        if "target" in table.column_names and self.target is not None:
            t = table["target"].to_numpy(zero_copy_only=False).astype(np.float64)
            block.targets = ((t - self.target[0]) / (self.target[1] or 1.0)).astype(np.float32)
        if self.numeric:
            # A missing value (or column, e.g. predicting from bare texts) is
            # read as the training mean: 0 after standardising.
            n = table.num_rows
            cols = [np.zeros(n) if c not in table.column_names else
                    np.nan_to_num((table[c].to_numpy(zero_copy_only=False).astype(np.float64) - m) / s)
                    for c, (m, s) in self.numeric.items()]
            block.numeric = np.stack(cols, axis=1).astype(np.float32)
        return block

    def texts(self, table: pa.Table) -> pa.ChunkedArray | TokenizedTexts:
        """A reader's table's texts, with the token lists its reader made by this run's
        tokenizer (:func:`~.tokenize.texts_of`): featurised without running it again."""
        return texts_of(table, self.tokenizer, lowercase=self.lowering, normalize=self.normalize)

    def unknown_labels(self, table: pa.Table) -> int:
        """Rows of ``table`` that :meth:`transform` gives a label training never
        had (-1): a label set only leaves such a label out, and keeps the row."""
        if "label" not in table.column_names or not table.num_rows or is_label_sets(table["label"]):
            return 0
        return int((self.label_ids(table["label"]) < 0).sum())

    def label_ids(self, labels: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Label strings → class index; -1 for a label unseen in training."""
        found = pc.index_in(labels, value_set=pa.array(self.labels, pa.string()))
        return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int32)

    def zero_unseen(self) -> None:
        """Hashed features fitted before a bucket no training row holds weighed 0
        (:func:`~.vocab.bucket_idf`), made to weigh as they are fitted now: such a
        bucket's weight learned nothing, so the model's figures for every term it
        knows are kept, undiluted. Not for a continued run's features, whose idf
        is another run's, of another number of rows."""
        if self.mode == "hashing" and self.idf is not None:
            self.idf = unseen_zeroed(self.idf, self.docs)

    def weigh_unseen(self, docs: int) -> None:
        """Give the hashed buckets at idf 0 the idf of no row of ``docs`` (the rows
        that fitted this idf), as every bucket had before unseen ones weighed 0:
        for a model that learns its validation rows too (LinearSVM's twin), whose
        saved weights are learned from rows the idf never counted."""
        if self.mode == "hashing" and self.idf is not None:
            self.idf = np.where(self.idf == 0, smooth_idf(np.zeros(1), docs)[0], self.idf).astype(np.float32)

    # ---- persistence -----------------------------------------------------
    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in ("mode", "ngrams", "lowercase", "sublinear_tf", "buckets",
                                            "max_len", "labels", "label_counts", "target", "numeric", "docs",
                                            "version")}
        # Tokenisation options only when set: a default run's features.json reads as before.
        d.update({k: getattr(self, k) for k, v in TEXT_DEFAULTS.items() if getattr(self, k) != v})
        d["vocabulary"] = self.vocabulary.to_pylist() if self.vocabulary is not None else None
        # A million buckets' idf as a JSON list takes a second to write and read:
        # packed (packing.float_planes: the buckets share a few thousand values)
        # and in base64 it takes milliseconds and a few percent of the bytes of
        # plain float32 (the cache holds this file too).
        d["idf"] = None if self.idf is None else {"float32_zstd_base64": base64.b64encode(
            float_planes(self.idf)).decode("ascii")}
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "FittedFeatures":
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, doc: dict) -> "FittedFeatures":
        """Features from :meth:`to_json`'s object, read (a run folder checks its fields first)."""
        d = dict(doc)
        vocab = d.pop("vocabulary")
        idf = d.pop("idf")
        d.setdefault("version", 1)   # written before feature format 2
        f = cls(**d)
        f.target = tuple(f.target) if f.target else None
        f.numeric = {k: tuple(v) for k, v in f.numeric.items()}
        f.vocabulary = pa.array(vocab, pa.string()) if vocab is not None else None
        if isinstance(idf, dict) and "float32_zstd_base64" in idf:
            idf = float_unplanes(base64.b64decode(idf["float32_zstd_base64"]))
        elif isinstance(idf, dict):   # written before the planes
            idf = np.frombuffer(base64.b64decode(idf["float32_base64"]), "<f4").astype(np.float32)
        f.idf = np.asarray(idf, np.float32) if idf is not None else None
        if f.tokenizer:
            from ..tokenizers import canonical

            # A run needing a tokenizer this process lacks: say so now, by name. The
            # reference ships the function with the features to the workers.
            f.tokenizer = canonical(f.tokenizer)
        return f


# FittedFeatures' tokenisation fields and what a run without them meant.
TEXT_DEFAULTS = {"analyzer": "word", "ngram_min": 1, "normalize": "none", "stop_words": None, "tokenizer": None}


def text_options(fcfg) -> dict:
    """A ``FeatureConfig``'s tokenisation options as :class:`FittedFeatures`'
    fields: the stop words as their list (``"english"``: scikit-learn's), so
    a run predicts without the file or the name's list."""
    analyzer = fcfg.known_analyzer() if hasattr(fcfg, "known_analyzer") else getattr(fcfg, "analyzer", "word")
    if analyzer is None:   # decided from the data before the fit (resolve.resolve_sample)
        raise RuntimeError("--analyzer auto reached the features undecided")
    stop = getattr(fcfg, "stop_words", None)
    words = list(ENGLISH) if stop == "english" else (sorted(set(stop)) if stop else None)
    return dict(analyzer=analyzer, ngram_min=getattr(fcfg, "ngram_min", 1),
                ngrams=fcfg.ngrams, lowercase=fcfg.lowercase, normalize=getattr(fcfg, "normalize", "none"),
                stop_words=words, tokenizer=getattr(fcfg, "tokenizer", None))


# The rows.noted reason of a row with more tokens than a sequence model's max_len: kept, its first max_len read.
TRUNCATED = "longer_than_max_len"


def cut_rows(cut: list | None, rows: int) -> np.ndarray:
    """The rows (of ``rows``) whose tokens a sequence model reads only the first
    ``max_len`` of, as a bool mask, from the masks :meth:`FittedFeatures.transform`
    appended to ``cut`` (none cut where it appended none: other modes read every term)."""
    if not cut:
        return np.zeros(rows, bool)
    return np.concatenate(cut).astype(bool)
