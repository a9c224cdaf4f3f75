import dataclasses

import numpy as np
import pytest

from lancetnic_flow.config import DataConfig, TrainConfig
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.features.vocab import Moments
from lancetnic_flow.training.orchestrator import check_fitted
from lancetnic_flow.options import said as said_as


def _fitted() -> FittedFeatures:
    return FittedFeatures(vocabulary=["alpha", "beta"], labels=["x", "y"], docs=10)


def test_a_numeric_column_without_one_number_in_the_training_rows_stops_the_run_naming_it():
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], label="label", numeric=["price", "size"]))
    cols = Columns(text=("text",), label="label", numeric=("price", "size"))
    read = {"price": Moments.of(np.array([np.nan, np.nan])), "size": Moments.of(np.array([1.0, 2.0]))}
    with pytest.raises(UserError) as e:
        check_fitted(cfg, cols, _fitted(), 10, {}, read)
    assert "--numeric price:" in e.value.cli[0] and "size" not in str(e.value)
    assert "decimal point" in e.value.hint
    read["price"] = Moments.of(np.array([np.nan, 0.5]))   # one number is enough to stand on
    check_fitted(cfg, cols, _fitted(), 10, {}, read)
    check_fitted(cfg, cols, _fitted(), 10, {}, {"size": read["size"], "price": read["price"]})
    with pytest.raises(UserError):   # a column the pass never saw a value of
        check_fitted(cfg, cols, _fitted(), 10, {}, {"size": read["size"]})


def test_a_runs_config_names_local_data_and_cache_as_absolute_paths_so_resume_finds_them_anywhere(tmp_path,
                                                                                                   monkeypatch):
    """config.json kept `big.csv` and `mycache` as typed: --resume from another folder found no data
    (or another big.csv, and refused it as changed after a whole fit pass)."""
    import dataclasses

    from lancetnic_flow.config import OutputConfig
    from lancetnic_flow.training.keep_learning import is_continued, mark_continued
    from lancetnic_flow.training.orchestrator import saved_config, with_absolute_paths

    monkeypatch.chdir(tmp_path)
    cfg = TrainConfig(data=DataConfig(train=["big.csv", "parts/*.csv", "s3://b/x.csv"], val=["val.csv"]),
                      output=OutputConfig(cache="mycache"))
    mark_continued(cfg)
    got = with_absolute_paths(cfg)
    assert got.data.train == [str(tmp_path / "big.csv"), str(tmp_path / "parts" / "*.csv"), "s3://b/x.csv"]
    assert got.data.val == [str(tmp_path / "val.csv")] and got.output.cache == str(tmp_path / "mycache")
    assert is_continued(got) and cfg.data.train[0] == "big.csv"   # the mark kept; the given config as it was
    none = dataclasses.replace(cfg, output=OutputConfig(cache="none"))
    assert with_absolute_paths(none).output.cache == "none"
    assert saved_config(cfg)["data"]["train"][0] == str(tmp_path / "big.csv")   # what config.json holds


def test_a_continued_runs_config_names_the_run_it_continues_as_an_absolute_path_so_resume_finds_it_anywhere(
        tmp_path, monkeypatch):
    """config.json kept `--init-from runs/jan` as typed: --resume from another folder found no run
    there (or another run of that name, and refused the data as changed after a whole fit pass)."""
    from lancetnic_flow.config import TrainingConfig
    from lancetnic_flow.training.orchestrator import saved_config, with_absolute_paths

    monkeypatch.chdir(tmp_path)
    cfg = TrainConfig(data=DataConfig(train=["feb.csv"]), training=TrainingConfig(init_from="runs/jan"))
    assert saved_config(cfg)["training"]["init_from"] == str(tmp_path / "runs" / "jan")
    assert cfg.training.init_from == "runs/jan"   # messages name it as typed
    s3 = TrainConfig(data=DataConfig(train=["feb.csv"]), training=TrainingConfig(init_from="s3://b/runs/jan"))
    assert with_absolute_paths(s3).training.init_from == "s3://b/runs/jan"
    assert with_absolute_paths(TrainConfig(data=DataConfig(train=["feb.csv"]))).training.init_from is None


def test_a_runs_config_names_its_out_folder_absolute_so_a_resume_elsewhere_finds_its_default_cache(tmp_path,
                                                                                                    monkeypatch):
    """config.json kept `--out runs` as typed: --resume from another folder looked for its cache entry in
    that folder's runs/.cache, fitted the data again and left a cache there."""
    from lancetnic_flow.training.orchestrator import saved_config

    monkeypatch.chdir(tmp_path)
    saved = saved_config(TrainConfig(data=DataConfig(train=["d.csv"])))
    assert saved["output"]["out"] == str(tmp_path / "runs") and saved["output"]["cache"] is None


