"""The `train` and `tune` parsers are built from the declarations
(lancetnic_flow/options.py), and parsed options map to the configuration
through them: every declared flag reaches its field. Pure: no cluster."""
from __future__ import annotations

import pytest

from lancetnic_flow import options as opts
from lancetnic_flow.cli.parser import CLUSTER, DATA, build_parser, given_dests, with_negative_values
from lancetnic_flow.config import DataConfig, TrainConfig, config_from_options

# A value for each typed flag that differs from every default.
SAMPLE = {int: ("7", 7), float: ("0.25", 0.25)}


def _config(*argv: str) -> TrainConfig:
    a = build_parser().parse_args(with_negative_values(["train", "x.csv", *argv]))
    return config_from_options(vars(a))


def _field(cfg: TrainConfig, field: str):
    section, name = field.split(".")
    return getattr(getattr(cfg, section), name)


@pytest.mark.parametrize("o", [o for o in opts.command_options("train") if o.field and o.type in SAMPLE],
                         ids=lambda o: o.flag)
def test_every_typed_flag_sets_its_declared_field(o):
    text, value = SAMPLE[o.type]
    assert _field(_config(o.flag, text), o.field) == value


@pytest.mark.parametrize("o", [o for o in opts.command_options("train") if o.kind == "bool"], ids=lambda o: o.flag)
def test_every_on_off_flag_sets_its_declared_field(o):
    assert _field(_config(o.flag), o.field) is True
    assert _field(_config("--no-" + o.flag[2:]), o.field) is False


def test_text_options_are_parsed_as_declared():
    cfg = _config("--text", "a", "--text", "b", "--numeric", "n1,n2", "--loss-weights", "1,0.5", "--min-df", "0.01",
                  "--memory-budget", "2KiB", "--blocksize", "1KiB", "--storage-option", "a.b=true",
                  "--ngram-range", "2,4", "--worker-threads", "3", "--track", "x", "--val", "v1", "v2")
    assert cfg.data.text == ["a", "b"] and cfg.data.numeric == ["n1", "n2"] and cfg.data.val == ["v1", "v2"]
    assert cfg.training.loss_weights == (1.0, 0.5) and cfg.features.min_df == 0.01
    assert (cfg.cluster.memory_budget, cfg.cluster.blocksize, cfg.cluster.threads) == (2048, 1024, 3)
    assert cfg.data.storage_options == {"a": {"b": True}} and cfg.output.track == ["x"]
    assert (cfg.features.ngram_min, cfg.features.ngrams) == (2, 4)


def test_no_options_mean_the_dataclass_defaults_but_the_charts_drawn_after_the_command():
    cfg = _config()
    assert cfg.output.wait_for_plots is False and TrainConfig(data=DataConfig(train=[])).output.wait_for_plots is True
    cfg.output.wait_for_plots = True
    assert cfg == TrainConfig(data=DataConfig(train=["x.csv"]))


def test_tune_takes_trains_options_but_resume_and_ddp():
    a = build_parser().parse_args(["tune", "x.csv", "--lr", "0.5"])
    assert a.lr == 0.5 and a.resume is None and a.ddp is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "x.csv", "--ddp", "2"])


def test_predict_and_evaluate_share_the_declared_data_and_cluster_options():
    assert {o.field for o in DATA} == {"data.format", "data.storage_options", "data.encoding", "data.delimiter"}
    assert {o.flag for o in CLUSTER} == {"--memory-budget", "--workers", "--worker-threads", "--scheduler",
                                         "--scheduler-wait", "--blocksize", "--run-on"}
    a = build_parser().parse_args(["predict", "run", "--text", "t", "--memory-budget", "1GiB"])
    assert a.memory_budget == "1GiB" and a.storage_option == [] and a.format == "auto"


def test_a_negative_value_reaches_its_check():
    a = build_parser().parse_args(with_negative_values(["train", "x.csv", "--lr", "-1"]))
    assert a.lr == -1.0


def test_given_dests_are_the_options_argv_gives_itself_whatever_their_values():
    """--init-from takes the run's value of each option not given: ``--text text``
    (the default's value) is given, an option left out is not."""
    given = given_dests(["train", "new.csv", "--init-from", "runs/a", "--text", "text", "--epochs", "10",
                         "--no-lowercase", "--quiet"], "train")
    assert {"data", "init_from", "text", "epochs", "lowercase"} <= given
    assert not given & {"label", "buckets", "features", "model", "command"}


def test_given_dests_of_tune_hold_no_option_of_train_alone():
    # tune's parser sets train's --ddp, --sync-rows, --train-on to None: read as typed, --sync-rows was
    # refused as given where no ranks average, on a command line that never named it
    given = given_dests(["tune", "d.csv", "--epochs", "3"], "tune")
    assert given == {"data", "epochs"}


