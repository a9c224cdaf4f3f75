"""Prediction output files: the format follows the name (``.csv``, ``.tsv``,
``.jsonl``/``.ndjson``/``.json``, ``.parquet``, each optionally compressed
except Parquet), written through fsspec to any URL, one table at a time.

Every table written must have the columns of the first: a CSV header or a
Parquet schema is fixed once. Kept columns are text, so tables from files
with the same columns always agree.
"""
from __future__ import annotations

import io
import json
import math

from fsspec.compression import compr
from fsspec.utils import infer_compression
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..errors import UserError
from ..formats import COMPRESSION_SUFFIXES
from ..storage import open_atomic, open_options

LIST_SEP = "|"   # multilabel predictions in CSV: the --label-sep a CSV of labels is read with
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
           ".parquet": "parquet", ".pq": "parquet"}


def output_format(url: str) -> str:
    """The output format from the file name (compression suffixes aside)."""
    name = url.lower()
    compressed = False
    for ext in COMPRESSION_SUFFIXES:
        if name.endswith(ext):
            name, compressed = name.removesuffix(ext), True
    for ext, fmt in FORMATS.items():
        if name.endswith(ext):
            if fmt == "parquet" and compressed:
                raise UserError(f"--output {url}: Parquet compresses itself", "end the name in .parquet")
            return fmt
    raise UserError(f"--output {url}: cannot tell the format from the name",
                    "end it in .csv, .tsv, .jsonl or .parquet (CSV and JSON Lines may add .gz, .bz2, .xz, .zst)")


def output_names(classifies: bool, regresses: bool, top_k: int | None = None, multilabel: bool = False) -> list[str]:
    """The columns prediction adds after the input's."""
    names = ["status"]
    if classifies:
        names += ["predicted", "probabilities" if multilabel else "probability"]
        for i in range(1, (top_k or 0) + 1):
            names += [f"label_{i}", f"probability_{i}"]
    if regresses:
        names.append("predicted_value")
    return names


def _jsonl(table: pa.Table) -> bytes:
    def clean(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return "".join(json.dumps({k: clean(v) for k, v in row.items()}, ensure_ascii=False) + "\n"
                   for row in table.to_pylist()).encode()


def flat_lists(table: pa.Table) -> pa.Table:
    """List columns (a multilabel run's labels and probabilities) as text for
    CSV: the items joined by ``LIST_SEP``; an empty list is an empty field."""
    for i, field in enumerate(table.schema):
        if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
            joined = pc.binary_join(pc.cast(table.column(i), pa.list_(pa.string())), LIST_SEP)
            table = table.set_column(i, field.name, joined)
    return table


def _csv_options(fmt: str, schema: pa.Schema) -> pacsv.WriteOptions:
    # Arrow quotes every header name unless told not to; plain names stay plain.
    delimiter = "\t" if fmt == "tsv" else ","
    plain = all(not any(ch in name for ch in (delimiter, '"', "\n", "\r")) for name in schema.names)
    return pacsv.WriteOptions(include_header=True, delimiter=delimiter, quoting_style="needed",
                              quoting_header="none" if plain else "needed")


class OutputFile:
    """A prediction output being written: ``with OutputFile(url, so) as f: f.write(table)``.
    It is written under a temporary name and renamed when complete, so a
    failed or killed run never leaves a half file under the real name."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url, self.format = url, output_format(url)
        self.storage_options = storage_options or {}
        self.schema: pa.Schema | None = None
        self._writer = None

    def __enter__(self) -> "OutputFile":
        self._atomic = open_atomic(self.url, open_options(self.url, self.storage_options))
        self._raw = self._atomic.__enter__()
        compression = None if self.format == "parquet" else infer_compression(self.url)
        self._file = compr[compression](self._raw, mode="wb") if compression else self._raw
        return self

    def write(self, table: pa.Table) -> None:
        """Append ``table``; its columns must be the first table's."""
        if self.schema is None:
            self.schema = table.schema
            self._start(table.schema)
        elif table.schema.names != self.schema.names:
            raise UserError(f"{self.url}: input files have different columns ({', '.join(self.schema.names)} "
                            f"against {', '.join(table.schema.names)})",
                            "name the columns to keep (--keep id,...), or predict each kind of file apart")
        else:
            table = table.cast(self.schema)
        if self.format in ("csv", "tsv"):
            self._writer.write_table(flat_lists(table))
        elif self.format == "parquet":
            self._writer.write_table(table)
        else:
            self._file.write(_jsonl(table))

    def _start(self, schema: pa.Schema) -> None:
        if self.format in ("csv", "tsv"):
            schema = flat_lists(schema.empty_table()).schema
            self._writer = pacsv.CSVWriter(self._file, schema, write_options=_csv_options(self.format, schema))
        elif self.format == "parquet":
            self._writer = pq.ParquetWriter(self._file, schema)

    def __exit__(self, *exc) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
            if self._file is not self._raw:
                self._file.close()         # the compressor's end of stream
        finally:
            self._atomic.__exit__(*exc)


def encode(table: pa.Table, fmt: str) -> bytes:
    """``table`` as bytes of the format (for tests and small outputs)."""
    if fmt == "jsonl":
        return _jsonl(table)
    buf = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, buf)
    else:
        pacsv.write_csv(table, buf, _csv_options(fmt, table.schema))
    return buf.getvalue()


__all__ = ["OutputFile", "encode", "output_format", "output_names"]
