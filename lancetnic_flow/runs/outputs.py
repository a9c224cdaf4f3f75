"""Prediction output files: the format follows the name, through the format
registry (:mod:`lancetnic_flow.formats`): any registered format that can
hold prediction's columns (CSV, TSV, JSON Lines, Parquet), each optionally
compressed except Parquet, written through fsspec to any URL, one table at
a time, by the format's registered writer (:mod:`lancetnic_flow.data.writers`,
the writers ``make-data`` uses too).

Every table written must have the columns of the first: a CSV header or a
Parquet schema is fixed once (JSON Lines, whose lines name their own keys,
takes new columns in later tables). Kept columns are text, or bytes where the
input held bytes (a Parquet or Arrow binary column): Parquet and Arrow write
them as bytes; CSV, TSV and JSON Lines, which hold text, write a value that is
UTF-8 as its text and refuse one that is not (as U+FFFD two ids could read back
as one). A Parquet or Arrow file names a column's type once: a text file's kept
column that first tables wrote as text and a later one holds as bytes asks for
the file to be written again with it as bytes (:class:`BytesAfterText`).
"""
from __future__ import annotations

import io
import os
import posixpath
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..data.readers.jsonl import KEYS_WINDOW
from ..data.writers import LIST_SEP, JsonLinesWriter, compressed, flat_lists
from ..errors import UserError
from ..formats import Format, delimited, format_for_path, format_named, registered
from ..storage import open_atomic, open_options, special_kind, url_to_fs

# The files of a run folder an output's name could take (JSON is written as JSON Lines): the run
# (runs/folder.py, runs/plots.py), a saved estimator's labels, tune's and the trackers' records.
RUN_FILES = ("config.json", "model.json", "features.json", "metrics.json", "history.csv", "per_class.csv",
             "per_label.csv", "top_terms.csv", "estimator_labels.json", "tune.json", "tracking.json")

# The columns every prediction output has; a format must hold them (text lines do not).
_PREDICTION_COLUMNS = ("text", "status", "predicted")


def _table_formats() -> list[Format]:
    return [f for f in registered() if f.writer is not None and f.holds(_PREDICTION_COLUMNS)]


def _what_works() -> str:
    tables = _table_formats()
    exts = [f.extensions[0] for f in tables]
    packed = [f.extensions[0] for f in tables if f.compressible]
    shown = ", ".join(exts[:-1]) + f" or {exts[-1]}" if len(exts) > 1 else "".join(exts)
    names = " and ".join(", ".join(f.shown for f in tables if f.compressible).rsplit(", ", 1))
    return f"end it in {shown} ({names} may add .gz, .bz2, .xz, .zst)" if packed else f"end it in {shown}"


def output_file_format(url: str) -> tuple[Format, str | None]:
    """The registered format (and compression) of the output file ``url``, by its name;
    a UserError for a name no writable table format has."""
    if str(url).strip() == "-":   # said as itself: "cannot tell the format" would send the user renaming it
        raise UserError("--output -: predictions are written to a file, not to stdout",
                        "name a file (--output predictions.csv); to stream the rows into another program, "
                        "name a pipe with the format's extension (mkfifo rows.csv; reader < rows.csv &)")
    fmt, comp = format_for_path(url)
    if fmt is None:
        raise UserError(f"--output {url}: cannot tell the format from the name", _what_works())
    if fmt.writer is None or not fmt.holds(_PREDICTION_COLUMNS):
        raise UserError(f"--output {url}: the {fmt.shown} format cannot hold prediction's columns "
                        f"({', '.join(_PREDICTION_COLUMNS)}, ...)", _what_works())
    if comp is not None and not fmt.compressible:
        raise UserError(f"--output {url}: {fmt.shown} compresses itself", f"end the name in {fmt.extensions[0]}")
    return fmt, comp


def check_label_sets_written_whole(url: str, labels: list[str]) -> None:
    """Refuse a CSV or TSV ``url`` for a multilabel run one of whose ``labels`` holds
    ``LIST_SEP``: those formats join a row's predicted labels by it (``flat_lists``),
    so such a row would read back with other labels. Before any work."""
    fmt, _ = output_file_format(url)
    holding = [x for x in labels if LIST_SEP in x]
    if (fmt.writer or "").endswith(":DelimitedWriter") and holding:
        raise UserError(f"--output {url}: the run's label {holding[0]!r} holds {LIST_SEP!r}, which joins a row's "
                        f"predicted labels in a {fmt.shown} file: that row would read back with other labels",
                        "write .jsonl, .parquet or .arrow, where each row's labels are a list")


