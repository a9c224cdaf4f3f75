"""data/checks.py: the up-front checks before any cluster starts — every
file's columns against what the run reads (in listing order), empty inputs,
the first block's encoding — and the block size that cuts a small input into
enough partitions."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.checks import (check_columns, check_first_block, checked_source, file_columns,
                                        split_blocksize)
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError

COLS = Columns(text=("text",), label="label")


def write(path, text: str, encoding: str = "utf-8"):
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_the_first_file_lacking_a_column_is_named(tmp_path):
    good = write(tmp_path / "a.csv", "text,label\nhello,pos\n")
    bad = write(tmp_path / "b.csv", "body,label\nhello,pos\n")
    plan = plan_source([good, bad])
    check_columns(plan_source([good]), COLS)
    with pytest.raises(UserError, match="b.csv"):
        check_columns(plan, COLS)
    with pytest.raises(UserError, match="no text column"):
        check_columns(plan, Columns(text=()))


def test_file_columns_read_csv_tsv_and_jsonl_heads_and_nothing_for_line_formats(tmp_path):
    plan = plan_source([write(tmp_path / "a.tsv", "text\tlabel\nx\ty\n"), write(tmp_path / "b.jsonl",
                                                                                   '{"text": "x", "n": 1}\n'),
                        write(tmp_path / "c.txt", "just lines\n")])
    assert [file_columns(f) for f in plan.files] == [["text", "label"], ["text", "n"], None]


def test_empty_inputs_are_refused_as_nothing_to_read(tmp_path):
    plan = plan_source([write(tmp_path / "empty.csv", "")])
    with pytest.raises(UserError, match="nothing to read: .*empty.csv is empty"):
        check_columns(plan, COLS)


def test_a_file_in_another_encoding_stops_up_front_and_reads_with_its_encoding(tmp_path):
    rows = "".join(f"caf\u00e9 cr\u00e8me {i},pos\n" for i in range(200))
    path = write(tmp_path / "latin.csv", "text,label\n" + rows, "latin-1")
    with pytest.raises(UserError, match="latin"):
        checked_source([path], "auto", {}, 2**20, COLS)
    check_first_block(plan_source([path]), Columns(text=("text",), label="label", encoding="latin-1"))


def test_split_blocksize_cuts_small_inputs_into_about_the_partitions_wanted(tmp_path):
    path = write(tmp_path / "big.csv", "text,label\n" + "some words here,pos\n" * 200_000)   # ~4 MB
    src = plan_source([path], blocksize=64 * 2**20)
    size = src.files[0].size
    assert split_blocksize(src, 64 * 2**20, 8, floor=1) == -(-size // 8)
    assert split_blocksize(src, 64 * 2**20, 8) == 1 << 20                  # never below the floor
    assert split_blocksize(src, 64 * 2**20, 1) == 64 * 2**20               # enough partitions already


def test_the_text_sample_reads_partitions_spread_over_the_input_not_only_its_first_block(tmp_path):
    from lancetnic_flow.data.checks import SAMPLE_BYTES, sample_texts

    # A sorted export: English rows first, Japanese rows after them.
    rows = [f"english words number {i},a" for i in range(3000)] + [f"日本語の文章その{i},b" for i in range(3000)]
    path = write(tmp_path / "sorted.csv", "text,label\n" + "\n".join(rows) + "\n")
    plan = plan_source([path], blocksize=32 * 1024)
    assert len(plan.partitions) >= 4
    texts = sample_texts(plan, COLS)
    assert any(t.startswith("english") for t in texts) and any(t.startswith("日本語") for t in texts)
    assert sum(len(t.encode()) for t in texts) <= SAMPLE_BYTES
    assert set(texts) <= {r.rsplit(",", 1)[0] for r in rows}   # whole rows only, as a worker reads them


def test_the_text_sample_of_a_small_file_is_its_rows(tmp_path):
    from lancetnic_flow.data.checks import sample_texts

    path = write(tmp_path / "s.jsonl", '{"text": "一つ", "label": "a"}\n{"text": "two", "label": "b"}\n')
    assert sample_texts(plan_source([path]), COLS) == ["一つ", "two"]


def test_the_sample_counts_the_distinct_labels_and_the_members_of_label_sets(tmp_path):
    from lancetnic_flow.data.checks import sample_label_count, sample_rows

    path = write(tmp_path / "l.csv", "text,label\none,a\ntwo,b\nthree,a\nfour,\n")
    assert sample_label_count(sample_rows(plan_source([path]), Columns(text=("text",), label="label"))) == 2
    sets = write(tmp_path / "m.csv", "text,label\none,a|b\ntwo,c|a\nthree,d\n")
    cols = Columns(text=("text",), label="label", multilabel=True, label_sep="|")
    assert sample_label_count(sample_rows(plan_source([sets]), cols)) == 4
    assert sample_label_count(sample_rows(plan_source([sets]), Columns(text=("text",)))) == 0   # no label column


def test_a_txt_file_whose_first_line_names_the_runs_columns_is_csv_in_every_plan_of_the_run(tmp_path):
    """A CSV whose texts span lines passes no count of fields a line: the
    columns the run reads decide, in the first plan and in the one cut for the workers."""
    from lancetnic_flow.config import DataConfig, TrainConfig
    from lancetnic_flow.data.checks import plan_training_sources

    rows = "".join(f'"row {i} first line\nand its second line",{"ab"[i % 2]}\n' for i in range(40_000))
    path = write(tmp_path / "train.txt", "text,label\n" + rows)   # ~1.7 MB: cut into smaller partitions
    assert plan_source([path]).files[0].format == "text"
    assert checked_source([path], "auto", {}, 64 * 2**20, COLS).files[0].format == "csv"
    train, _ = plan_training_sources(TrainConfig(data=DataConfig(train=[path])).validate(), 64 * 2**20, threads=4)
    assert len(train.partitions) > 1 and train.files[0].format == "csv"
    assert train.sniffed[0].reason == "first line names the columns text, label, split by commas"


def test_ddp_ranks_each_get_partitions_from_all_over_the_input(tmp_path):
    """A --ddp rank's share is whole partitions: a 4 MB file planned for two
    threads is 4 partitions (1 MiB floor), for 2 ranks at least 8 a rank, so a
    rank never learns from one stretch of a sorted file; a block size the user
    chose is kept."""
    from lancetnic_flow.config import ClusterConfig, DataConfig, TrainConfig, TrainingConfig
    from lancetnic_flow.data.checks import RANK_PARTITIONS, plan_training_sources

    rows = "".join(f"row {i:07d} about topic {i // 1000},{i // 1000}\n" for i in range(140_000))
    path = write(tmp_path / "train.csv", "text,label\n" + rows)
    size = (tmp_path / "train.csv").stat().st_size
    assert 4 << 20 <= size < 5 << 20

    def parts(ddp=None, blocksize=None):
        cfg = TrainConfig(data=DataConfig(train=[path]), training=TrainingConfig(ddp=ddp),
                          cluster=ClusterConfig(blocksize=blocksize)).validate()
        return plan_training_sources(cfg, blocksize or 64 * 2**20, threads=2)[0].partitions   # as the plan passes it

    assert len(parts()) == 5
    assert len(parts(ddp=2)) >= RANK_PARTITIONS * 2
    assert len(parts(ddp=8)) == -(-size // (256 << 10))        # never below 256 KiB a partition
    assert sum(p.length for p in parts(ddp=2)) == size           # every byte read once
    assert len(parts(ddp=2, blocksize=2 << 20)) == 3


def test_a_ddp_run_reusing_a_cache_cut_coarser_than_its_plan_says_so_and_what_would_cut_it_finer():
    from lancetnic_flow.data.checks import coarse_cache_warning

    said = cli(coarse_cache_warning(8, 64, 8))
    assert said.startswith("the shard cache was cut into 8 partitions by an earlier run, where this run's plan cuts 64 "
                           "for 8 ranks") and "a new --cache folder" in said
    assert coarse_cache_warning(64, 64, 8) is None     # the entry is this plan's
    assert coarse_cache_warning(1, 1, 8) is None       # a small input: nothing finer to cut
    assert coarse_cache_warning(16, 20, 2) is None     # 8 partitions a rank already
    assert coarse_cache_warning(8, 64, 1) is None      # no ranks


def test_a_val_file_that_the_training_folder_or_glob_also_holds_is_refused_naming_it(tmp_path):
    from lancetnic_flow.config import DataConfig, TrainConfig
    from lancetnic_flow.data.checks import plan_training_sources

    (tmp_path / "data").mkdir()
    train = write(tmp_path / "data" / "train.csv", "text,label\nhello there,pos\ngood bye,neg\n")
    val = write(tmp_path / "data" / "val.csv", "text,label\nhello again,pos\n")

    def plan(train_urls, val_urls):
        return plan_training_sources(TrainConfig(data=DataConfig(train=train_urls, val=val_urls)).validate(), 1 << 20)

    for given in ([str(tmp_path / "data")], [str(tmp_path / "data" / "*.csv")], [train, val]):
        with pytest.raises(UserError, match=r"val\.csv is training data and val data at once"):
            plan(given, [val])
    tr, va = plan([train], [val])
    assert [f.url for f in tr.files] != [f.url for f in va.files]


def test_a_val_file_that_is_a_training_file_by_another_name_is_refused_naming_both(tmp_path):
    # --val data/sub/val.csv with data/sub a link to the training folder (or a hard link) trained on the
    # validation rows and scored them as unseen: the files were told apart by their names alone
    import os

    from lancetnic_flow.config import DataConfig, TrainConfig
    from lancetnic_flow.data.checks import plan_training_sources

    (tmp_path / "data" / "real").mkdir(parents=True)
    write(tmp_path / "data" / "real" / "train.csv", "text,label\nhello there,pos\ngood bye,neg\n")
    os.symlink("real", tmp_path / "data" / "sub")
    os.link(tmp_path / "data" / "real" / "train.csv", tmp_path / "hard.csv")

    def plan(train_urls, val_urls):
        return plan_training_sources(TrainConfig(data=DataConfig(train=train_urls, val=val_urls)).validate(), 1 << 20)

    for val in (tmp_path / "data" / "sub" / "train.csv", tmp_path / "hard.csv"):
        with pytest.raises(UserError, match=rf"real/train\.csv \(as {val} in val: a link to it\) is training data "
                                            "and val data at once"):
            plan([str(tmp_path / "data" / "real")], [str(val)])
def test_training_columns_read_texts_by_the_rule_of_the_analyzer_the_options_give():
    from lancetnic_flow.config import TrainConfig
    from lancetnic_flow.data.checks import training_columns

    def rule(**features):
        return training_columns(TrainConfig.from_dict({"data": {"train": ["t.csv"]}, "features": features})).text_rule

    assert rule(analyzer="auto", mode="hashing") == "visible"   # undecided: its sample keeps every text not blank
    assert rule(analyzer="word") == rule(analyzer="auto", mode="tfidf") == "word"
    assert rule(analyzer="char", ngram_min=2, ngrams=4) == "chars 2"
    assert rule(analyzer="char_wb", normalize="nfkc") == "visible nfkc"


@pytest.mark.parametrize("ranks", [2, 3, 5])
def test_an_input_under_the_rank_floor_is_still_cut_into_a_partition_for_every_ddp_rank(tmp_path, ranks):
    """256 KiB a partition at the smallest left a 175 KB file in one piece: one
    rank trained it all and the others nothing, silently. The floor gives way."""
    from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig
    from lancetnic_flow.data.checks import plan_training_sources

    rows = "".join(f"row {i:07d} about topic {i % 4},{i % 4}\n" for i in range(4_000))
    path = write(tmp_path / "train.csv", "text,label\n" + rows)
    size = (tmp_path / "train.csv").stat().st_size
    assert size < 256 << 10
    cfg = TrainConfig(data=DataConfig(train=[path]), training=TrainingConfig(ddp=ranks)).validate()
    parts = plan_training_sources(cfg, 64 * 2**20, threads=2)[0].partitions
    assert len(parts) >= ranks and sum(p.length for p in parts) == size
    assert min(p.length for p in parts) > size // (2 * ranks)   # no last range of a byte or two, holding no row


def test_a_ddp_rank_whose_share_holds_no_row_is_named_in_a_warning():
    from lancetnic_flow.data.checks import idle_ranks_warning

    said = cli(idle_ranks_warning([537, 0], 1))
    assert said.startswith("--ddp 2: the training rows are in 1 partition, so rank 1 has none to train on")
    assert "lower --ddp" in said and "--blocksize" in said
    assert "ranks 2, 3 have none" in idle_ranks_warning([5, 4, 0, 0], 2)
    assert idle_ranks_warning([270, 267], 2) is None
    assert idle_ranks_warning([537], 1) is None   # one trainer task


def test_a_label_separator_for_fasttext_files_alone_is_refused_as_splitting_nothing(tmp_path):
    # --task multilabel --label-sep "|" on fastText lines trained as without it: every tag is a label
    from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig
    from lancetnic_flow.data.checks import plan_training_sources

    (tmp_path / "t.ft").write_text("__label__a __label__b good words\n__label__b more words\n")
    (tmp_path / "t.csv").write_text('text,label\ngood words,a|b\nmore words,b\n')

    def cfg(*files):
        return TrainConfig(data=DataConfig(train=[str(tmp_path / f) for f in files], label_sep="|"),
                           training=TrainingConfig(task="multilabel"))

    with pytest.raises(UserError, match=r"label_sep '\|' splits a label string, and fastText lines") as e:
        plan_training_sources(cfg("t.ft"), 1 << 20)
    assert e.value.cli[0].startswith("--label-sep '|'")
    plan_training_sources(cfg("t.csv"), 1 << 20)   # a CSV's label strings are split
    plan_training_sources(cfg("t.ft", "t.csv"), 1 << 20)


def test_a_continued_runs_separator_taken_from_the_run_it_continues_is_not_refused_on_lists(tmp_path):
    """`train lists.jsonl --init-from RUN` of a run trained with --label-sep '|' was refused with `drop
    --label-sep`, an option its caller never gave and could not drop: the old run's separator applies
    where it splits something; one the caller gives is judged as before."""
    import dataclasses

    from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig
    from lancetnic_flow.data.checks import plan_training_sources

    (tmp_path / "t.jsonl").write_text('{"text": "good words", "label": ["a", "b"]}\n'
                                      '{"text": "more words", "label": ["b"]}\n')
    inherited = TrainConfig(data=DataConfig(train=[str(tmp_path / "t.jsonl")], label_sep="|"),
                            training=TrainingConfig(task="multilabel", init_from=str(tmp_path / "old")))
    plan_training_sources(inherited, 1 << 20)
    given = dataclasses.replace(inherited, given=frozenset({"data.label_sep"}))
    with pytest.raises(UserError, match="holds lists"):
        plan_training_sources(given, 1 << 20)


def cli(text: str) -> str:
    """A run's warning as the command line reads it (options.said, Events' words)."""
    from lancetnic_flow.options import said

    return said(text, "cli")


def test_a_jsonl_column_its_first_object_leaves_out_is_found_in_the_objects_after_it(tmp_path):
    # A JSON Lines object may leave a key out: a first row without a label stopped the run as "no column
    # 'label'; the file has columns: 'text'", where its readers (and pandas) read the others' labels.
    path = write(tmp_path / "a.jsonl", '{"text": "no label yet"}\n{"id": 1, "text": "goal match", "label": "a"}\n')
    check_columns(plan_source([path]), COLS)
    check_columns(plan_source([path]), Columns(text=("text",), keep=("id",), all_rows=True))
    with pytest.raises(UserError, match=r"no column 'lable' \(did you mean 'label'\?\); the file has columns: "
                                        r"'text', 'id', 'label'"):
        check_columns(plan_source([path]), Columns(text=("text",), label="lable"))


@pytest.mark.parametrize("given,fix", [("0.2", "--val-fraction 0.2"), ("20%", "--val-fraction 0.2"),
                                       (".15", "--val-fraction 0.15")])
def test_a_share_given_to_val_is_told_val_fraction_not_a_folder_listing(tmp_path, monkeypatch, given, fix):
    """`train data.csv --val 0.2` was told `0.2: no such file or folder` and shown the folder's
    files, never the option that holds a share of the rows out."""
    from lancetnic_flow.config import DataConfig, TrainConfig
    from lancetnic_flow.data.checks import plan_training_sources

    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "train.csv", "text,label\nhello,pos\nbye,neg\n")
    cfg = TrainConfig(data=DataConfig(train=[path], val=[given], format="csv")).validate()
    with pytest.raises(UserError) as e:
        plan_training_sources(cfg, 64 * 2**20)
    message, hint = e.value.said("cli")
    assert message.startswith(f"--val {given}: no file has that name") and hint.endswith(f"use {fix}")
    write(tmp_path / given, "text,label\nhello,pos\n")   # a file of that name is validation data, as given
    assert plan_training_sources(cfg, 64 * 2**20)[1] is not None
