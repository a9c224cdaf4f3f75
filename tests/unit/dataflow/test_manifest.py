"""dataflow/manifest.py: cache keys are stable hashes that change with what
the entry depends on; the manifest and the fitted features round trip through
the cache; an absent, damaged, stale or older manifest reads as none."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.dataflow.manifest import (CACHE_VERSION, MANIFEST, Manifest, cache_key, columns_key, entry_key,
                                              read_features, read_manifest, write_features, write_manifest)
from lancetnic_flow.storage import join, write_bytes

from .conftest import COLUMNS, VAL_FRACTION

# A line format whose reader was never revised: its entries' keys hold no reader revision, the baseline of the
# tests of the other revisions (every format lancetnic_flow registers has had its reader revised).
UNREVISED = "unrevised"


@pytest.fixture(autouse=True)
def unrevised_format():
    from lancetnic_flow import formats

    formats.register_format(dataclasses.replace(formats.format_named("text"), name=UNREVISED,
                                                extensions=(".unrevised",), revision=0))
    yield
    formats.unregister_format(UNREVISED)


def test_cache_key_is_a_stable_hash_that_ignores_dict_order_and_sees_every_value():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert len(cache_key("x")) == 20
    assert cache_key({"a": 1}) != cache_key({"a": 2}) != cache_key({"a": 1}, "more")


def test_the_entry_key_changes_with_the_data_options_columns_and_split(entry):
    s = entry.spec
    base = entry_key(s.train, None, s.feature_config, COLUMNS, VAL_FRACTION)
    assert base == entry_key(s.train, None, dict(s.feature_config), COLUMNS, VAL_FRACTION)
    assert base != entry_key(s.train, None, {**s.feature_config, "ngrams": 3}, COLUMNS, VAL_FRACTION)
    assert base != entry_key(s.train, None, s.feature_config, Columns(text=("text",)), VAL_FRACTION)
    assert base != entry_key(s.train, None, s.feature_config, COLUMNS, 0.5)
    assert base != entry_key(s.train, s.train, s.feature_config, COLUMNS, VAL_FRACTION)
    assert base != entry_key(s.train, None, s.feature_config, COLUMNS, VAL_FRACTION, version=CACHE_VERSION - 1)


def test_entries_made_before_a_formats_reader_was_revised_are_not_reused_and_others_are():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    def plan(fmt: str) -> SourcePlan:
        return SourcePlan(files=[FileInfo(f"file:///d/a.{fmt}", 10, "v1", fmt, None)], partitions=[])

    fc = FeatureConfig().__dict__
    # CSV, TSV: rows cut in two at a quoted line end; JSON Lines: a number label named two ways, then
    # integers a double cannot hold and strings read as dates; Parquet, Arrow IPC (and JSON Lines): a NaN
    # label named "nan", a binary text that is not UTF-8; fastText: a __label__ tag after the text read as a word;
    # plain text: a BOM at a line's start (files joined by cat) kept in its text
    as_written = {**fc, "lowercase": False}   # lower-casing's own revision aside (below)
    for fmt in ("csv", "tsv", "jsonl", "parquet", "arrow", "fasttext", "text"):
        assert entry_key(plan(fmt), None, as_written, COLUMNS, VAL_FRACTION) != entry_key(
            plan(fmt), None, as_written, COLUMNS, VAL_FRACTION, revisions=False)
    for fmt in (UNREVISED,):   # read as before: their entries still match
        assert entry_key(plan(fmt), None, as_written, COLUMNS, VAL_FRACTION) == entry_key(
            plan(fmt), None, as_written, COLUMNS, VAL_FRACTION, revisions=False)


def test_csv_entries_made_while_a_one_column_files_lines_of_spaces_were_rows_are_not_reused_and_recognised(
        monkeypatch):
    # the CSV/TSV readers' revision 2 skips them as blank: an entry of revision 1 counted them as empty_text
    from lancetnic_flow import formats
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow.manifest import SPACE_LINES_READ_AS_ROWS

    real = formats.format_named
    for fmt in ("csv", "tsv"):
        plan = SourcePlan(files=[FileInfo(f"file:///d/a.{fmt}", 10, "v1", fmt, None)], partitions=[])
        now = entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION)
        before = entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION,
                           readers=SPACE_LINES_READ_AS_ROWS)
        # the key the reader of revision 1 made
        monkeypatch.setattr(formats, "format_named",
                            lambda n, f=fmt: dataclasses.replace(real(n), revision=1) if n == f else real(n))
        assert entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION) == before != now
        monkeypatch.undo()


def test_entries_lower_cased_before_final_sigma_was_lowered_as_str_lower_does_are_not_reused():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = FeatureConfig().__dict__
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) != entry_key(plan, None, fc, COLUMNS, VAL_FRACTION,
                                                                         revisions=False)
    kept = {**fc, "lowercase": False}   # text as written: its terms never changed
    assert entry_key(plan, None, kept, COLUMNS, VAL_FRACTION) == entry_key(plan, None, kept, COLUMNS, VAL_FRACTION,
                                                                           revisions=False)


def test_entries_of_zstd_input_read_before_a_file_cut_short_was_refused_are_not_reused():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    def plan(name, comp):
        return SourcePlan(files=[FileInfo(f"file:///d/{name}", 10, "v1", UNREVISED, comp)], partitions=[])

    fc = {**FeatureConfig().__dict__, "lowercase": False}   # no other revision in the key
    zst, gz = plan("a.txt.zst", "zstd"), plan("a.txt.gz", "gzip")
    assert entry_key(zst, None, fc, COLUMNS, VAL_FRACTION) != entry_key(zst, None, fc, COLUMNS, VAL_FRACTION,
                                                                        revisions=False)
    assert entry_key(gz, None, fc, COLUMNS, VAL_FRACTION) == entry_key(gz, None, fc, COLUMNS, VAL_FRACTION,
                                                                       revisions=False)
    assert entry_key(gz, zst, fc, COLUMNS, VAL_FRACTION) != entry_key(gz, zst, fc, COLUMNS, VAL_FRACTION,
                                                                      revisions=False)


def test_a_vocabulary_without_idf_never_reuses_an_entry_whose_idf_was_applied():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.parquet", 10, "v1", "parquet", None)], partitions=[])
    fc = {k: v for k, v in FeatureConfig(mode="tfidf").__dict__.items() if k != "idf"}   # before the option
    assert entry_key(plan, None, {**fc, "idf": False}, COLUMNS, VAL_FRACTION) != entry_key(
        plan, None, fc, COLUMNS, VAL_FRACTION)
    hashed = {k: v for k, v in FeatureConfig(mode="hashing").__dict__.items() if k != "idf"}
    assert entry_key(plan, None, {**hashed, "idf": False}, COLUMNS, VAL_FRACTION) == entry_key(
        plan, None, hashed, COLUMNS, VAL_FRACTION)   # hashed buckets had no idf before it: the same rows


def test_an_entry_of_a_custom_tokenizer_is_not_reused_once_its_code_changes():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.tokenizers import canonical, register_tokenizer

    plan = SourcePlan(files=[FileInfo("file:///d/a.parquet", 10, "v1", "parquet", None)], partitions=[])

    def words(t):
        return t.split()

    def constant(t):
        return ["constant"]

    register_tokenizer("key-tok", words)
    fc = FeatureConfig(mode="hashing", tokenizer=canonical("key-tok")).__dict__
    before = entry_key(plan, None, fc, COLUMNS, VAL_FRACTION)
    assert before == entry_key(plan, None, dict(fc), COLUMNS, VAL_FRACTION)
    register_tokenizer("key-tok", constant)   # the same name, other code: other tokens, other shards
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) != before


def test_columns_added_later_count_in_the_key_only_when_set():
    plain = Columns(text=("text",), label="label")
    assert columns_key(plain) == (("text",), "label", None, ())
    fields = [f for f in dataclasses.fields(Columns)[4:] if f.type in (bool, "bool")]
    assert fields, "Columns has later boolean fields"
    flag = fields[0].name
    changed = columns_key(dataclasses.replace(plain, **{flag: not getattr(plain, flag)}))
    assert changed[:4] == columns_key(plain) and changed[4] == {flag: not getattr(plain, flag)}


def test_the_manifest_round_trips_with_its_shards_and_partitions(entry):
    m = read_manifest(entry.spec.entry, entry.spec.key, {})
    assert m is not None and m.version == CACHE_VERSION and m.key == entry.spec.key
    assert Manifest.from_json(m.to_json()) == m
    assert m.fingerprint == entry.spec.train.fingerprint()
    assert [s.url for s in m.shards("train")] == [s.url for r in entry.results for s in r.shards
                                                  if s.split == "train"]
    for i, part in enumerate(entry.spec.train.partitions):
        assert m.partition("train", i) == part


@pytest.mark.parametrize("damage", ["absent", "garbage", "other key", "older version"])
def test_a_manifest_that_is_absent_damaged_stale_or_older_reads_as_none(entry, damage):
    s = entry.spec
    url = join(s.entry, MANIFEST)
    m = read_manifest(s.entry, s.key, {})
    if damage == "absent":
        assert read_manifest(s.entry + "-elsewhere", s.key, {}) is None
        return
    if damage == "garbage":
        write_bytes(url, b"{not json", {})
    elif damage == "other key":
        assert read_manifest(s.entry, "another", {}) is None
        return
    else:
        d = json.loads(m.to_json())
        d["version"] = CACHE_VERSION - 1
        write_bytes(url, json.dumps(d).encode(), {})
    assert read_manifest(s.entry, s.key, {}) is None


def test_write_manifest_then_read_gives_the_same_manifest_in_memory_storage(entry):
    m = read_manifest(entry.spec.entry, entry.spec.key, {})
    write_manifest("memory://unit-manifest/e1", m, {})
    assert read_manifest("memory://unit-manifest/e1", m.key, {}) == m


def test_fitted_features_round_trip_through_the_cache_entry(entry, tmp_path):
    f = entry.spec.features
    assert read_features(str(tmp_path / "none"), {}) is None
    write_features(str(tmp_path / "e"), f, {})
    back = read_features(str(tmp_path / "e"), {})
    assert back.vocabulary.equals(f.vocabulary) and back.labels == f.labels
    np.testing.assert_array_equal(back.idf, f.idf)


def test_multilabel_entries_made_before_python_list_cells_were_read_as_label_sets_are_not_reused():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}
    multi = Columns(text=("text",), label="label", multilabel=True)
    assert entry_key(plan, None, fc, multi, VAL_FRACTION) != entry_key(plan, None, fc, multi, VAL_FRACTION,
                                                                       revisions=False)
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == entry_key(plan, None, fc, COLUMNS, VAL_FRACTION,
                                                                         revisions=False)


def test_typed_file_entries_made_with_an_encoding_before_it_decoded_their_bytes_are_not_reused(monkeypatch):
    # --encoding did nothing to a Parquet/Arrow column of bytes (read as UTF-8): those entries are not reused
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow import manifest

    fc = {**FeatureConfig().__dict__, "lowercase": False}
    latin = Columns(text=("text",), label="label", encoding="latin_1")
    for fmt, columns, revised in (("parquet", latin, True), ("arrow", latin, True), ("text", latin, False),
                                  ("parquet", COLUMNS, False)):
        plan = SourcePlan(files=[FileInfo(f"file:///d/a.{fmt}", 10, "v1", fmt, None)], partitions=[])
        now = entry_key(plan, None, fc, columns, VAL_FRACTION)
        monkeypatch.setattr(manifest, "ENCODED_BYTES_REVISION", manifest.ENCODED_BYTES_REVISION + 1)
        assert (entry_key(plan, None, fc, columns, VAL_FRACTION) != now) == revised, fmt
        monkeypatch.undo()


def test_an_entrys_features_replaced_by_another_entrys_are_not_read_as_its_own(entry, tmp_path):
    from .conftest import make_entry

    s = entry.spec
    write_features(s.entry, s.features, {})
    assert read_features(s.entry, {}, s.key).labels == s.features.labels
    (tmp_path / "other").mkdir()
    other = make_entry(tmp_path / "other", fcfg=FeatureConfig(mode="tfidf", ngrams=2, analyzer="word"), finish=False)
    write_features(s.entry, other.spec.features, {})   # another entry's vocabulary: every shard's ids read wrong
    assert read_features(s.entry, {}, s.key) is None
    assert read_features(s.entry, {}) is not None       # no key: the file as it is (an entry still being written)
    old = dataclasses.replace(read_manifest(s.entry, s.key, {}), features_digest=None)
    write_manifest(s.entry, old, {})                    # a manifest written before it named its features
    assert read_features(s.entry, {}, s.key) is not None


def test_multilabel_entries_made_before_labels_training_never_had_were_counted_are_not_reused(monkeypatch):
    # their validation shards dropped such a label uncounted (no per-row ``missed``): scored as if absent;
    # those of revision 2 counted one named twice in a row's set twice (a missed label too many)
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow import manifest

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}
    multi = Columns(text=("text",), label="label", multilabel=True)
    now = entry_key(plan, None, fc, multi, VAL_FRACTION)
    for earlier in (1, 2):
        monkeypatch.setattr(manifest, "LABEL_SETS_REVISION", earlier)
        assert entry_key(plan, None, fc, multi, VAL_FRACTION) != now
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == entry_key(plan, None, fc, COLUMNS, VAL_FRACTION,
                                                                         revisions=False)


def _csv_entries_of_revision_are_recognised(monkeypatch, readers: dict[str, int]) -> None:
    """An entry the CSV/TSV readers of ``readers``' revision made keys as ``entry_key(readers=...)``
    says (a checkpoint of it is recognised), and no longer as today's (not reused)."""
    from lancetnic_flow import formats
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    real = formats.format_named
    for fmt in ("csv", "tsv"):
        plan = SourcePlan(files=[FileInfo(f"file:///d/a.{fmt}", 10, "v1", fmt, None)], partitions=[])
        now = entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION)
        before = entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION, readers=readers)
        monkeypatch.setattr(formats, "format_named",
                            lambda n, f=fmt: dataclasses.replace(real(n), revision=readers[f]) if n == f else real(n))
        assert entry_key(plan, None, FeatureConfig().__dict__, COLUMNS, VAL_FRACTION) == before != now
        monkeypatch.undo()


