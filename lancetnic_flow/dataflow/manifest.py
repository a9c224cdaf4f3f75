"""The cache entry: its key, the manifest of its shards, the fitted features.

A cache entry is keyed by the source fingerprint (files, sizes, change
tokens) and the feature config, so a changed input or option gets a fresh
entry and an unchanged one is reused. The manifest is written once an entry
is complete and lists every shard with the partition it came from, so a
damaged shard is rebuilt from the same bytes whatever today's plan.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import ADDED_FIELDS
from ..data.sources import Columns, FileInfo, Partition, SourcePlan
from ..features.vectorize import FittedFeatures
from ..storage import join, read_bytes, write_bytes
from .shards import PartitionResult, ShardInfo

MANIFEST = "manifest.json"
FEATURES = "features.json"
NAMES = "bucket_names.json"   # the hashed buckets' sampled terms, for top_terms.csv (features/names.py)
# A continued run's training labels read as its old run's spelling ({"1 as 1.0": rows}), said by the runs
# that reuse the entry.
READ_AS = "labels_read_as.json"
# 3: the validation split hashes the whole text (features/hashing.py). Entries
# of version 2 may hold the split of the first and last 64 bytes: never reused.
# 4: shards are packed (features/packing.py), which a version-3 reader cannot
# decode; this version still reads the plain .npz shards of version 3.
CACHE_VERSION = 4
# Lower-casing's revision, in the key of entries that lower-case: 1 lowers a word's final capital
# sigma to ς as str.lower does (features/tokenize.lower), where earlier entries hold σ.
LOWER_REVISION = 1
# Label sets' revision, in the key of --task multilabel entries: 1 reads a cell holding a Python list
# (['a', 'b'], as pandas writes a list column) as its labels, where earlier entries hold one label;
# 2 keeps, per row, the labels training never had (``missed``), which earlier entries dropped uncounted;
# 3 counts such a label named twice in one row's set once, where earlier entries count it twice;
# 4 counts the label strings --label-sep split (rows.label_sep), where an earlier entry's count of none
# would say the separator split nothing; 5 keeps a row whose set is an empty list ([]) as a row no label
# applies to, which earlier entries skipped as missing_label.
LABEL_SETS_REVISION = 5
# Bytes columns' revision, in the key of Parquet/Arrow entries made with --encoding: 1 decodes a column
# of bytes in that encoding, where earlier entries decoded it as UTF-8 (the option did nothing there);
# 2 refuses a column of UTF-8 bytes there, where earlier entries hold its letters garbled ("cafÃ©");
# 3 judges every value of a column, and one UTF-8 letter ("café"), where earlier entries judged a row
# group's first 64 KiB and needed three letters.
ENCODED_BYTES_REVISION = 3
# Encoded text's revision, in the key of entries of text formats (CSV, TSV, JSON Lines, text, fastText)
# made with --encoding: 1 refuses a UTF-8 file there (data/readers/table.check_not_utf8), where an
# earlier entry may hold its letters garbled ("cafÃ©"); 2 refuses a block of one UTF-8 letter ("café",
# data/readers/utf8_shapes.py) or of a stray byte beside them, where an earlier entry needed three and none.
ENCODED_TEXT_REVISION = 2
# zstd input's revision, in the key of entries that read a .zst file: 1 refuses a file cut short
# (data/decompress.py), where an earlier entry may hold only the rows before the cut.
ZSTD_REVISION = 1
# Numbers' revision, in the key of entries with --numeric or --target columns: 1 reads true/false text
# there as 1/0, as a boolean column is read, where earlier entries hold no number (the mean, a skip);
# 2 reads a typed file's (Parquet, Arrow IPC) duration column in seconds, where earlier entries hold its
# stored unit (pandas' nanoseconds, Arrow's microseconds). Text formats hold no duration: theirs stay 1.
NUMBERS_REVISION = 2
DURATIONS_IN_SECONDS = 2
# Validation labels' revision, in the key of entries with a label column and a --val source: 1 reads a
# validation label the training labels hold in another spelling of its value (1 for 1.0) as training's,
# where earlier entries skipped its rows (unknown_label).
VAL_LABELS_REVISION = 1
# Target notes' revision, in the key of entries with a --target column: 1 counts the rows skipped as
# missing_target whose target was given but is no number (1,5 with a decimal comma: rows.noted.
# unreadable_target), where an earlier entry's count of none would let the run say nothing of them.
TARGET_NOTES_REVISION = 1
# The CSV and TSV readers' revisions before a one-column file's lines of spaces were blank, no row
# (formats.py's revision 2): a checkpoint keyed by them is of that reading.
SPACE_LINES_READ_AS_ROWS = {"csv": 1, "tsv": 1}
# Their revisions before a lone "\r" ended a row everywhere (revision 3): the header, the cuts between
# partitions and the quote automaton knew "\n" alone, so such a file was refused or some rows read otherwise.
LONE_CR_NOT_A_ROW_END = {"csv": 2, "tsv": 2}
# Their revisions before each record was read on its own (revision 4): the lines a malformed record's quote
# took were re-read past the record's end, so a malformed file's rows depended on where it was cut.
MALFORMED_READ_PAST_ITS_RECORD = {"csv": 3, "tsv": 3}
# Their revisions before a row of fewer fields than the header was read with its missing fields empty
# (revision 5): such a row was malformed, skipped in training.
SHORT_ROWS_MALFORMED = {"csv": 4, "tsv": 4}


def cache_key(*parts: Any) -> str:
    """A short stable hash of JSON-able parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


