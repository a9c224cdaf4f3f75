"""In-memory inputs as rows: a list of texts, a NumPy array, a pandas Series
or DataFrame, an Arrow array, record batch or table, a polars Series or
DataFrame, a Hugging Face ``datasets.Dataset``.

Prediction and the estimators read them through the same rules as files
(:func:`~.readers.table.finish` in ``all_rows`` mode): one output row per
input row, in order, each with a ``status`` ("ok" or why it cannot be
used). pandas, polars and datasets are never imported here: their objects
are recognised only when their library is already loaded (whoever made one
loaded it). polars and datasets hold Arrow memory, so theirs is read as
Arrow (``to_arrow()``, a Dataset's Arrow table), never copied through pandas.
"""
from __future__ import annotations

import difflib
import shlex
import sys
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import UserError, close_matches
from .readers.labels import strings_array
from .readers.table import finish
from .sources import Chunk, Columns, likely_columns

SUPPORTED = ("a list of texts, a NumPy array, a pandas or polars Series or DataFrame, "
             "a datasets.Dataset, or an Arrow array or table")


def _loaded(module: str, kind: str):
    """``module.kind`` when ``module`` is imported already, else None (never imports it)."""
    mod = sys.modules.get(module)
    return getattr(mod, kind, None) if mod is not None else None


def _pandas(kind: str):
    return _loaded("pandas", kind)


def _is(data: Any, module: str, kind: str) -> bool:
    cls = _loaded(module, kind)
    return cls is not None and isinstance(data, cls)


def arrow_of(data: Any) -> pa.Table | pa.Array | pa.ChunkedArray | None:
    """The Arrow data under a polars DataFrame or Series or a ``datasets.Dataset``
    (a table, or an array for a Series), without a copy where the library
    allows one; None for any other input. A ``DatasetDict`` or an
    ``IterableDataset`` is refused: one split, in memory, is a table."""
    if _is(data, "polars", "DataFrame") or _is(data, "polars", "Series"):
        return data.to_arrow()
    if _is(data, "datasets", "Dataset"):
        # A slice of the whole: the Dataset's own (memory-mapped) table, no copy;
        # after select/shuffle/filter, its rows in the Dataset's order.
        return data.with_format("arrow")[:]
    if _is(data, "datasets", "DatasetDict"):
        raise UserError(f"a DatasetDict of splits {', '.join(map(repr, data))} is not one table of rows",
                        "pass one split, e.g. ds['train']")
    if _is(data, "datasets", "IterableDataset"):
        raise UserError("an IterableDataset streams its rows and cannot be read as a table",
                        "load it as a Dataset (streaming=False), or save it to Parquet and pass the files")
    return None


def is_table(data: Any) -> bool:
    """True for inputs with named columns (a DataFrame, an Arrow table or record batch, a Dataset)."""
    return isinstance(data, (pa.Table, pa.RecordBatch)) or _is(data, "pandas", "DataFrame") \
        or _is(data, "polars", "DataFrame") or _is(data, "datasets", "Dataset")


def like_input(data: Any, table: pa.Table):
    """``table`` in the kind of frame ``data`` is: pandas for a pandas DataFrame or
    Series (with ``data``'s index), polars for a polars DataFrame or Series, else Arrow."""
    if _is(data, "pandas", "DataFrame") or _is(data, "pandas", "Series"):
        out = table.to_pandas()
        # Row for row with data: its index, so `df["p"] = predict_table(df)["predicted"]` lines up
        # on a filtered or shuffled df (a fresh 0..n-1 index put answers on other rows, or none).
        out.index = data.index
        return out
    if _is(data, "polars", "DataFrame") or _is(data, "polars", "Series"):
        return sys.modules["polars"].from_arrow(table)
    return table


def is_missing(v: Any) -> bool:
    """None, NaN, and pandas' NA and NaT (whose text, "<NA>", would be read as a word)."""
    return v is None or (isinstance(v, (float, np.floating)) and v != v) or type(v).__name__ in ("NAType", "NaTType")


def _text_values(values: list) -> pa.Array:
    # Numbers become their text (as a CSV reader reads them); missing values are missing text; bytes
    # that are not UTF-8 and a str's lone surrogate are U+FFFD (strings_array).
    out = [v if isinstance(v, str) else None if is_missing(v)
           else v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]
    return strings_array(out)[0]