def test_every_checkpoint_the_run_writes_records_its_network_even_from_a_ddp_ranks_state(tmp_path):
    """A --ddp pause writes the state rank 0 sent, which knows nothing of the network: its
    checkpoint had no record, so a resume whose config.json built another network (another
    dropout, another run's) trained on from those weights instead of being refused."""
    from types import SimpleNamespace

    from lancetnic_flow.events import Events
    from lancetnic_flow.training.checkpoints import check_network, load_checkpoint, network_of
    from lancetnic_flow.training.orchestrator import Training
    from lancetnic_flow.training.state import TrainState

    meta = {"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": {"dim": 8, "hidden": 4, "dropout": 0.1}}
    parts = {"inputs": {"train": [["file:///d/a.csv", 10, "mtime=1", "csv", ""]], "val": None},
             "options": {"min_df": 2, "tokenizer": None}, "val_fraction": 0.1, "revisions": {"csv": 5}}
    run = SimpleNamespace(run=str(tmp_path), key="k", key_parts=parts, decisions={}, model_meta=meta, out_so={},
                          events=Events(), partitioning=None)
    ranks_state = TrainState(epoch=1, model={"w": np.zeros(2, dtype=np.float32)})   # as a rank builds it
    Training._checkpoint(run, ranks_state, "interrupt")
    saved = TrainState.from_checkpoint(load_checkpoint(str(tmp_path)))
    assert saved.network == network_of(meta) and saved.key == "k" and saved.key_parts == parts
    check_network(str(tmp_path), saved, network_of(meta))
    edited = {**meta, "kwargs": {**meta["kwargs"], "dropout": 0.4}}
    with pytest.raises(UserError, match=r"holds a network other than.*dropout 0\.1 → 0\.4"):
        check_network(str(tmp_path), saved, network_of(edited))


def _resuming(tmp_path, fits_twin: bool):
    """A run resuming a LinearSVM checkpoint with its twin, in a session whose plan holds the
    model alone (``fits_twin`` False) or with its twin: the Training fields decide and
    _make_room read."""
    from types import SimpleNamespace

    from lancetnic_flow.config import ModelConfig, TrainingConfig
    from lancetnic_flow.events import Events
    from lancetnic_flow.resolve import resolve
    from lancetnic_flow.training.state import TrainState

    cfg = resolve(TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="LinearSVM"),
                              training=TrainingConfig(learn_val=True)))
    shrunk = []
    return SimpleNamespace(
        cfg=cfg, given=cfg, resume=str(tmp_path), events=Events(), client=None, columns=None,
        saved=TrainState(model={"input.weight": None, "twin_weight": None}),
        feed=SimpleNamespace(total_rows=lambda: 500), features=FittedFeatures(labels=["a", "b"]), init=None,
        held_out=SimpleNamespace(start_pass=lambda *a: None), memory=SimpleNamespace(partition=1), partitioning=[1, 1],
        _trainer_need=lambda classes, c=None: 2 if (c or cfg).training.learn_val else 1,
        _fits=lambda need: need <= (2 if fits_twin else 1), need=2, shrunk=shrunk,
        _fit_shuffle_buffer=lambda classes: shrunk.append(classes),
        _too_small_to_resume=lambda classes: UserError("--memory-budget too small to resume"),
        _say_labels=lambda counts: None)


def test_a_resumed_run_keeps_its_twin_and_shuffle_buffer_whatever_this_sessions_memory_budget(tmp_path):
    """--memory-budget may change on --resume: a smaller one decided again that the twin had no
    room, and the run failed after its fit pass as "another run's checkpoint" (or, had the weights
    loaded, trained another model); a model that outgrew the plan gave up shuffle-buffer rows,
    replaying other batches than those trained. Now the checkpoint decides, and a plan without
    room for the run as it started is refused naming --memory-budget."""
    from lancetnic_flow.training.orchestrator import Training

    run = _resuming(tmp_path, fits_twin=False)
    Training.decide(run)
    assert run.cfg.training.learn_val is True and run.tc.learn_val is True
    with pytest.raises(UserError, match="--memory-budget"):
        Training._make_room(run, 2)
    assert run.shrunk == []   # the shuffle buffer is the run's
    run = _resuming(tmp_path, fits_twin=True)
    Training.decide(run)
    Training._make_room(run, 2)
    assert run.cfg.training.learn_val is True and run.shrunk == []
    new = _resuming(tmp_path, fits_twin=False)
    new.resume = new.saved = None   # a new run decides from its plan, and makes room as before
    Training.decide(new)
    assert new.cfg.training.learn_val is False
    new.need = 3
    Training._make_room(new, 2)
    assert new.shrunk == [2]