@dataclass
class Manifest:
    key: str
    fingerprint: str
    config: dict
    results: list[PartitionResult]
    version: int = CACHE_VERSION
    # The partitions the shards were cut from ({"train": [...], "val": [...]}),
    # so a damaged shard is rebuilt from the same bytes whatever today's plan.
    partitions: dict[str, list[dict]] = field(default_factory=dict)
    # The SHA-256 of the features.json the shards were featurised with: that file, damaged or
    # replaced by another entry's, would read every shard's ids as other terms. None: written before.
    features_digest: str | None = None

    def partition(self, split: str, index: int) -> Partition:
        d = dict(self.partitions[split][index])
        return Partition(**{**d, "file": FileInfo(**d["file"])})

    def shards(self, split: str) -> list[ShardInfo]:
        return [s for r in self.results for s in r.shards if s.split == split]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        d = json.loads(text)
        d["results"] = [PartitionResult(**{**r, "shards": [ShardInfo(**s) for s in r["shards"]]})
                        for r in d["results"]]
        return cls(**d)


def read_manifest(entry: str, key: str, cache_options: dict) -> Manifest | None:
    """The complete manifest of a cache entry, or None if absent or stale."""
    try:
        m = Manifest.from_json(read_bytes(join(entry, MANIFEST), cache_options).decode())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    return m if m.key == key and m.version == CACHE_VERSION else None


def write_manifest(entry: str, manifest: Manifest, cache_options: dict) -> None:
    write_bytes(join(entry, MANIFEST), manifest.to_json().encode(), cache_options)


def read_features(entry: str, cache_options: dict, key: str | None = None) -> FittedFeatures | None:
    """The entry's fitted features, or None if absent or damaged. With ``key``: also
    None when the entry's complete manifest names other features than this file
    holds (another entry's, or a damaged one), which a fit pass then makes again."""
    try:
        data = read_bytes(join(entry, FEATURES), cache_options)
        features = FittedFeatures.from_json(data.decode())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    manifest = read_manifest(entry, key, cache_options) if key is not None else None
    if manifest is not None and manifest.features_digest not in (None, features_digest(data)):
        return None
    return features


