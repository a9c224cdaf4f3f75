"""Inputs checked up front and messages in the user's own words: a folder as
DATA (recursion, hidden files, other file kinds, lancetnic_flow's own
outputs), every file of a glob checked before the fit, option errors named
by their flag, hints for CSV files that are not what they seem."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest
from helpers import CLUSTER, assert_user_error, cli

from lancetnic_flow.data.sources import plan_source
from lancetnic_flow.data.synth import write_corpus


def names(plan, root) -> list[str]:
    return [f.url.split(str(root) + "/", 1)[1] for f in plan.files]


def test_a_folder_is_read_recursively_without_hidden_files_other_kinds_or_its_own_outputs(tmp_path):
    d = tmp_path / "data"
    (d / "2025" / "12").mkdir(parents=True)
    write_corpus(str(d / "a.csv"), 50, seed=0)
    write_corpus(str(d / "2025" / "12" / "b.jsonl"), 50, seed=1)
    for hidden in (".hidden/x.csv", "_temporary/y.csv", ".z.csv", "2025/_SUCCESS"):
        (d / hidden).parent.mkdir(parents=True, exist_ok=True)
        (d / hidden).write_text("text,label\nx,y\n")
    (d / "README.md").write_text("about this data\n")
    # a run folder and a shard-cache entry written inside the data folder
    run = d / "runs" / "r1"
    run.mkdir(parents=True)
    for f in ("model.json", "config.json", "per_class.csv"):
        (run / f).write_text("text,label\nx,y\n")
    entry = d / "cache" / "abc"
    entry.mkdir(parents=True)
    for f in ("manifest.json", "features.json", "rows.csv"):
        (entry / f).write_text("text,label\nx,y\n")
    plan = plan_source([str(d)])
    assert names(plan, d) == ["2025/12/b.jsonl", "a.csv"]
    assert any("README.md" in w and "not data" in w for w in plan.warnings)


def test_a_file_named_on_its_own_is_read_even_if_hidden_and_an_unknown_kind_is_an_error(tmp_path):
    write_corpus(str(tmp_path / ".x.csv"), 20, seed=0)
    assert len(plan_source([str(tmp_path / ".x.csv")]).files) == 1
    (tmp_path / "notes.md").write_text("x\n")
    from lancetnic_flow.errors import UserError

    with pytest.raises(UserError, match="cannot tell the format"):
        plan_source([str(tmp_path / "notes.md")])


def test_every_file_of_a_glob_is_checked_for_its_columns_before_the_fit(tmp_path):
    for i in range(3):
        write_corpus(str(tmp_path / f"part-{i}.csv"), 200, seed=i)
    (tmp_path / "part-9.csv").write_text("body,label\nsome text,a\n")
    start = time.monotonic()
    p = cli("train", "part-*.csv", "--epochs", "1", cwd=tmp_path)
    assert_user_error(p, "part-9.csv", "no column 'text'", "'body'")
    assert "fitting" not in p.stderr and "memory plan" not in p.stderr
    assert time.monotonic() - start < 20


def test_a_header_naming_a_used_column_twice_is_refused_and_an_unused_duplicate_is_read(tmp_path):
    """Two 'text' (or 'label') columns: reading either could train on the wrong
    one without a word, so every file of a glob is refused up front, naming the
    column and its fields; a duplicate the run does not read is harmless."""
    from lancetnic_flow.data.checks import check_columns
    from lancetnic_flow.data.sources import Columns
    from lancetnic_flow.errors import UserError

    write_corpus(str(tmp_path / "part-0.csv"), 100, seed=0)
    (tmp_path / "part-1.csv").write_text("text,label,text\nfirst words,a,second words\n")
    p = cli("train", "part-*.csv", "--epochs", "1", cwd=tmp_path)
    assert_user_error(p, "part-1.csv", "'text' 2 times", "fields 1, 3")
    assert "fitting" not in p.stderr
    (tmp_path / "d.tsv").write_text("label\ttext\tlabel\nb\tsome words\ta\n")
    with pytest.raises(UserError, match="'label' 2 times"):
        check_columns(plan_source([str(tmp_path / "d.tsv")]), Columns(text=("text",), label="label"))
    (tmp_path / "u.csv").write_text("note,text,label,note\nx,some words,a,y\n")
    check_columns(plan_source([str(tmp_path / "u.csv")]), Columns(text=("text",), label="label"))
    with pytest.raises(UserError, match="'note' 2 times"):   # --keep all reads every column
        check_columns(plan_source([str(tmp_path / "u.csv")]), Columns(text=("text",), keep_all=True))


@pytest.mark.parametrize("args,needle", [
    (["--epochs", "0"], "--epochs: must be > 0"),
    (["--val-fraction", "1.5"], "--val-fraction: must be in [0, 1)"),
    (["--memory-budget", "-1GiB"], "--memory-budget: a size cannot be negative"),
    (["--blocksize", "-4MiB"], "--blocksize: a size cannot be negative"),
    (["--optimizer", "adamw"], "--optimizer: 'adamw' is not one of"),
    # Options that would run and change nothing: refused, naming what they apply to.
    (["--features", "hashing", "--min-df", "2"], "--min-df 2 prunes a fitted vocabulary's terms"),
    (["--max-len", "64"], "--max-len cuts the token ids a sequence model reads"),
    (["--model", "LinearSVM", "--clip-grad", "1"], "--clip-grad does not apply to LinearSVM"),
    (["--model", "ScalpelMC", "--target", "target"], "--target target is a value to predict"),
    (["--val-fraction", "0", "--early-stopping", "2"], "--early-stopping 2 stops when the validation scores"),
])
def test_option_errors_name_the_flag_and_a_negative_size_shows_no_usage_block(tmp_path, args, needle):
    write_corpus(str(tmp_path / "d.csv"), 50, seed=0)
    p = cli("train", "d.csv", *args, cwd=tmp_path)
    out = assert_user_error(p, needle)
    assert "usage:" not in out


@pytest.mark.parametrize("content,needle", [
    ("text;label\nhello there;a\n", "split by ';'"),
    ("the match ended with a late goal in the rain,sports\nshares fell,business\n", "looks like a row of data"),
])
def test_a_semicolon_csv_and_a_csv_without_a_header_get_a_hint_that_says_so(tmp_path, content, needle):
    (tmp_path / "d.csv").write_text(content)
    assert_user_error(cli("train", "d.csv", cwd=tmp_path), "no column 'text'", needle)


def test_the_printed_predict_command_is_quoted_for_the_shell(tmp_path):
    write_corpus(str(tmp_path / "d.csv"), 600, seed=0)
    p = cli("train", "d.csv", "--epochs", "1", "--out", tmp_path / "my runs", "--name", "r", "--workers", "1",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(x for x in p.stderr.splitlines() if "lancetnic-flow predict" in x)
    words = shlex.split(line.split("predict", 1)[1])
    assert words[:2] == ["lancetnic-flow", "predict"] and words[2] == str(tmp_path / "my runs" / "r"), words


# In a fresh interpreter: the threads it has after importing the readers; after
# refusing a JSON Lines file given as CSV (a user error); after checking and reading
# every partition of a CSV, a JSON Lines and a Parquet file.
THREADS_SCRIPT = """
import os, sys
from lancetnic_flow.data.checks import checked_source
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError
threads = lambda: len(os.listdir('/proc/self/task'))
# numba's first use of a kernel (the CSV reader's row ends), compiled or cached, loads scipy's BLAS,
# whose OpenBLAS starts threads of its own: counted before, so only Arrow's are measured
import numba.np.arraymath
before = threads()
cols = Columns(text=("text",), label="label")
try:
    checked_source([sys.argv[2]], "csv", {}, 1 << 16, cols)