def _where(url: str, storage_options: dict) -> tuple[object, str, str]:
    """The filesystem, the path and a key that is one file's whatever the spelling (a local
    path resolved through its links)."""
    fs, path = url_to_fs(url, **open_options(url, storage_options))
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    local = "file" in protocols or "local" in protocols
    return fs, path, os.path.realpath(path) if local else f"{protocols[0]}://{path.rstrip('/')}"


def check_output_place(url: str, storage_options: dict | None, inputs: list[str],
                       input_options: dict | None = None, flag: str = "--output") -> None:
    """Refuse an output (given as ``flag``) that would replace what the command reads, or
    a run's own file, even where replacing a file is asked for (``--force``): one of the
    ``inputs`` (their rows gone, replaced by predictions), or a file of a run folder,
    ``config.json``, ``model.json``, ``history.csv``, its weights... (that run damaged or
    misreported); a new file of another name beside them is the user's."""
    so = storage_options or {}
    fs, path, key = _where(url, so)
    for given in inputs:
        if _where(given, input_options if input_options is not None else so)[2] == key:
            raise UserError(f"{flag} {url} is the input {given}: writing there would replace what the command "
                            "reads", f"name a file of its own, e.g. {flag} {_beside(url)}")
    parent, name = posixpath.split(path.rstrip("/"))
    if any(fs.exists(posixpath.join(parent, f)) for f in ("model.json", "config.json")) and \
            (name in RUN_FILES or fs.exists(path)):
        raise UserError(f"{flag} {url} is a file of the run folder {parent}: writing there would replace it",
                        "name a file outside the run folder, or a new name in it")


def check_plots_place(url: str, storage_options: dict | None, run: str) -> None:
    """Refuse ``evaluate --plots`` into a run folder, this run's or another's: its charts and
    ``per_class.csv`` are that run's validation's, and an evaluation would replace them."""
    fs, path, _ = _where(url, storage_options or {})
    if any(fs.exists(posixpath.join(path.rstrip("/"), f)) for f in ("model.json", "config.json")):
        this = _where(run, storage_options or {})[2] == _where(url, storage_options or {})[2]
        raise UserError(f"--plots {url} is {'the' if this else 'a'} run folder, whose charts and tables are its "
                        "validation rows'", f"name a folder of its own: --plots {run.rstrip('/')}-evaluated")


# What ``evaluate --plots DIR`` writes (runs/plots.py's plot_jobs): an earlier evaluation's, if DIR holds one.
EVALUATION_FILES = ("per_class.csv", "per_class.png", "per_label.csv", "per_label.png", "confusion_matrix.png",
                    "class_distribution.png", "label_distribution.png", "regression_scatter.png", "residuals.png")


def refuse_earlier_plots(url: str, storage_options: dict | None) -> None:
    """Refuse ``evaluate --plots DIR`` where DIR holds an earlier evaluation's tables or
    charts (:data:`EVALUATION_FILES`), which this one would replace without a word, as
    ``predict --output`` refuses an existing file; ``--force`` replaces them."""
    fs, path, _ = _where(url, storage_options or {})
    try:
        held = [f for f in EVALUATION_FILES if fs.isfile(posixpath.join(path.rstrip("/"), f))]
    except Exception:   # a store that cannot say: check_writable has already shown the place is writable
        return
    if held:
        raise UserError(f"--plots {url} already holds an evaluation's {', '.join(held[:3])}"
                        f"{', …' if len(held) > 3 else ''}; evaluate does not replace them unless asked",
                        "pass --force to replace them, or name another folder")


def _beside(url: str) -> str:
    """Another file name beside ``url``: ``x.csv`` → ``x-predicted.csv``."""
    head, dot, ext = url.rpartition("/")[2].partition(".")
    return url[: len(url) - len(url.rpartition("/")[2])] + f"{head}-predicted{dot}{ext}"