def _from_pandas(frame) -> pa.Table:
    """A pandas DataFrame as Arrow. An object column Arrow cannot take as one
    kind (numbers beside words, ``[1.5, "n/a"]``; a text holding a lone
    surrogate) is read as :func:`_text_values` reads a list: its values as
    their text, as a CSV reader reads that column, then each row as the file's."""
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (UnicodeEncodeError, pa.ArrowInvalid, pa.ArrowTypeError):
        fixed = frame.copy()
        for i in range(fixed.shape[1]):
            col = fixed.iloc[:, i]
            if col.dtype == object and not _arrow_takes(col):
                fixed.isetitem(i, _text_values(col.tolist()).to_pylist())
        return pa.Table.from_pandas(fixed, preserve_index=False)


def _arrow_takes(col) -> bool:
    try:
        pa.array(col, from_pandas=True)
        return True
    except (UnicodeEncodeError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False


def as_table(data: Any, name: str = "text") -> pa.Table:
    """Any supported input as an Arrow table; a sequence of texts becomes the column ``name``."""
    if isinstance(data, pa.Table):
        return data
    arrow = arrow_of(data)
    if arrow is not None:
        data = arrow
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        return pa.table({name: data})
    frame, series = _pandas("DataFrame"), _pandas("Series")
    if frame is not None and isinstance(data, frame):
        return _from_pandas(data)
    if series is not None and isinstance(data, series):
        return pa.table({name: _text_values(data.tolist())})
    if isinstance(data, (str, bytes)):
        raise UserError("one string was given where a sequence of texts is expected",
                        "wrap it in a list: [text]")
    if isinstance(data, np.ndarray):
        if data.ndim == 2 and data.shape[1] == 1:
            data = data[:, 0]
        if data.ndim != 1:
            raise UserError(f"an array of shape {data.shape} is not a sequence of texts",
                            "pass a 1-D array (or one column) of strings")
        return pa.table({name: _text_values(data.tolist())})
    if isinstance(data, Sequence) or hasattr(data, "__iter__"):
        return pa.table({name: _text_values(list(data))})
    raise UserError(f"cannot read texts from a {type(data).__name__}", f"pass {SUPPORTED}")


def text_columns_of(table: pa.Table, wanted: Sequence[str]) -> tuple[str, ...]:
    """The text column(s) to read: ``wanted`` when the table has them, else its only column."""
    have = table.column_names
    if all(c in have for c in wanted):
        return tuple(wanted)
    if len(have) == 1:
        return (have[0],)
    missing = next(c for c in wanted if c not in have)
    message = f"the table has no text column {missing!r} (its columns: {', '.join(have)})"
    near = difflib.get_close_matches(missing, have, n=1, cutoff=0.5) or likely_columns(list(have), "text")
    if not near:
        raise UserError(message, "name the text column (text_column=...), or pass that column alone",
                        cli=(message, "name the text column (--text-column), or pass that column alone"))
    raise UserError(message, f"name the text column, e.g. text_column={near[0]!r}, or pass that column alone",
                    cli=(message, f"name the text column, e.g. --text-column {shlex.quote(near[0])}, "
                                  "or pass that column alone"))


def input_rows(data: Any, text: Sequence[str] = ("text",), keep: Sequence[str] | str | None = None,
               numeric: Sequence[str] = (), text_rule: str = "word") -> Chunk:
    """``data`` as prediction rows: ``text``, the numeric columns present,
    ``keep:NAME`` columns and ``status``, one per input row, in order;
    ``text_rule``: which texts the run's analyzer reads (data/usable.py)."""
    table = as_table(data, text[0] if len(text) == 1 else "text")
    cols = text_columns_of(table, text)
    have = table.column_names
    keep_all = keep == "all"
    listed = () if keep_all or keep is None else tuple(keep)
    for c in listed:
        if c not in have:
            raise UserError(f"keep: no column {c!r} (the columns: {', '.join(have)})", "name columns of the input")
    lacking = [c for c in numeric if c not in have]
    if lacking and is_table(data):
        # A frame is read as a file is, which is refused without them: texts alone (a list, a
        # Series) stand for rows whose numbers are unknown, read as the training mean.
        raise UserError(f"no column {lacking[0]!r}{close_matches(lacking[0], have)}, a numeric column the run was "
                        f"trained with ({{data.numeric}} {' '.join(numeric)}); the input has columns: {', '.join(have)}",
                        "add the column, or pass the texts alone (a list or a Series) to read it as the training mean")
    columns = Columns(text=cols, numeric=tuple(c for c in numeric if c in have), keep=listed,
                      keep_all=keep_all, all_rows=True, text_rule=text_rule)
    columns.refuse_named_twice({"text": "the text column (text_column=)", "numeric": "a numeric column of the run",
                                "keep": "keep="})
    return finish(columns, table.column, table.num_rows, table.num_rows, {}, have=have)


__all__ = ["arrow_of", "as_table", "input_rows", "is_missing", "is_table", "like_input", "text_columns_of", "SUPPORTED"]
