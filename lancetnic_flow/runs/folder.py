"""The run folder: everything a trained model needs, and nothing executable.

``DIR/<name>/`` holds ``config.json`` (resolved, secrets masked),
``features.json`` (vocabulary, idf, labels, scalers), ``model.json``
(architecture name and sizes), ``model.safetensors`` (weights),
``metrics.json`` and ``history.csv``. Loading reads JSON and safetensors
only: no pickle, so a planted file cannot run code.

``model.json`` is written last, after every other file: it is what makes a
folder a finished run. A run stopped while training or saving (Ctrl-C, a
kill, a full disk) has ``config.json`` and no ``model.json``; loading,
``predict`` and ``evaluate`` refuse it and say how to continue it.

The folder may be any fsspec URL (``s3://bucket/runs/NAME``): ``train``
hands back a :class:`RunFolder`, which carries the storage options that
open it, so the files written into it and a ``Predictor(result.run)``
reach it without being given them again.
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import fsspec

from ..errors import UserError
from ..features.vectorize import FittedFeatures
from ..registry import task_kind
from ..storage import check_writable, join, open_atomic, options_for, read_bytes, write_bytes, writing

FORMAT_VERSION = 1
CHECKPOINT_FILE = "checkpoint.safetensors"   # written by training while the run is unfinished


class RunFolder(str):
    """A run folder's URL that also carries the fsspec storage options that open it.

    It prints, compares and serialises to JSON as the plain URL, so the
    options (which may hold credentials) never show."""

    storage_options: dict[str, Any]

    def __new__(cls, url: str, storage_options: dict | None = None) -> "RunFolder":
        self = super().__new__(cls, url)
        self.storage_options = dict(storage_options or {})
        return self

    def __reduce__(self) -> tuple:
        # Dask ships a run to its workers by pickling it: the options go along.
        return (RunFolder, (str(self), self.storage_options))


def folder_options(url: str, given: dict | None = None) -> dict:
    """Storage options for the folder at ``url``: those given, else those a :class:`RunFolder` carries."""
    return dict(given) if given else dict(getattr(url, "storage_options", None) or {})


def new_run_dir(out: str, name: str | None, storage_options: dict | None = None) -> RunFolder:
    """Create ``out/name`` (a fresh timestamped name by default) and return its URL,
    carrying ``storage_options`` for the steps that write into it."""
    so = storage_options or {}
    fs, base = fsspec.core.url_to_fs(out, **so)
    name = name or time.strftime("%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name in (".", ".."):
        raise UserError(f"run name {name!r} is not a plain folder name", "use letters, digits, '.', '-' and '_'")
    candidate, n = name, 1
    # A folder with config.json is a run, finished or waiting for --resume: never reuse it.
    while any(fs.exists(f"{base.rstrip('/')}/{candidate}/{f}") for f in ("model.safetensors", "config.json")):
        n += 1
        candidate = f"{name}-{n}"
    path = f"{base.rstrip('/')}/{candidate}"
    with writing(out):
        fs.makedirs(path, exist_ok=True)
    return RunFolder(fs.unstrip_protocol(path) if "://" in out else path, so)


def check_output_places(cfg: Any, resume: str | None = None) -> None:
    """The places a training run writes, ``cfg.output``'s --out (or the run
    ``resume`` continues) and --cache, checked before any work by writing and
    removing a probe file: a place that cannot be written is a UserError."""
    out, data = cfg.output, cfg.data
    run_dir = resume or out.out
    check_writable(run_dir, options_for(run_dir, data.storage_options, like=data.train[0]),
                   "--resume" if resume else "--out")
    cache = out.cache or join(out.out, ".cache")
    check_writable(cache, options_for(cache, data.storage_options, like=data.train[0]), "--cache")


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def write_json(url: str, obj: Any, storage_options: dict | None = None) -> None:
    write_bytes(url, json.dumps(obj, indent=2, default=_json_default).encode(), storage_options or {})


def save_run(run: str, *, config: dict, features: FittedFeatures, model: Any, model_meta: dict,
             metrics: dict | None, history: list[dict], storage_options: dict | None = None,
             finish: bool = True) -> None:
    """Write a run folder's files, ``model.json`` last (it marks the run finished).
    ``metrics=None, finish=False``: all but metrics.json and model.json, for the
    caller to write metrics.json and then call :func:`finish_run`."""
    from .tensor_file import write_safetensors

    so = folder_options(run, storage_options)
    write_json(join(run, "config.json"), config, so)
    write_bytes(join(run, "features.json"), features.to_json().encode(), so)
    with open_atomic(join(run, "model.safetensors"), so) as f:
        write_safetensors(f, model.state_dict())
    if metrics is not None:
        write_json(join(run, "metrics.json"), metrics, so)
    if history:
        buf = io.StringIO()
        keys = list(dict.fromkeys(k for h in history for k in h))
        w = csv.DictWriter(buf, fieldnames=keys)
        w.writeheader()
        w.writerows(history)
        write_bytes(join(run, "history.csv"), buf.getvalue().encode(), so)
    if finish:
        finish_run(run, model_meta, so)


def finish_run(run: str, model_meta: dict, storage_options: dict | None = None) -> None:
    """Write ``model.json``: the mark of a finished run, so it goes after every other file."""
    write_json(join(run, "model.json"), {**model_meta, "format_version": FORMAT_VERSION},
               folder_options(run, storage_options))


@dataclass
class LoadedRun:
    url: str
    config: dict
    features: FittedFeatures
    model: Any
    meta: dict
    metrics: dict

    def task(self):
        """The :class:`~lancetnic_flow.models.tasks.Task` this run was trained for, rebuilt from its JSON files."""
        from ..models.tasks import Task, label_cuts

        kw, tc = self.meta["kwargs"], self.config.get("training", {})
        return Task(task_kind(self.meta), classes=kw.get("classes", 0),
                    class_loss=tc.get("class_loss", "cross_entropy"), value_loss=tc.get("value_loss", "mse"),
                    loss_weights=tuple(tc.get("loss_weights", (1.0, 1.0))),
                    target=tuple(self.features.target or (0.0, 1.0)),
                    label_cuts=label_cuts(self.meta.get("thresholds")))


def _not_a_run(run: str, missing: str) -> UserError:
    return UserError(f"{run} is not a lancetnic_flow run folder ({missing} missing)",
                     "pass the folder printed at the end of `lancetnic-flow train`, e.g. runs/20261130-101500")


def _unfinished(run: str, storage_options: dict) -> UserError:
    """A folder with config.json and no model.json: a run stopped before it was saved."""
    fs, path = fsspec.core.url_to_fs(join(run, CHECKPOINT_FILE), **storage_options)
    if fs.exists(path):
        return UserError(f"{run} is an unfinished run: it stopped before its model was saved (no model.json)",
                         f"continue it from its checkpoint with `lancetnic-flow train --resume {run}`")
    return UserError(f"{run} is an unfinished run: it stopped before its model was saved (no model.json) "
                     "and has no checkpoint to continue from",
                     "train it again with the same command (what was fitted and featurised is cached)")


def read_run_json(run: str, storage_options: dict | None = None) -> tuple[dict, dict]:
    """A run folder's ``model.json`` and ``config.json``, checked, without
    torch: commands call it first, so a wrong folder is exit 2 at once."""
    so = folder_options(run, storage_options)
    try:
        config = json.loads(read_bytes(join(run, "config.json"), so))
    except FileNotFoundError:
        raise _not_a_run(run, "model.json or config.json") from None
    try:
        meta = json.loads(read_bytes(join(run, "model.json"), so))
    except FileNotFoundError:
        raise _unfinished(run, so) from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{run} was written by an incompatible version (format {meta.get('format_version')})")
    return meta, config


def weights_stamp(run: str, storage_options: dict | None = None) -> str:
    """What tells one saved ``model.safetensors`` in ``run`` from the next one written
    there (size and modification time, or the store's ETag): the key under which a
    worker may keep the loaded run between tasks."""
    so = folder_options(run, storage_options)
    fs, path = fsspec.core.url_to_fs(join(run, "model.safetensors"), **so)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return ""
    when = info.get("mtime") or info.get("ETag") or info.get("LastModified") or info.get("created") or ""
    return f"{info.get('size')}:{when}"


def load_run(run: str, storage_options: dict | None = None, device: str = "cpu") -> LoadedRun:
    """Load a run folder: JSON and safetensors only. ``storage_options``
    default to those ``run`` carries when it is a :class:`RunFolder`."""
    so = folder_options(run, storage_options)
    meta, config = read_run_json(run, so)
    try:
        weights = read_bytes(join(run, "model.safetensors"), so)
    except FileNotFoundError:
        raise _not_a_run(run, "model.safetensors") from None
    import safetensors.torch

    from ..models import build_model

    try:
        state = safetensors.torch.load(weights)
    except Exception as exc:
        raise UserError(f"{run}/model.safetensors is not a valid safetensors file ({exc})",
                        "weights are only loaded from safetensors; retrain or restore the file") from None
    features = FittedFeatures.from_json(read_bytes(join(run, "features.json"), so).decode())
    model = build_model(meta.get("net", "ScalpelNet"), **meta["kwargs"])
    model.load_state_dict(state)
    model.to(device).eval()
    try:
        metrics = json.loads(read_bytes(join(run, "metrics.json"), so))
    except FileNotFoundError:
        metrics = {}
    return LoadedRun(run, config, features, model, meta, metrics)
