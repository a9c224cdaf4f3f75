"""Workflow files map their keys to the declared options directly (no
command line in between), `--set key=value` is read by the declared type,
and unknown keys are refused with close matches. Pure: no cluster."""
from __future__ import annotations

import re

import pytest

from lancetnic_flow.cli import commands, parser
from lancetnic_flow.cli.parser import build_parser, given_dests
from lancetnic_flow.cli.workflow import read_workflow, workflow_config
from lancetnic_flow.config import config_from_options
from lancetnic_flow.errors import UserError

WORKFLOW = """\
train: [a.csv, b.csv]
out: s3://bucket/runs
data:
  text: body
  target: y
  numeric: [n1, n2]
  storage_option:
    client_kwargs:
      region_name: eu
features:
  ngram_range: [1, 3]
  min_df: 2
  lowercase: false
model:
  model: ScalpelMC
  task: multitask
  hidden: 32
training:
  loss_weights: [1, 0.5]
  lr: 0.05
  checkpoint_every: 500
cluster:
  memory_budget: 2GiB
  worker_threads: 2
"""
ARGV = ["train", "--text", "body", "--target", "y", "--task", "multitask", "--numeric", "n1,n2", "--storage-option", "client_kwargs.region_name=eu",
        "--ngram-range", "1,3", "--min-df", "2", "--no-lowercase", "--model", "ScalpelMC", "--hidden", "32",
        "--loss-weights", "1,0.5", "--lr", "0.05", "--checkpoint-every", "500", "--memory-budget", "2GiB",
        "--worker-threads", "2", "--out", "s3://bucket/runs", "a.csv", "b.csv"]


def _write(tmp_path, text: str = WORKFLOW) -> str:
    p = tmp_path / "wf.yaml"
    p.write_text(text)
    return str(p)


def test_a_workflow_means_what_its_command_line_means(tmp_path):
    cli = config_from_options({**vars(build_parser().parse_args(ARGV)), "dashboard": True},
                              given=given_dests(ARGV, "train"))
    wf = workflow_config(read_workflow(_write(tmp_path)))
    assert wf == cli and "model.hidden" in wf.given   # the options it names are given, as typed ones are


