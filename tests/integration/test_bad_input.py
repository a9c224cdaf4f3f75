"""Bad input, tried through the real `lancetnic-flow train` subprocess.

Every case ends one of two ways: one clear message naming what is wrong and
what would work, exit status 2, no traceback; or a finished run whose
metrics.json counts each unusable row by reason, so that
``read = trained + validated + Σ skipped``. Never a silent loss, never a hang:
every subprocess has a timeout. The error cases run side by side (each is
mostly interpreter start-up); tests/integration/test_cli.py already covers a missing file,
a wrong CSV --text column and --format xml.
"""
from __future__ import annotations

import json
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import CLUSTER, assert_user_error, cli

RUN = [*CLUSTER, "--epochs", "1"]
LABELS = ("sports", "tech")


def good_rows(n: int, start: int = 0) -> list[tuple[str, str]]:
    """Learnable (text, label) rows without quotes, commas or tabs."""
    words = {"sports": "match goal team coach season", "tech": "chip phone code cloud server"}
    return [(f"row {start + i} about {words[LABELS[i % 2]]}", LABELS[i % 2]) for i in range(n)]


def lines(rows, sep: str) -> bytes:
    return b"".join(f"{t}{sep}{lab}\n".encode() for t, lab in rows)


# ---------------------------------------------------------------- messy files
# Each file's bad lines, and the counts they must produce, side by side.

MESSY_CSV = (
    b"text,label\n" + lines(good_rows(60), ",")
    + b"too,many,fields,here\n"                    # malformed
    + b"only one field\n"                          # missing_label: its label field missing, as pandas reads it
    + b",sports\n"                                 # empty_text
    + b"   ,tech\n"                                # empty_text
    + b"no label here,\n"                          # missing_label
    + b"blank label here,   \n"                    # missing_label
    + b"bad \xff\xfe bytes,tech\n"                 # undecodable
    + b'a stray quote in the label,"tech\n'        # malformed; the rows after it still count
    + lines(good_rows(60, 60), ",")
    + b'"an unclosed quote on the last line,tech\n'  # malformed
)
MESSY_TSV = (
    b"text\tlabel\n" + lines(good_rows(60), "\t")
    + b"too\tmany\tfields\n"                       # malformed
    + b"only one field\n"                          # missing_label: its label field missing, as pandas reads it
    + b"\tsports\n"                                # empty_text
    + b"bad \xff bytes\ttech\n"                    # undecodable
    + b'"a stray quote opens this text\ttech\n'    # malformed; the rows after it still count
    + lines(good_rows(60, 60), "\t")
)
MESSY_JSONL = (
    b"".join(json.dumps({"text": t, "label": lab}).encode() + b"\n" for t, lab in good_rows(60))
    + b'{"text": "broken json", "label": \n'       # malformed
    + b'["a", "list"]\n'                           # malformed
    + b'{"label": "tech"}\n'                       # empty_text
    + b'{"text": null, "label": "tech"}\n'         # empty_text
    + b'{"text": "no label"}\n'                    # missing_label
    + b'{"text": "null label", "label": null}\n'   # missing_label
    + b'{"text": "bad \xff", "label": "tech"}\n'   # undecodable
)
# One line of 300 KB in a file split into 64 KiB partitions.
LONG_TEXT = "zzfirst " + "longword " * 33_000 + "zzlast"
LONG_CSV = (b"text,label\n" + lines(good_rows(50), ",") + f'"{LONG_TEXT}",sports\n'.encode()
            + lines(good_rows(50, 50), ","))
VAL_CSV = b"text,label\n" + lines(good_rows(40), ",") + lines([("rain and wind", "weather")] * 3, ",")

TRAINED = 120 + 120 + 60 + 101    # every good row of messy.csv, messy.tsv, messy.jsonl, long.csv
SKIPPED = {"malformed": 3 + 2 + 2, "empty_text": 2 + 1 + 2, "missing_label": 3 + 1 + 2,
           "undecodable": 1 + 1 + 1, "unknown_label": 3}

