"""JSON Lines: one object per line; Arrow's reader, with a per-line slow
path for a block that holds a malformed line or mixed-type values."""
from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.json as pj

from ...errors import UserError
from ..sources import Chunk, Columns, missing_column_error
from .table import BOM, decoded, empty_table, finish


def parse_jsonl(data: bytes, columns: Columns, url: str) -> Chunk:
    data, skipped = decoded(data)
    undecodable = skipped.get("undecodable", 0)
    if not data.strip():
        return Chunk(empty_table(columns, "jsonl"), undecodable, skipped)
    names = columns.names()
    table = None
    try:
        table = pj.read_json(io.BytesIO(data),
                             read_options=pj.ReadOptions(block_size=max(1 << 20, len(data) + 1)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = None
    if table is not None:
        missing = [n for n in names if n not in table.column_names]
        if missing and table.num_rows:
            raise missing_column_error(url, missing[0], table.column_names)
        return finish(columns, table.column, table.num_rows,
                       table.num_rows + undecodable, skipped)
    # Slow path, only for a block with a malformed line or mixed-type values.
    cols: dict[str, list] = {n: [] for n in names}
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
        for n in names:
            v = obj.get(n)
            if n in obj:
                found.add(n)
            if isinstance(v, (dict, list)):
                v = json.dumps(v)
            elif isinstance(v, bool):
                v = str(v).lower()
            elif v is not None:
                v = str(v)
            cols[n].append(v)
    n_rows = len(cols[names[0]]) if names else 0
    if n_rows:
        for n in names:
            if n not in found:
                raise missing_column_error(url, n, sorted(seen_keys))
    if malformed:
        skipped["malformed"] = skipped.get("malformed", 0) + malformed
    arrays = {n: pa.array(v, pa.string()) for n, v in cols.items()}
    return finish(columns, arrays.__getitem__, n_rows, n_rows + malformed + undecodable,
                   skipped)


def columns_of(f, url: str) -> list[str] | None:
    """The keys of the first object in the open file ``f``; None for a file of blank lines."""
    for line in f:
        if line.strip():
            line = line[len(BOM):] if line.startswith(BOM) else line
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