def test_run_builds_the_configuration_without_a_command_line(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(parser, "build_parser", lambda: pytest.fail("a workflow went through argv"))
    monkeypatch.setattr(commands, "train_config", lambda cfg, report, words="cli": seen.append(cfg) or 0)
    a = build_parser().parse_args(["run", _write(tmp_path), "--set", "epochs=3"])
    assert commands.cmd_run(a, report=None) == 0
    assert seen[0].training.epochs == 3 and seen[0].data.train == ["a.csv", "b.csv"]


@pytest.mark.parametrize("item, dest, value", [
    ("epochs=3", "epochs", 3), ("training.lr=1e-3", "lr", 0.001), ("lowercase=false", "lowercase", False),
    ("text=title", "text", ["title"]), ("train=c.csv", "data", ["c.csv"]), ("label=1", "label", "1"),
    ("loss_weights=1,2", "loss_weights", "1,2"), ("max-len=9", "max_len", 9),
])
def test_an_override_is_read_by_the_declared_type(tmp_path, item, dest, value):
    values = read_workflow(_write(tmp_path), [item]).values
    assert values[dest] == value and type(values[dest]) is type(value)


@pytest.mark.parametrize("item, words", [("epochs=three", "expected an integer"), ("lr=fast", "expected a number"),
                                         ("lowercase=maybe", "expected true or false")])
def test_an_ill_typed_override_is_refused(tmp_path, item, words):
    with pytest.raises(UserError) as e:
        read_workflow(_write(tmp_path), [item])
    assert words in str(e.value) and item.split("=")[0] in str(e.value)


def test_an_unknown_override_is_refused_with_close_matches(tmp_path):
    with pytest.raises(UserError) as e:
        read_workflow(_write(tmp_path), ["epoch=3"])
    assert "unknown field 'epoch'" in str(e.value) and "'epochs'" in str(e.value)


@pytest.mark.parametrize("section, key, meant", [("output", "dir", "'out'"), ("training", "learning_rate", "'lr'"),
                                               ("training", "epoch", "'epochs'"), ("output", "nmae", "'name'")])
def test_an_unknown_key_is_offered_the_field_it_means_not_one_of_another_section(tmp_path, section, key, meant):
    """`output: {dir: runs}` was offered 'delimiter', a data field that only shares two letters."""
    path = _write(tmp_path, f"train: x.csv\n{section}:\n  {key}: 1\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"(did you mean {meant}?)" in str(e.value) and "delimiter" not in str(e.value)


def test_an_unknown_or_ill_typed_key_names_the_file_line_and_field(tmp_path):
    path = _write(tmp_path, "train: x.csv\nfeatures:\n  max_featurez: 10\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"{path}:3" in str(e.value) and "features.max_featurez" in str(e.value) and "'max_features'" in str(e.value)
    path = _write(tmp_path, "train: x.csv\ntraining:\n  epochs: 2.5\n  lowercase: 1\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"{path}:3" in str(e.value) and "an integer" in str(e.value)
    path = _write(tmp_path, "train: x.csv\nlowercase: 1\n")
    with pytest.raises(UserError, match="true or false"):
        read_workflow(path)
    path = _write(tmp_path, "train: x.csv\nlr: [1, 2]\n")
    with pytest.raises(UserError, match="one value"):
        read_workflow(path)


def test_a_text_option_that_yaml_read_as_a_boolean_names_the_line_and_says_to_quote_it(tmp_path):
    # checkpoint_every: off became "False", refused without file or line by a hint that listed off itself
    path = _write(tmp_path, "train: x.csv\ncheckpoint_every: off\n")
    with pytest.raises(UserError) as e:
        read_workflow(path)
    assert f"{path}:2" in str(e.value) and "checkpoint_every" in str(e.value) and "quote it" in str(e.value)
    wf = read_workflow(_write(tmp_path, "train: x.csv\ncheckpoint_every: 'off'\n"))
    assert workflow_config(wf).training.checkpoint_every == "off"


@pytest.mark.parametrize("text", ["train: x.csv\nepochs:\n", "train: x.csv\ntraining:\n  epochs:\n",
                                  "train: x.csv\nepochs: ~\n"])
def test_a_key_without_a_value_is_refused_naming_the_file_line_and_key(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(UserError, match="epochs has no value") as e:
        read_workflow(path)
    assert f"{path}:{text.count(chr(10)) }" in str(e.value)


@pytest.mark.parametrize("make_data, words", [
    ("{out: d.csv, rows: abc}", "make_data.rows: expected a whole number, got 'abc'"),
    ("{out: d.csv, rows: true}", "make_data.rows: expected a whole number"),
    ("{out: d.csv, rows: 0}", "make_data.rows: expected at least 1"),
    ("{out: d.csv, rowz: 10}", "make_data has no field 'rowz'"),
    ("{out: d.csv}", "make_data needs `rows: N`"),
    ("{out: d.csv, rows: 10, multilabel: 1}", "make_data.multilabel: expected true or false"),
    ("{out: d.csv, rows: 10, classes: 1}", "make_data.classes: expected at least 2"),   # as make-data refuses it
])
def test_a_make_data_field_that_is_unknown_or_of_the_wrong_kind_is_refused_before_writing(tmp_path, make_data, words):
    from lancetnic_flow.cli.workflow import prepare_workflow

    path = _write(tmp_path, f"train: {tmp_path / 'd.csv'}\nmake_data: {make_data.replace('d.csv', str(tmp_path / 'd.csv'))}\n")
    with pytest.raises(UserError, match=re.escape(words)):
        prepare_workflow(path)
    assert not (tmp_path / "d.csv").exists()


def test_make_datas_delimiter_writes_the_corpus_that_the_workflows_delimiter_reads(tmp_path):
    from lancetnic_flow.cli.workflow import prepare_workflow

    out = tmp_path / "d.csv"
    path = _write(tmp_path, f"train: {out}\ndelimiter: ';'\nmake_data: {{out: {out}, rows: 20, delimiter: ';'}}\n")
    cfg = prepare_workflow(path)
    assert out.read_text().startswith("text;label;value;target\n") and cfg.data.delimiter == ";"


def test_make_datas_storage_options_for_a_local_corpus_are_refused_before_writing(tmp_path):
    from lancetnic_flow.cli.workflow import prepare_workflow

    out = tmp_path / "d.csv"
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 10, storage_options: {{anon: true}}}}\n")
    with pytest.raises(UserError, match=re.escape(f"make_data.storage_options anon opens remote storage")):
        prepare_workflow(path)
    assert not out.exists()


def test_a_set_make_data_value_for_a_corpus_that_exists_is_refused_not_trained_on_the_old_file(tmp_path):
    # quickstart.yaml's `--set make_data.rows=5000`, run again: it trained on the 50,000 rows written the first time
    from lancetnic_flow.cli.workflow import prepare_workflow

    out = tmp_path / "d.csv"
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 20}}\n")
    prepare_workflow(path, ["make_data.rows=30"])   # missing: written with the value set
    assert out.read_text().count("\n") == 31
    with pytest.raises(UserError, match=re.escape(f"--set make_data.rows=10 asks for another corpus than the one "
                                                  f"{out} holds")) as e:
        prepare_workflow(path, ["make_data.rows=10"])
    assert f"remove {out}" in e.value.hint and out.read_text().count("\n") == 31
    prepare_workflow(path, ["make_data.rows=20"])   # the block's own value: the corpus the file describes
    prepare_workflow(path)


def test_a_set_make_data_value_for_a_corpus_the_run_does_not_read_is_refused(tmp_path):
    from lancetnic_flow.cli.workflow import prepare_workflow

    out, other = tmp_path / "d.csv", tmp_path / "other.csv"
    other.write_text("text,label\na b,x\n")
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 20}}\n")
    with pytest.raises(UserError, match="the run does not read"):
        prepare_workflow(path, [f"train={other}", "make_data.rows=30"])
    assert not out.exists()


