"""Label names that spell one value are one label where data meets a run, and are paired where they meet in one."""
from __future__ import annotations

import pyarrow as pa

from lancetnic_flow.features.label_values import (LABEL_AS_RUN, as_run_labels, counted_names, in_run_names, run_label,
                                                  in_run_spelling, noted_read_as, read_as_of, read_as_warning,
                                                  same_values, spelled_apart_warning, spelled_twice, value_of)


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


def test_the_spellings_of_one_date_or_instant_are_one_value():
    """pandas writes a midnight as 2024-02-01 00:00:00 in a column that holds a time of day."""
    assert value_of("2024-02-01") == value_of("2024-02-01 00:00:00") == value_of("2024-02-01T00:00:00.000")
    assert value_of("2024-01-05 10:00:00+01:00") == value_of("2024-01-05T09:00Z") != value_of("2024-01-05 09:00")
    assert value_of("2024-01-05 10:00:00.5") == value_of("2024-01-05 10:00:00.500000") != value_of("2024-01-05 10:00")
    for name in ("2024-02-30", "2024-13-01", "2024-01-05 10", "2024/01/05"):
        assert value_of(name) is None
    assert as_run_labels(pa.array(["2024-02-01 00:00:00"]), ["2024-02-01"])[0].to_pylist() == ["2024-02-01"]


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
    assert spelled_apart_warning([("1", "1.0")], "and", "x").startswith("1 label is the same value")
    assert spelled_apart_warning([("1", "1.0"), ("2", "2.0")], "and", "x").startswith("2 labels are the same")


def test_a_tables_labels_the_run_knows_in_another_spelling_are_read_as_the_runs_and_noted():
    noted: dict = {}
    table = pa.table({"text": ["a", "b", "c", "d"], "label": ["1", "2", "1.0", "x"]})
    got = in_run_spelling(table, ["1.0", "2.0"], noted)   # a Parquet float column against a CSV run's
    assert got["label"].to_pylist() == ["1.0", "2.0", "1.0", "x"] and got["text"] == table["text"]
    assert noted == {f"{LABEL_AS_RUN}:1 as 1.0": 1, f"{LABEL_AS_RUN}:2 as 2.0": 1, LABEL_AS_RUN: 2}
    assert in_run_spelling(table.drop_columns(["label"]), ["1.0"], noted).column_names == ["text"]
    assert read_as_of(noted) == {"1 as 1.0": 1, "2 as 2.0": 1} and noted == {LABEL_AS_RUN: 2}


def test_a_tables_renames_are_noted_as_a_raw_shards_counts_are_adding_to_what_was_noted():
    # the rows path (in_run_spelling) and the shard path (counted_names, noted_read_as) keep one set of notes
    table = pa.table({"text": ["a", "b", "c"], "label": ["1", "1", "x"]})
    by_rows: dict = {"other": 1}
    in_run_spelling(table, ["1.0"], by_rows)
    in_run_spelling(table, ["1.0"], by_rows)
    by_counts: dict = {"other": 1}
    read_as, _ = counted_names({"1": 2, "x": 1}, ["1.0"])
    noted_read_as(by_counts, read_as)
    noted_read_as(by_counts, read_as)
    assert by_rows == by_counts == {"other": 1, f"{LABEL_AS_RUN}:1 as 1.0": 4, LABEL_AS_RUN: 4}


def test_a_raw_shards_label_names_and_counts_are_read_in_the_runs_spelling():
    assert in_run_names(["1", "x", "2.0", "true"], ["1.0", "2.0", "True"]) == ["1.0", "x", "2.0", "True"]
    read_as, unknown = counted_names({"1": 6, "x": 4, "2.0": 3}, ["1.0", "2.0"])
    assert read_as == {"1 as 1.0": 6} and unknown == {"x": 4}
    noted = {"other": 1}
    noted_read_as(noted, read_as)
    noted_read_as(noted, read_as)
    assert noted == {"other": 1, f"{LABEL_AS_RUN}:1 as 1.0": 12, LABEL_AS_RUN: 12}


def test_the_warning_of_labels_read_as_the_runs_pairs_them_and_counts_in_words():
    said = read_as_warning({"1 as 1.0": 1}, "training's")
    assert said.startswith("1 label was read as training's spelling") and "1 as 1.0 (1)" in said
    assert read_as_warning({"1 as 1.0": 2, "2 as 2.0": 1}, "training's").startswith("3 labels were read")
    assert read_as_warning({}, "training's") is None


def test_a_label_a_caller_names_in_another_spelling_is_the_runs_and_another_is_left_as_given():
    labels = ["1.0", "2.0", "True", "a"]
    assert [run_label(x, labels) for x in (1, "2", True, " a ", "a", None)] == ["1.0", "2.0", "True", "a", "a", None]
    assert run_label(3, labels) == 3 and run_label("1", ["1", "1.0"]) == "1" and run_label(1.5, ["1", "1.0"]) == 1.5
