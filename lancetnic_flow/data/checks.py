"""Input checks: the columns a configuration reads, and its training and
validation files (or predict's and evaluate's) planned into partitions and
checked against them before any work starts.

Free of torch on purpose: the commands run these checks before they load
the trainer or a model, so a wrong path, format or column is exit 2 in well
under a second, not after torch's import.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from ..config import TrainConfig, label_sep_given
from ..errors import UserError
from ..formats import csv_delimiter, format_named, text_encoding
from ..options import bad, said
from .heads import file_columns, head_schema
from .idle_options import refuse_idle_delimiter, refuse_idle_encoding, refuse_idle_label_sep
from .readers import read_partition
from .readers.lines import check_line_columns
from .readers.table import check_names
from .sources import Columns, FileInfo, Partition, SourcePlan, plan_source
from .usable import text_rule
from ..plurals import counted


# Headers read at once while checking many files (remote stores answer in parallel).
CHECK_THREADS = 16

# What to check when every row was skipped for a reason, by the reason most rows had
# (train's training rows, evaluate's rows to score: the same column options).
# Options named as {{section.field}}: options.bad, or options.said, says them in the reader's words.
SKIP_HINTS = {
    "missing_target": "the {{data.target}} column {target!r} must hold numbers, written with a decimal point "
                      "(1.5, not 1,5); check {{data.target}}",
    "missing_label": "the {{data.label}} column {label!r} must hold a value in every row; check {{data.label}}",
    "empty_text": "the {{data.text}} column {text} must hold text the analyzer reads (words, for "
                  "{{features.analyzer}} word); check {{data.text}}",
    "not_text": "the {{data.text}} column {text} must hold strings, not numbers, lists or objects; check "
                "{{data.text}}",
    "unknown_label": "no training row has the validation rows' labels; check the {{data.val}} data",
}


def skip_hint(reason: str, *, label: str | None, target: str | None, text: tuple[str, ...] | list[str],
              style: str | None = "cli") -> str:
    """What to check when every row was skipped, most of them for ``reason``: its options named
    as ``style`` names them (options.Words), or as ``{section.field}`` where ``style`` is None."""
    hint = SKIP_HINTS.get(reason, "check the file, {{data.format}} and the column options").format(
        target=target, label=label, text=", ".join(map(repr, text)))
    return hint if style is None else said(hint, style)


def check_columns(plan: SourcePlan, columns: Columns, *, storage_options=None) -> dict[str, pa.Schema | None]:
    """Read the head of every file and raise UserError for the first one that
    lacks a column or cannot be read as its format (files in parallel); what
    each head says its columns hold (:func:`~.heads.head_schema`, by URL) is
    kept in ``plan.heads`` and returned. With ``columns.label_sep`` a JSON
    Lines head is read past its first object, to tell a column of lists."""
    if not columns.text:
        raise UserError("no text column given", "name at least one text column")
    if not plan.files:
        return {}
    if not plan.partitions:
        shown = ", ".join(f.url for f in plan.files[:5]) + (
            f" and {len(plan.files) - 5} more" if len(plan.files) > 5 else "")
        raise UserError(f"nothing to read: {shown} "
                        f"{'is' if len(plan.files) == 1 else 'are'} empty",
                        "point at files that hold rows")

    def check(fi: FileInfo) -> pa.Schema | None:
        if format_named(fi.format).columns is not None:
            check_line_columns(fi.url, fi.format, columns)
            return None
        schema = head_schema(fi, storage_options, columns.encoding, rows=columns.label_sep is not None,
                             wanted=columns.names(), delimiter=columns.delimiter)
        if schema is not None:
            check_names(fi.url, schema.names, columns, fi.format)
        return schema

    if len(plan.files) == 1:
        schemas = [check(plan.files[0])]
    else:
        with ThreadPoolExecutor(min(CHECK_THREADS, len(plan.files)), thread_name_prefix="lancetnic-check") as pool:
            # map keeps file order: the error reported is the first file's in the listing.
            schemas = list(pool.map(check, plan.files))
    plan.heads.update((fi.url, schema) for fi, schema in zip(plan.files, schemas))
    return plan.heads


def first_columns(plan: SourcePlan, storage_options=None, encoding: str | None = None,
                  delimiter: str | None = None) -> list[str] | None:
    """The columns of the first file of ``plan`` (None: a line format, or nothing to read there)."""
    return file_columns(plan.files[0], storage_options, encoding, delimiter) if plan.files else None


def training_columns(cfg: TrainConfig) -> Columns:
    """The columns ``cfg`` reads: the label unless it regresses (a set of labels
    per row with multilabel), the target when it regresses; a text is usable by
    the rule of the analyzer ``cfg`` computes (``auto`` undecided: the widest)."""
    d, task = cfg.data, cfg.training.task
    return Columns(text=tuple(d.text), label=d.label if task != "regress" else None,
                   target=d.target if task in ("regress", "multitask") else None, numeric=tuple(d.numeric),
                   multilabel=task == "multilabel", label_sep=d.label_sep if task == "multilabel" else None,
                   encoding=text_encoding(d.encoding), delimiter=csv_delimiter(d.delimiter),
                   text_rule=text_rule(cfg.features))


def split_blocksize(src: SourcePlan, blocksize: int, want: int, floor: int = 1 << 20, at_least: int = 1) -> int:
    """A block size that gives about ``want`` partitions of the splittable
    files, never below ``floor`` bytes nor above ``blocksize`` — except that
    the floor gives way to cut them into ``at_least`` partitions (a --ddp rank
    each: one holding none trains nothing)."""
    splittable = sum(f.size for f in src.files if f.compression is None and format_named(f.format).splits_by_bytes)
    if not splittable or len(src.partitions) >= want:
        return blocksize
    if at_least > 1:   # rounded up: rounded down, a last partition of a byte or two held no row
        floor = max(1, min(floor, -(-splittable // at_least)))
    return max(floor, min(blocksize, -(-splittable // want)))


def checked_source(urls: list[str], fmt: str, storage_options: dict, blocksize: int, columns: Columns,
                   in_order: bool = False) -> SourcePlan:
    """``urls`` planned into partitions, with the columns ``columns`` names checked in the
    first file; ``in_order``: the files in the order ``urls`` name them (plan_source)."""
    src = plan_source(urls, format=fmt, storage_options=storage_options, blocksize=blocksize, names=columns.names(),
                      in_order=in_order, delimiter=columns.delimiter)
    check_columns(src, columns, storage_options=storage_options)
    check_first_block(src, columns, storage_options)
    return src


# The start of the first file, read up front as a worker reads it, so a file in
# another encoding stops the run before a cluster starts.
FIRST_BLOCK = 1 << 20


def check_first_block(plan: SourcePlan, columns: Columns, storage_options=None) -> None:
    """Read the first ``FIRST_BLOCK`` bytes of the first file as a worker would,
    raising what reading them raises: a file in another encoding than expected
    (:func:`~.readers.table.check_decodable`), UTF-16 text, labels that do not fit."""
    fi = next((f for f in plan.files if f.size), None)
    if fi is None or not format_named(fi.format).splits_by_bytes:
        return
    part = Partition(0, fi, 0, -1 if fi.compression else min(fi.size, FIRST_BLOCK))
    chunks = read_partition(part, columns, storage_options=storage_options, chunk_bytes=FIRST_BLOCK)
    try:
        next(chunks, None)
    finally:
        chunks.close()


# What --analyzer auto reads of the training text: this many bytes in all,
# from up to SAMPLE_PARTS partitions spread over the input (a sorted file's
# first block may be one kind of text).
SAMPLE_BYTES, SAMPLE_PARTS = 256 * 1024, 4


def sample_rows(plan: SourcePlan, columns: Columns, storage_options=None) -> pa.Table | None:
    """Rows from the start of up to :data:`SAMPLE_PARTS` partitions spread over
    ``plan``, about :data:`SAMPLE_BYTES` in all, read as a worker reads them
    (``columns``' text, and label when it has one); None when there are none."""
    parts = plan.partitions
    if not parts:
        return None
    step = max(1, len(parts) // SAMPLE_PARTS)
    each = SAMPLE_BYTES // min(SAMPLE_PARTS, len(parts))
    tables: list[pa.Table] = []
    for p in parts[::step][:SAMPLE_PARTS]:
        if p.length > 0 and format_named(p.file.format).splits_by_bytes:
            p = Partition(p.index, p.file, p.start, min(p.length, each))
        chunks = read_partition(p, columns, storage_options=storage_options, chunk_bytes=each)
        try:
            chunk = next(chunks, None)
        finally:
            chunks.close()
        if chunk is not None and chunk.table.num_rows:
            tables.append(chunk.table.select([c for c in ("text", "label") if c in chunk.table.column_names]))
    return pa.concat_tables(tables) if tables else None


def sample_texts(plan: SourcePlan, columns: Columns, storage_options=None,
                 sample: pa.Table | None = None) -> list[str]:
    """The texts of :func:`sample_rows` (``sample``, when already read)."""
    sample = sample if sample is not None else sample_rows(plan, columns, storage_options)
    return [] if sample is None else [t for t in sample.column("text").to_pylist() if t]


def sample_label_count(sample: pa.Table | None) -> int:
    """How many distinct labels (label set members, for label sets) a sample holds."""
    if sample is None or "label" not in sample.column_names:
        return 0
    labels = sample.column("label")
    if pa.types.is_list(labels.type) or pa.types.is_large_list(labels.type):
        labels = pc.list_flatten(labels)
    return len(pc.unique(pc.drop_null(labels)))


# A --ddp rank learns from its share alone between syncs, and a share is whole
# partitions: with one stretch of a file sorted by something that goes with the
# label (names, dates, sources) a rank sees a few classes, and the averaged
# replicas lose accuracy (docs/benchmarks.md, "Eight ranks"). Partitions this
# small cost a task's overhead each, not memory.
RANK_PARTITIONS = 8
RANK_FLOOR = 256 << 10


def idle_ranks_warning(rows: list[int], partitions: int) -> str | None:
    """What a --ddp run says when some rank's share of the training partitions
    holds no row (``rows``: each rank's rows in the first epoch): that rank
    trains nothing and waits at every step: the others take its part of each batch (no faster than
    fewer ranks), or its untrained replica joins the average. None when every rank has rows."""
    idle = [r for r, n in enumerate(rows) if n == 0]
    if len(rows) < 2 or not idle:
        return None
    which = f"rank {idle[0]}" if len(idle) == 1 else f"ranks {', '.join(map(str, idle))}"
    return (f"{{training.ddp}} {len(rows)}: the training rows are in {counted(partitions, 'partition')}, so {which} "
            f"{'has' if len(idle) == 1 else 'have'} none to train on (a share is whole partitions): the run is no faster "
            f"than on fewer ranks; lower {{training.ddp}}, or cut the input finer: a "
            "smaller {cluster.blocksize} (text files), more files or Parquet row groups (a compressed file is one "
            "partition), or a new {output.cache} folder where an earlier run cut the entry coarser")


def coarse_cache_warning(cut: int, planned: int, ranks: int) -> str | None:
    """What a --ddp run says when the shard cache it reuses was cut into fewer
    partitions than its own plan (an earlier run without --ddp made the entry:
    the cache is keyed by the data, not its partitioning); None otherwise."""
    if ranks < 2 or cut >= planned or cut >= RANK_PARTITIONS * ranks:
        return None
    return (f"the shard cache was cut into {counted(cut, 'partition')} by an earlier run, where this run's plan cuts {planned} "
            f"for {ranks} ranks: between syncs each rank learns from fewer stretches of the input, which costs "
            "accuracy when the input is sorted (by name, date, source); a new {output.cache} folder featurises it anew")


def plan_training_sources(cfg: TrainConfig, blocksize: int, *, threads: int = 0
                          ) -> tuple[SourcePlan, SourcePlan | None]:
    """Partitions of the training (and validation) data, columns checked.

    ``threads``: the cluster's worker threads. Unless the user chose the
    block size, small inputs are cut into about four partitions a thread, so
    featurisation runs in parallel and epoch 1 overlaps training; with
    ``--ddp N`` into :data:`RANK_PARTITIONS` a rank at least, so each rank's
    share (whole partitions) comes from all over the input."""
    so, fmt, columns = cfg.data.storage_options, cfg.data.format, training_columns(cfg)
    train_src = checked_source(cfg.data.train, fmt, so, blocksize, columns)
    ranks = cfg.training.ddp or 0
    if (threads or ranks > 1) and not cfg.cluster.blocksize:
        want, floor = 4 * threads, 1 << 20
        if ranks > 1:
            want, floor = max(want, RANK_PARTITIONS * ranks), RANK_FLOOR
        small = split_blocksize(train_src, blocksize, want, floor=floor, at_least=ranks)
        if small < blocksize:
            heads = train_src.heads   # the same files, cut finer: their heads as read
            train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=small,
                                    names=columns.names(), delimiter=columns.delimiter)
            train_src.heads.update(heads)
    refuse_share_as_val(cfg.data.val)
    val_src = checked_source(cfg.data.val, fmt, so, blocksize, columns) if cfg.data.val else None
    if val_src is not None:
        refuse_files_in_both(train_src, val_src)
    if label_sep_given(cfg):
        refuse_idle_label_sep(columns, train_src, val_src, storage_options=so)
    refuse_idle_encoding(columns, train_src, val_src, storage_options=so, named=cfg.data.encoding)
    refuse_idle_delimiter(columns, train_src, val_src)
    return train_src, val_src


# A share of rows as a user types one: 0.2, .2, 20%.
SHARE = re.compile(r"(?:0?\.\d+|\d+(?:\.\d+)?%)")


def refuse_share_as_val(val: list[str]) -> None:
    """A UserError when ``--val`` was given a share of rows (``0.2``, ``20%``) that
    names no file: it takes validation data, and the share is ``--val-fraction``'s.
    Told as a missing file, the user was pointed at their folder's listing."""
    for given in val:
        if SHARE.fullmatch(given) and not os.path.exists(given):
            share = float(given[:-1]) / 100 if given.endswith("%") else float(given)
            fix = f"{{data.val_fraction}} {share:g}" if 0 < share < 1 else "{data.val_fraction} 0.1"
            raise UserError(f"{{data.val}} {given}: no file has that name; {{data.val}} takes validation data "
                            "(files, globs, URLs)",
                            f"to hold out a share of the training rows, use {fix}")


def refuse_files_in_both(train: SourcePlan, val: SourcePlan) -> None:
    """A UserError when a file is training and ``--val`` data at once (a folder
    or glob that holds the validation file, or the file by another name: a
    symbolic or hard link): its rows would be trained on and then scored as
    unseen, and every figure of the run would flatter it."""
    trained = {file_identity(f.url): f.url for f in train.files}
    both = sorted((trained[key], f.url) for f in val.files if (key := file_identity(f.url)) in trained)
    if both:
        first, as_val = both[0]
        named = f" (as {as_val.split('file://', 1)[-1]} in {{data.val}}: a link to it)" if as_val != first else ""
        more = f" (and {len(both) - 1} more)" if len(both) > 1 else ""
        raise UserError(f"{first}{named}{more} is training data and {{data.val}} data at once: its rows would be trained "
                        "on and then scored as unseen",
                        "train on paths, a glob or a folder that leave the {data.val} files out, or drop {data.val} to "
                        "hold out {data.val_fraction} of the training rows")


def file_identity(url: str) -> object:
    """What tells one file from another: a local file's device and inode (a link, symbolic or hard,
    is its target), else its URL."""
    if url.startswith("file://"):
        try:
            st = os.stat(url[len("file://"):])
            return st.st_dev, st.st_ino
        except OSError:
            pass
    return url


def check_training_inputs(cfg: TrainConfig) -> None:
    """Raise the UserError a bad path, format or column in ``cfg`` would
    raise in training, without a cluster and without torch."""
    plan_training_sources(cfg, cfg.cluster.blocksize or 64 * 2**20)
