"""Workflow files: a training run written down as YAML.

A workflow's keys are the ``lancetnic-flow train`` options, spelled the same
(``max_features`` or ``max-features`` for ``--max-features``), optionally
grouped under ``data``, ``features``, ``model``, ``training``, ``cluster``
and ``output`` for readability; ``train`` holds the training data. Each key
is looked up in the declarations (:mod:`lancetnic_flow.options`), its value
checked against the declared type and set on the configuration directly, so
a workflow and a command line mean exactly the same thing. ``--set
key=value`` overrides a field, its value read by the declared type as the
command line reads it (``epochs=1``, ``lowercase=false``). An optional
``make_data`` block generates the corpus first when it is missing.

Unknown keys and ill-typed values are refused with the file, the line and the
field named.
"""
from __future__ import annotations

import copy
import fnmatch
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import UserError, close_matches, reworded
from ..storage import check_writable, options_for, protocol, refuse_local_storage_options, url_to_fs
from ..options import BY_DEST, BY_FIELD, NGRAM_FIELDS, SECTIONS, parse_storage_options, text_value, typed_value, unknown_key

_KEY_ALIASES = {"train": "data"}          # the training data: the positional DATA of `train`


@dataclass
class Field:
    key: str
    value: Any
    line: int
    where: str       # "section.key" as written, or "--set key"


@dataclass
class Workflow:
    """A workflow file read: its options by destination (``max_features``,
    ``data``), as typed values, and its make_data block."""

    values: dict[str, Any]
    make_data: dict | None
    lines: dict[str, str] = field(default_factory=dict)   # an option's config field -> "FILE:LINE" setting it
    # The --set make_data.KEY=VALUE items whose value is not the file's: a corpus other than the block's.
    make_data_changed: list[str] = field(default_factory=list)


def _load(path: str) -> yaml.MappingNode:
    try:
        with open(path, encoding="utf-8") as f:
            node = yaml.compose(f)
    except FileNotFoundError:
        raise UserError(f"workflow file {path} does not exist", "check the path; examples are in workflows/") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise UserError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if node is None or not isinstance(node, yaml.MappingNode):
        raise UserError(f"{path}: a workflow is a mapping of options", "see workflows/quickstart.yaml")
    return node


def _fields(path: str, node: yaml.MappingNode) -> tuple[list[Field], dict | None]:
    out: list[Field] = []
    make_data = None
    for k_node, v_node in node.value:
        key = k_node.value
        if key in SECTIONS and isinstance(v_node, yaml.MappingNode):
            for sk, sv in v_node.value:
                _refuse_other_field(key, sk.value, f"{path}:{sk.start_mark.line + 1}")
                out.append(Field(sk.value, _value(path, sk, sv, _dest(sk.value) != "storage_option"),
                                 sk.start_mark.line + 1, f"{key}.{sk.value}"))
        elif key == "make_data":
            make_data = {"value": _value(path, k_node, v_node, False), "line": k_node.start_mark.line + 1}
        else:
            out.append(Field(key, _value(path, k_node, v_node, _dest(key) != "storage_option"),
                             k_node.start_mark.line + 1, key))
    return out, make_data


class _AsWritten(yaml.SafeLoader):
    """YAML 1.1 reads ``010`` as 8, ``1:30`` as 90, ``3.10`` as 3.1 and ``2024-01-05`` as a date: an
    option's number or text is kept as written, for its declared type to read as its flag reads it."""


for _tag in ("int", "float", "timestamp"):
    _AsWritten.add_constructor(f"tag:yaml.org,2002:{_tag}", yaml.SafeLoader.construct_yaml_str)


def _value(path: str, k_node: yaml.Node, v_node: yaml.Node, as_written: bool = True):
    """A field's value; a key with none (``epochs:``) is the user's error, named with its line.
    ``as_written``: numbers and dates stay the text the file has (an option's; not a
    storage option's or make_data's, whose values YAML reads, as ``--storage-option`` does)."""
    if isinstance(v_node, yaml.ScalarNode) and v_node.tag == "tag:yaml.org,2002:null":
        raise UserError(f"{path}:{k_node.start_mark.line + 1}: {k_node.value} has no value",
                        f"give it one ({k_node.value}: ...), or remove the line to keep the default")
    return yaml.load(yaml.serialize(v_node), Loader=_AsWritten if as_written else yaml.SafeLoader)