except UserError:
    pass
refused = threads()
rows = 0
for url, fmt in zip(sys.argv[1:], ("csv", "jsonl", "parquet")):
    plan = checked_source([url], fmt, {}, 1 << 16, cols)
    for part in plan.partitions:
        rows += sum(c.table.num_rows for c in read_partition(part, cols))
print(before, refused, threads(), rows)
"""


def test_input_checks_and_reads_start_no_arrow_thread_pool_that_could_abort_the_exit(tmp_path):
    """An Arrow thread pool alive at interpreter exit can abort a process that
    finished its work: "terminate called without an active exception", exit 134
    after the error message, seen in 1 of 30 user errors under load. Reads run
    without Arrow's CPU threads, headers are parsed without Arrow, so a refused
    input starts no thread at all and reading starts at most Arrow's one IO
    (readahead) thread, which its CSV reader always uses."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    csv = tmp_path / "t.csv"
    write_corpus(str(csv), 3000, classes=3, seed=2)
    table = pacsv.read_csv(csv)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(f'{{"text": "{t}", "label": "{lab}"}}\n'
                             for t, lab in zip(table["text"].to_pylist(), table["label"].to_pylist())))
    parquet = tmp_path / "t.parquet"
    pq.write_table(table.select(["text", "label"]), parquet, row_group_size=1000)
    p = subprocess.run([sys.executable, "-c", THREADS_SCRIPT, str(csv), str(jsonl), str(parquet)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    before, refused, after, rows = map(int, p.stdout.split())
    assert rows == 3 * 3000
    assert refused == before, f"{refused - before} threads started by refusing an input"
    assert after <= before + 1, f"{after - before} threads started by reading"


def test_a_fasttext_train_txt_is_trained_evaluated_and_predicted_as_fasttext_and_the_run_says_so(tmp_path):
    """fastText's tutorials name their files train.txt: the start of the file,
    not its extension, decides; --format text still reads it as plain text."""
    write_corpus(str(tmp_path / "corpus.ft"), 600, seed=0)
    (tmp_path / "corpus.ft").rename(tmp_path / "train.txt")
    said = "decided  format fasttext: train.txt's lines start with __label__ (--format text reads it as plain text)"
    p = cli("train", "train.txt", "--epochs", "1", "--out", "runs", "--name", "r", *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.count(said) == 1, p.stderr[-2000:]
    (decided,) = json.loads((tmp_path / "runs" / "r" / "metrics.json").read_text())["decided"]["format"]
    assert (decided["format"], decided["named"], decided["reason"]) == ("fasttext", "text", "lines start with __label__")
    e = cli("evaluate", "runs/r", "train.txt", "--json", cwd=tmp_path)
    assert e.returncode == 0 and said in e.stderr, e.stderr[-2000:]
    assert json.loads(e.stdout)["rows"]["evaluated"] > 500
    q = cli("predict", "runs/r", "--input", "train.txt", "--output", "p.csv", cwd=tmp_path)
    assert q.returncode == 0 and said in q.stderr and "wrote 600 rows" in q.stderr, q.stderr[-2000:]
    assert_user_error(cli("train", "train.txt", "--format", "text", cwd=tmp_path), "the text format has no labels")


def test_a_semicolon_csv_trains_predicts_and_evaluates_with_the_runs_delimiter(tmp_path):
    # a ';' file could not be read at all: its header was one column, and the hint said to save it with commas
    import csv as pycsv

    words = {"sports": "goal match team score", "tech": "phone chip code app", "politics": "vote law party poll"}
    tails = ["; semi; colons", ", and commas, too", "", '"quoted"; x', "multi\nline; y"]
    with open(tmp_path / "d.csv", "w", newline="") as f:
        w = pycsv.writer(f, delimiter=";")
        w.writerow(["id", "text", "label"])
        for i in range(900):
            label = list(words)[i % 3]
            w.writerow([i, words[label] + tails[i % len(tails)], label])
    p = cli("train", "d.csv", "--delimiter", ";", "--epochs", "2", "--blocksize", "4KiB", "--out", tmp_path / "runs",
            "--name", "r", "--workers", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    metrics = json.loads((tmp_path / "runs" / "r" / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 900 and not metrics["rows"]["skipped"]
    for blocksize in ("1KiB", "64MiB"):   # the run's delimiter, unsaid
        q = cli("predict", tmp_path / "runs" / "r", "--input", "d.csv", "--keep", "id", "--output", f"p{blocksize}.csv",
                "--blocksize", blocksize, "--workers", "1", cwd=tmp_path)
        assert q.returncode == 0, q.stderr[-3000:]
        with open(tmp_path / f"p{blocksize}.csv", newline="") as f:   # written as its input was read: with ';'
            rows = list(pycsv.DictReader(f, delimiter=";"))
        assert [r["id"] for r in rows] == [str(i) for i in range(900)]
        assert [r["predicted"] for r in rows] == [list(words)[i % 3] for i in range(900)]
    e = cli("evaluate", tmp_path / "runs" / "r", "d.csv", "--json", "--workers", "1", cwd=tmp_path)
    assert e.returncode == 0 and json.loads(e.stdout)["rows"]["evaluated"] == 900
    (tmp_path / "c.csv").write_text("text,label\ngoal match,sports\n")   # a comma file: the option, named
    assert_user_error(cli("evaluate", tmp_path / "runs" / "r", "c.csv", cwd=tmp_path), "no column 'text'",
                      "pass --delimiter ','")
    assert_user_error(cli("train", "c.csv", "--delimiter", ";;", cwd=tmp_path), "--delimiter ';;'", "one character")