def test_a_column_option_given_twice_with_two_names_is_refused_and_numeric_columns_add_up(capsys):
    # argparse kept the last --label/--target and the last --numeric: a declared column was dropped without a word
    p = build_parser()
    for twice in (["--label", "a", "--label", "b"], ["--target", "y", "--target", "z"]):
        with pytest.raises(SystemExit) as e:
            p.parse_args(["train", "x.csv", *twice])
        assert e.value.code == 2
        assert f"{twice[0]} given twice ({twice[1]}, {twice[3]})" in capsys.readouterr().err
    assert p.parse_args(["train", "x.csv", "--label", "a", "--label", "a"]).label == "a"   # the same twice: one
    a = p.parse_args(["train", "x.csv", "--numeric", "v", "--numeric", "w,u"])
    assert config_from_options(vars(a)).data.numeric == ["v", "w", "u"]
    assert config_from_options(vars(p.parse_args(["train", "x.csv"]))).data.numeric == []


# ---------------------------------------------------------------- flags the messages name

# Flags of other tools, and the help's own notation, that messages name on purpose.
NOT_OURS = {"--memory-limit",        # `dask worker --memory-limit`
            "--nthreads",            # `dask worker --nthreads`
            "--x", "--no-x", "--no-"}  # how options.py and cli/commands.py describe --x/--no-x


def _every_flag() -> set[str]:
    import argparse

    seen: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            seen.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return seen


def _package_texts():
    """Every string literal of the package, with where it is: the parts of an f-string too."""
    import ast
    import pathlib

    import lancetnic_flow

    root = pathlib.Path(lancetnic_flow.__file__).parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.JoinedStr, ast.Call)):
                yield f"{path.relative_to(root)}:{node.lineno}", node
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{path.relative_to(root)}:{node.lineno}", node.value


def test_every_flag_a_message_names_is_one_a_command_offers():
    """A message or hint naming `--n-features` where the parser has `--buckets` sends the
    user to an option that does not exist; so does a field placeholder (`{training.lr}`)
    that names no declared field."""
    import re

    flags, wrong = _every_flag(), []
    for where, text in _package_texts():
        if not isinstance(text, str):
            continue
        wrong += [f"{where}: {f}" for f in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)
                  if f not in flags and f not in NOT_OURS]
        for field in re.findall(r"\{((?:%s)\.[a-z_]+)\}" % "|".join(opts.SECTIONS), text):
            if field not in opts.BY_FIELD:
                wrong.append(f"{where}: {{{field}}}")
            elif opts.cli_name(field) not in flags:
                wrong.append(f"{where}: {{{field}}} says {opts.cli_name(field)}")
    assert not wrong, wrong


def test_no_message_shows_a_value_after_a_flag_that_takes_none():
    """`{features.idf} {value}` said `--idf False`, `{name} {'on' if on else 'off'}` `--idf off`, and a
    field named at run time (`{{{f}}} {value}`) `--ngrams 3` for `--ngram-range 1,3`: a --x/--no-x
    option and --ngram-range are said with ``say.setting`` (options.Words), as typed."""
    import ast

    flagged = {f for f, o in opts.BY_FIELD.items() if o.kind in ("bool", "flag")} | set(opts.NGRAM_FIELDS)
    wrong = []
    for where, node in _package_texts():
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "bad" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in flagged:
            named = ["{name} "]             # the error's own field, a flag: no value follows it
        elif isinstance(node, ast.JoinedStr):
            named = ["{%s} " % f for f in flagged]
        else:
            continue
        for text in _strings(node):
            parts = text.values
            for before, after in zip(parts, parts[1:]):
                if isinstance(before, ast.Constant) and isinstance(after, ast.FormattedValue) \
                        and before.value.endswith(tuple(named)):
                    wrong.append(f"{where}: {before.value[-30:]!r} then a value")
            for a, b, c in zip(parts, parts[1:], parts[2:]):   # {{{f}}} {value}: a field named at run time
                if isinstance(a, ast.Constant) and a.value.endswith("{") and isinstance(b, ast.FormattedValue) \
                        and isinstance(c, ast.Constant) and c.value.startswith("} "):
                    wrong.append(f"{where}: a field named at run time, then a value")
    assert not wrong, sorted(set(wrong))


def _strings(node):
    import ast

    return [n for n in ast.walk(node) if isinstance(n, ast.JoinedStr)]


# ---------------------------------------------------------------- argparse's own refusals