def test_a_resumed_run_cuts_its_inputs_as_it_did_before_the_checkpoint_whatever_this_sessions_plan(tmp_path):
    """--workers, --worker-threads and --memory-budget may change on --resume, and the plan's block
    size and threads cut the inputs: a run without a cache featurised its stopped epoch from other
    partitions, and the replay of the batches trained before the checkpoint trained some rows twice
    and others not at all (another model, the same row counts). The checkpoint keeps the cut."""
    from types import SimpleNamespace

    from lancetnic_flow.events import Events
    from lancetnic_flow.training.checkpoints import load_checkpoint
    from lancetnic_flow.training.orchestrator import Training
    from lancetnic_flow.training.state import TrainState

    started = SimpleNamespace(memory=SimpleNamespace(partition=4 << 20, workers=1, threads=1), saved=None)
    assert Training._partitioning(started) == [4 << 20, 1]
    run = SimpleNamespace(run=str(tmp_path), key="k", key_parts=None, decisions={}, model_meta={}, out_so={},
                          events=Events(), partitioning=Training._partitioning(started))
    Training._checkpoint(run, TrainState(epoch=1, batches=30), "interrupt")
    saved = TrainState.from_checkpoint(load_checkpoint(str(tmp_path)))
    resumed = SimpleNamespace(memory=SimpleNamespace(partition=1 << 20, workers=2, threads=2), saved=saved)
    assert Training._partitioning(resumed) == [4 << 20, 1]
    older = SimpleNamespace(memory=resumed.memory, saved=TrainState())   # a checkpoint from before the record
    assert Training._partitioning(older) == [1 << 20, 4]


def _manifest(cut: list[tuple[int, int, int]]):
    """A manifest whose training shards are ``cut``: (partition, rows, crc32) each."""
    from lancetnic_flow.dataflow.manifest import Manifest
    from lancetnic_flow.dataflow.shards import PartitionResult, ShardInfo

    results = [PartitionResult(p, [ShardInfo(f"s{p}", "train", p, 0, rows, rows * 9, rows * 90, crc)])
               for p, rows, crc in cut]
    return Manifest("k", "f", {}, results)


def test_a_resume_from_a_cache_entry_made_again_with_other_shards_is_refused_not_replayed():
    # the resume skips the batches trained before the checkpoint: from an entry deleted and made
    # again by a run on another plan (same key), it skipped other rows than were trained
    from types import SimpleNamespace

    from lancetnic_flow.dataflow.manifest import shards_digest
    from lancetnic_flow.training.orchestrator import Training
    from lancetnic_flow.training.state import TrainState

    trained = _manifest([(0, 500, 11), (1, 500, 12)])
    run = SimpleNamespace(entry="runs/.cache/k", resume="runs/r")
    saved = TrainState(shards=shards_digest(trained))
    check = lambda manifest: Training._check_same_shards(run, saved, SimpleNamespace(manifest=manifest))  # noqa: E731
    check(_manifest([(0, 500, 11), (1, 500, 12)]))          # the same cut, made again: the same batches
    check(None)                                             # no complete entry: this run makes it as cut before
    with pytest.raises(UserError, match="made again since runs/r's checkpoint"):
        check(_manifest([(0, 250, 21), (1, 250, 22), (2, 250, 23), (3, 250, 24)]))
    Training._check_same_shards(run, TrainState(), SimpleNamespace(manifest=trained))   # a checkpoint from before


def _warned_for(entry_parts: int, shard_parts: list[int], planned: int, world: int = 5) -> list[str]:
    from types import SimpleNamespace

    from lancetnic_flow.events import Events
    from lancetnic_flow.training.orchestrator import Training

    said: list[str] = []
    t = Training.__new__(Training)   # the ranks' partition warnings alone: no cluster
    t.events = Events()
    t.events.subscribe(lambda kind, e: said.append(e["message"]) if kind == "warning" else None)
    t.tc = SimpleNamespace(seed=0)
    t.train_src = SimpleNamespace(partitions=[None] * planned)
    t.feed = SimpleNamespace(manifest=SimpleNamespace(partitions={"train": [{}] * entry_parts, "val": []}))
    shards = [SimpleNamespace(partition=p, chunk=0, rows=300, split="train") for p in shard_parts]
    t._warn_partitions(SimpleNamespace(train_shards=shards, world=world, rule="hinge"))
    return said