def test_csv_entries_made_before_a_lone_cr_ended_a_row_are_not_reused_and_recognised(monkeypatch):
    # revision 3 reads a lone \r as a row end everywhere (the header, the cuts): a revision 2 entry may differ
    from lancetnic_flow.dataflow.manifest import LONE_CR_NOT_A_ROW_END

    assert LONE_CR_NOT_A_ROW_END == {"csv": 2, "tsv": 2}
    _csv_entries_of_revision_are_recognised(monkeypatch, LONE_CR_NOT_A_ROW_END)


def test_csv_entries_made_before_each_record_was_read_on_its_own_are_not_reused_and_recognised(monkeypatch):
    # revision 4 reads a malformed record's lines within the record: a revision 3 entry may hold other rows
    from lancetnic_flow.dataflow.manifest import MALFORMED_READ_PAST_ITS_RECORD

    assert MALFORMED_READ_PAST_ITS_RECORD == {"csv": 3, "tsv": 3}
    _csv_entries_of_revision_are_recognised(monkeypatch, MALFORMED_READ_PAST_ITS_RECORD)


def test_csv_entries_made_while_short_rows_were_malformed_are_not_reused_and_recognised(monkeypatch):
    # revision 5 reads a row of fewer fields than the header with its missing fields empty: revision 4 skipped it
    from lancetnic_flow.dataflow.manifest import SHORT_ROWS_MALFORMED

    assert SHORT_ROWS_MALFORMED == {"csv": 4, "tsv": 4}
    _csv_entries_of_revision_are_recognised(monkeypatch, SHORT_ROWS_MALFORMED)