def test_resume_is_not_a_workflow_field(tmp_path):
    with pytest.raises(UserError, match="resume is not a workflow field") as caught:
        read_workflow(_write(tmp_path, "train: x.csv\nresume: runs/a\n"))
    assert "lancetnic-flow train --resume RUN" in caught.value.hint and "did you mean" not in str(caught.value)


def test_resume_set_on_the_command_line_names_train_resume(tmp_path):
    with pytest.raises(UserError, match="--set: resume is not a workflow field"):
        read_workflow(_write(tmp_path, "train: x.csv\n"), ["resume=runs/a"])


def test_nested_storage_option_overrides_merge(tmp_path):
    values = read_workflow(_write(tmp_path), ["storage_option.anon=true"]).values
    assert values["storage_option"] == {"client_kwargs": {"region_name": "eu"}, "anon": True}


@pytest.mark.parametrize("text, lines", [
    ("train: x.csv\nepochs: 1\ntraining:\n  epochs: 3\n", (2, 4)),   # the top level's and a section's
    ("train: x.csv\nmax_features: 10\nmax-features: 20\n", (2, 3)),  # two spellings of one option
    ("train: x.csv\nepochs: 1\nepochs: 2\n", (2, 3)),                # a key repeated
])
def test_an_option_set_twice_in_a_file_is_refused_naming_both_lines(tmp_path, text, lines):
    path = _write(tmp_path, text)
    with pytest.raises(UserError, match=f"{re.escape(str(path))}:{lines[1]}: .* line {lines[0]} ") as e:
        read_workflow(path)
    assert "--set" in e.value.hint


def test_a_set_override_replaces_the_files_value_without_being_a_second_setting(tmp_path):
    values = read_workflow(_write(tmp_path, "train: x.csv\nepochs: 1\n"), ["epochs=4"]).values
    assert values["epochs"] == 4