def test_a_partition_of_this_runs_own_entry_without_training_rows_is_not_an_entry_an_earlier_run_cut_coarser():
    """Six byte ranges, the last one byte (the file's final line end): five hold
    training rows, and the run said an earlier run had cut the entry into 5."""
    assert _warned_for(6, [0, 1, 2, 3, 4], planned=6) == []
    coarse = _warned_for(2, [0, 1], planned=6, world=2)   # an entry cut coarser is still said
    assert len(coarse) == 1 and coarse[0].startswith("the shard cache was cut into 2 partitions by an earlier run")


def test_ddp_ranks_set_the_workers_of_a_cluster_the_run_starts_not_of_an_existing_one():
    from types import SimpleNamespace

    from lancetnic_flow.training.orchestrator import Training

    ranks = Training.ranks.fget
    assert ranks(SimpleNamespace(external=False, tc=SimpleNamespace(ddp=3))) == 3
    assert ranks(SimpleNamespace(external=True, tc=SimpleNamespace(ddp=3))) == 0   # ranks go on the workers it has
    assert ranks(SimpleNamespace(external=False, tc=SimpleNamespace(ddp=1))) == 0
    assert ranks(SimpleNamespace(external=False, tc=SimpleNamespace(ddp=None))) == 0


def test_a_checkpoint_of_an_entry_that_read_durations_in_their_stored_unit_is_refused_saying_so():
    from types import SimpleNamespace

    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow.manifest import entry_key
    from lancetnic_flow.features.split import fraction_of
    from lancetnic_flow.training.orchestrator import Training

    plan = SourcePlan(files=[FileInfo("file:///d/a.parquet", 10, "v1", "parquet", None)], partitions=[])
    columns = Columns(text=("text",), label="label", numeric=("took",))
    run = SimpleNamespace(train_src=plan, val_src=None, columns=columns, val_fraction=0.1, resume="runs/r",
                          _key_options=lambda: {"features": {}})
    saved = entry_key(plan, None, run._key_options(), columns, fraction_of(0.1), numbers=1)
    with pytest.raises(UserError, match="read a Parquet or Arrow duration column .* where it now reads seconds"):
        Training._refuse_other_key(run, saved)


def test_a_checkpoint_of_a_tokenizer_run_that_trained_texts_it_read_no_token_from_is_refused_saying_so():
    from types import SimpleNamespace

    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.data.usable import text_rule
    from lancetnic_flow.dataflow.manifest import entry_key
    from lancetnic_flow.features.split import fraction_of
    from lancetnic_flow.training.orchestrator import Training

    plan = SourcePlan(files=[FileInfo("file:///d/a.csv", 10, "v1", "csv", None)], partitions=[])
    rule = text_rule(SimpleNamespace(analyzer="word", ngram_min=1, normalize="nfkc", tokenizer="my.mod:seg",
                                     stop_words="english"))
    columns = Columns(text=("text",), label="label", text_rule=rule)
    run = SimpleNamespace(train_src=plan, val_src=None, columns=columns, val_fraction=0.1, resume="runs/r",
                          _key_options=lambda: {"features": {}})
    saved = entry_key(plan, None, run._key_options(), dataclasses.replace(columns, text_rule="visible nfkc"),
                      fraction_of(0.1))
    with pytest.raises(UserError, match="or from which a tokenizer of yours read no token"):
        Training._refuse_other_key(run, saved)


@pytest.mark.parametrize("readers, said", [("SPACE_LINES_READ_AS_ROWS", "lines of spaces"),
                                            ("LONE_CR_NOT_A_ROW_END", "a lone \\r"),
                                            ("MALFORMED_READ_PAST_ITS_RECORD", "however the file is cut"),
                                            ("SHORT_ROWS_MALFORMED", "fewer fields than the header")])
def test_a_checkpoint_of_an_entry_an_earlier_csv_reader_made_is_refused_saying_which_revision(readers, said):
    from types import SimpleNamespace

    from lancetnic_flow.data.sources import FileInfo, SourcePlan
    from lancetnic_flow.dataflow import manifest
    from lancetnic_flow.dataflow.manifest import entry_key
    from lancetnic_flow.features.split import fraction_of
    from lancetnic_flow.training.orchestrator import Training

    plan = SourcePlan(files=[FileInfo("file:///d/a.csv", 10, "v1", "csv", None)], partitions=[])
    columns = Columns(text=("text",), label="label")
    run = SimpleNamespace(train_src=plan, val_src=None, columns=columns, val_fraction=0.1, resume="runs/r",
                          _key_options=lambda: {"features": {}})
    saved = entry_key(plan, None, run._key_options(), columns, fraction_of(0.1), readers=getattr(manifest, readers))
    with pytest.raises(UserError, match="whose CSV and TSV reader was revised since") as e:
        Training._refuse_other_key(run, saved)
    assert said in str(e.value)
    with pytest.raises(UserError, match="the training data or feature options changed"):
        Training._refuse_other_key(run, "another key")


