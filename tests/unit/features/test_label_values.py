"""Label names that spell one value are one label where data meets a run, and are paired where they meet in one."""
from __future__ import annotations

import pyarrow as pa

from lancetnic_flow.features.label_values import (as_run_labels, same_values, spelled_apart_warning, spelled_twice,
                                                  value_of)


def test_the_spellings_of_one_number_or_boolean_are_one_value_and_numbers_compare_exactly():
    assert value_of("1") == value_of("1.0") == value_of("1e0") == value_of("01") == value_of("+1.000")
    assert value_of("-0.0") == value_of("0") == value_of(".0")
    assert value_of("1000") == value_of("1e3") == value_of("1000.0")
    assert value_of("True") == value_of("true") == value_of("TRUE") != value_of("1")
    assert value_of(str(2**53 + 1)) != value_of(str(2**53))   # equal as float64, not as numbers
    assert value_of("1" * 40) != value_of("1" * 39 + "2")      # no rounding to a decimal context's precision
    assert value_of("-1") != value_of("1")
    for name in ("nan", "inf", "1_0", "sports", "", "1,5", "0x10"):
        assert value_of(name) is None


def test_a_label_the_run_knows_in_another_spelling_of_its_value_is_read_as_the_runs():
    column, renamed = as_run_labels(pa.array(["1", "2", "x", None, "3", "1"]), ["1.0", "2.0", "3.0"])
    assert column.to_pylist() == ["1.0", "2.0", "x", None, "3.0", "1.0"]
    assert renamed == {"1 as 1.0": 2, "2 as 2.0": 1, "3 as 3.0": 1}
    column, renamed = as_run_labels(pa.chunked_array([["true", "False"]]), ["True", "False"])
    assert column.to_pylist() == ["True", "False"] and renamed == {"true as True": 1}


def test_a_label_set_the_run_knows_in_another_spelling_is_read_as_the_runs_and_its_rows_kept():
    sets = pa.array([["1.0", "x"], None, [], ["2", "1"]]).slice(0)
    column, renamed = as_run_labels(sets, ["1", "2"])
    assert column.to_pylist() == [["1", "x"], None, [], ["2", "1"]] and renamed == {"1.0 as 1": 1}
    sliced, _ = as_run_labels(pa.array([["9"], ["1.0"], ["2.0", "2"]]).slice(1), ["1", "2"])
    assert sliced.to_pylist() == [["1"], ["2", "2"]]


def test_a_label_the_run_holds_by_name_or_in_two_spellings_is_left_as_it_is():
    column, renamed = as_run_labels(pa.array(["1.0", "1", "01"]), ["1", "1.0"])
    assert column.to_pylist() == ["1.0", "1", "01"] and renamed == {}


def test_two_spellings_of_one_value_among_one_runs_labels_are_paired_and_said():
    assert spelled_twice(["1.0", "2.0", "1", "True", "true", "a", "A"]) == [("1", "1.0"), ("true", "True")]
    assert same_values(["1.0", "2.0"], ["1", "2.0", "3", "x"]) == [("1", "1.0")]
    said = spelled_apart_warning([("1", "1.0")], "and", "each is learned as a class of its own")
    assert "'1' (and '1.0')" in said and "each is learned as a class of its own" in said
    assert spelled_apart_warning([], "and", "x") is None