def test_entries_with_numeric_or_target_columns_read_before_true_and_false_were_numbers_are_not_reused():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}   # no other revision in the key
    for columns in (dataclasses.replace(COLUMNS, numeric=("n",)), dataclasses.replace(COLUMNS, target="y")):
        assert entry_key(plan, None, fc, columns, VAL_FRACTION) != entry_key(plan, None, fc, columns, VAL_FRACTION,
                                                                            revisions=False)
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == entry_key(plan, None, fc, COLUMNS, VAL_FRACTION,
                                                                         revisions=False)


def test_entries_of_typed_files_with_numeric_or_target_columns_read_before_durations_were_seconds_are_not_reused():
    # a Parquet duration column was read in its stored unit (microseconds, nanoseconds): not reused
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    typed = SourcePlan(files=[FileInfo("file:///d/a.parquet", 10, "v1", "parquet", None)], partitions=[])
    text = SourcePlan(files=[FileInfo("file:///d/a.csv", 10, "v1", "csv", None)], partitions=[])
    fc = FeatureConfig().__dict__
    for columns in (dataclasses.replace(COLUMNS, numeric=("n",)), dataclasses.replace(COLUMNS, target="y")):
        assert entry_key(typed, None, fc, columns, VAL_FRACTION) != entry_key(typed, None, fc, columns,
                                                                             VAL_FRACTION, numbers=1)
        # a CSV holds no duration: its entries read as before and are kept
        assert entry_key(text, None, fc, columns, VAL_FRACTION) == entry_key(text, None, fc, columns,
                                                                            VAL_FRACTION, numbers=1)
    assert entry_key(typed, None, fc, COLUMNS, VAL_FRACTION) == entry_key(typed, None, fc, COLUMNS, VAL_FRACTION,
                                                                          numbers=1)


