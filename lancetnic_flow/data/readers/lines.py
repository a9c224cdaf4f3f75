"""Plain text (a row per line) and fastText (``__label__x text``) lines."""
from __future__ import annotations

import pyarrow.compute as pc

from ...errors import UserError
from ..sources import Chunk, Columns
from .table import decoded, finish, split_lines

_FASTTEXT_RE = r"^(?:__label__(?P<label>\S*)\s*)?(?:__label__\S*\s*)*(?P<text>.*)$"


def check_line_columns(url: str, fmt: str, columns: Columns) -> None:
    if columns.target or columns.numeric:
        raise UserError(f"{url}: the {fmt} format has no numeric columns",
                        "use csv, tsv, jsonl or parquet for target and numeric columns")
    if fmt == "text" and columns.label:
        raise UserError(f"{url}: the text format has no labels",
                        "use the fasttext format (__label__x text) or a table format for labels")


def parse_lines(data: bytes, fmt: str, columns: Columns, url: str) -> Chunk:
    check_line_columns(url, fmt, columns)
    data, skipped = decoded(data)
    undecodable = skipped.get("undecodable", 0)
    lines = split_lines(data)
    lines = pc.utf8_trim_whitespace(lines)
    lines = pc.filter(lines, pc.greater(pc.utf8_length(lines), 0))  # blank lines are not rows
    n = len(lines)
    if fmt == "text":
        get = {columns.text[0]: lines}
        cols = Columns(text=(columns.text[0],))
    else:
        parts = pc.extract_regex(lines, _FASTTEXT_RE)
        get = {"text": parts.field("text"), "label": parts.field("label")}
        cols = Columns(text=("text",), label="label" if columns.label else None)
    chunk = finish(cols, get.__getitem__, n, n + undecodable, skipped)
    return chunk


