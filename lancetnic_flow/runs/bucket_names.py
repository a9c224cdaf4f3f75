"""Which terms a hashing run's buckets held: the fit pass's bounded sample,
kept in the run folder.

``top_terms.csv`` names a hashed bucket by the terms the fit pass saw in it
(:mod:`lancetnic_flow.features.names`). A run continued from this one
(``--init-from``, ``partial_fit``) does not read the old data again, so
without the old run's names its strongest buckets, learned from that data,
would be shown as ``#bucket``. The run folder therefore keeps them in
``bucket_names.json`` (the cache entry's format: bucket, term and count
lists), bounded as the fit pass bounds them (at most
:data:`~lancetnic_flow.features.names.PER_BUCKET` terms a bucket and
:data:`~lancetnic_flow.features.names.MOST` entries); model.json records
their count and the file's SHA-256. A continued run merges them with its
own data's (:func:`~lancetnic_flow.features.names.merge_names`) and keeps
the merge, so a chain of continued runs keeps naming every run's terms.
"""
from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from ..errors import UserError
from ..features.names import names_from_json, names_to_json
from ..storage import join, read_bytes, write_bytes

FILE = "bucket_names.json"
RESTORE = "restore the run folder whole (copy every file of it)"


def write_bucket_names(run: str, names: pa.Table | None, storage_options: dict) -> dict | None:
    """Write ``names`` into ``run`` and return what model.json keeps of them (None: no names to keep)."""
    if names is None or not names.num_rows:
        return None
    data = json.dumps(names_to_json(names), ensure_ascii=False).encode()
    write_bytes(join(run, FILE), data, storage_options)
    return {"file": FILE, "entries": int(names.num_rows), "sha256": hashlib.sha256(data).hexdigest()}


def read_bucket_names(run: str, meta: dict, storage_options: dict) -> pa.Table | None:
    """The bucket names of the finished run ``run`` (its model.json ``meta``), checked against
    model.json; None for a run that keeps none (not hashing, or saved before they were kept)."""
    record = meta.get("bucket_names")
    if not isinstance(record, dict):
        return None
    url = join(run, FILE)
    try:
        data = read_bytes(url, storage_options)
    except FileNotFoundError:
        raise UserError(f"{url} is missing: {join(run, 'model.json')} records {record.get('entries')} bucket "
                        "names there", RESTORE) from None
    names = None
    if hashlib.sha256(data).hexdigest() == record.get("sha256"):
        try:
            names = names_from_json(json.loads(data))
        except ValueError:   # not JSON (UnicodeDecodeError is one)
            names = None
    if names is None or names.num_rows != record.get("entries"):
        raise UserError(f"{url} is not the file {join(run, 'model.json')} was saved with (SHA-256 or entries "
                        "differ)", RESTORE)
    return names


__all__ = ["FILE", "write_bucket_names", "read_bucket_names"]