def _labels_said(labels, rows, task=None, multilabel=False):
    """The warnings and decisions Training._say_labels gives for ``labels`` over ``rows`` training rows."""
    from types import SimpleNamespace

    from lancetnic_flow.resolve import FitCounts
    from lancetnic_flow.training.orchestrator import Training

    said = []
    run = SimpleNamespace(features=SimpleNamespace(labels=labels), cfg=TrainConfig(data=DataConfig(train=["d.csv"], label="id")),
                          columns=SimpleNamespace(multilabel=multilabel), decisions={},
                          events=SimpleNamespace(emit=lambda kind, **kw: said.append(kw["message"])),
                          given=SimpleNamespace(training=SimpleNamespace(task=task)))
    Training._say_labels(run, FitCounts(rows=rows, classes=len(labels)))
    return said, run.decisions


@pytest.mark.parametrize("labels", [[f"doc-{i}" for i in range(900)], [str(i) for i in range(900)]])
def test_a_label_column_with_a_class_per_training_row_is_warned_of_as_identifiers(labels):
    # --label id trained one class per row; the only sign was "validated 0, skipped unknown_label"
    said, decisions = _labels_said(labels, 900)
    assert len(said) == 1 and "the label column 'id' looks like identifiers, not classes: 900 classes over " \
        "900 training rows" in said[0] and "pass {data.label} the column that holds the classes" in said[0]
    assert "pass --label the column" in said_as(said[0], "cli") and "pass label the column" in said_as(said[0], "python")
    assert "--target" not in said[0]   # a row id is no number to predict either
    assert decisions["identifier_labels"] == {"classes": 900, "training_rows": 900}


def test_labels_of_several_rows_each_or_few_or_sets_are_not_taken_for_identifiers():
    assert _labels_said([f"c{i}" for i in range(100)], 1000)[0] == []
    assert _labels_said([f"c{i}" for i in range(800)], 1000)[0] == []   # under nine in ten of the rows
    assert _labels_said(["a", "b", "c"], 3)[0] == []   # a toy set, each row its own class on purpose
    assert _labels_said([f"t{i}" for i in range(300)], 100, multilabel=True)[0] == []
    numbers, _ = _labels_said(["1", "2", "3"], 300)
    assert len(numbers) == 1 and "holds numbers" in numbers[0]


def _row_warnings(words: str, by: str | None = None) -> list[str]:
    """What a run's row warnings say to a caller of ``words`` (cli, python, workflow); ``by``:
    :data:`PARTIAL_FIT` when an estimator's partial_fit continued the run."""
    import types

    from lancetnic_flow.config import TrainingConfig
    from lancetnic_flow.events import Events
    from lancetnic_flow.training.keep_learning import mark_continued
    from lancetnic_flow.training.orchestrator import Training

    cfg = TrainConfig(data=DataConfig(train=["t.csv"], val_fraction=0.1), training=TrainingConfig(early_stopping=2))
    cfg.features.max_len = 64
    if by:
        mark_continued(cfg, by)
    said: list[str] = []
    events = Events(words=words)
    events.subscribe(lambda kind, e: said.append(e["message"]))
    run = types.SimpleNamespace(cfg=cfg, tc=cfg.training, given=cfg, events=events)
    run._continued = lambda: Training._continued(run)
    rows = {"validated": 0, "noted": {"longer_than_max_len": 3, "unreadable_numeric": 1, "learned_by_init": 2}}
    Training._warn_of_rows(run, rows, {})
    return said


def test_a_runs_row_warnings_name_each_option_as_its_caller_typed_it():
    """`3 rows held more tokens than --max-len 64`, `--numeric value`, `--early-stopping 2 had no
    validation row` and `the --init-from model` reached train(cfg) and the estimators: each now names
    the option as the caller gave it, a flag on the command line, a parameter in Python, a key in a workflow."""
    cli, python, flow = _row_warnings("cli"), _row_warnings("python"), _row_warnings("workflow")
    assert any("more tokens than --max-len 64" in m and "raise --max-len" in m for m in cli)
    assert any("1 --numeric value that is not a number" in m for m in cli)
    assert any(m.startswith("--early-stopping 2") for m in cli)
    assert any("the --init-from model had learned" in m for m in cli)
    for said in (python, flow):
        text = "\n".join(said)
        assert "--" not in text, text
        assert "more tokens than max_len 64" in text and "1 numeric value" in text
        assert "early_stopping 2" in text and "the init_from model had learned" in text


