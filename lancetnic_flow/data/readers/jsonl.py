"""JSON Lines: one object per line; Arrow's reader, with a per-line slow
path for a block that holds a malformed line or mixed-type values.

A text field holding a number, boolean, list or object is not text: its row
is skipped as "not_text" (a status in prediction), never trained as the
value's JSON. The Arrow path sees it from the column's type, the slow path
from the value's Python type. Labels and targets may be numbers."""
from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.json as pj

from ...errors import UserError
from ...formats import Format, Head, to_utf8
from ..sources import Chunk, Columns, missing_column_error
from .labels import json_values_as_text
from .table import BOM, decoded, empty_table, finish, open_head, read_lines, strip_bom, text_kinds, utf8_ok


def parse(data: bytes, header: bytes | None, fmt: str, columns: Columns, url: str) -> Chunk:
    """The registry's reader for JSON Lines (no header line)."""
    return parse_jsonl(data, columns, url)


def head_columns(fi, storage_options: dict | None, encoding: str | None = None) -> list[str] | None:
    """The registry's ``head``: the keys of the file ``fi``'s first object."""
    with open_head(fi, storage_options) as f:
        return columns_of(f, fi.url, encoding)


def parse_jsonl(data: bytes, columns: Columns, url: str) -> Chunk:
    if columns.all_rows and not utf8_ok(data):
        return _rows_in_order(strip_bom(data), columns, url)
    data, skipped = decoded(data)
    undecodable = skipped.get("undecodable", 0)
    if not data.strip():
        return Chunk(empty_table(columns, "jsonl"), undecodable, skipped)
    names = columns.names()
    table = None
    try:
        table = pj.read_json(io.BytesIO(data),
                             read_options=pj.ReadOptions(block_size=max(1 << 20, len(data) + 1), use_threads=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = None
    if table is not None:
        missing = [n for n in names if n not in table.column_names]
        if missing and table.num_rows:
            raise missing_column_error(url, missing[0], table.column_names)
        get, not_text = text_kinds(columns, table.column) if table.num_rows else (table.column, None)
        return finish(columns, get, table.num_rows, table.num_rows + undecodable, skipped,
                      have=table.column_names, not_text=not_text)
    if columns.all_rows:
        return _rows_in_order(data, columns, url)
    return _slow_rows(data, columns, url, skipped, undecodable)


def _slow_rows(data: bytes, columns: Columns, url: str, skipped: dict[str, int], undecodable: int) -> Chunk:
    """Training's slow path, only for a block with a malformed line or mixed-type
    values: a Python loop per line."""
    names = columns.names()
    texts = set(columns.text)
    cols: dict[str, list] = {n: [] for n in names}
    not_text: list[bool] = []
    malformed = 0
    seen_keys: set[str] = set()
    found: set[str] = set()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            malformed += 1
            continue
        if not isinstance(obj, dict):
            malformed += 1
            continue
        seen_keys.update(obj)
        wrong = False
        for n in names:
            v = obj.get(n)
            if n in obj:
                found.add(n)
            if n in texts and v is not None and not isinstance(v, str):
                wrong, v = True, None   # a number, boolean, list or object where text belongs
            elif isinstance(v, (dict, list)):
                v = json.dumps(v)
            elif isinstance(v, bool):
                v = str(v).lower()
            elif v is not None and not isinstance(v, float):   # floats: json_values_as_text, as Arrow writes them
                v = str(v)
            cols[n].append(v)
        not_text.append(wrong)
    n_rows = len(cols[names[0]]) if names else 0
    if n_rows:
        for n in names:
            if n not in found:
                raise missing_column_error(url, n, sorted(seen_keys))
    if malformed:
        skipped["malformed"] = skipped.get("malformed", 0) + malformed
    arrays = {n: json_values_as_text(v) for n, v in cols.items()}
    return finish(columns, arrays.__getitem__, n_rows, n_rows + malformed + undecodable,
                  skipped, not_text=pa.array(not_text, pa.bool_()) if any(not_text) else None)


def _value(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return str(v).lower()
    return v if v is None or isinstance(v, float) else str(v)   # floats: json_values_as_text, as Arrow writes them


def _rows_in_order(data: bytes, columns: Columns, url: str) -> Chunk:
    """Prediction's slow path, for a block holding a malformed or undecodable
    line: every line in order, with its status."""
    objs: list[dict | None] = []
    status: list[str | None] = []
    have: list[str] = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
            why = None
        except UnicodeDecodeError:
            why = "undecodable"   # its other fields (an id) still identify the row
        try:
            obj = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            obj, why = None, why or "malformed"
        if obj is not None and not isinstance(obj, dict):
            obj, why = None, why or "malformed"
        if obj is not None and why is None and any(
                obj.get(n) is not None and not isinstance(obj.get(n), str) for n in columns.text):
            why = "not_text"   # a number, boolean, list or object where text belongs
        objs.append(obj)
        status.append(why)
        if obj is not None:
            have += [k for k in obj if k not in have]
    if objs and have:
        for n in columns.names():
            if n not in have:
                raise missing_column_error(url, n, have)
    skipped: dict[str, int] = {}
    for why in status:
        if why:
            skipped[why] = skipped.get(why, 0) + 1
    names = columns.read_names(have)
    arrays = {n: json_values_as_text([None if o is None else _value(o.get(n)) for o in objs]) for n in names}
    return finish(columns, arrays.__getitem__, len(objs), len(objs), skipped,
                  status=pa.array(status, pa.string()), have=have)


def columns_of(f, url: str, encoding: str | None = None) -> list[str] | None:
    """The keys of the first object in the open file ``f`` (text in ``encoding``;
    None: UTF-8); None for a file of blank lines."""
    for line in read_lines(f):
        if line.strip():
            line = to_utf8(line[len(BOM):] if line.startswith(BOM) else line, encoding)
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise UserError(f"{url}: the first line is not JSON ({exc})",
                                "check the format, or pass --format") from exc
            if not isinstance(obj, dict):
                raise UserError(f"{url}: the first line is not a JSON object",
                                "each line must be an object like "
                                '{"text": "...", "label": "..."}')
            return list(obj)
    return None


def sniff(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for JSON Lines: every line of the head is a
    JSON object (or the one line it cut short opens one)."""
    if not head.lines:
        return "first line opens a JSON object" if head.cut.startswith('{"') else None
    for line in head.lines:
        try:
            if not isinstance(json.loads(line), dict):
                return None
        except ValueError:
            return None
    return "lines are JSON objects"