@pytest.mark.parametrize("line, argv", [
    ("seed: 010", ["--seed", "010"]),                  # YAML 1.1: octal 8
    ("name: 0755", ["--name", "0755"]),                # octal 493: the run folder "493"
    ("name: 3.10", ["--name", "3.10"]),                # the float 3.1
    ("name: 1_000", ["--name", "1_000"]),              # the integer 1000
    ("name: 2024-01-05", ["--name", "2024-01-05"]),    # a date
    ("label: 010", ["--label", "010"]),
    ("training:\n  epochs: 1_0", ["--epochs", "1_0"]),
])
def test_a_number_or_date_in_a_workflow_means_what_its_flag_means(tmp_path, line, argv):
    argv = ["train", "x.csv", *argv]
    cli = config_from_options({**vars(build_parser().parse_args(argv)), "dashboard": True},
                              given=given_dests(argv, "train"))
    assert workflow_config(read_workflow(_write(tmp_path, f"train: x.csv\n{line}\n"))) == cli


@pytest.mark.parametrize("text", ["train: x.csv\ncheckpoint_every: 1:30\n", "train: x.csv\nepochs: 0x10\n",
                                  "train: x.csv\nepochs: 3.0\n"])
def test_a_number_its_flag_would_refuse_is_refused_in_a_workflow(tmp_path, text):
    # YAML 1.1 read 1:30 as 90 (checkpoints every 90 batches) and 0x10 as 16, where the flags refuse them
    with pytest.raises(UserError) as e:
        workflow_config(read_workflow(_write(tmp_path, text)))
    assert text.split("\n")[1].split(":")[0] in str(e.value)


def test_storage_options_and_make_data_keep_yamls_values(tmp_path):
    wf = read_workflow(_write(tmp_path, "train: x.csv\nstorage_option: {anon: true, block_size: 1024}\n"
                                        "make_data: {out: x.csv, rows: 100}\n"))
    assert wf.values["storage_option"] == {"anon": True, "block_size": 1024}
    assert wf.make_data["value"]["rows"] == 100


@pytest.mark.parametrize("block, words", [
    ("make_data: 5", "make_data is a mapping"), ("make_data: [a, b]", "make_data is a mapping"),
    ("make_data: {out: 2024, rows: 10}", "make_data.out: expected a path"),
    ("make_data: {out: x.csv, rowz: 10}", "no field 'rowz'"), ("make_data: {out: x.csv, rows: abc}", "make_data.rows"),
])
def test_a_bad_make_data_block_is_refused_even_when_its_corpus_exists(tmp_path, monkeypatch, block, words):
    # A block that was no mapping, or an out that was no text, ended in an internal error; a field misspelt
    # or ill-typed passed unseen whenever the corpus was there already.
    from lancetnic_flow.cli.workflow import prepare_workflow

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("text,label\na b,x\n")
    path = _write(tmp_path, f"train: x.csv\n{block}\n")
    for overrides in ([], ["make_data.seed=3"]):
        with pytest.raises(UserError) as e:
            prepare_workflow(path, overrides)
        assert f"{path}:2" in str(e.value) and words in str(e.value)


@pytest.mark.parametrize("text, overrides, words", [
    ("train: x.csv\nmodel:\n  name: LancetMC\n", [], "model.name would set --name"),
    ("train: x.csv\ncluster:\n  threads: 2\n", [], "cluster.threads would set --threads"),
    ("train: x.csv\n", ["model.name=LancetMC"], "model.name would set --name"),
])
def test_a_key_naming_a_field_of_its_section_that_another_option_sets_is_refused(tmp_path, text, overrides, words):
    # model: {name: LancetMC}, as config.json writes it, named the run folder LancetMC and trained the default
    # model; cluster: {threads: 2} set the trainer's threads, not the workers'
    with pytest.raises(UserError) as e:
        read_workflow(_write(tmp_path, text), overrides)
    assert words in str(e.value)


def test_a_sections_own_field_names_still_set_their_options(tmp_path):
    wf = read_workflow(_write(tmp_path, "data:\n  train: x.csv\noutput:\n  name: r\ntraining:\n  threads: 1\n"),
                       ["output.name=s", "data.train=y.csv"])
    assert wf.values["name"] == "s" and wf.values["data"] == ["y.csv"] and wf.values["threads"] == 1