def test_entries_with_a_validation_source_made_before_its_labels_were_read_in_trainings_spelling_are_not_reused():
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    val = SourcePlan(files=[FileInfo("file:///d/v.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}   # no other revision in the key
    assert entry_key(plan, val, fc, COLUMNS, VAL_FRACTION) != entry_key(plan, val, fc, COLUMNS, VAL_FRACTION,
                                                                        revisions=False)
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == entry_key(plan, None, fc, COLUMNS, VAL_FRACTION,
                                                                         revisions=False)


def test_a_continued_runs_labels_read_in_its_spelling_are_kept_beside_the_entry_for_the_runs_that_reuse_it(tmp_path):
    from lancetnic_flow.dataflow.manifest import READ_AS, read_read_as, write_read_as

    entry = str(tmp_path / "entry")
    assert read_read_as(entry, {}) == {}
    write_read_as(entry, {}, {})
    assert not (tmp_path / "entry" / READ_AS).exists()   # none read so: no file
    write_read_as(entry, {"1 as 1.0": 63, "2 as 2.0": 119}, {})
    assert read_read_as(entry, {}) == {"1 as 1.0": 63, "2 as 2.0": 119}
    (tmp_path / "entry" / READ_AS).write_text("[1, 2")
    assert read_read_as(entry, {}) == {}   # damaged: said by the runs that fit it, not here


def test_an_entry_of_a_tokenizer_is_not_reused_once_a_file_it_depends_on_changes_and_is_while_unchanged(tmp_path):
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.tokenizers import canonical, register_tokenizer

    plan = SourcePlan(files=[FileInfo("file:///d/a.parquet", 10, "v1", "parquet", None)], partitions=[])
    stop = tmp_path / "stop.txt"
    stop.write_text("the\nof\n")

    def words_but_stop(t):
        listed = set(open(stop).read().split())
        return [w for w in t.split() if w not in listed]

    register_tokenizer("key-listed", words_but_stop, depends_on=stop)
    fc = FeatureConfig(mode="hashing", tokenizer=canonical("key-listed")).__dict__
    before = entry_key(plan, None, fc, COLUMNS, VAL_FRACTION)
    stop.write_text("the\nof\n")   # written again, the same words: the entry is reused
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == before
    stop.write_text("the\nof\nand\n")   # another list: other tokens, a fresh entry
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) != before


def test_text_entries_made_with_an_encoding_before_a_utf8_file_was_refused_there_are_not_reused(monkeypatch):
    # --encoding latin-1 read a UTF-8 file's "café" as "cafÃ©" into the entry: such entries are not reused
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow import manifest

    fc = {**FeatureConfig().__dict__, "lowercase": False}
    latin = Columns(text=("text",), label="label", encoding="latin_1")
    for fmt, columns, revised in (("csv", latin, True), ("jsonl", latin, True), ("text", latin, True),
                                  ("parquet", latin, False), ("csv", COLUMNS, False)):
        plan = SourcePlan(files=[FileInfo(f"file:///d/a.{fmt}", 10, "v1", fmt, None)], partitions=[])
        now = entry_key(plan, None, fc, columns, VAL_FRACTION)
        monkeypatch.setattr(manifest, "ENCODED_TEXT_REVISION", manifest.ENCODED_TEXT_REVISION + 1)
        assert (entry_key(plan, None, fc, columns, VAL_FRACTION) != now) == revised, fmt
        monkeypatch.undo()


def test_entries_with_a_target_column_made_before_unreadable_targets_were_counted_are_not_reused(monkeypatch):
    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow import manifest

    plan = SourcePlan(files=[FileInfo("file:///d/a.txt", 10, "v1", UNREVISED, None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}
    target = dataclasses.replace(COLUMNS, target="y")
    now = entry_key(plan, None, fc, target, VAL_FRACTION), entry_key(plan, None, fc, COLUMNS, VAL_FRACTION)
    monkeypatch.setattr(manifest, "TARGET_NOTES_REVISION", 0)   # the keys made before the count
    assert entry_key(plan, None, fc, target, VAL_FRACTION) != now[0]
    assert entry_key(plan, None, fc, COLUMNS, VAL_FRACTION) == now[1]


def test_a_csv_entry_read_with_another_delimiter_is_its_own_and_a_comma_keys_as_before():
    # a ';' file cached as ',' (one column of whole lines) must not be reused, nor the other way round
    from lancetnic_flow.data.sources import FileInfo, SourcePlan

    plan = SourcePlan(files=[FileInfo("file:///d/a.csv", 10, "v1", "csv", None)], partitions=[])
    fc = {**FeatureConfig().__dict__, "lowercase": False}
    keys = {d: entry_key(plan, None, fc, dataclasses.replace(COLUMNS, delimiter=d), VAL_FRACTION)
            for d in (None, ";", "|")}
    assert len(set(keys.values())) == 3 and keys[None] == entry_key(plan, None, fc, COLUMNS, VAL_FRACTION)
    assert columns_key(COLUMNS) == columns_key(dataclasses.replace(COLUMNS, delimiter=None))