def _dest(key: str) -> str:
    key = key.replace("-", "_")
    return _KEY_ALIASES.get(key, key)


def _refuse_other_field(section: str, key: str, where: str) -> None:
    """``model: {name: X}`` is ``--name`` (the run folder), not the model, which is ``model.name`` in
    config.json; ``cluster: {threads: N}`` is ``--threads`` (the trainer's), not ``cluster.threads``
    (``--worker-threads``). A key whose section holds a field of its name that another option sets is
    refused, naming both, rather than setting the option its name resolves to."""
    meant, got = BY_FIELD.get(f"{section}.{key}"), BY_DEST.get(_dest(key))
    if meant is None or got is None or meant is got:
        return
    raise UserError(f"{where}: {section}.{key} would set {got.flag} ({got.help.split(' (')[0]}), not {section}.{key}",
                    f"for {section}.{key} write `{meant.dest}: ...` ({meant.flag}); for {got.flag} put `{key}:` "
                    f"at the top level or under {got.field.split('.')[0]}:")


def _declared(dest: str, key: str, where: str):
    o = BY_DEST.get(dest)
    if dest == "resume":     # --resume continues a run with its own options: not a workflow's
        raise UserError(f"{where}: {key} is not a workflow field: a workflow starts a new run",
                        f"continue an interrupted run with `lancetnic-flow train --resume RUN` (its own options), "
                        f"or start from a finished one with init_from: RUN")
    if o is None:
        raise unknown_key(key, where)
    return o


def _override(fields: list[Field], item: str) -> Field | None:
    """``--set key=value`` as a field, its value read by the declared type (None: a make_data key)."""
    if "=" not in item:
        raise UserError(f"--set {item!r}: expected KEY=VALUE", "e.g. --set epochs=1 or --set training.lr=0.02")
    key, raw = item.split("=", 1)
    if key.split(".", 1)[0] in SECTIONS and "." in key:
        _refuse_other_field(*key.split(".", 1), "--set")
        key = key.split(".", 1)[1]
    if _dest(key).startswith("storage_option."):
        # A nested storage option merges into the file's storage_option mapping.
        old = next((f for f in fields if _dest(f.key) == "storage_option"), None)
        # The file's may be a mapping or KEY=VALUE items, as --storage-option repeats: both merge.
        merged = {} if old is None else copy.deepcopy(parse_storage_options(
            old.value if isinstance(old.value, (dict, list)) else [str(old.value)], old.where))
        node = merged
        *parents, leaf = key.split(".")[1:]
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(raw) if raw else ""
        return Field("storage_option", merged, 0, "--set storage_option")
    o = _declared(_dest(key), key, "--set")
    try:
        value = text_value(o, raw)
    except ValueError as exc:
        raise UserError(f"--set {key}: expected {exc}, got {raw!r}") from None
    return Field(key, value, 0, f"--set {key}")


def _set_again(before: Any, f: Field) -> Field:
    """A key ``--set`` twice: a repeatable option's values add up, as its flag's do
    (``--set text=title --set text=body`` is ``--text title --text body``, not body
    alone); another's second value is refused, as which one was meant is not known."""
    if BY_DEST[_dest(f.key)].kind in ("append", "list", "positional"):
        return Field(f.key, [*before, *f.value], f.line, f.where)
    if before != f.value:
        raise UserError(f"--set {f.key} given twice ({before!r}, {f.value!r})", "keep one of them")
    return f


def _refuse_twice(path: str, fields: list[Field]) -> None:
    """One option set twice in a file (a key repeated, a section's and the top
    level's, ``max_features`` and ``max-features``) is refused: which one was
    meant is not the file's to guess. ``--set`` overrides the file."""
    seen: dict[str, Field] = {}
    for f in fields:
        first = seen.setdefault(_dest(f.key), f)
        if first is not f:
            raise UserError(f"{path}:{f.line}: {f.where} sets what line {first.line} ({first.where}) already sets",
                            "keep one of them (`--set KEY=VALUE` overrides the file's value)")