REGRESS_CSV = (
    b"text,target\n" + b"".join(f"{t},{i / 10 - 3}\n".encode() for i, (t, _) in enumerate(good_rows(100)))
    + b"no target,\n" + b"word target,abc\n" + b"nan target,nan\n" + b"inf target,inf\n"
    + b"overflowing target,1e999\n"                # five missing_target
    + b",1.5\n"                                    # empty_text
    + b"padded target, 2.5 \n"                     # a number: trained
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-input")
    for name, data in {"messy.csv": MESSY_CSV, "messy.tsv": MESSY_TSV, "messy.jsonl": MESSY_JSONL,
                       "long.csv": LONG_CSV, "val.csv": VAL_CSV, "regress.csv": REGRESS_CSV,
                       "empty.csv": b"", "header.csv": b"text,label\n",
                       "blank-texts.csv": b'text,label\n"",a\n"  ",b\n"!!",c\n',
                       "no-labels.csv": b"text,label\nhello world,\nfoo bar,\n",
                       "good.csv": b"text,label,target\n" + b"".join(
                           f"{t},{lab},{i}\n".encode() for i, (t, lab) in enumerate(good_rows(40))),
                       "good.jsonl": b"".join(json.dumps({"text": t, "label": lab}).encode() + b"\n"
                                              for t, lab in good_rows(40))}.items():
        (d / name).write_bytes(data)
    rows = good_rows(40)
    pq.write_table(pa.table({"text": [t for t, _ in rows], "label": [lab for _, lab in rows]}), d / "good.parquet")
    (d / "empty-folder.csv").mkdir()
    (d / "link.csv").symlink_to(d / "gone.csv")
    return d


def _metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


@pytest.fixture(scope="module")
def runs(inputs):
    """Finished runs over messy input: classification (CSV, TSV, JSONL, a
    300 KB line, a validation file with an unseen label), regression, and a
    fitted vocabulary over the long line."""
    jobs = {
        "classify": ("train", "long.csv", "messy.csv", "messy.tsv", "messy.jsonl", "--val", "val.csv",
                     "--blocksize", "64KiB", *RUN, "--out", "runs", "--name", "classify"),
        "regress": ("train", "regress.csv", "--task", "regress", "--target", "target", "--model", "ScalpelReg",
                    *RUN, "--out", "runs", "--name", "regress"),
        # A fitted vocabulary shows which words were read.
        "vocabulary": ("train", "long.csv", "messy.csv", "--features", "tfidf", "--blocksize", "64KiB", *RUN,
                       "--out", "runs", "--name", "vocabulary"),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        done = {k: pool.submit(cli, *args, cwd=inputs, timeout=240) for k, args in jobs.items()}
        return {k: (f.result(), inputs / "runs" / k) for k, f in done.items()}


def finished(runs, name) -> tuple[str, dict]:
    p, run = runs[name]
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in out, out
    return out, _metrics(run)


def test_messy_input_trains_and_every_row_read_is_trained_validated_or_skipped_by_reason(runs):
    out, m = finished(runs, "classify")
    rows = m["rows"]
    assert rows["read"] == rows["trained"] + rows["validated"] + sum(rows["skipped"].values())
    assert rows["skipped"] == SKIPPED
    assert rows["read"] == TRAINED + 40 + sum(SKIPPED.values())   # val.csv: 40 good rows
    assert "skipped" in out and "malformed" in out and "unknown_label" in out   # the summary shows the reasons


def test_too_many_fields_and_unclosed_quotes_are_malformed_and_the_rows_after_a_stray_quote_still_train(runs):
    _, m = finished(runs, "classify")
    assert m["rows"]["skipped"]["malformed"] == 7
    # The rows after each stray quote were not swallowed into its field.
    assert m["rows"]["trained"] == TRAINED


def test_invalid_utf8_lines_are_skipped_as_undecodable_in_csv_tsv_and_jsonl(runs):
    _, m = finished(runs, "classify")
    assert m["rows"]["skipped"]["undecodable"] == 3


def test_empty_texts_and_missing_labels_are_skipped_each_under_its_reason(runs):
    _, m = finished(runs, "classify")
    assert m["rows"]["skipped"]["empty_text"] == 5 and m["rows"]["skipped"]["missing_label"] == 6


def test_validation_labels_unseen_in_training_are_skipped_as_unknown_label_and_the_run_succeeds(runs):
    _, m = finished(runs, "classify")
    assert m["labels"] == ["sports", "tech"]
    assert m["rows"]["skipped"]["unknown_label"] == 3 and m["rows"]["validated"] == 40
    assert sum(map(sum, m["confusion"])) == 40


def test_a_line_longer_than_a_partition_is_read_whole_as_one_row(runs):
    _, m = finished(runs, "classify")
    assert m["memory"]["plan"]["partition"] == 64 * 1024 < len(LONG_TEXT) // 4
    # Split in two, it would add a row (and a malformed one); lost, both ends' words would be missing.
    assert m["rows"]["trained"] == TRAINED and m["rows"]["skipped"]["malformed"] == SKIPPED["malformed"]
    finished(runs, "vocabulary")
    vocabulary = json.loads((runs["vocabulary"][1] / "features.json").read_text())["vocabulary"]
    assert {"zzfirst", "longword", "zzlast"} <= set(vocabulary)


def test_regression_rows_with_missing_or_non_numeric_targets_are_skipped_as_missing_target(runs):
    _, m = finished(runs, "regress")
    rows = m["rows"]
    assert rows["skipped"] == {"missing_target": 5, "empty_text": 1}
    # abc, nan, inf and 1e999 were given, unlike the empty one: counted, and the run says so
    assert rows["noted"] == {"unreadable_target": 4}
    assert rows["trained"] + rows["validated"] == 101 and rows["read"] == 107
    assert m["task"] == "regress" and m["val_rmse"] is not None


# ---------------------------------------------------------------- user errors

@pytest.fixture(scope="module")
def errors(inputs):
    """Each bad command line, run side by side: name -> finished process.

    Every process has a timeout, so a hang fails the tests instead of stalling them."""
    silent = socket.socket()       # accepts connections (the kernel does) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    closed = socket.socket()       # bound, not listening: connections are refused
    closed.bind(("127.0.0.1", 0))
    silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}/x.csv"
    closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}/x.csv"
    cases = {
        "empty_file": ["empty.csv"],
        "target_not_numbers": ["good.csv", "--target", "label"],
        "blank_texts": ["blank-texts.csv"],
        "no_labels": ["no-labels.csv"],
        "header_only": ["header.csv"],
        "glob_matches_nothing": ["nothing-*.csv"],
        "path_through_a_file": ["good.csv/x.csv"],
        "broken_link": ["link.csv"],
        "empty_folder": ["empty-folder.csv"],
        "csv_wrong_label": ["good.csv", "--label", "topic"],
        "csv_wrong_target": ["good.csv", "--task", "regress", "--target", "score", "--model", "ScalpelReg"],
        "jsonl_wrong_label": ["good.jsonl", "--label", "topic"],
        "jsonl_wrong_target": ["good.jsonl", "--task", "multitask", "--target", "score", "--model", "ScalpelMTSK"],
        "parquet_wrong_text": ["good.parquet", "--text", "body"],
        "csv_as_parquet": ["good.csv", "--format", "parquet"],
        "csv_as_jsonl": ["good.csv", "--format", "jsonl"],
        "csv_as_tsv": ["good.csv", "--format", "tsv"],
        "jsonl_as_csv": ["good.jsonl", "--format", "csv"],
        "parquet_as_csv": ["good.parquet", "--format", "csv"],
        "silent_server": [silent_url, "--storage-option", "client_kwargs.timeout=2"],
        "refused_connection": [closed_url],
    }

    def one(args):
        return cli("train", *args, *RUN, "--out", "error-runs", cwd=inputs, timeout=120)

    try:
        with ThreadPoolExecutor(3) as pool:
            done = {k: pool.submit(one, args) for k, args in cases.items()}
            out = {k: f.result() for k, f in done.items()}
    finally:
        silent.close()
        closed.close()
    out["urls"] = (silent_url, closed_url)
    return out