def test_a_key_set_twice_adds_up_where_its_flag_repeats_and_is_refused_where_it_does_not(tmp_path):
    # --set text=title --set text=body trained on body alone, --set epochs=1 --set epochs=5 on 5, unsaid
    path = _write(tmp_path, "train: x.csv\ntext: t\n")
    assert read_workflow(path, ["text=title", "text=body"]).values["text"] == ["title", "body"]
    assert read_workflow(path, ["val=a.csv", "val=b.csv"]).values["val"] == ["a.csv", "b.csv"]
    assert read_workflow(path, ["epochs=3", "epochs=3"]).values["epochs"] == 3
    with pytest.raises(UserError, match=r"--set epochs given twice \(1, 5\)"):
        read_workflow(path, ["epochs=1", "training.epochs=5"])


def test_a_nested_storage_option_override_merges_into_a_files_key_value_list_too(tmp_path):
    # storage_option: [anon=false, client_kwargs.endpoint_url=...] with --set storage_option.anon=true
    # kept {anon: true} alone: the endpoint went to AWS instead
    path = _write(tmp_path, 'train: x.csv\nstorage_option: ["anon=false", '
                                '"client_kwargs.endpoint_url=http://h:9"]\n')
    values = read_workflow(path, ["storage_option.anon=true"]).values
    assert values["storage_option"] == {"anon": True, "client_kwargs": {"endpoint_url": "http://h:9"}}


def test_make_data_writes_a_remote_corpus_once_and_no_local_folder_named_after_its_url(tmp_path, monkeypatch):
    # out: s3://... was looked for on the local disk: written again on every run, beside a local "s3:" folder
    import uuid

    import lancetnic_flow.data.synth as synth
    from lancetnic_flow.cli.workflow import prepare_workflow

    monkeypatch.chdir(tmp_path)
    written = []
    real = synth.write_corpus
    monkeypatch.setattr(synth, "write_corpus", lambda *a, **k: written.append(a[0]) or real(*a, **k))
    url = f"memory://lf-{uuid.uuid4().hex}/x.csv"
    path = _write(tmp_path, f"train: {url}\nmake_data: {{out: '{url}', rows: 20}}\n")
    prepare_workflow(path)
    prepare_workflow(path)
    assert written == [url] and not (tmp_path / "memory:").exists()


def test_a_bad_option_stops_a_workflow_before_make_data_writes_its_corpus(tmp_path):
    # epochs: 0 was refused only after a corpus of make_data.rows rows had been generated
    from lancetnic_flow.cli.workflow import prepare_workflow

    out = tmp_path / "d.csv"
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 10}}\nepochs: 0\n")
    with pytest.raises(UserError, match="epochs"):
        prepare_workflow(path)
    assert not out.exists()


def test_make_data_to_a_place_that_cannot_be_written_names_it_with_exit_2(tmp_path):
    from lancetnic_flow.cli.workflow import prepare_workflow

    (tmp_path / "f").write_text("a file")
    out = tmp_path / "f" / "x.csv"
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 10}}\n")
    with pytest.raises(UserError, match=f"make_data.out {re.escape(str(out))}: cannot write there"):
        prepare_workflow(path)


@pytest.mark.parametrize("body, line, words", [
    ("model: ScalpelMC\ntraining:\n  lr: -1\n", 4, "lr: must be > 0"),
    ("checkpoint_every: '1:30'\n", 2, "checkpoint_every: '1:30' is neither"),
    ("features: tfidf\nbuckets: 100\n", 3, "buckets sets the columns of hashed features"),
    ("model: LancetMC\nngram_range: [1, 3]\n", 3, "ngram_range: 1,3: features ids reads word tokens"),
])
def test_a_value_the_option_refuses_is_named_with_its_file_and_line(tmp_path, body, line, words):
    path = _write(tmp_path, "train: x.csv\n" + body)
    with pytest.raises(UserError) as caught:
        workflow_config(read_workflow(path))
    message, _ = caught.value.said("workflow")
    assert message.startswith(f"{path}:{line}: {words}"), message
    assert caught.value.said("cli")[0].startswith(f"{path}:{line}: ")


