"""A synthetic, learnable, labelled text corpus of any size, written by streaming.

This is what ``lancetnic-flow make-data OUT --rows N [--classes K] [--seed S]``
runs. :func:`write_corpus` generates rows a chunk at a time and appends each
chunk to the output, so memory stays constant however many rows are asked for.

Columns
-------
``text``    lowercase pseudo-words ("morani tesu, the kalop ..."), first word
            capitalised, a few commas, a final full stop. Only ASCII letters,
            spaces, ``,`` and ``.``: no tabs, newlines, quotes or backslashes.
``label``   class name: ``sports``, ``tech``, ... (12 names), then ``class_13``,
            ``class_14``, ... for more classes. Classes are mildly imbalanced
            (the largest is at most 1.5x the smallest).
``value``   float, normally distributed around a per-class mean.
``target``  float regression target: the sum of per-word weights over the
            row's tokens divided by sqrt(length), plus ``0.5 * value``, plus
            Gaussian noise. Learnable from the text (ridge on TF-IDF reaches
            R^2 ~ 0.5 on a few thousand rows).

How the text is made
--------------------
A vocabulary of ~20,000 unique pronounceable words is built from syllables by
the seed, plus ~40 English stop words shared by all classes. Each token of a
row is a stop word (30%), a background word drawn from a Zipf distribution over
the whole vocabulary, or a topic word drawn from a class's topic distribution
(a Zipf distribution over ~1,500 words taken from a shared pool, so the topics
of different classes overlap). Topic tokens come mostly from the row's own
class and partly from a random other class, and a few rows' topics belong to a
different class than their label, so a TF-IDF + linear model reaches roughly
85-95% accuracy, not 100%. Lengths are lognormal, 5..200 tokens, mean ~40.

Everything is vectorised with numpy and pyarrow; there is no Python loop per
row or per token.

Determinism
-----------
The output depends only on ``(rows, classes, seed, format, compression, delimiter)``, never
on ``chunk_rows``: rows are generated in fixed blocks of :data:`BLOCK_ROWS`
(10,000) rows, block ``b`` from ``numpy.random.default_rng([seed, b, ...])``,
and ``chunk_rows`` is rounded to a whole number of blocks (at least one).
Parquet row groups are always one block (10,000 rows) for the same reason.
Gzip output is written with a zero mtime and no file name in its header, so it
is byte-identical run to run as well.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Callable

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UserError
from ..formats import (COMPRESSION_SUFFIXES, Format, csv_delimiter, delimited, file_name, format_for_path, format_named,
                       registered, split_compression)
from ..storage import open_special, reader_kept_reading, refuse_local_storage_options, special_kind, url_to_fs
from .writers import compressed

__all__ = ["write_corpus", "infer_format", "generate_blocks", "BLOCK_ROWS", "class_names"]

#: Rows per deterministic block; chunk_rows is rounded to a multiple of this.
BLOCK_ROWS = 10_000

#: compression suffix -> fsspec compression name
COMPRESSIONS: dict[str, str] = COMPRESSION_SUFFIXES

LABEL_NAMES = (
    "sports", "tech", "politics", "business", "science", "health",
    "travel", "food", "music", "movies", "fashion", "education",
)

STOP_WORDS = (
    "the", "of", "and", "a", "to", "in", "is", "it", "that", "for", "on", "with",
    "as", "was", "at", "by", "this", "be", "from", "or", "are", "an", "but", "not",
    "have", "they", "which", "one", "you", "were", "all", "we", "when", "there",
    "can", "been", "has", "more", "if", "so",
)

_ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
    "v", "w", "z", "br", "ch", "dr", "fl", "gr", "kr", "pl", "sh", "st", "tr", "th", "",
)  # a syllable is onset + vowel + coda, each drawn independently
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io")
_CODAS = ("", "n", "r", "s", "l", "m", "t", "k", "nd", "st")

N_WORDS = 20_000          # synthetic content words
TOPIC_WORDS = 1_500       # words per class topic
P_STOP = 0.30             # share of tokens that are stop words
P_TOPIC = 0.33            # share of tokens drawn from a topic
P_OWN_TOPIC = 0.75        # topic tokens from the row's own class (rest: a random class)
P_TOPIC_SWAP = 0.03       # rows whose topic is a random class regardless of label
P_COMMA = 0.05
LEN_MU, LEN_SIGMA, LEN_MIN, LEN_MAX = math.log(34.0), 0.6, 5, 200
VALUE_WEIGHT, TARGET_NOISE = 0.5, 0.3
FREQUENT_BG, FREQUENT_TOPIC = 2_000, 300  # words with large target weights


class SynthError(UserError, ValueError):
    """A bad ``write_corpus`` argument: a UserError the CLI prints, and a ValueError."""


def class_names(classes: int) -> list[str]:
    """Label names for ``classes`` classes: the fixed names, then ``class_13``, ..."""
    return [LABEL_NAMES[i] if i < len(LABEL_NAMES) else f"class_{i + 1}" for i in range(classes)]


def _writable() -> list[Format]:
    return [f for f in registered() if f.writer is not None]


def _supported() -> str:
    exts = [e for f in _writable() for e in f.extensions]
    fixed = [f.name for f in _writable() if not f.compressible]
    return (f"use one of {', '.join(exts)}, optionally followed by "
            f"{', '.join(COMPRESSIONS)}" + (f" (not for {', '.join(fixed)})" if fixed else ""))


def infer_format(url: str) -> tuple[str, str | None]:
    """``(format, compression)`` from the file extension of ``url``, by the
    format registry (:func:`lancetnic_flow.formats.format_for_path`).

    ``format`` is a registered format's name; ``compression`` is an fsspec
    compression name (``gzip``, ``bz2``, ``xz``, ``zstd``) or None. Raises a
    :class:`UserError` (also a ValueError) for an unknown extension.
    """
    fmt, compression = format_for_path(url)
    if fmt is None or fmt.writer is None:
        raise SynthError(f"cannot tell the output format of {url!r} from its extension", _supported())
    return fmt.name, compression


# --------------------------------------------------------------------------- model


@functools.lru_cache(maxsize=4)
def _model(classes: int, seed: int) -> "_Model":
    return _Model(classes, seed)


class _Model:
    """Everything that depends on (classes, seed) but not on the row: vocabulary, topics, weights."""

    def __init__(self, classes: int, seed: int):
        rng = np.random.default_rng([seed, 0x70C0])
        self.classes = classes
        words = self._vocabulary(rng)
        self.n_stop = len(STOP_WORDS)
        self.n_vocab = self.n_stop + len(words)
        plain = pa.array(list(STOP_WORDS) + words, pa.string())
        cap = pa.array([w.capitalize() for w in STOP_WORDS] + [w.capitalize() for w in words], pa.string())
        # token string = variant * n_vocab + id; 0 plain, 1 Capitalised, 2 "word,", 3 "word."
        self.strings = pa.concat_arrays([
            plain, cap, pc.binary_join_element_wise(plain, ",", ""),
            pc.binary_join_element_wise(plain, ".", ""),
        ])
        self.words = plain

        # stop words: Zipf over their fixed order
        self.stop_draw = _sampler(_zipf_cdf(self.n_stop, 1.0, 1.0))
        # background: Zipf over a seeded permutation of the content words
        self.bg_ids = (rng.permutation(len(words)) + self.n_stop).astype(np.int32)
        self.bg_draw = _sampler(_zipf_cdf(len(words), 1.05, 2.7))
        # topics: each class takes TOPIC_WORDS words from a shared pool, so they overlap
        pool_size = min(len(words), max(6_000, 1_000 * classes))
        pool = rng.choice(len(words), pool_size, replace=False) + self.n_stop
        self.topic_ids = np.stack(
            [pool[rng.choice(pool_size, TOPIC_WORDS, replace=False)] for _ in range(classes)]
        ).astype(np.int32)
        self.topic_draw = _sampler(_zipf_cdf(TOPIC_WORDS, 0.9, 5.0))
        # labels: mildly imbalanced priors, largest / smallest = 1.5
        w = 1.0 / (1.0 + 0.5 * np.arange(classes) / max(classes - 1, 1))
        self.label_cdf = np.cumsum(w / w.sum())
        self.label_cdf[-1] = 1.0
        self.labels = pa.array(class_names(classes), pa.string())
        # value: per-class mean; target: per-word weights (stop words weigh nothing)
        self.value_mean = rng.normal(0.0, 1.5, classes)
        # frequent words (top background ranks, top topic ranks) weigh most, so the
        # target is learnable from a few thousand rows; rare words add a little noise
        weight = rng.normal(0.0, 0.2, self.n_vocab)
        frequent = np.union1d(self.bg_ids[:FREQUENT_BG], self.topic_ids[:, :FREQUENT_TOPIC].ravel())
        weight[frequent] = rng.normal(0.0, 1.0, len(frequent))
        weight[: self.n_stop] = 0.0
        self.word_weight = weight.astype(np.float32)

    @staticmethod
    def _vocabulary(rng: np.random.Generator) -> list[str]:
        n_cand = 3 * N_WORDS
        n_syl = rng.choice(np.array([1, 2, 3]), n_cand, p=[0.10, 0.60, 0.30])
        n = int(n_syl.sum())

        def pick(options, p=None):
            return pa.array(options, pa.string()).take(pa.array(rng.choice(len(options), n, p=p)))

        coda_p = np.full(len(_CODAS), 0.35 / (len(_CODAS) - 1))
        coda_p[0] = 0.65
        vowel_p = np.array([3, 3, 3, 3, 2, 1, 1, 1, 1], float)
        parts = pc.binary_join_element_wise(
            pick(_ONSETS), pick(_VOWELS, vowel_p / vowel_p.sum()), pick(_CODAS, coda_p), ""
        )
        offsets = np.concatenate([[0], np.cumsum(n_syl)]).astype(np.int32)
        cand = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), parts), "")
        cand = cand.to_numpy(zero_copy_only=False)
        _, first = np.unique(cand, return_index=True)
        keep = np.sort(first)                      # first occurrences, in draw order
        stop = set(STOP_WORDS)
        words = [w for w in cand[keep] if 3 <= len(w) <= 11 and w not in stop]
        if len(words) < N_WORDS:  # pragma: no cover - 60k draws give far more
            raise RuntimeError("synthetic vocabulary too small")
        return words[:N_WORDS]


def _zipf_cdf(n: int, s: float, q: float) -> np.ndarray:
    p = 1.0 / (np.arange(n) + q) ** s
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    return cdf


_TABLE_BITS = 20


def _sampler(cdf: np.ndarray) -> np.ndarray:
    """An inverse-CDF lookup table: ``table[rng.integers(2**20)]`` draws from ``cdf``.

    Far faster than ``searchsorted`` per draw (random probes into a 20k-entry CDF
    miss the cache); the distribution is quantised to 2**-20, fine for synthetic text.
    """
    bounds = np.rint(cdf * (1 << _TABLE_BITS)).astype(np.int64)
    counts = np.diff(bounds, prepend=0)
    return np.repeat(np.arange(len(cdf), dtype=np.int16 if len(cdf) < (1 << 15) else np.int32), counts)


def _draw(table: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    return table[rng.integers(0, 1 << _TABLE_BITS, n, dtype=np.int32)]


SCHEMA = pa.schema([
    pa.field("text", pa.string()),
    pa.field("label", pa.string()),
    pa.field("value", pa.float64()),
    pa.field("target", pa.float64()),
])


def _block(model: _Model, seed: int, index: int, n: int, multilabel: bool = False) -> pa.RecordBatch:
    """Rows of block ``index`` (``n`` rows), from its own seeded generator.
    ``multilabel``: each row gets a set of labels (:func:`_label_sets`) and its
    topic words come from all of them."""
    rng = np.random.default_rng([seed, index, 0xB10C])
    k = model.classes
    label = np.searchsorted(model.label_cdf, rng.random(n), side="right").clip(0, k - 1)
    topic = np.where(rng.random(n) < P_TOPIC_SWAP, rng.integers(0, k, n), label)
    # Label sets draw from a generator of their own: the single-label corpus stays byte for byte the same.
    sets = _label_sets(model, np.random.default_rng([seed, index, 0x5E75]), label) if multilabel else None
    other = rng.integers(0, k, n)
    length = np.clip(np.rint(rng.lognormal(LEN_MU, LEN_SIGMA, n)), LEN_MIN, LEN_MAX).astype(np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    row = np.repeat(np.arange(n, dtype=np.int32), length)

    # token sources, in whole percent (uint8 keeps the per-token temporaries small)
    src = rng.integers(0, 100, total, dtype=np.uint8)
    ids = np.empty(total, np.int32)
    is_stop = src < round(100 * P_STOP)
    ids[is_stop] = _draw(model.stop_draw, rng, int(is_stop.sum()))
    is_topic = (src >= round(100 * P_STOP)) & (src < round(100 * (P_STOP + P_TOPIC)))
    t_rows = row[is_topic]
    del row
    own = rng.integers(0, 100, len(t_rows), dtype=np.uint8) < round(100 * P_OWN_TOPIC)
    t_cls = np.where(own, topic[t_rows] if sets is None else _set_topics(sets, t_rows, seed, index),
                     other[t_rows])
    ids[is_topic] = model.topic_ids[t_cls, _draw(model.topic_draw, rng, len(t_rows))]
    del t_rows, own, t_cls
    is_bg = ~(is_stop | is_topic)
    del is_stop, is_topic
    ids[is_bg] = model.bg_ids[_draw(model.bg_draw, rng, int(is_bg.sum()))]
    del is_bg

    value = model.value_mean[label] + rng.normal(0.0, 1.0, n)
    score = np.add.reduceat(model.word_weight[ids], offsets[:-1]).astype(np.float64) / np.sqrt(length)
    target = score + VALUE_WEIGHT * value + rng.normal(0.0, TARGET_NOISE, n)

    # token strings: variant * n_vocab + id; 0 plain, 1 Capitalised, 2 "word,", 3 "word."
    src = (rng.integers(0, 100, total, dtype=np.uint8) < round(100 * P_COMMA)).view(np.uint8)
    src *= 2
    src[offsets[1:] - 1] = 3     # last token: full stop
    src[offsets[:-1]] = 1        # first token: capitalised (length >= 5, so distinct)
    ids += src.astype(np.int32) * np.int32(model.n_vocab)
    del src
    tokens = model.strings.take(pa.array(ids))
    del ids
    text = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), tokens), " ")
    del tokens

    names = model.labels.take(pa.array(label)) if sets is None else _set_names(model, sets)
    return pa.RecordBatch.from_arrays(
        [text, names, pa.array(np.round(value, 4)), pa.array(np.round(target, 4))],
        schema=SCHEMA,
    )


# Labels per row of a multi-label corpus: 1, 2 or 3, with these shares.
SET_SIZES = (0.45, 0.35, 0.20)


def _label_sets(model: _Model, rng: np.random.Generator, label: np.ndarray) -> np.ndarray:
    """Each row's labels as rows × 3 class ids, sorted, -1 past its last: its
    drawn ``label`` plus up to two more distinct ones, drawn from the same priors."""
    n, k = len(label), model.classes
    size = rng.choice(np.arange(1, 4), n, p=SET_SIZES)
    extra = np.searchsorted(model.label_cdf, rng.random((n, 2)), side="right").clip(0, k - 1)
    second = np.where((size >= 2) & (extra[:, 0] != label), extra[:, 0], -1)
    third = np.where((size >= 3) & (extra[:, 1] != label) & (extra[:, 1] != extra[:, 0]), extra[:, 1], -1)
    sets = np.stack([label, second, third], axis=1)
    sets = np.sort(np.where(sets < 0, k, sets), axis=1)    # -1 sorts last as k, then goes back
    return np.where(sets == k, -1, sets)


def _set_topics(sets: np.ndarray, t_rows: np.ndarray, seed: int, index: int) -> np.ndarray:
    """The topic of each topic token: one of its row's labels, uniformly."""
    rng = np.random.default_rng([seed, index, 0x70B1])
    size = (sets >= 0).sum(1)
    slot = (rng.random(len(t_rows)) * size[t_rows]).astype(np.int64)
    return sets[t_rows, slot]