def user_error(errors, case: str, *needles: str) -> str:
    return assert_user_error(errors[case], *needles)


def test_an_empty_file_or_a_header_only_csv_exits_2_saying_there_are_no_rows(errors):
    user_error(errors, "empty_file", "empty.csv", "empty", "files that hold rows")
    user_error(errors, "header_only", "header.csv", "no training rows")


def test_every_row_skipped_exits_2_counting_the_reasons_and_naming_the_column_to_check(errors):
    # Before: "every row was skipped (malformed, empty text, missing label)" whatever the reason.
    out = user_error(errors, "target_not_numbers", "good.csv", "40 rows read", "40 missing_target", "'label'",
                     "--target")
    assert "missing_label" not in out
    user_error(errors, "blank_texts", "3 rows read", "3 empty_text", "--text")
    user_error(errors, "no_labels", "2 rows read", "2 missing_label", "--label")


def test_a_glob_that_matches_nothing_exits_2_listing_what_the_folder_holds(errors):
    user_error(errors, "glob_matches_nothing", "no files match", "nothing-*.csv", "good.csv")


def test_paths_that_cannot_be_opened_exit_2_saying_why(errors):
    user_error(errors, "path_through_a_file", "good.csv/x.csv", "is a file, not a folder")
    user_error(errors, "broken_link", "link.csv", "symbolic link")
    user_error(errors, "empty_folder", "empty-folder.csv", "folder is empty")


def test_an_unreadable_file_exits_2_with_access_denied(inputs):
    locked = inputs / "locked.csv"
    locked.write_bytes((inputs / "good.csv").read_bytes())
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: chmod 000 does not stop reads (the other open failures are tested above)")
        p = cli("train", "locked.csv", *RUN, "--out", "error-runs", cwd=inputs, timeout=120)
        assert_user_error(p, "locked.csv", "access denied")
    finally:
        locked.chmod(0o644)