def test_a_partial_fit_runs_row_warnings_name_partial_fit_not_a_flag():
    text = "\n".join(_row_warnings("python", by="partial_fit"))
    assert "the partial_fit model had learned" in text and "--" not in text


def test_a_runs_errors_about_its_data_name_options_as_each_caller_typed_them():
    """`check --target`, `lower --min-df`, `--class-loss bce needs exactly 2 classes` reached Python callers."""
    from lancetnic_flow.config import FeatureConfig
    from lancetnic_flow.training.orchestrator import no_rows_error

    cfg = TrainConfig(data=DataConfig(train=["t.csv"]))
    e = no_rows_error(cfg, 10, {})
    assert e.hint == "add rows, or lower val_fraction" and e.cli[1] == "add rows, or lower --val-fraction"
    e = no_rows_error(TrainConfig(data=DataConfig(train=["t.csv"], target="y")), 10, {"missing_target": 10})
    assert e.hint == "the target column 'y' must hold numbers, written with a decimal point (1.5, not 1,5); check target"
    assert e.cli[1] == "the --target column 'y' must hold numbers, written with a decimal point (1.5, not 1,5); check --target"
    cfg = TrainConfig(data=DataConfig(train=["t.csv"]), features=FeatureConfig(mode="tfidf"))
    features = FittedFeatures(mode="tfidf", ngrams=1, lowercase=True, sublinear_tf=False, buckets=0, max_len=0,
                              labels=["a", "b"], target=None, vocabulary={}, idf=None, docs=5)
    with pytest.raises(UserError) as e:
        check_fitted(cfg, Columns(text=["text"], label="label"), features, rows_read=5)
    assert e.value.hint == "lower min_df, raise max_df, or check the text column"
    assert e.value.cli[1] == "lower --min-df, raise --max-df, or check the --text column"


def test_a_run_of_texts_without_a_word_names_the_analyzer_that_reads_characters():
    # a corpus of emoji alone was refused with "must hold text the analyzer reads": not what would read it
    from lancetnic_flow.config import FeatureConfig
    from lancetnic_flow.training.orchestrator import no_rows_error

    cfg = TrainConfig(data=DataConfig(train=["t.csv"]), features=FeatureConfig(analyzer="word", mode="hashing"))
    e = no_rows_error(cfg, 600, {"empty_text": 600})
    assert e.cli[1].endswith("; emoji, symbols and single letters are no word: --analyzer char_wb reads every "
                             "character")
    # a fitted vocabulary reads words alone: no character analyzer to name there
    cfg.features = FeatureConfig(analyzer="word", mode="tfidf")
    assert "char_wb" not in no_rows_error(cfg, 600, {"empty_text": 600}).cli[1]


def test_a_run_without_a_checkpoint_to_resume_names_checkpoint_every_as_the_caller_typed_it(tmp_path):
    """train(cfg, resume=RUN) was told a checkpoint is written every `--checkpoint-every`."""
    import types

    from lancetnic_flow.training.orchestrator import Training

    with pytest.raises(UserError) as e:
        Training._load_checkpoint(types.SimpleNamespace(resume=str(tmp_path), out_so={}))
    assert "written every checkpoint_every and on Ctrl-C" in e.value.hint
    assert "written every --checkpoint-every and on Ctrl-C" in e.value.cli[1]


@pytest.mark.parametrize("schedule, counts, start", [
    ("linear", [5, 0, 0], 120),      # rows of a label the old run trained: the schedule goes on
    ("linear", [5, 0, 3], 0),        # rows of a label added: its output row starts from nothing
    ("linear", [5, 2, 0], 0),        # rows of a label declared (partial_fit's classes) but never trained
    ("constant", [5, 0, 0], 0)])
def test_a_continued_runs_learning_rate_goes_on_from_its_weights_steps_unless_a_label_is_new_to_training(
        schedule, counts, start):
    # it started at full --lr again, as a fresh run does
    from types import SimpleNamespace

    from lancetnic_flow.training.orchestrator import Training

    init = SimpleNamespace(steps=120, features=SimpleNamespace(labels=["a", "b"], label_counts=[40, 0]))
    run = SimpleNamespace(init=init, tc=SimpleNamespace(lr_schedule=schedule),
                          features=SimpleNamespace(labels=["a", "b", "c"], label_counts=counts))
    assert Training._schedule_start(run) == start
    assert Training._schedule_start(SimpleNamespace(init=None, tc=run.tc, features=run.features)) == 0