def output_format(url: str) -> str:
    """The output format's name, from the file name (compression suffixes aside)."""
    return output_file_format(url)[0].name


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


class OutputFile:
    """A prediction output being written: ``with OutputFile(url, so) as f: f.write(table)``.
    It is written under a temporary name and renamed when complete, so a
    failed or killed run never leaves a half file under the real name."""

    def __init__(self, url: str, storage_options: dict | None = None, inputs: list[str] | None = None,
                 as_bytes: Sequence[str] = (), delimiter: str | None = None):
        """``inputs``: the input columns every table's columns before ``status`` are,
        decided before the first (a JSON Lines file's keys, :func:`~..data.heads.keys_ahead`):
        those a table lacks are written empty, and one past them is refused where the
        file names its columns once, whichever table it comes in. ``as_bytes``: kept
        columns a Parquet or Arrow file writes as bytes from its first table (a later one
        holds bytes that are not UTF-8: :class:`BytesAfterText`). ``delimiter``: the
        separator of a CSV file's fields (``--delimiter``; None: a comma), so the file
        reads back with the options its inputs were read with; other formats keep theirs."""
        self.url = url
        self.inputs = list(inputs) if inputs is not None else None
        self.as_bytes = list(as_bytes)
        spec, self.compression = output_file_format(url)
        self.spec = delimited(spec, delimiter)
        self.format = self.spec.name
        self.storage_options = storage_options or {}
        self.schema: pa.Schema | None = None
        self._writer = None

    def __enter__(self) -> "OutputFile":
        self._atomic = open_atomic(self.url, open_options(self.url, self.storage_options))
        self._raw = self._atomic.__enter__()
        self._sink = compressed(self._raw, self.compression)
        self._file = self._sink.__enter__()
        return self

    def write(self, table: pa.Table) -> None:
        """Append ``table``; its columns must be the first table's (JSON Lines: or new ones)."""
        if self.spec.splits_by_bytes:   # a text format: bytes as their text, or refused
            table = bytes_as_text(table, self.url)
        if self.inputs is not None:
            table = self._with_inputs(table)
        if not self.spec.splits_by_bytes:
            table = self._bytes_kept_whole(table)
        if self.schema is None:
            self.schema = table.schema
            self._writer = self.spec.open_writer(self._file, table.schema)
        elif table.schema.names != self.schema.names:
            new = [n for n in table.schema.names if n not in self.schema.names]
            if new and isinstance(self._writer, JsonLinesWriter):   # each line names its own keys
                self.schema = pa.schema(list(self.schema) + [table.schema.field(n) for n in new])
            elif new:   # the file (a CSV header, a Parquet schema) already names its columns
                raise UserError(f"{self.url}: later input rows have columns the first rows written lack "
                                f"({', '.join(new)}; the first had {', '.join(self.schema.names)})", _KEEP_FEWER)
            # rows without some kept columns (JSON Lines objects without a key): empty there
            table = pa.table({n: table.column(n) if n in table.schema.names else pa.nulls(len(table))
                              for n in self.schema.names}).cast(self.schema)
        else:
            try:
                table = table.cast(self.schema)
            except pa.ArrowInvalid:   # bytes that are not UTF-8 (a corrupt string column), where the first rows were text
                name = next(f.name for f in table.schema if f.type != self.schema.field(f.name).type)
                raise UserError(f"--output {self.url}: the kept column {name!r} holds bytes that are not UTF-8 in "
                                "later rows, and the first rows wrote it as text", "predict that file apart, "
                                "or give --encoding NAME if its values are text in another encoding") from None
        self._writer.write(table)

    def _bytes_kept_whole(self, table: pa.Table) -> pa.Table:
        """``table`` with the columns of :attr:`as_bytes` as bytes; :class:`BytesAfterText`
        where a column the tables before wrote as text holds bytes in this one."""
        for i, field in enumerate(table.schema):
            if field.name in self.as_bytes and _is_text(field.type):
                table = table.set_column(i, field.name, pc.cast(table.column(i), pa.binary()))
        if self.schema is None:
            return table
        later = [f.name for f in table.schema if _is_bytes(f.type) and f.name in self.schema.names
                 and _is_text(self.schema.field(f.name).type)]
        if later and special_kind(self.url) is not None:   # its reader has the first rows: no second writing
            raise UserError(f"--output {self.url}: the kept column {later[0]!r} holds bytes that are not UTF-8 in "
                            f"later rows, and the first rows went to the {special_kind(self.url)} as text",
                            "write a regular file, which is then written with the column as bytes; or give "
                            "--encoding NAME if its values are text in another encoding")
        if later:
            raise BytesAfterText(later)
        return table

    def _with_inputs(self, table: pa.Table) -> pa.Table:
        """``table`` with the input columns decided before the first table, in their order."""
        names = table.column_names
        given = names[:names.index("status")] if "status" in names else []
        new = [n for n in given if n not in self.inputs]
        if new and not (self.spec.writer or "").endswith(":JsonLinesWriter"):
            raise UserError(f"{self.url}: input rows have keys past those of the input's first rows ({', '.join(new)}; "
                            f"the columns written are {', '.join(self.inputs)}, the keys of the objects in each input "
                            f"file's first {KEYS_WINDOW // 2**20} MiB), which this file names once", _KEEP_FEWER)
        self.inputs += new   # JSON Lines: each line names its own keys
        empty = pa.nulls(len(table), pa.string())
        return pa.table({**{n: table.column(n) if n in given else empty for n in self.inputs},
                         **{n: table.column(n) for n in names[len(given):]}})

    def __exit__(self, *exc) -> None:
        try:
            try:
                if self._writer is not None:
                    self._writer.close()
            finally:
                self._sink.__exit__(*exc)         # the compressor's end of stream
        finally:
            self._atomic.__exit__(*exc)