def test_wrong_label_target_and_text_columns_exit_2_listing_the_columns_of_csv_jsonl_and_parquet(errors):
    user_error(errors, "csv_wrong_label", "'topic'", "the file has columns: 'text', 'label', 'target'")
    user_error(errors, "csv_wrong_target", "'score'", "'target'")
    user_error(errors, "jsonl_wrong_label", "good.jsonl", "'topic'", "the file has columns: 'text', 'label'")
    user_error(errors, "jsonl_wrong_target", "good.jsonl", "'score'")
    user_error(errors, "parquet_wrong_text", "good.parquet", "'body'", "the file has columns: 'text', 'label'")


def test_a_format_that_does_not_match_the_file_exits_2_saying_what_the_file_looks_like(errors):
    user_error(errors, "csv_as_parquet", "good.csv", "not a valid Parquet file", "--format")
    user_error(errors, "csv_as_jsonl", "good.csv", "not JSON", "--format")
    user_error(errors, "csv_as_tsv", "good.csv", "--format csv")
    user_error(errors, "jsonl_as_csv", "good.jsonl", "looks like JSON", "--format jsonl")
    user_error(errors, "parquet_as_csv", "good.parquet", "the file is Parquet data, not text", "--format")


def test_a_server_that_never_answers_ends_the_run_in_bounded_time_naming_the_url(errors):
    silent_url, closed_url = errors["urls"]
    # It ended by itself, inside the subprocess timeout: with aiohttp's default
    # (5 minutes per request) it would still be waiting.
    user_error(errors, "silent_server", silent_url, "did not answer in time", "client_kwargs.timeout")
    user_error(errors, "refused_connection", closed_url, "cannot reach the server")


def test_labels_that_are_numbers_train_as_classes_as_written_and_the_run_says_so(tmp_path):
    rows = "".join(f"{t},{n}\n" for n, t in zip((1, 2, 3) * 80, [r[0] for r in good_rows(240)]))
    (tmp_path / "n.csv").write_text("text,label\n" + rows)
    p = cli("train", "n.csv", "--epochs", "1", "--out", "runs", "--name", "n", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "the label column 'label' holds numbers (3 values:" in out and "--target label" in out
    m = json.loads((tmp_path / "runs" / "n" / "metrics.json").read_text())
    assert sorted(m["labels"]) == ["1", "2", "3"] and m["decided"]["numeric_labels"] == 3


def test_evaluate_scores_rows_with_labels_the_run_never_saw_as_wrong_and_names_them(tmp_path):
    """Accuracy and F1 as scikit-learn computes them on the same predictions: a row
    whose label is new to the run counts as wrong (it was left out before, which
    reported 1.0 here), and the new labels are counted by name."""
    from sklearn.metrics import accuracy_score, f1_score

    from lancetnic_flow.runs.predict import Predictor

    (tmp_path / "train.csv").write_text("text,label\n" + lines(good_rows(400), ",").decode())
    test = good_rows(60, 1000) + [(f"row {i} about weather rain sun", "weather") for i in range(15)] \
        + [(f"row {i} about match goal", "football") for i in range(5)]
    (tmp_path / "test.csv").write_text("text,label\n" + lines(test, ",").decode())
    assert cli("train", "train.csv", "--epochs", "2", "--out", "runs", "--name", "r", cwd=tmp_path).returncode == 0
    e = cli("evaluate", "runs/r", "test.csv", "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    got = json.loads(e.stdout)
    pred = [p["label"] for p in Predictor(str(tmp_path / "runs" / "r")).predict([t for t, _ in test])]
    true = [lab for _, lab in test]
    assert got["accuracy"] == pytest.approx(accuracy_score(true, pred)) and got["accuracy"] <= 60 / 80
    assert got["macro_f1"] == pytest.approx(f1_score(true, pred, average="macro", zero_division=0))
    assert got["weighted_f1"] == pytest.approx(f1_score(true, pred, average="weighted", zero_division=0))
    assert got["unseen_labels"] == {"weather": 15, "football": 5}
    assert got["rows"]["evaluated"] == 80 and got["rows"]["unseen_label"] == 20 and not got["rows"]["skipped"]
    # and their rows are in the confusion matrix, as scikit-learn's has them (they were nowhere in it)
    from sklearn.metrics import confusion_matrix

    from lancetnic_flow.models.metrics import cells_of, dense_confusion, with_unseen_rows

    cells, names = with_unseen_rows(cells_of(got), got["labels"], got)
    assert names[len(got["labels"]):] == ["weather", "football"]
    assert dense_confusion(cells, len(names)).tolist() == confusion_matrix(true, pred, labels=names).tolist()
    line = cli("evaluate", "runs/r", "test.csv", cwd=tmp_path)
    assert "80 rows (20 with a label the run never saw, scored as wrong: 'weather' 15, 'football' 5)" in \
        line.stdout + line.stderr
