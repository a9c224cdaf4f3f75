"""The fit pass: one Dask pass over the training partitions, tree-reduced.

Every partition contributes a :class:`FitStats` (document frequencies, label
counts, numeric moments, row accounting); partials are merged in groups of
``split_every`` on the workers, so the client only ever receives the final,
merged statistics. Validation rows (by stable hash) are left out of the fit.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..allocator import trim_allocator
from ..config import FeatureConfig
from ..data.readers import read_partition
from ..data.sources import Chunk, Columns, Partition
from ..events import NULL_EVENTS, Events
from .label_values import as_run_labels
from .labelsets import is_label_sets, set_counts
from .rows import RowBlock
from .split import Holdout, held_out_hashes, validation_mask
from .tokenize import texts_of
from .vectorize import PIECE_ROWS, FittedFeatures, text_options
from .vocab import FitStats, Moments, bucket_idf, merge_stats, merge_terms, prune, smooth_idf, term_counts

# The vocabulary's size cap when --max-features is not given.
DEFAULT_MAX_FEATURES = 100_000


def table_stats(table: pa.Table, train: np.ndarray, numeric: tuple[str, ...]) -> FitStats:
    """What a chunk's training rows (``train``: a mask) say about labels and
    numeric columns, and the labels of its validation rows."""
    stats = FitStats(docs=int(train.sum()))
    if "label" in table.column_names and is_label_sets(table["label"]):
        # Rows per label. Validation rows keep their row whatever their labels
        # (a label training never saw is only left out of its set).
        if train.any():
            stats.labels = set_counts(table["label"].filter(pa.array(train)))
        if not train.all():   # their labels (rows per label), to note those read in the run's spelling
            stats.val_labels = set_counts(table["label"].filter(pa.array(~train)))
    elif "label" in table.column_names:
        for name, mask in (("labels", train), ("val_labels", ~train)):
            if mask.any():
                vc = table["label"].filter(pa.array(mask)).value_counts()
                setattr(stats, name, dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist())))
    for col in (("target",) if "target" in table.column_names else ()) + numeric:
        stats.numeric[col] = Moments.of(table[col].filter(pa.array(train)).to_numpy(zero_copy_only=False)
                                        .astype(np.float64))
    return stats


def bucket_frequencies(counts: RowBlock, train: np.ndarray, buckets: int) -> np.ndarray:
    """Document frequency of each bucket over the training rows of a block of
    term counts (a row's ids are distinct, so each counts once)."""
    rows = np.repeat(train, np.diff(counts.offsets))
    return np.bincount(counts.indices[rows], minlength=buckets)


def record_held_out(stats: FitStats, table: pa.Table, is_val: np.ndarray, held: float | Holdout) -> None:
    """Keep the validation rows' text hashes in ``stats``, when ``held`` asks for a record."""
    if isinstance(held, Holdout) and held.record:
        stats.held_out, stats.held_out_limit = held_out_hashes(table, is_val), held.record


def _chunk_stats(chunk: Chunk, fcfg: FeatureConfig, val_fraction: float | Holdout,
                 numeric: tuple[str, ...]) -> FitStats:
    """The vocabulary modes' statistics of one chunk: term document frequencies of its training rows."""
    table = chunk.table
    is_val = validation_mask(table, val_fraction)
    train_mask = ~is_val
    stats = table_stats(table, train_mask, numeric)
    stats.rows_read, stats.skipped = chunk.rows_read, dict(chunk.skipped)
    record_held_out(stats, table, is_val, val_fraction)
    train = table.filter(pa.array(train_mask)) if is_val.any() else table
    if train.num_rows:
        # Piece by piece, so tokenisation's working arrays stay small; the
        # per-piece tables hold distinct terms only.
        opts = text_options(fcfg)
        ngram_min, ngrams = (1, 1) if fcfg.mode == "ids" else (opts["ngram_min"], opts["ngrams"])
        pieces = []
        texts = texts_of(train, opts["tokenizer"], lowercase=opts["lowercase"], normalize=opts["normalize"])
        for start in range(0, train.num_rows, PIECE_ROWS):
            terms, occurrences = term_counts(texts.slice(start, PIECE_ROWS), ngram_min=ngram_min,
                                             ngrams=ngrams, lowercase=opts["lowercase"],
                                             normalize=opts["normalize"], stop_words=opts["stop_words"],
                                             tokenizer=opts["tokenizer"])
            stats.tokens += occurrences
            pieces.append(terms)
            if len(pieces) == 4:  # fold early: peak = merged terms + a few pieces
                pieces = [merge_terms(pieces)]
        stats.terms = merge_terms(pieces)
    return stats


def fit_partition(part: Partition, columns: Columns, fcfg: FeatureConfig, storage_options: dict,
                  chunk_bytes: int, val_fraction: float | Holdout) -> FitStats:
    """Worker task of the vocabulary modes: the fit statistics of one partition (chunk by chunk)."""
    parts = [_chunk_stats(c, fcfg, val_fraction, columns.numeric)
             for c in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes)]
    out = merge_stats(parts) if len(parts) != 1 else parts[0]
    out.bytes_read = part.length if part.length > 0 else part.file.size
    del parts
    trim_allocator()   # the piece tables are gone: give their heap back before the next task
    return out


