"""The training inputs: the columns a configuration reads, and its training
and validation files planned into partitions and checked against them.

Free of torch on purpose: `lancetnic-flow train` runs
:func:`check_training_inputs` before it loads the trainer, so a wrong path,
format or column is exit 2 in well under a second, not after torch's import.
"""
from __future__ import annotations

from .config import TrainConfig
from .readers import check_columns
from .sources import Columns, SourcePlan, plan_source


def training_columns(cfg: TrainConfig) -> Columns:
    """The columns ``cfg`` reads: the label unless it regresses, the target unless it classifies."""
    d, task = cfg.data, cfg.training.task
    return Columns(text=tuple(d.text), label=d.label if task != "regress" else None,
                   target=d.target if task != "classify" else None, numeric=tuple(d.numeric))


def split_blocksize(src: SourcePlan, blocksize: int, want: int, floor: int = 1 << 20) -> int:
    """A block size that gives about ``want`` partitions of the splittable
    files, never below ``floor`` bytes nor above ``blocksize``."""
    splittable = sum(f.size for f in src.files if f.compression is None and f.format != "parquet")
    if not splittable or len(src.partitions) >= want:
        return blocksize
    return max(floor, min(blocksize, -(-splittable // want)))


def plan_training_sources(cfg: TrainConfig, blocksize: int, *, threads: int = 0
                          ) -> tuple[SourcePlan, SourcePlan | None]:
    """Partitions of the training (and validation) data, columns checked.

    ``threads``: the cluster's worker threads. Unless the user chose the
    block size, small inputs are cut into about four partitions a thread, so
    featurisation runs in parallel and epoch 1 overlaps training."""
    so, fmt = cfg.data.storage_options, cfg.data.format
    train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=blocksize)
    if threads and not cfg.cluster.blocksize:
        small = split_blocksize(train_src, blocksize, 4 * threads)
        if small < blocksize:
            train_src = plan_source(cfg.data.train, format=fmt, storage_options=so, blocksize=small)
    val_src = plan_source(cfg.data.val, format=fmt, storage_options=so, blocksize=blocksize) if cfg.data.val else None
    columns = training_columns(cfg)
    check_columns(train_src, columns, storage_options=so)
    if val_src:
        check_columns(val_src, columns, storage_options=so)
    return train_src, val_src


def check_training_inputs(cfg: TrainConfig) -> None:
    """Raise the UserError a bad path, format or column in ``cfg`` would
    raise in training, without a cluster and without torch."""
    plan_training_sources(cfg, cfg.cluster.blocksize or 64 * 2**20)
