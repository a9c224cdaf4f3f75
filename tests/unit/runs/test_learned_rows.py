"""runs/learned_rows.py: the record of the rows a run's model learned besides
its training rows is written beside the model, read back checked against
model.json, and a run saved without one says whether it may have learned some."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.learned_rows import FILE, LearnedRows, read_learned, write_learned

LEARNS = {"training": {"learn_val": True}}


def test_a_record_round_trips_through_the_run_folder_and_model_json(tmp_path):
    rows = LearnedRows(np.array([3, 17, 2**63 + 5], np.uint64))
    meta = {"learned_rows": write_learned(str(tmp_path), rows, {})}
    assert meta["learned_rows"]["rows"] == 3 and meta["learned_rows"]["complete"] is True
    assert (tmp_path / FILE).stat().st_size == 24
    back = read_learned(str(tmp_path), meta, LEARNS, {})
    assert back.hashes.dtype == np.uint64 and back.hashes.tolist() == rows.hashes.tolist() and back.complete


def test_nothing_is_written_when_the_model_learned_nothing_beyond_its_training_rows(tmp_path):
    assert write_learned(str(tmp_path), LearnedRows(), {}) is None
    assert not (tmp_path / FILE).exists()
    # An incomplete record is written, empty: a continued run must hear of it.
    assert write_learned(str(tmp_path), LearnedRows(complete=False), {})["complete"] is False


def test_a_run_saved_without_a_record_is_incomplete_only_if_it_learned_its_validation_rows(tmp_path):
    old = read_learned(str(tmp_path), {}, LEARNS, {})
    assert old.hashes.size == 0 and not old.complete
    plain = read_learned(str(tmp_path), {}, {"training": {"learn_val": False}}, {})
    assert plain.hashes.size == 0 and plain.complete


def test_a_missing_or_changed_record_is_refused_naming_the_file(tmp_path):
    meta = {"learned_rows": write_learned(str(tmp_path), LearnedRows(np.array([1, 2], np.uint64)), {})}
    (tmp_path / FILE).write_bytes(np.array([1, 3], "<u8").tobytes())
    with pytest.raises(UserError, match=f"{FILE} is not the file .*model.json was saved with"):
        read_learned(str(tmp_path), meta, LEARNS, {})
    (tmp_path / FILE).unlink()
    with pytest.raises(UserError, match=f"{FILE} is missing"):
        read_learned(str(tmp_path), meta, LEARNS, {})


def test_union_keeps_both_records_and_is_complete_only_if_both_are():
    a = LearnedRows(np.array([1, 5], np.uint64))
    b = LearnedRows(np.array([5, 9], np.uint64))
    assert a.union(b).hashes.tolist() == [1, 5, 9] and a.union(b).complete
    assert not a.union(LearnedRows(complete=False)).complete
    assert a.digest() != b.digest() and a.digest() != LearnedRows(a.hashes, False).digest()
