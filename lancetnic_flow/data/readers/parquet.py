"""Parquet: one partition per row group."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from ...formats import Format, Head
from ..sources import Chunk, Columns, Partition
from .table import check_names, finish_table, fs_path, open_seekable


def read_parquet(part: Partition, columns: Columns,
                  storage_options: dict | None) -> Chunk:
    url = part.file.url
    with open_seekable(url, storage_options) as f:
        pf = pq.ParquetFile(f, pre_buffer=False)   # no Arrow IO thread pool (see readers/__init__.py)
        have = pf.schema_arrow.names
        check_names(url, have, columns)
        table = pf.read_row_group(part.start, columns=columns.read_names(have), use_threads=False)
    return finish_table(url, columns, table, have)


def row_groups(fs, path: str) -> int:
    """The registry's ``pieces``: a Parquet file is read a row group at a time."""
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).num_row_groups


def head_columns(fi, storage_options: dict | None, encoding: str | None = None) -> list[str]:
    """The registry's ``head``: the columns of the file ``fi``'s schema."""
    return columns_of(fi.url, storage_options)


def columns_of(url: str, storage_options: dict | None) -> list[str]:
    return schema_of(url, storage_options).names


def schema_of(url: str, storage_options: dict | None) -> pa.Schema:
    """The Arrow schema of the Parquet file at ``url`` (its footer alone is read)."""
    fs, path = fs_path(url, storage_options)
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).schema_arrow


def sniff(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for Parquet: the magic bytes a Parquet file starts with."""
    return "first bytes are PAR1, Parquet's mark" if head.data.startswith(b"PAR1") else None