def _set_names(model: _Model, sets: np.ndarray) -> pa.Array:
    """Label sets as strings joined by ``|`` ("sports|tech"); the writers turn
    them into JSON lists (jsonl) or several ``__label__`` tags (fastText)."""
    size = (sets >= 0).sum(1)
    offsets = np.zeros(len(sets) + 1, np.int32)
    np.cumsum(size, out=offsets[1:])
    names = model.labels.take(pa.array(sets[sets >= 0]))
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), names), "|")


def generate_blocks(rows: int, *, classes: int = 4, seed: int = 0, multilabel: bool = False):
    """Yield the corpus as record batches of :data:`BLOCK_ROWS` rows (the last may be shorter)."""
    _check(rows, classes, seed)
    model = _model(classes, seed)
    for b in range(-(-rows // BLOCK_ROWS)):
        yield _block(model, seed, b, min(BLOCK_ROWS, rows - b * BLOCK_ROWS), multilabel)


def _check(rows: int, classes: int, seed: int) -> None:
    if int(rows) != rows or rows < 0:
        raise _refused("rows", rows, "a whole number >= 0", 100000)
    if int(classes) != classes or classes < 1:
        raise _refused("classes", classes, "a whole number >= 1", 4)
    if int(seed) != seed or seed < 0:
        raise _refused("seed", seed, "a whole number >= 0", 0)


def _refused(name: str, got: Any, want: str, example: int) -> SynthError:
    """A make-data value refused, its example as each caller gives it: ``--rows 100000`` on the
    command line, ``rows=100000`` to :func:`write_corpus`, ``rows: 100000`` in a workflow's make_data."""
    message = f"{name} must be {want}, got {got!r}"
    return SynthError(message, f"e.g. {name}={example}", cli=(f"--{message}", f"e.g. --{name} {example}"),
                      workflow=(message, f"e.g. make_data: {{{name}: {example}}}"))


# --------------------------------------------------------------------------- writing
# The registered formats' writers (data/writers.py) write the corpus, the same
# ones prediction outputs use.


def _output_format(url: str, format: str) -> tuple[Format, str | None]:
    """(format, compression) of the file to write: the format named, or the extension's."""
    if format == "auto":
        fmt = format_named(infer_format(url)[0])
    else:
        fmt = next((f for f in _writable() if f.name == ("text" if format == "txt" else format)), None)
        if fmt is None:
            raise SynthError(f"unknown format {format!r}",
                             f"use one of {', '.join(f.name for f in _writable())} or 'auto'")
    comp = split_compression(file_name(url).lower())[1]
    if comp is not None and not fmt.compressible:
        raise SynthError(
            f"{fmt.name} output cannot take a {comp} suffix: {url!r}",
            f"drop the compression suffix ({fmt.extensions[0]} is compressed internally)",
        )
    return fmt, comp


def _with_delimiter(url: str, fmt: Format, delimiter: str | None) -> Format:
    """``fmt`` writing CSV fields split by ``delimiter`` (``--delimiter``'s spellings: ``;``,
    ``tab``); refused for any other format, whose fields it would not split."""
    sep = csv_delimiter(delimiter)
    if sep is None or fmt.name == "csv":
        return delimited(fmt, sep)

    def words(name: str) -> tuple[str, str]:
        return (f"{name} {delimiter!r} splits a CSV file's fields, and {url} is written as {fmt.shown}: it would "
                "change nothing", f"write a .csv file (a .tsv file's fields are split by tabs), or drop {name}")

    raise SynthError(*words("delimiter"), cli=words("--delimiter"), workflow=words("make_data.delimiter"))


def _refuse_unlabelled(url: str, fmt: Format) -> None:
    """``multilabel`` asks for label sets, which plain text lines cannot hold: refused, as the
    corpus would be written without them, not a word said."""
    if fmt.name != "text":
        return
    labelled = ", ".join(f.extensions[0] for f in _writable() if f.name != "text")

    def words(name: str) -> tuple[str, str]:
        return (f"{name}: {url!r} is plain text, one line per row with no label, so no label set would be written",
                f"write a format with a label column: {labelled} (fastText: several __label__ tags a line), "
                f"or drop {name}")

    raise SynthError(*words("multilabel"), cli=words("--multilabel"), workflow=words("make_data.multilabel"))


def _as_written(table: pa.Table, fmt: Format, multilabel: bool) -> pa.Table:
    """A chunk as its format takes it: label sets (joined by ``|``) as lists, which
    CSV and TSV write joined by ``|`` again, JSON Lines as lists and fastText as
    several tags; Parquet keeps them joined, as :data:`SCHEMA` says."""
    if multilabel and fmt.name != "parquet":
        i = table.schema.get_field_index("label")
        table = table.set_column(i, "label", pc.split_pattern(table.column("label"), "|"))
    return table


def _open_to_write(url: str, storage_options: dict | None):
    """``url`` to write, its folders made, as ``fsspec.open`` does, with a local path that holds "::"
    read as that path (storage.url_to_fs)."""
    fs, path = url_to_fs(url, **dict(storage_options or {}))
    with contextlib.suppress(PermissionError):   # a store without folders, or one made by its owner
        fs.makedirs(fs._parent(path), exist_ok=True)
    return fsspec.core.OpenFile(fs, path, "wb")


def write_corpus(
    url: str,
    rows: int,
    *,
    classes: int = 4,
    seed: int = 0,
    format: str = "auto",
    storage_options: dict | None = None,
    chunk_rows: int = 20_000,
    progress: Callable[[int], None] | None = None,
    multilabel: bool = False,
    delimiter: str | None = None,
) -> dict:
    """Write ``rows`` rows of the synthetic corpus to ``url`` (any fsspec URL), streaming.

    ``format="auto"`` infers the format from the extension (see :func:`infer_format`);
    otherwise it names a registered format and only the compression is taken
    from the extension. ``chunk_rows`` is rounded to whole blocks of
    :data:`BLOCK_ROWS` rows and only sets how much is generated and written at a
    time (memory), never the content. ``progress(rows_done)`` is called after
    each chunk. ``multilabel``: every row has 1 to 3 labels, its topic words
    drawn from all of them; the ``label`` column holds them joined by ``|``
    (csv, tsv, parquet), as a JSON list (jsonl) or as several ``__label__``
    tags (fastText). ``delimiter``: a CSV file's fields split by it (``";"``, ``"|"``,
    ``"tab"``), as ``train(delimiter=...)`` reads them; refused for other formats.

    Returns ``{"url", "rows", "format", "compression", "bytes"}``, ``bytes`` being
    the size of the written (compressed) file, or -1 if the filesystem cannot tell;
    and ``delimiter`` for a CSV file's other than the comma.
    """
    _check(rows, classes, seed)
    rows, classes, seed = int(rows), int(classes), int(seed)
    fmt, comp = _output_format(url, format)
    fmt = _with_delimiter(url, fmt, delimiter)
    # as make-data refuses --storage-option for a local OUT: they would open nothing
    refuse_local_storage_options(storage_options, {"url": url}, "storage_options")
    if multilabel:
        _refuse_unlabelled(url, fmt)
    if int(chunk_rows) != chunk_rows or chunk_rows < 1:
        raise SynthError(f"chunk_rows must be a whole number >= 1, got {chunk_rows!r}")
    chunk_blocks = max(1, round(chunk_rows / BLOCK_ROWS))
    model = _model(classes, seed)
    n_blocks = -(-rows // BLOCK_ROWS)

    def chunks():
        for start in range(0, n_blocks, chunk_blocks):
            stop = min(start + chunk_blocks, n_blocks)
            batches = [_block(model, seed, b, min(BLOCK_ROWS, rows - b * BLOCK_ROWS), multilabel)
                       for b in range(start, stop)]
            yield pa.Table.from_batches(batches, schema=SCHEMA), min(stop * BLOCK_ROWS, rows)

    # a named pipe (a reader waits at its other end) is opened so that one nobody reads is refused, not a wait
    of = open_special(url) if special_kind(url) is not None else _open_to_write(url, storage_options)
    with reader_kept_reading(url), of as f, compressed(f, comp) as sink:
        writer = None
        for table, done in chunks():
            table = _as_written(table, fmt, multilabel)
            writer = writer or fmt.open_writer(sink, table.schema)
            for at in range(0, table.num_rows, BLOCK_ROWS):   # a block at a time: a Parquet row group is a block
                writer.write(table.slice(at, BLOCK_ROWS))
            if progress is not None:
                progress(done)
        if writer is None:   # no rows: the header or schema alone
            writer = fmt.open_writer(sink, _as_written(SCHEMA.empty_table(), fmt, multilabel).schema)
        writer.close()

    try:
        size = int(of.fs.size(of.path))
    except Exception:  # noqa: BLE001 - size is informational only
        size = -1
    return {"url": url, "rows": rows, "format": fmt.name, "compression": comp, "bytes": size,
            **({"delimiter": fmt.delimiter} if fmt.name == "csv" and fmt.delimiter != "," else {})}
