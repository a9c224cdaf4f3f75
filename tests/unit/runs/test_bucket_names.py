"""runs/bucket_names.py: a hashing run keeps its buckets' sampled terms in its
folder, recorded in model.json, so a run continued from it names them; a
missing or changed file is refused naming it, and a run without the record
(not hashing, or saved before) keeps none."""
from __future__ import annotations

import pyarrow as pa
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.features.names import bucket_labels
from lancetnic_flow.runs.bucket_names import FILE, read_bucket_names, write_bucket_names

NAMES = pa.table({"bucket": pa.array([7, 7, 40], pa.int64()), "term": ["goal", "match", "vote"],
                  "count": pa.array([5, 2, 3], pa.int64())})


def test_names_round_trip_through_the_run_folder_and_model_json(tmp_path):
    meta = {"bucket_names": write_bucket_names(str(tmp_path), NAMES, {})}
    assert meta["bucket_names"]["entries"] == 3 and (tmp_path / FILE).exists()
    back = read_bucket_names(str(tmp_path), meta, {})
    assert back.to_pydict() == NAMES.to_pydict()
    assert bucket_labels(back, [7, 40, 9]) == ["goal | match", "vote", "#9"]


def test_a_run_without_names_writes_and_reads_none(tmp_path):
    assert write_bucket_names(str(tmp_path), None, {}) is None
    assert write_bucket_names(str(tmp_path), NAMES.slice(0, 0), {}) is None
    assert not (tmp_path / FILE).exists()
    assert read_bucket_names(str(tmp_path), {}, {}) is None   # a run saved before the names were kept


@pytest.mark.parametrize("damage", ["changed", "not json", "missing"])
def test_a_missing_or_changed_file_is_refused_naming_it(tmp_path, damage):
    meta = {"bucket_names": write_bucket_names(str(tmp_path), NAMES, {})}
    if damage == "missing":
        (tmp_path / FILE).unlink()
    else:
        data = (tmp_path / FILE).read_text()
        (tmp_path / FILE).write_text(data.replace("goal", "gaol") if damage == "changed" else "{not json")
        if damage == "not json":   # the record made to match the damage: it is still no names file
            import hashlib

            meta["bucket_names"]["sha256"] = hashlib.sha256(b"{not json").hexdigest()
    words = "is missing" if damage == "missing" else "is not the file .*model.json was saved with"
    with pytest.raises(UserError, match=f"{FILE} {words}"):
        read_bucket_names(str(tmp_path), meta, {})