def shards_digest(manifest: Manifest) -> str:
    """The digest of ``manifest``'s training shards, in their order: partition, chunk, rows and
    CRC-32 each. Equal for an entry made again from the same partitions; another cut differs."""
    parts = [(s.partition, s.chunk, s.rows, s.crc32) for s in manifest.shards("train")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def features_digest(data: bytes) -> str:
    """The digest of a features.json's bytes, as the manifest records it."""
    return hashlib.sha256(data).hexdigest()


def write_features(entry: str, features: FittedFeatures, cache_options: dict) -> None:
    write_bytes(join(entry, FEATURES), features.to_json().encode(), cache_options)


def read_names(entry: str, cache_options: dict):
    """The hashed buckets' sampled names the entry's fit pass kept (features/names.py), or
    None: an entry written before them, or a damaged file (the buckets are then shown unnamed)."""
    from ..features.names import names_from_json

    try:
        return names_from_json(json.loads(read_bytes(join(entry, NAMES), cache_options)))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None


def write_names(entry: str, names, cache_options: dict) -> None:
    """Keep the fit pass's bucket names beside the entry's features (nothing when there are none)."""
    from ..features.names import names_to_json

    if names is not None:
        write_bytes(join(entry, NAMES), json.dumps(names_to_json(names), ensure_ascii=False).encode(),
                    cache_options)


def read_read_as(entry: str, cache_options: dict) -> dict[str, int]:
    """The training labels the entry's fit pass read in a continued run's spelling
    (:func:`write_read_as`); none for an entry without them, or a damaged file."""
    try:
        doc = json.loads(read_bytes(join(entry, READ_AS), cache_options))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return {}
    return {str(k): int(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def write_read_as(entry: str, read_as: dict[str, int], cache_options: dict) -> None:
    """Keep the training labels read in a continued run's spelling beside the entry (nothing when none were)."""
    if read_as:
        write_bytes(join(entry, READ_AS), json.dumps(read_as, ensure_ascii=False).encode(), cache_options)


def entry_key(train: SourcePlan, val: SourcePlan | None, feature_config: dict, columns: Columns,
              val_fraction: float, version: int = CACHE_VERSION, revisions: bool = True,
              readers: dict[str, int] | None = None, numbers: int = NUMBERS_REVISION) -> str:
    """The cache entry of featurising ``train`` (and ``val``) with these options.
    Options added later count only when they differ from what an entry made
    before them meant, so those entries (and their runs' checkpoints) still match.
    ``version``: an earlier cache version's key (to recognise an old checkpoint).
    ``revisions=False``: the key of an entry made before its formats' readers
    were last revised (``Format.revision``: CSV and TSV rows cut outside
    quotes, JSON numbers named as Arrow names them; then JSON values read as
    written, a NaN label missing, a binary text not UTF-8 undecodable;
    fastText tags anywhere in a line; then every JSON value of a line read
    by the per-line path as Arrow reads them, fastText's \\v and NUL ending a tag; then
    a one-column CSV/TSV file's lines of spaces blank, no row; then a lone \\r a CSV/TSV row end;
    a BOM at a fastText line's start no text, then at a plain text line's, then a lone \\r a plain text line end; a JSON object across lines malformed lines, then also beside a line of two objects; then a CSV/TSV
    row of fewer fields than the header read with its missing fields empty),
    lower-casing was (:data:`LOWER_REVISION`), label sets were
    (:data:`LABEL_SETS_REVISION`), typed files' bytes were decoded
    (:data:`ENCODED_BYTES_REVISION`), a UTF-8 file read in another encoding was refused
    (:data:`ENCODED_TEXT_REVISION`), a cut-off zstd file was refused
    (:data:`ZSTD_REVISION`), true/false read as numbers
    (:data:`NUMBERS_REVISION`), validation labels read in training's spelling
    (:data:`VAL_LABELS_REVISION`) and targets that are no number counted
    (:data:`TARGET_NOTES_REVISION`), whose rows, terms or labels may differ. ``readers``: format → the
    revision its reader had (a key an earlier reader made, to recognise its checkpoint); ``numbers``:
    the numbers' revision an earlier reader had, likewise."""
    options = key_options_of(feature_config)
    parts: list = [version, train.fingerprint(), val.fingerprint() if val else None, options,
                   columns_key(columns), val_fraction]
    revised = _revised(train, val, feature_config, columns, readers or {}, numbers) if revisions else []
    return cache_key(*parts, revised) if revised else cache_key(*parts)


def key_parts(train: SourcePlan, val: SourcePlan | None, feature_config: dict, columns: Columns,
              val_fraction: float) -> dict:
    """What today's :func:`entry_key` is made of, by name and in the clear: each input file's
    identity, the options, the columns, the held-out share and the readers' revisions. A
    checkpoint keeps them beside its key, so that a resume whose key differs names what changed."""
    tokenizer = None
    if feature_config.get("tokenizer"):   # the code and the files it depends on, each on its own
        from ..tokenizers import code_parts

        tokenizer = code_parts(str(feature_config["tokenizer"]))
    parts = {"inputs": {"train": train.file_rows(), "val": val.file_rows() if val else None},
             "options": key_options_of(feature_config, tokenizer), "columns": _columns_named(columns),
             "val_fraction": val_fraction,
             "revisions": dict(_revised(train, val, feature_config, columns, {}, NUMBERS_REVISION))}
    if tokenizer is not None:
        parts["tokenizer"] = tokenizer
    return parts


def key_options_of(feature_config: dict, tokenizer: dict | None = None) -> dict:
    """The feature options as the key counts them: those added later only where they differ
    from what an entry made before them meant, a tokenizer's code, an idf switched off.
    ``tokenizer``: the tokenizer's code parts (tokenizers.code_parts), where the caller has them."""
    added = ADDED_FIELDS["features"]
    options = {k: v for k, v in feature_config.items() if not (k in added and v == added[k])}
    if feature_config.get("tokenizer"):
        # a run records the tokenizer's name; its shards come from its code
        from ..tokenizers import code_fingerprint

        options["tokenizer_code"] = code_fingerprint(str(feature_config["tokenizer"]), tokenizer)
    if (feature_config.get("mode") or "tfidf") == "tfidf" and feature_config.get("idf") is False:
        # a vocabulary's idf was applied whatever --no-idf said until it was honoured: those entries hold it
        options["idf"] = False
    return options


def _revised(train: SourcePlan, val: SourcePlan | None, feature_config: dict, columns: Columns,
             readers: dict[str, int], numbers: int) -> list:
    """The revisions the key counts, as (what was revised, its revision): see :func:`entry_key`."""
    revised = _revisions(train, val, readers=readers)
    if feature_config.get("lowercase", True):
        revised.append(("lower", LOWER_REVISION))
    if columns.multilabel:
        revised.append(("label_sets", LABEL_SETS_REVISION))
    if columns.encoding and _typed_files(train, val):
        revised.append(("encoded_bytes", ENCODED_BYTES_REVISION))
    if columns.encoding and _text_files(train, val):
        revised.append(("encoded_text", ENCODED_TEXT_REVISION))
    if any(f.compression == "zstd" for p in (train, val) if p is not None for f in p.files):
        revised.append(("zstd", ZSTD_REVISION))
    if columns.numeric or columns.target:
        if not _typed_files(train, val):   # durations are typed files' alone: text formats' entries read as before
            numbers = min(numbers, DURATIONS_IN_SECONDS - 1)
        revised.append(("numbers", numbers))
    if columns.label and val is not None:
        revised.append(("val_labels", VAL_LABELS_REVISION))
    if columns.target and TARGET_NOTES_REVISION:
        revised.append(("target_notes", TARGET_NOTES_REVISION))
    return revised


def _columns_named(columns: Columns) -> dict:
    """The columns the key counts, by field name, as JSON holds them."""
    return {f.name: list(v) if isinstance(v := getattr(columns, f.name), tuple) else v
            for f in dataclasses.fields(columns)}


def _text_files(*plans: SourcePlan | None) -> bool:
    """Whether these plans read a file of a text format (cut by bytes: CSV, JSON Lines, text, fastText)."""
    from ..formats import format_named

    return any(format_named(f.format).splits_by_bytes for p in plans if p is not None for f in p.files)


def _typed_files(*plans: SourcePlan | None) -> bool:
    """Whether these plans read a typed file (Parquet, Arrow IPC), whose columns may hold bytes."""
    from ..formats import format_named

    return any(not format_named(f.format).splits_by_bytes for p in plans if p is not None for f in p.files)


def _revisions(*plans: SourcePlan | None, readers: dict[str, int]) -> list:
    """The revised readers of these plans' formats, as (format, revision); ``readers``: revisions other than today's."""
    from ..formats import format_named

    found = {(f.format, readers.get(f.format, format_named(f.format).revision))
             for p in plans if p is not None for f in p.files}
    return sorted((name, rev) for name, rev in found if rev)


def columns_key(columns: Columns) -> tuple:
    """The columns as a cache key: fields added after the first four (multilabel,
    its separator, …) count only when set, so entries made before them still match."""
    first = dataclasses.fields(columns)[:4]
    later = {f.name: getattr(columns, f.name) for f in dataclasses.fields(columns)[4:]
             if getattr(columns, f.name) != f.default}
    return tuple(getattr(columns, f.name) for f in first) + ((later,) if later else ())