class BytesAfterText(Exception):
    """A Parquet or Arrow output's kept columns that earlier tables wrote as text and a later
    one holds as bytes (a block of a text file where a value is not UTF-8): the file names
    a column's type once, so it is written again with them as bytes from its first table,
    the file one block size or another would give (:func:`~.predict.predict_files`)."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


_KEEP_FEWER = ("name columns to keep that the first rows have too (--keep id,...), write JSON Lines "
               "(--output NAME.jsonl), whose lines name their own keys, or predict each kind of file apart")


def bytes_as_text(table: pa.Table, url: str) -> pa.Table:
    """``table`` with each column of bytes (a kept binary column) as text, for a format that
    holds text; a UserError naming the column and the formats that keep bytes where a value is
    not UTF-8: as U+FFFD, distinct values would be written as one."""
    for i, field in enumerate(table.schema):
        wide = pa.types.is_large_binary(field.type)
        if not (pa.types.is_binary(field.type) or wide):
            continue
        try:
            text = pc.cast(table.column(i), pa.large_string() if wide else pa.string())
        except pa.ArrowInvalid:
            bad = next(v for v in table.column(i).to_pylist() if v is not None and not _utf8(v))
            shown = bad[:24] + (b"..." if len(bad) > 24 else b"")
            raise UserError(f"--output {url}: the kept column {field.name!r} holds bytes that are not UTF-8 "
                            f"({shown!r}), which a {format_for_path(url)[0].shown} file cannot hold as text "
                            "(as U+FFFD, distinct values would read back as one)",
                            f"write --output {_renamed(url, '.parquet')} (or .arrow), which keeps them as bytes; "
                            "or give --encoding NAME if they are text in another encoding") from None
        table = table.set_column(i, field.name, text)
    return table


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _renamed(url: str, ext: str) -> str:
    """``url`` with its format's extension (and any compression suffix) as ``ext``."""
    name = url.rpartition("/")[2]
    return url[: len(url) - len(name)] + name.partition(".")[0] + ext


def encode(table: pa.Table, fmt: str) -> bytes:
    """``table`` as bytes of the format (for tests and small outputs)."""
    buf = io.BytesIO()
    writer = format_named(fmt).open_writer(buf, table.schema)
    writer.write(table)
    writer.close()
    return buf.getvalue()


__all__ = ["BytesAfterText", "LIST_SEP", "OutputFile", "bytes_as_text", "check_label_sets_written_whole", "check_output_place", "check_plots_place", "encode", "EVALUATION_FILES", "refuse_earlier_plots", "flat_lists", "output_file_format", "output_format", "output_names"]