def held_out_partition(part: Partition, split: str | None, *, columns: Columns, storage_options: dict,
                       chunk_bytes: int, val_fraction: Holdout, labels: list[str] | None = None) -> FitStats:
    """Worker task: only the text hashes of one partition's validation rows
    (``split``: its source's forced split), for a run whose fit pass did not
    record them (training/held_out.py); with ``labels`` (the run's classes)
    only those of rows with one of them."""
    parts = []
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        stats = FitStats()
        is_val = validation_mask(chunk.table, val_fraction, split) & known_labels(chunk.table, labels)
        record_held_out(stats, chunk.table, is_val, val_fraction)
        parts.append(stats)
    return merge_stats(parts) if parts else FitStats(held_out_limit=val_fraction.record)


def known_labels(table: pa.Table, labels: list[str] | None) -> np.ndarray:
    """Which rows have one of ``labels`` (None: every row). A validation row of
    another label is skipped (``unknown_label``): no model learns it, so no
    record may say one did. A label set keeps its row, less that label."""
    if labels is None or "label" not in table.column_names or is_label_sets(table["label"]):
        return np.ones(table.num_rows, bool)
    # a label the run holds in another spelling of its value is read as the run's: the model learns its row
    found = pc.is_in(as_run_labels(table["label"], labels)[0], value_set=pa.array(labels, pa.string()))
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False).astype(bool)


def _progress_of(stats: FitStats) -> tuple[int, int]:
    """Runs where ``stats`` lives: the trainer gets two numbers, not the term tables."""
    return stats.rows_read, stats.bytes_read


def _merge_fit(parts: list[FitStats]) -> FitStats:
    out = merge_stats(parts)
    del parts
    trim_allocator()
    return out


def _finish_on_worker(stats: FitStats, fcfg: FeatureConfig, columns: Columns) -> tuple[FittedFeatures, FitStats]:
    fitted = finish_fit(stats, fcfg, columns)
    stats.terms = stats.buckets = None   # counted and pruned; the caller gets the totals (and bounded names) only
    return fitted, stats


def _as_completed(client: Any, futures: list) -> Any:
    """``futures`` as they finish: the client's own order when it runs tasks here, else Dask's."""
    if getattr(client, "in_process", False):
        return client.as_completed(futures)
    from distributed import as_completed

    return as_completed(futures)