def test_the_rows_a_label_separator_split_are_counted_apart_from_the_rows_read_changed():
    from lancetnic_flow.dataflow.shards import PartitionResult
    from lancetnic_flow.training.orchestrator import sum_rows

    parts = [PartitionResult(0, rows_read=5, noted={"label_sep_split": 3, "repeated_label": 1}),
             PartitionResult(1, rows_read=4, noted={"label_sep_split": 2, "label_sep_in_lists": 1})]
    rows = sum_rows(parts)
    assert rows["label_sep"] == {"split": 5, "in_lists": 1} and rows["noted"] == {"repeated_label": 1}
    assert "label_sep" not in sum_rows([PartitionResult(0, rows_read=5)])


@pytest.mark.parametrize("words,named", [("cli", "--label-sep '|'"), ("python", "label_sep '|'")])
def test_a_label_separator_that_split_no_label_in_the_whole_run_is_warned_of_at_its_end(words, named):
    """A JSON Lines file of lists longer than the head the option check reads took --label-sep '|'
    and trained with it doing nothing, silently: the run now says so at its end, in the caller's words."""
    import types

    from lancetnic_flow.config import TrainingConfig
    from lancetnic_flow.events import Events
    from lancetnic_flow.training.orchestrator import Training

    cfg = TrainConfig(data=DataConfig(train=["t.jsonl"], label_sep="|"), training=TrainingConfig(task="multilabel"))
    said: list[str] = []
    events = Events(words=words)
    events.subscribe(lambda kind, e: said.append(e["message"]))
    run = types.SimpleNamespace(cfg=cfg, tc=cfg.training, given=cfg, events=events)
    Training._warn_of_rows(run, {"validated": 9, "label_sep": {"in_lists": 4}}, {})
    assert len(said) == 2 and said[0].startswith("4 rows whose labels are a list")
    assert said[1].startswith(f"{named} split no label")
    said.clear()
    Training._warn_of_rows(run, {"validated": 9, "label_sep": {"split": 4}}, {})
    assert said == []
    # a continued run's separator taken from the run it continues: never "drop it", list items still named
    run.cfg = dataclasses.replace(cfg, training=TrainingConfig(task="multilabel", init_from="runs/old"))
    Training._warn_of_rows(run, {"validated": 9, "label_sep": {"in_lists": 4}}, {})
    assert len(said) == 1 and said[0].startswith("4 rows whose labels are a list")


def test_a_multilabel_runs_labels_joining_its_other_labels_by_a_separator_it_did_not_split_by_are_warned_of():
    """Lists with a few "sports|tech" strings, trained without --label-sep: the joined string was
    learned as a label of its own, silently; the run now names it and the separator that splits it."""
    import types

    from lancetnic_flow.events import Events
    from lancetnic_flow.training.orchestrator import Training

    said: list[str] = []
    events = Events(words="cli")
    events.subscribe(lambda kind, e: said.append(e["message"]))
    for sep, multilabel, expected in ((None, True, 1), ("|", True, 0), (None, False, 0)):
        said.clear()
        run = types.SimpleNamespace(cfg=TrainConfig(data=DataConfig(train=["t.jsonl"], label_sep=sep)), events=events,
                                    columns=Columns(text=("text",), label="label", multilabel=multilabel), decisions={})
        Training._warn_of_joined_sets(run, ["sports", "tech", "sports|tech"])
        assert len(said) == expected
    run.columns = Columns(text=("text",), label="label", multilabel=True)
    Training._warn_of_joined_sets(run, ["sports", "tech", "sports|tech"])
    assert said[-1].startswith("1 label of this run is its other labels joined by '|' ('sports|tech')")
    assert "pass --label-sep '|'" in said[-1] and run.decisions["joined_labels"]["separator"] == "|"


def test_a_val_file_joining_the_runs_labels_is_refused_before_the_first_epoch_from_its_head(tmp_path):
    """A run trained on lists with a --val CSV of "sports|tech" was refused only after the first
    epoch's validation (after the last one under --ddp); its head now says so before any epoch."""
    import types

    from lancetnic_flow.data.sources import plan_source
    from lancetnic_flow.training.orchestrator import Training

    (tmp_path / "val.csv").write_text("text,label\nball game,sports|tech\nnew chip,tech\nvote,politics\n")
    labels = ["sports", "tech", "politics"]

    def run(sep, multilabel=True):
        columns = Columns(text=("text",), label="label", multilabel=multilabel, label_sep=sep)
        return types.SimpleNamespace(cfg=TrainConfig(data=DataConfig(train=["t.jsonl"])), columns=columns,
                                     val_src=plan_source([str(tmp_path / "val.csv")]))

    with pytest.raises(UserError, match=r"joins this run's labels by '\|' \('sports\|tech' 1\)") as e:
        Training._refuse_joined_val_sets(run(None), labels)
    assert "--label-sep '|'" in e.value.said("cli")[1]
    Training._refuse_joined_val_sets(run("|"), labels)   # read with the separator: three sets of known labels
    Training._refuse_joined_val_sets(run(None, multilabel=False), labels)   # one label a row: not label sets
    Training._refuse_joined_val_sets(types.SimpleNamespace(columns=run(None).columns, val_src=None), labels)


