"""training/held_out.py: a run records its validation rows' hashes only when
its model may learn them, keeps a whole record in the cache entry, and saves
the union with what the run it continues had learned."""
from __future__ import annotations

import numpy as np

from lancetnic_flow.features.split import RECORD_MAX, Holdout
from lancetnic_flow.features.vocab import FitStats, merge_stats
from lancetnic_flow.resolve import LEARN_VAL_MAX_ROWS
from lancetnic_flow.runs.learned_rows import LearnedRows
from lancetnic_flow.training.held_out import ENTRY_FILE, HeldOut, holdout_for


class Init:   # what HeldOut reads of an InitRun
    def __init__(self, hashes, complete=True):
        self.learned = LearnedRows(np.array(hashes, np.uint64), complete)


def test_the_split_records_only_for_a_model_that_may_learn_its_validation_rows():
    assert holdout_for(0.1, None, False, True) == 0.1          # no record, nothing learned: a plain fraction
    assert holdout_for(0.1, None, None, False) == 0.1          # a model that never learns them
    assert holdout_for(0.1, None, None, True).record == LEARN_VAL_MAX_ROWS   # decided by the rows
    assert holdout_for(0.1, None, True, True).record == RECORD_MAX
    held = holdout_for(0.1, Init([4, 8]), False, True)
    assert isinstance(held, Holdout) and held.record == 0 and held.learned.tolist() == [4, 8]


def test_the_saved_record_is_the_runs_validation_rows_and_what_its_starting_model_learned():
    h = HeldOut(Holdout(0.1, record=100))
    h.take(merge_stats([FitStats(held_out=np.array([7, 3], np.uint64), held_out_limit=100),
                        FitStats(held_out=np.array([3, 11], np.uint64), held_out_limit=100)]))
    assert h.learned(True, None).hashes.tolist() == [3, 7, 11]
    both = h.learned(True, Init([1, 7]))
    assert both.hashes.tolist() == [1, 3, 7, 11] and both.complete
    # A model that did not learn its validation rows keeps only what it started from.
    assert h.learned(False, Init([1, 7])).hashes.tolist() == [1, 7]
    assert h.learned(False, None).hashes.size == 0


def test_a_record_past_its_limit_is_saved_as_incomplete():
    h = HeldOut(Holdout(0.1, record=2))
    h.take(merge_stats([FitStats(held_out=np.array([1, 2], np.uint64), held_out_limit=2),
                        FitStats(held_out=np.array([3], np.uint64), held_out_limit=2)]))
    assert h.lost == 3
    assert not h.learned(True, None).complete


def test_a_whole_record_is_kept_in_the_cache_entry_and_read_back(tmp_path):
    h = HeldOut(Holdout(0.1, record=100))
    h.take(FitStats(held_out=np.array([9, 2], np.uint64), held_out_limit=100))
    h.write_entry(str(tmp_path), {})
    again = HeldOut(Holdout(0.1, record=100))
    again.read_entry(str(tmp_path), {}, ["every partition"])
    assert again.hashes.tolist() == [2, 9] and not again.missing
    # A damaged one is not trusted: every partition is hashed again.
    (tmp_path / ENTRY_FILE).write_bytes(b"12345")
    damaged = HeldOut(Holdout(0.1, record=100))
    damaged.read_entry(str(tmp_path), {}, ["every partition"])
    assert damaged.hashes is None and damaged.missing == ["every partition"]
    assert not damaged.learned(True, None).complete   # nothing hashed them: the record says so


def test_a_record_the_fit_pass_could_not_finish_is_not_kept_in_the_cache_entry(tmp_path):
    h = HeldOut(Holdout(0.1, record=100))
    h.take(FitStats(held_out=np.array([9], np.uint64), held_out_limit=100), unread=["the --val source"])
    h.write_entry(str(tmp_path), {})
    assert not (tmp_path / ENTRY_FILE).exists() and h.missing == ["the --val source"]


def test_a_fit_record_holding_validation_rows_of_unknown_labels_is_made_again_from_the_known_ones():
    """The fit pass hashes validation rows before the classes are known: when one
    has a label training never had (skipped, never learned) its record is not
    used; every partition is hashed again, the pass given the run's classes."""
    h = HeldOut(Holdout(0.1, record=100))
    fit = FitStats(held_out=np.array([1, 2], np.uint64), held_out_limit=100, val_labels={"a": 1, "z": 1})
    every = [("p0", None), ("p1", "val")]
    h.take(fit, unread=[], labels=["a", "b"], partitions=every)
    assert h.hashes is None and h.missing == every
    client = Client()
    h.start_pass(client, None, {}, 1, labels=["a", "b"])
    assert client.calls == [(["p0", "p1"], ["a", "b"])]
    assert h.learned(True, None).hashes.tolist() == [1]
    # Every validation label known: the fit's record is the record.
    ok = HeldOut(Holdout(0.1, record=100))
    ok.take(FitStats(held_out=np.array([1, 2], np.uint64), held_out_limit=100, val_labels={"a": 2}),
            labels=["a"], partitions=every)
    assert ok.hashes.tolist() == [1, 2] and not ok.missing


class Client:   # runs the pass's tasks in place; each returns the known rows' record, [1]
    def __init__(self):
        self.calls = []

    def map(self, fn, parts, splits, *, labels, **kw):
        self.calls.append((parts, labels))
        return [Done(FitStats(held_out=np.array([1], np.uint64), held_out_limit=100)) for _ in parts]


class Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value