def fit_features(client: Any, partitions: list[Partition], columns: Columns, fcfg: FeatureConfig, *,
                 storage_options: dict, chunk_bytes: int, val_fraction: float | Holdout, task: Callable = fit_partition,
                 splits: list | None = None, events: Events = NULL_EVENTS, split_every: int = 8,
                 relabel: Callable[[FittedFeatures], FittedFeatures] | None = None,
                 **task_options: Any) -> tuple[FittedFeatures, FitStats]:
    """Run the fit pass on the cluster and prune: the fitted features, and the
    pass's totals (rows, docs, labels, skipped, the shards a counting ``task``
    wrote, the hashed buckets' sampled ``names``, bounded: features/names.py;
    ``terms`` and ``buckets`` are not returned).

    ``task(partition, [split,] columns=, fcfg=, …)`` makes each partition's
    :class:`FitStats`: :func:`fit_partition` for the vocabulary modes, or a
    task that also writes the partition's term counts as shards (``splits``:
    each partition's forced split, e.g. "val" for a separate validation source).
    ``relabel``: the features the run trains with, made from the fitted ones (a
    continued run's are its old run's): returned, and what the ``fitted`` event says."""
    t0 = time.monotonic()
    events.emit("stage", stage="fitting", total=len(partitions))
    args = [partitions] if splits is None else [partitions, splits]
    leaves = client.map(task, *args, columns=columns, fcfg=fcfg, storage_options=storage_options,
                        chunk_bytes=chunk_bytes, val_fraction=val_fraction, pure=False, **task_options)
    # The merge tree is fixed by partition index (float sums stay bit-identical
    # run to run); its tasks outrank the partitions still queued, so a group
    # merges as soon as its partitions are done and only ~split_every
    # partitions' statistics wait on the workers, however many there are.
    level = leaves
    while len(level) > 1:
        level = [client.submit(_merge_fit, level[i:i + split_every], pure=False, priority=10)
                 for i in range(0, len(level), split_every)]
    # Progress from where each result lives: two numbers, not the term tables. In this process the
    # pool runs tasks first in, first out, without priorities: a progress task would wait behind the
    # merges (the whole pass), so each partition is counted as it finishes, read here.
    here = getattr(client, "in_process", False)
    progress = leaves if here else [client.submit(_progress_of, leaf, pure=False, priority=20) for leaf in leaves]
    del leaves
    done = 0
    for fut in _as_completed(client, progress):
        # A task's error surfaces here, with its own message.
        rows, nbytes = _progress_of(fut.result()) if here else fut.result()
        done += 1
        events.emit("progress", stage="fitting", done=done, total=len(partitions), rows=rows, bytes_read=nbytes)
    del progress
    # Pruning runs where the merged statistics are: the trainer receives the
    # kept vocabulary, not every distinct term (3.5 M bigrams at 250 k rows).
    fitted, stats = client.submit(_finish_on_worker, level[0], fcfg, columns, pure=False).result() \
        if level else (finish_fit(FitStats(), fcfg, columns), FitStats())
    if relabel is not None:
        fitted = relabel(fitted)
    events.emit("fitted", seconds=time.monotonic() - t0, vocabulary=fitted.dim, docs=stats.docs,
                labels=len(fitted.labels), rows_read=stats.rows_read, skipped=stats.skipped)
    return fitted, stats


def finish_fit(stats: FitStats, fcfg: FeatureConfig, columns: Columns) -> FittedFeatures:
    """Merged statistics → vocabulary, idf, label set and scalers."""
    mode = fcfg.mode or "tfidf"   # unresolved (no model chose): the default features
    f = FittedFeatures(mode=mode, **text_options(fcfg), sublinear_tf=fcfg.sublinear_tf, buckets=fcfg.buckets,
                       max_len=fcfg.max_len, docs=stats.docs)
    if mode == "ids":
        f.ngrams = f.ngram_min = 1   # token ids in order: no word pairs
    if mode != "hashing":
        terms, df = prune(stats.terms, stats.docs, min_df=fcfg.min_df, max_df=fcfg.max_df,
                          max_features=fcfg.max_features if fcfg.max_features is not None else DEFAULT_MAX_FEATURES)
        f.vocabulary = terms
        # --no-idf: term frequencies alone (scikit-learn's use_idf=False); token ids keep theirs
        f.idf = smooth_idf(df, stats.docs) if fcfg.idf or mode == "ids" else None
    elif fcfg.idf and stats.buckets is not None:
        f.idf = bucket_idf(stats.buckets, stats.docs)
    # Most frequent first (ties by name), so class ids are stable across runs.
    ranked = sorted(stats.labels.items(), key=lambda kv: (-kv[1], kv[0]))
    f.labels, f.label_counts = [k for k, _ in ranked], [v for _, v in ranked]
    if "target" in stats.numeric:
        m = stats.numeric["target"]
        # A constant target (every training row's the same) keeps its scale 0: every prediction is then
        # the mean exactly, where a network's output trained towards 0 left a few thousandths on it.
        f.target = (m.mean, m.std)
    f.numeric = {c: (stats.numeric[c].mean, stats.numeric[c].std or 1.0) if c in stats.numeric else (0.0, 1.0)
                 for c in columns.numeric}
    return f
