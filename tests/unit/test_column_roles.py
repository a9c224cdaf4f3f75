"""One column, one role: the first column named twice, and by which roles."""
from __future__ import annotations

from lancetnic_flow.column_roles import WHY_TWICE, named_twice

ROLES = ("text", "label", "target", "numeric")


def test_a_column_named_in_two_roles_is_found_with_both_roles_in_their_order():
    roles = [("text", ["body", "title"]), ("label", ["topic"]), ("target", [None]), ("numeric", ["n", "title"])]
    assert named_twice(roles) == ("title", "text", "numeric")
    assert named_twice([("text", ["a", "a"])]) == ("a", "text", "text")
    assert named_twice([("label", ["y"]), ("target", ["y"])]) == ("y", "label", "target")


def test_columns_each_named_once_and_no_column_at_all_are_no_clash():
    assert named_twice([("text", ["body"]), ("label", [None]), ("target", [None]), ("numeric", ["n"])]) is None
    assert named_twice([]) is None


def test_every_pair_of_roles_in_their_order_says_why_it_is_refused():
    pairs = {(a, b) for i, a in enumerate(ROLES) for b in ROLES[i:]} - {("label", "label"), ("target", "target")}
    assert pairs <= set(WHY_TWICE)
