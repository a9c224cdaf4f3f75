"""Input checks: the columns a configuration reads, and its training and
validation files (or predict's and evaluate's) planned into partitions and
checked against them before any work starts.

Free of torch on purpose: the commands run these checks before they load
the trainer or a model, so a wrong path, format or column is exit 2 in well
under a second, not after torch's import.
"""
from __future__ import annotations

import fsspec

from ..config import TrainConfig
from ..errors import UserError
from ..storage import open_options
from .readers import csv, jsonl, parquet
from .readers.lines import check_line_columns
from .readers.table import check_names
from .sources import Columns, SourcePlan, open_error, plan_source


def check_columns(plan: SourcePlan, columns: Columns, *, storage_options=None) -> None:
    """Read the head of the first file and raise UserError for missing columns."""
    if not columns.text:
        raise UserError("no text column given", "name at least one text column")
    if not plan.files:
        return
    if not plan.partitions:
        shown = ", ".join(f.url for f in plan.files[:5]) + (
            f" and {len(plan.files) - 5} more" if len(plan.files) > 5 else "")
        raise UserError(f"nothing to read: {shown} "
                        f"{'is' if len(plan.files) == 1 else 'are'} empty",
                        "point at files that hold rows")
    fi = plan.files[0]
    if fi.format in ("text", "fasttext"):
        check_line_columns(fi.url, fi.format, columns)
        return
    have = first_columns(plan, storage_options)
    if have is not None:
        check_names(fi.url, have, columns, fi.format)


def first_columns(plan: SourcePlan, storage_options=None) -> list[str] | None:
    """The columns of the first file of ``plan`` (None: a line format, or nothing to read there)."""
    if not plan.files:
        return None
    fi = plan.files[0]
    url = fi.url
    if fi.format in ("text", "fasttext") or fi.size == 0:
        return None
    try:
        if fi.format == "parquet":
            return parquet.columns_of(url, storage_options)
        with fsspec.open(url, "rb", compression=fi.compression, **open_options(url, storage_options)) as f:
            return csv.columns_of(f, url, fi.format) if fi.format in ("csv", "tsv") else jsonl.columns_of(f, url)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise open_error(url, exc) from exc


def training_columns(cfg: TrainConfig) -> Columns:
    """The columns ``cfg`` reads: the label unless it regresses (a set of labels
    per row with multilabel), the target when it regresses."""
    d, task = cfg.data, cfg.training.task
    return Columns(text=tuple(d.text), label=d.label if task != "regress" else None,
                   target=d.target if task in ("regress", "multitask") else None, numeric=tuple(d.numeric),
                   multilabel=task == "multilabel", label_sep=d.label_sep if task == "multilabel" else None)


def split_blocksize(src: SourcePlan, blocksize: int, want: int, floor: int = 1 << 20) -> int:
    """A block size that gives about ``want`` partitions of the splittable
    files, never below ``floor`` bytes nor above ``blocksize``."""
    splittable = sum(f.size for f in src.files if f.compression is None and f.format != "parquet")
    if not splittable or len(src.partitions) >= want:
        return blocksize
    return max(floor, min(blocksize, -(-splittable // want)))


def checked_source(urls: list[str], fmt: str, storage_options: dict, blocksize: int, columns: Columns
                   ) -> SourcePlan:
    """``urls`` planned into partitions, with the columns ``columns`` names checked in the first file."""
    src = plan_source(urls, format=fmt, storage_options=storage_options, blocksize=blocksize)
    check_columns(src, columns, storage_options=storage_options)
    return src


def plan_training_sources(cfg: TrainConfig, blocksize: int, *, threads: int = 0
                          ) -> tuple[SourcePlan, SourcePlan | None]:
    """Partitions of the training (and validation) data, columns checked.

    ``threads``: the cluster's worker threads. Unless the user chose the
    block size, small inputs are cut into about four partitions a thread, so
    featurisation runs in parallel and epoch 1 overlaps training."""
    so, fmt, columns = cfg.data.storage_options, cfg.data.format, training_columns(cfg)
    train_src = checked_source(cfg.data.train, fmt, so, blocksize, columns)
    if threads and not cfg.cluster.blocksize:
        small = split_blocksize(train_src, blocksize, 4 * threads)
        if small < blocksize:
            train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=small)
    val_src = checked_source(cfg.data.val, fmt, so, blocksize, columns) if cfg.data.val else None
    return train_src, val_src


def check_training_inputs(cfg: TrainConfig) -> None:
    """Raise the UserError a bad path, format or column in ``cfg`` would
    raise in training, without a cluster and without torch."""
    plan_training_sources(cfg, cfg.cluster.blocksize or 64 * 2**20)