def test_a_refused_value_given_by_set_is_said_as_before(tmp_path):
    with pytest.raises(UserError) as caught:
        workflow_config(read_workflow(_write(tmp_path, "train: x.csv\nmodel: ScalpelMC\n"), ["lr=-1"]))
    assert caught.value.said("workflow")[0].startswith("lr: must be > 0")


@pytest.mark.parametrize("train, written", [
    ("{d}/d.csv", True), ("'{d}/*.csv'", True), ("{d}", True), ("{d}/other.csv", False)])
def test_make_data_writes_its_corpus_only_where_the_run_reads_it(tmp_path, train, written):
    """`--set train=OTHER` on a workflow with make_data trained on OTHER and still generated the
    corpus (200,000 rows for multiclass.yaml) that nothing read."""
    from lancetnic_flow.cli.workflow import prepare_workflow

    data = tmp_path / "data"
    path = _write(tmp_path, f"train: x.csv\nmake_data: {{out: {data / 'd.csv'}, rows: 20}}\n")
    prepare_workflow(path, [f"train={train.format(d=data).strip(chr(39))}"])
    assert (data / "d.csv").exists() is written


def test_make_data_writes_a_corpus_the_run_validates_on(tmp_path):
    from lancetnic_flow.cli.workflow import prepare_workflow

    path = _write(tmp_path, f"train: x.csv\nval: {tmp_path / 'v.csv'}\nmake_data: {{out: {tmp_path / 'v.csv'}, rows: 20}}\n")
    prepare_workflow(path)
    assert (tmp_path / "v.csv").exists()


def test_a_corpus_a_workflow_generates_is_told_as_make_data_tells_it_and_not_when_it_exists(tmp_path):
    """A workflow's make_data block wrote its corpus with no `made` event in --json-log."""
    from lancetnic_flow.cli.workflow import prepare_workflow

    out = tmp_path / "d.csv"
    path = _write(tmp_path, f"train: {out}\nmake_data: {{out: {out}, rows: 20}}\n")
    told: list = []
    prepare_workflow(path, made=lambda where, info: told.append((where, info)))
    assert len(told) == 1 and told[0][0] == str(out) and told[0][1]["rows"] == 20 and told[0][1]["format"] == "csv"
    prepare_workflow(path, made=lambda where, info: told.append((where, info)))
    assert len(told) == 1   # the corpus exists: nothing written, nothing told


def test_a_set_make_data_out_naming_a_file_that_exists_trains_on_it_and_other_changes_are_still_refused(tmp_path):
    """`--set train=X --set make_data.out=X` (a workflow pointed at the user's own file) was
    refused as asking for another corpus than X holds: where the corpus goes is no other corpus."""
    from lancetnic_flow.cli.workflow import prepare_workflow

    mine = tmp_path / "mine.csv"
    mine.write_text("text,label\na b,x\nc d,y\n")
    path = _write(tmp_path, f"train: {tmp_path / 'd.csv'}\nmake_data: {{out: {tmp_path / 'd.csv'}, rows: 20}}\n")
    cfg = prepare_workflow(path, [f"train={mine}", f"make_data.out={mine}"])
    assert cfg.data.train == [str(mine)] and mine.read_text().count("\n") == 3 and not (tmp_path / "d.csv").exists()
    with pytest.raises(UserError, match=re.escape("--set make_data.rows=30 asks for another corpus")):
        prepare_workflow(path, [f"train={mine}", f"make_data.out={mine}", "make_data.rows=30"])


@pytest.mark.parametrize("key, value, said", [
    ("ngrams", "0", "ngrams: 0: need a whole number from 1 to 32"),
    ("memory_budget", "8XB", "memory_budget: cannot read '8XB' as a size")])
def test_a_value_refused_as_it_is_read_is_named_with_its_line_and_key(tmp_path, key, value, said):
    # `ngrams: 0` was refused as "ngram_range: 1,0", a key the file never held, and with no line
    path = _write(tmp_path, f"data:\n  train: a.csv\nfeatures:\n  {key}: {value}\n")
    with pytest.raises(UserError) as e:
        workflow_config(read_workflow(path))
    assert e.value.said("workflow")[0].startswith(f"{path}:4: {said}")