def _refusal(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(list(argv))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and err.startswith("error: ") and "\n  hint: " in err, err
    return err


def test_a_misspelled_command_is_one_line_naming_the_command_meant_not_a_usage_block(capsys):
    err = _refusal(capsys, "trian", "data/train.csv")
    assert "no command 'trian' (did you mean 'train'" in err and "`lancetnic-flow --help`" in err


def test_a_misspelled_flag_names_the_commands_closest_flags_and_its_help(capsys):
    err = _refusal(capsys, "evaluate", "runs/r", "data/test.csv", "--jsn")
    assert "lancetnic-flow evaluate: no option '--jsn' (did you mean '--json'" in err
    assert "`lancetnic-flow evaluate --help`" in err
    assert "no option or argument 'extra'" in _refusal(capsys, "predict", "runs/r", "extra", "--text", "t")


def test_a_value_of_the_wrong_kind_names_the_flag_and_says_what_this_commands_option_takes(capsys):
    err = _refusal(capsys, "train", "x.csv", "--epochs", "x")
    assert "error: --epochs: expected a whole number, got 'x'" in err and "(default 10;" in err
    assert "(default 2)" in _refusal(capsys, "demo", "--epochs", "x")    # demo's --epochs, not train's
    assert "--lr: expected a number, got 'fast'" in _refusal(capsys, "train", "x.csv", "--lr", "fast")


@pytest.mark.parametrize("argv, said", [
    (["--json-log", "trian"], "--json-log took 'trian' as its FILE, so no command follows it (did you mean the "
                              "command 'train'?)"),
    (["--debug", "--json-log", "prdict", "runs/r"], "(did you mean the command 'predict'?)"),
    (["--json-log", "train", "data.csv"], "--json-log took 'train' as its FILE, so no command follows it\n"),
])
def test_a_command_taken_as_the_global_json_logs_file_is_one_error_not_the_help(capsys, argv, said):
    """`lancetnic-flow --json-log trian` took `trian` as the log file and printed the whole help,
    exit 2 without a word why; `--json-log train data.csv` refused a command 'data.csv'."""
    err = _refusal(capsys, *argv)
    assert said in err and "put --json-log after the command" in err


def test_a_log_file_before_the_command_is_still_a_log_file():
    a = build_parser().parse_args(["--json-log", "events.jsonl", "train", "d.csv"])
    assert a.json_log == "events.jsonl" and a.command == "train"
    assert build_parser().parse_args(["--json-log", "train", "train", "d.csv"]).json_log == "train"


def test_tunes_help_says_its_trials_train_on_the_cpu_and_device_and_threads_are_the_final_runs(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Each trial trains on a worker's CPU, one thread per trial: --device and --threads apply to the final " \
           "run only" in out


@pytest.mark.parametrize("typed,meant", [
    ("--overwrite", "'--force'"), ("--replace", None),   # predict's --force, not --format; nothing close
    ("--learning-rate", "'--lr'"), ("--output-dir", "'--out'"), ("--batch_size", "'--batch-size'"),
    ("--epoch", "'--epochs'"), ("--gpu", "'--device'"), ("--modle", "'--model'"), ("--val-split", "'--val-fraction'"),
])
def test_an_unknown_flag_is_offered_what_the_user_meant_not_flags_that_only_share_the_dashes(typed, meant):
    """`predict --overwrite` was offered '--format', '--worker-threads', '--scheduler-wait';
    `train --learning-rate` '--learn-val'."""
    from lancetnic_flow.cli.parser import build_parser, unknown_words

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(getattr(a, "choices", None), dict))
    command = "predict" if typed in ("--overwrite", "--replace") else "train"
    said = unknown_words([typed], sub.choices[command])
    if meant is None:
        assert said == f"no option {typed!r}", said
    else:
        assert said.startswith(f"no option {typed!r} (did you mean {meant}"), said


@pytest.mark.parametrize("argv, dest, want", [
    (["predict", "RUN", "--input", "a.csv", "--input", "b.csv", "c.csv", "--output", "p.csv"], "input",
     ["a.csv", "b.csv", "c.csv"]),
    (["train", "d.csv", "--val", "a.csv", "--val", "b.csv"], "val", ["a.csv", "b.csv"]),
    (["predict", "RUN", "--input", "a.csv", "--keep", "id", "--keep", "source,lang", "--output", "p.csv"], "keep",
     "id,source,lang")])
def test_a_list_option_given_twice_reads_every_value_not_the_last_occurrence_alone(argv, dest, want):
    # predict --input a.csv --input b.csv predicted b.csv alone: a.csv's rows went unread without a word
    from lancetnic_flow.cli.parser import build_parser

    assert getattr(build_parser().parse_args(argv), dest) == want
    assert build_parser().parse_args(["train", "d.csv"]).val is None