def test_a_label_set_runs_metrics_lead_with_the_saved_models_figures_and_say_where_the_epochs_decide():
    """metrics.json led with val_micro_f1 at margin 0 (a LinearSVM's epochs: 0.45) and kept the saved
    model's figure at its thresholds (0.76) further down, unsaid which was which: the saved model's now
    come first, and the epoch figures name the margin they decide a label at."""
    import types

    from lancetnic_flow.models.calibrate import Calibration
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.orchestrator import Training

    at = {"micro_f1": 0.76, "macro_f1": 0.7, "subset_accuracy": 0.4, "rows": 50}
    run = types.SimpleNamespace(calibration=Calibration(rows=40, at_thresholds=at),
                                task=Task(kind="multilabel", classes=3, class_loss="hinge"))
    got = Training._leading_figures(run, {"micro_f1": 0.45, "loss": 1.0})
    assert list(got)[0] == "val_at_thresholds" and got["val_at_thresholds"] == {**at, "thresholds_rows": 40}
    assert got["val_micro_f1"] == 0.45 and got["val_decided_at"] == "margin 0"
    run = types.SimpleNamespace(calibration=Calibration(), task=Task(kind="classify", classes=3))
    got = Training._leading_figures(run, {"accuracy": 0.9, "loss": 1.0})
    assert list(got)[0] == "val_loss" and "val_decided_at" not in got and "val_at_thresholds" not in got


class _Planned(Exception):
    """Where the stub run stops: past the start, before any cluster or data."""


@pytest.mark.parametrize("searched", [False, True])
def test_train_warns_at_the_start_of_a_patience_that_can_stop_no_epoch_but_not_in_tunes_final_run(searched,
                                                                                                  monkeypatch):
    import lancetnic_flow.training.orchestrator as orchestrator
    from lancetnic_flow.config import ModelConfig, TrainingConfig
    from lancetnic_flow.events import Events

    given = TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name="ScalpelMC"),
                        training=TrainingConfig(epochs=3, early_stopping=2),
                        given=frozenset({"training.epochs", "training.early_stopping"}))

    class Run:
        def __init__(self, cfg, events, resume):
            self.given, self.cfg = cfg, cfg.validate()

        def plan(self, external):
            raise _Planned

    monkeypatch.setattr(orchestrator, "Training", Run)
    events, seen = Events(), []
    events.subscribe(lambda kind, e: seen.append(e["message"]) if kind == "warning" else None)
    with pytest.raises(_Planned):
        orchestrator.train(given, events, searched=searched)
    assert [m.split(":")[0] for m in seen] == ([] if searched else ["early_stopping 2 can stop no epoch of epochs 3"])


def test_a_multilabel_fit_of_one_label_and_empty_sets_trains_it_and_one_every_row_has_is_refused():
    """One label some rows have and others lack ([]) is a "does it apply" task: it was refused,
    naming --task classify, which reads no label set. It trains now (one margin, the empty sets
    its negatives); a label every row has, or no label at all, leaves nothing to learn."""
    import torch

    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.orchestrator import label_set_task

    fitted = FittedFeatures(vocabulary=["alpha"], labels=["spam"], label_counts=[5], docs=10)
    task = label_set_task(Task("multilabel", 1), fitted, "balanced", torch.device("cpu"))
    assert task.classes == 1 and task.class_weights.tolist() == [1.0]   # 5 negatives over 5 positives
    every = FittedFeatures(vocabulary=["alpha"], labels=["spam"], label_counts=[10], docs=10)
    with pytest.raises(UserError, match="every training row has it") as e:
        label_set_task(Task("multilabel", 1), every, "none", torch.device("cpu"))
    assert "classify" not in str(e.value) and "empty label set" in e.value.said("cli")[1]
    with pytest.raises(UserError, match="found no label value"):
        label_set_task(Task("multilabel", 0), FittedFeatures(vocabulary=["alpha"], docs=10), "none",
                       torch.device("cpu"))