def read_workflow(path: str, overrides: list[str] | None = None) -> Workflow:
    """A workflow file and its ``--set`` overrides, each key a declared option and each value of its type."""
    fields, make_data = _fields(path, _load(path))
    _refuse_twice(path, fields)
    typed: dict[str, Any] = {}
    changed: list[str] = []
    for item in overrides or []:
        if item.split("=", 1)[0].startswith("make_data."):
            key, raw = item.split("=", 1)
            make_data = make_data or {"value": {}, "line": 0}
            if isinstance(make_data["value"], dict):   # else the block is refused as it is (make_data_spec)
                name, value = key.split(".", 1)[1], yaml.safe_load(raw)
                if make_data["value"].get(name, _UNSET) != value:
                    changed.append(item)
                make_data["value"] = {**make_data["value"], name: value}
            continue
        f = _override(fields, item)
        if _dest(f.key) in typed and f.key != "storage_option":   # a storage option's keys merge already
            f = _set_again(typed[_dest(f.key)], f)
        fields = [old for old in fields if _dest(old.key) != _dest(f.key)] + [f]
        typed[_dest(f.key)] = f.value
    values: dict[str, Any] = {}
    lines: dict[str, str] = {}
    for f in fields:
        dest = _dest(f.key)
        where = f"{path}:{f.line}" if f.line else "--set"
        o = _declared(dest, f.where, where)
        # --ngram-range has no field of its own: it sets the pair an error about either names.
        for set_field in ((o.field,) if o.field else NGRAM_FIELDS if dest == "ngram_range" else ()) if f.line else ():
            lines[set_field] = where
        if dest in typed:
            values[dest] = typed[dest]
            continue
        try:
            values[dest] = typed_value(o, f.value)
        except ValueError as exc:
            raise UserError(f"{where}: {f.where}: expected {exc}, got {f.value!r}") from None
    if not values.get("data"):
        raise UserError(f"{path}: no training data", "add `train: path/or/url` (a list for several)")
    return Workflow(values, make_data, lines, changed)


def workflow_config(wf: Workflow):
    """The TrainConfig a workflow means (the same as its `train` command line), checked."""
    from ..config import config_from_options
    from ..options import command_line_defaults

    # The dashboard link is shown by the console views, as for `train`; the command line's own defaults too.
    try:
        # A value refused as it is read (ngrams: 0, memory_budget: 8XB) is named where it is written too.
        cfg = config_from_options({**command_line_defaults(), **wf.values, "dashboard": True}, given=wf.values)
        cfg.validate()   # checked now; train() resolves the options as given (--model auto decides after the fit)
    except UserError as exc:
        # A value the file gives that its type allows but the option refuses is named where it is written.
        where = wf.lines.get(exc.field or "")
        if where is None:
            raise
        raise reworded(exc, lambda message, hint: (f"{where}: {message}", hint)) from None
    return cfg


# make_data's fields and their kinds (data/synth.write_corpus's arguments a file may give).
MAKE_DATA_FIELDS = {"rows": int, "classes": int, "seed": int, "format": str, "chunk_rows": int, "multilabel": bool,
                    "storage_options": dict, "delimiter": str}


def _check_make_data(spec: dict, where: str) -> None:
    """Refuse a make_data field that does not exist or holds the wrong kind of value."""
    for key, value in spec.items():
        kind = MAKE_DATA_FIELDS.get(key)
        if kind is None:
            raise UserError(f"{where}: make_data has no field {key!r}" + close_matches(key, list(MAKE_DATA_FIELDS)),
                            "fields: out, " + ", ".join(MAKE_DATA_FIELDS))
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            shown = {int: "a whole number", str: "text", bool: "true or false", dict: "a mapping"}[kind]
            raise UserError(f"{where}: make_data.{key}: expected {shown}, got {value!r}")
        least = {"rows": 1, "classes": 2, "chunk_rows": 1}.get(key)   # as `make-data --rows/--classes` take them
        if kind is int and least is not None and value < least:
            raise UserError(f"{where}: make_data.{key}: expected at least {least}, got {value}")
    if "rows" not in spec:
        raise UserError(f"{where}: make_data needs `rows: N`", "e.g. make_data: {out: data/train.csv, rows: 5000}")


