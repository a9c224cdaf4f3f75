"""Workflow files: a training run written down as YAML.

A workflow's keys are the ``lancetnic-flow train`` options, spelled the same
(``max_features`` or ``max-features`` for ``--max-features``), optionally
grouped under ``data``, ``features``, ``model``, ``training``, ``cluster``
and ``output`` for readability; ``train`` holds the training data. The file
is turned into the equivalent command line and parsed by the same parser, so
a workflow and a command mean exactly the same thing. An optional
``make_data`` block generates the corpus first when it is missing.

Unknown keys and ill-typed values are refused with the file, the line and the
field named.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import UserError, close_matches
from .parser import Option, train_options

SECTIONS = ("data", "features", "model", "training", "cluster", "output")
_FLAG_ALIASES = {"train": "data"}          # the positional DATA of `train`


@dataclass
class Field:
    key: str
    value: Any
    line: int
    where: str       # "section.key" as written


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
                out.append(Field(sk.value, yaml.safe_load(yaml.serialize(sv)), sk.start_mark.line + 1,
                                 f"{key}.{sk.value}"))
        elif key == "make_data":
            make_data = {"value": yaml.safe_load(yaml.serialize(v_node)), "line": k_node.start_mark.line + 1}
        else:
            out.append(Field(key, yaml.safe_load(yaml.serialize(v_node)), k_node.start_mark.line + 1, key))
    return out, make_data


def _flatten(prefix: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _flatten(f"{prefix}.{k}" if prefix else str(k), v)]
    return [f"{prefix}={value}"]


def _check_type(f: Field, option: Option, path: str, value: Any) -> None:
    kind = option.type
    if kind in (int, float):
        try:
            ok = not isinstance(value, bool) and kind(value) == kind(value)
            if kind is int and isinstance(value, float) and not value.is_integer():
                ok = False
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise UserError(f"{path}:{f.line}: {f.where}: expected {'an integer' if kind is int else 'a number'}, "
                            f"got {value!r}")


def to_argv(path: str, overrides: list[str] | None = None) -> tuple[list[str], dict | None]:
    """The ``train`` command line a workflow file means, and its make_data block."""
    fields, make_data = _fields(path, _load(path))
    for item in overrides or []:
        if "=" not in item:
            raise UserError(f"--set {item!r}: expected KEY=VALUE", "e.g. --set epochs=1 or --set training.lr=0.02")
        key, raw = item.split("=", 1)
        if key.startswith("make_data."):
            make_data = make_data or {"value": {}, "line": 0}
            make_data["value"] = {**(make_data["value"] or {}), key.split(".", 1)[1]: yaml.safe_load(raw)}
            continue
        key = key.split(".", 1)[1] if key.split(".", 1)[0] in SECTIONS and "." in key else key
        value = yaml.safe_load(raw) if raw else ""
        if key.replace("-", "_").startswith("storage_option."):
            # A nested storage option merges into the file's storage_option mapping.
            old = next((f for f in fields if f.key.replace("-", "_") == "storage_option"), None)
            merged = dict(old.value) if old is not None and isinstance(old.value, dict) else {}
            node = merged
            *parents, leaf = key.split(".")[1:]
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
            key, value = "storage_option", merged
        fields = [f for f in fields if f.key.replace("-", "_") != key.replace("-", "_")]
        fields.append(Field(key, value, 0, f"--set {key}"))
    options = train_options()
    argv: list[str] = ["train"]
    data: list[str] = []
    for f in fields:
        dest = _FLAG_ALIASES.get(f.key, f.key).replace("-", "_")
        where = f"{path}:{f.line}" if f.line else "--set"
        if dest == "data":
            data = [str(v) for v in (f.value if isinstance(f.value, list) else [f.value])]
            continue
        option = options.get(dest)
        if option is None:
            raise UserError(f"{where}: unknown field {f.where!r}" + close_matches(dest, sorted(options)),
                            "fields are `lancetnic-flow train` options; see `lancetnic-flow train --help`")
        flag = option.flag
        values = f.value if isinstance(f.value, list) else [f.value]
        if option.kind in ("flag", "bool"):
            if not isinstance(f.value, bool):
                raise UserError(f"{where}: {f.where}: expected true or false, got {f.value!r}")
            if f.value or option.kind == "bool":
                argv.append(flag if f.value else "--no-" + flag[2:])
            continue
        if dest == "storage_option" and isinstance(f.value, dict):
            for pair in _flatten("", f.value):
                argv += [flag, pair]
            continue
        if dest == "numeric" and isinstance(f.value, list):
            values = [",".join(map(str, f.value))]
        if dest == "loss_weights" and isinstance(f.value, list):
            values = [",".join(map(str, f.value))]
        for v in values:
            _check_type(f, option, path, v)
        if option.kind == "list":
            argv += [flag, *map(str, values)]
        elif option.kind == "append":
            for v in values:
                argv += [flag, str(v)]
        else:
            if len(values) != 1:
                raise UserError(f"{where}: {f.where}: expected one value, got a list")
            argv += [flag, str(values[0])]
    if not data:
        raise UserError(f"{path}: no training data", "add `train: path/or/url` (a list for several)")
    return argv + ["--"] + data, make_data


def prepare_workflow(path: str, overrides: list[str] | None = None) -> list[str]:
    """The ``train`` command line of a workflow, its data generated first if asked and missing."""
    argv, make_data = to_argv(path, overrides)
    if make_data is not None:
        spec = dict(make_data["value"] or {})
        out = spec.pop("out", None)
        if not out:
            raise UserError(f"{path}:{make_data['line']}: make_data needs `out: PATH`")
        if not os.path.exists(out):
            from ..data.synth import write_corpus

            os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
            try:
                write_corpus(out, **spec)
            except TypeError as exc:
                raise UserError(f"{path}:{make_data['line']}: make_data: {exc}",
                                "fields: out, rows, classes, seed") from None
    return argv
