"""errors.py: a UserError prints its message and hint, survives pickling (as
Dask ships a worker's error back) with both, and close matches suggest names."""
from __future__ import annotations

import pickle

from lancetnic_flow.errors import UserError, close_matches
from lancetnic_flow.storage import WriteError


def test_a_user_error_prints_its_message_then_its_hint():
    assert str(UserError("bad column 'txt'", "use --text text")) == "bad column 'txt'\n  hint: use --text text"
    assert str(UserError("no hint")) == "no hint"


def test_a_user_error_and_its_subclasses_keep_message_and_hint_through_pickle():
    for err in (UserError("m", "h"), WriteError("disk full at /x", "free space")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and (back.message, back.hint) == (err.message, err.hint)


def test_close_matches_suggest_the_nearest_names_or_nothing():
    assert close_matches("jsonl", ["csv", "json", "parquet"]) == " (did you mean 'json'?)"
    assert close_matches("zzz", ["csv", "json"]) == ""