def make_data_spec(path: str, make_data: dict) -> tuple[str, dict]:
    """A make_data block, checked whether or not its corpus exists yet (a field misspelt
    in it is refused the same on every run): its ``out`` and write_corpus's arguments."""
    where = f"{path}:{make_data['line']}"
    example = "e.g. make_data: {out: data/train.csv, rows: 5000}"
    if not isinstance(make_data["value"], dict):
        raise UserError(f"{where}: make_data is a mapping of fields, got {make_data['value']!r}", example)
    spec = dict(make_data["value"])
    out = spec.pop("out", None)
    if not out:
        raise UserError(f"{where}: make_data needs `out: PATH`", example)
    if not isinstance(out, str):
        raise UserError(f"{where}: make_data.out: expected a path, got {out!r}", "quote it: out: 'data/train.csv'")
    _check_make_data(spec, where)
    return out, spec


def prepare_workflow(path: str, overrides: list[str] | None = None, made=None):
    """The checked TrainConfig of a workflow, its data generated first if asked and missing.
    ``made(out, info)``: told of a corpus written (write_corpus's summary), as make-data tells."""
    wf = read_workflow(path, overrides)
    cfg = workflow_config(wf)   # a bad option stops the run before a corpus is written
    if wf.make_data is not None:
        out, spec = make_data_spec(path, wf.make_data)
        try:
            refuse_local_storage_options(spec.get("storage_options"), {"make_data.out": out},
                                         "make_data.storage_options")
        except UserError as e:
            raise UserError(f"{path}: {e.message}", e.hint) from None
        read = _read_by_run(out, [*cfg.data.train, *cfg.data.val])
        exists = read and _corpus_exists(out, spec.get("storage_options"))
        # Where the corpus goes is no other corpus: an `out` naming a file that exists is that file.
        changed = [item for item in wf.make_data_changed if not exists or not item.startswith("make_data.out=")]
        if changed and (exists or not read):
            raise _corpus_not_written(out, changed, exists)
        if read and not exists:
            from ..data.synth import write_corpus

            # A place that cannot be written is the user's to fix: exit 2 naming it, not an internal error.
            check_writable(out, options_for(out, spec.get("storage_options")), f"{path}: make_data.out",
                           folder=False)
            if protocol(out) == "file":
                os.makedirs(os.path.dirname(os.path.expanduser(out)) or ".", exist_ok=True)
            info = write_corpus(out, **spec)
            if made is not None:
                made(out, info)
    return cfg


def _corpus_not_written(out: str, changed: list[str], exists: bool) -> UserError:
    """``--set make_data.KEY=VALUE`` where make_data writes nothing: the run would train on
    another corpus than the one asked for, not a word said."""
    items = " ".join(f"--set {item}" for item in changed)
    if exists:
        return UserError(f"{items} asks for another corpus than the one {out} holds, and make_data writes {out} "
                         "only where it is missing: the run would train on the file as it is",
                         f"remove {out} to generate it again with {items}, or drop {items}")
    return UserError(f"{items} changes the corpus make_data writes to {out}, and the run does not read {out} "
                     "(train and val name other data): no corpus would be written",
                     f"drop {items}, or train on {out}")


_UNSET = object()


def _comparable(url: str) -> str:
    return url if "://" in url else os.path.normpath(os.path.abspath(os.path.expanduser(url)))


def _read_by_run(out: str, data: list[str]) -> bool:
    """Whether the run reads make_data's ``out``: named, matched by a glob, or inside a folder it
    reads. A ``--set train=...`` that points the run at other data leaves the corpus unwritten,
    rather than generating rows nothing reads."""
    mine = _comparable(out)
    for url in map(_comparable, data):
        if mine == url or fnmatch.fnmatchcase(mine, url) or mine.startswith(url.rstrip("/") + "/"):
            return True
    return False


def _corpus_exists(out: str, storage_options: dict | None) -> bool:
    """Whether make_data's ``out`` is there, on its own filesystem: a URL (``s3://``) asked
    of the local disk was never there, so the corpus was written again on every run."""
    fs, where = url_to_fs(out, **options_for(out, storage_options))
    return fs.exists(where)
