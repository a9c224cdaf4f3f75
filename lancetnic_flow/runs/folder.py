"""The run folder: everything a trained model needs, and nothing executable.

``DIR/<name>/`` holds ``config.json`` (resolved, secrets masked),
``features.json`` (vocabulary, idf, labels, scalers), ``model.json``
(architecture name and sizes), ``model.safetensors`` (weights),
``metrics.json`` and ``history.csv``: JSON and safetensors only, so loading
it (:mod:`.loading`) never unpickles code.

``model.json`` is written last, after every other file: it is what makes a
folder a finished run. A run stopped while training or saving (Ctrl-C, a
kill, a full disk) has ``config.json`` and no ``model.json``; loading,
``predict`` and ``evaluate`` refuse it and say how to continue it. A save
into a folder that already holds a run removes its ``model.json`` first, and
every file goes in under a temporary name and is renamed, so a kill at any
moment leaves either the old run, the new one, or an unfinished one.
``model.json`` records the size and SHA-256 of the weights it was saved with
(``"weights"``): weights from another save beside it are refused.

The folder may be any fsspec URL (``s3://bucket/runs/NAME``): ``train``
hands back a :class:`RunFolder`, which carries the storage options that
open it, so the files written into it and a ``Predictor(result.run)``
reach it without being given them again.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
import re
import time
from typing import Any

from ..dataflow.entry_lease import LEASE
from ..dataflow.entry_lock import LOCK, try_lock_entry
from ..errors import UserError
from ..features.vectorize import FittedFeatures
from ..storage import check_writable, join, open_atomic, options_for, read_bytes, url_to_fs, write_bytes, writing

# 2: model.safetensors may hold a matrix as its entries (stored_weights.py), which
# a reader of format 1 would take for another network's weights.
FORMAT_VERSION = 2
READS_FORMATS = (1, 2)   # format 1's dense weights read as they are
CHECKPOINT_FILE = "checkpoint.safetensors"   # written by training while the run is unfinished
WEIGHTS_FILE = "model.safetensors"
FEATURES_FILE = "features.json"
# What model.json and config.json say about who wrote them; not configuration.
STAMP_KEYS = ("format_version", "written_by")
# The folder's writer lock (run_lock.py): its trainer's, never one of the run's files.
LOCK_FILES = (LOCK, LEASE)


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
    carrying ``storage_options`` for the steps that write into it. Its writer lock
    is let go at once: a trainer claims its folder with :func:`claim_run_dir`."""
    run, lock = claim_run_dir(out, name, storage_options)
    if lock is not None:
        lock.release()
    return run


def claim_run_dir(out: str, name: str | None, storage_options: dict | None = None) -> tuple[RunFolder, Any]:
    """:func:`new_run_dir`'s folder, and its writer lock (run_lock.py) held from before
    its config.json is created: no ``train --resume`` gets in while it is trained. The
    lock is None where the folder's store has none; ``release()`` it once the run is saved."""
    so = storage_options or {}
    fs, base = url_to_fs(out, **so)
    name = name or time.strftime("%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name in (".", ".."):
        raise UserError(f"run name {name!r} is not a plain folder name", "use letters, digits, '.', '-' and '_'")
    candidate, n = name, 1
    with writing(out):
        # A folder with config.json is a run, finished or waiting for --resume: never reuse it.
        while (lock := _claimed(fs, f"{base.rstrip('/')}/{candidate}", out, candidate, so)) is False:
            n += 1
            candidate = f"{name}-{n}"
    path = f"{base.rstrip('/')}/{candidate}"
    return RunFolder(fs.unstrip_protocol(path) if "://" in out else path, so), lock


def renamed_run_warning(run: str, name: str | None) -> str | None:
    """What a run says when the ``name`` given was an earlier run's, so it trains into
    ``name-2`` (or on): a ``predict`` or ``evaluate`` of ``OUT/name``, as typed, would
    read the earlier run's model. None where the run has the name given, or none was."""
    got = posixpath.basename(str(run).rstrip("/"))
    if not name or got == name:
        return None
    return (f"{{output.name}} {name}: that folder holds an earlier run, so this one is {got} ({run}); "
            f"predict and evaluate it there, not with {name}, or give a new {{output.name}}")


def _claimed(fs: Any, path: str, out: str, name: str, so: dict) -> Any:
    """False unless ``path`` is now this run's: created, or an empty folder taken,
    with an empty config.json (write_config fills it) created only if no
    other run has one. Created exclusively where the filesystem can (a local
    disk): two runs started in the same second, with the same default name,
    took one folder and wrote over each other's files. Elsewhere, checked
    first (an object store has no exclusive create). Claimed: the folder's
    writer lock, taken first (None where it has none)."""
    if any(fs.exists(f"{path}/{f}") for f in ("model.safetensors", "config.json")):
        return False
    fs.makedirs(path, exist_ok=True)
    lock = try_lock_entry(join(out, name), so)
    if lock is not None and not lock.held:   # another trainer is claiming it this moment
        return False
    if "file" not in fs.protocol:
        return lock
    try:
        with open(f"{path}/config.json", "xb"):   # a local path: url_to_fs stripped its protocol
            return lock
    except FileExistsError:   # another run claimed it since the check above
        if lock is not None:
            lock.release()
        return False


def check_output_places(cfg: Any, resume: str | None = None) -> None:
    """The places a training run writes, ``cfg.output``'s --out (or the run
    ``resume`` continues) and --cache, checked before any work by writing and
    removing a probe file: a place that cannot be written is a UserError."""
    out, data = cfg.output, cfg.data
    run_dir = resume or out.out
    check_writable(run_dir, options_for(run_dir, data.storage_options, like=data.train[0]),
                   "--resume" if resume else "{output.out}")
    if out.no_cache:   # nothing is written there
        return
    cache = out.cache or join(out.out, ".cache")
    check_writable(cache, options_for(cache, data.storage_options, like=data.train[0]), "{output.cache}")


def written_by() -> str:
    """``lancetnic_flow 0.1.0``: what a file says wrote it, named when another version cannot read it."""
    from .. import __version__

    return f"lancetnic_flow {__version__}"


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def write_json(url: str, obj: Any, storage_options: dict | None = None) -> None:
    write_bytes(url, json.dumps(obj, indent=2, default=_json_default).encode(), storage_options or {})


def write_config(run: str, config: dict, storage_options: dict | None = None) -> None:
    """``config.json``: the configuration, stamped with the run format and the version that wrote it."""
    write_json(join(run, "config.json"), {**config, "format_version": FORMAT_VERSION, "written_by": written_by()},
               folder_options(run, storage_options))


class _Digesting:
    """A binary file that counts and hashes what goes through it: the weights are
    hashed as they stream out, not read back (a second pass over S3)."""

    def __init__(self, f: Any):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def write(self, data: Any) -> int:
        self.sha.update(data)
        self.size += memoryview(data).nbytes
        return self.f.write(data)

    def record(self) -> dict:
        """What model.json keeps of the weights it was saved with."""
        return {"file": WEIGHTS_FILE, "bytes": self.size, "sha256": self.sha.hexdigest()}


def weights_record(run: str, storage_options: dict | None = None, name: str = WEIGHTS_FILE) -> dict:
    """The size and SHA-256 of the weights (or the file ``name``) in ``run``, as ``model.json`` records them."""
    fs, path = url_to_fs(join(run, name), **folder_options(run, storage_options))
    sha, size = hashlib.sha256(), 0
    with fs.open(path, "rb") as f:
        while block := f.read(2**24):
            sha.update(block)
            size += len(block)
    return {"file": name, "bytes": size, "sha256": sha.hexdigest()}


def _features_record(run: str, storage_options: dict) -> dict:
    """features.json's size and SHA-256: its labels' order and idf must be the ones the weights
    learned with, and another run's of the same sizes fits the network as well ({} when none)."""
    try:
        return {"features": weights_record(run, storage_options, FEATURES_FILE)}
    except FileNotFoundError:
        return {}


def unfinish(run: str, storage_options: dict | None = None) -> None:
    """Remove ``run``'s ``model.json`` if it has one, before anything else is written
    into the folder: until the new one is written, it is an unfinished run."""
    fs, path = url_to_fs(join(run, "model.json"), **folder_options(run, storage_options))
    with writing(run):
        try:
            fs.rm(path)
        except FileNotFoundError:
            pass


def save_run(run: str, *, config: dict, features: FittedFeatures, model: Any, model_meta: dict,
             metrics: dict | None, history: list[dict], storage_options: dict | None = None,
             finish: bool = True) -> dict:
    """Write a run folder's files, ``model.json`` last (it marks the run finished).
    ``metrics=None, finish=False``: all but metrics.json and model.json, for the
    caller to write metrics.json and then call :func:`finish_run` with the weights'
    record this returns (their size and SHA-256)."""
    from .stored_weights import encode

    so = folder_options(run, storage_options)
    # A folder saved into again (`train --resume` of a run killed after its model.json, before its
    # checkpoint was removed) must not keep the old model.json beside new weights while it is written.
    unfinish(run, so)
    write_config(run, config, so)
    write_bytes(join(run, FEATURES_FILE), features.to_json().encode(), so)
    weights = write_weights(run, encode(model.state_dict()), so, network_digest(model_meta))
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
        finish_run(run, model_meta, so, weights)
    return weights


# What of model.json the weights were trained as: the network, its sizes, its task and thresholds.
NETWORK_KEYS = ("model", "net", "kwargs", "task", "thresholds")
NETWORK_DIGEST = "lancetnic_flow_network"   # the weights file's metadata key that holds its digest


def network_digest(model_meta: dict) -> str:
    """The SHA-256 of ``model_meta``'s network as model.json writes and reads it back. The
    weights file carries it: model.json's sizes edited (a pooling, a task) build a network the
    weights still fit, and predict otherwise than they were trained to."""
    doc = json.loads(json.dumps({k: model_meta.get(k) for k in NETWORK_KEYS}, default=_json_default))
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def write_weights(run: str, tensors: dict, storage_options: dict | None = None, network: str | None = None) -> dict:
    """Write ``tensors`` (as :func:`.stored_weights.encode` gives them) as ``run``'s
    weights file, renamed into place when whole; returns the record model.json keeps.
    ``network``: :func:`network_digest` of the model.json they are saved with."""
    from .tensor_file import write_safetensors

    with open_atomic(join(run, WEIGHTS_FILE), folder_options(run, storage_options)) as f:
        digest = _Digesting(f)
        write_safetensors(digest, tensors, {NETWORK_DIGEST: network} if network else None)
    return digest.record()


def finish_run(run: str, model_meta: dict, storage_options: dict | None = None, weights: dict | None = None) -> None:
    """Write ``model.json``: the mark of a finished run, so it goes after every other file.
    ``weights``: :func:`save_run`'s record of the weights; without it they are read to make one."""
    so = folder_options(run, storage_options)
    weights = weights or weights_record(run, so)
    write_json(join(run, "model.json"), {**model_meta, "format_version": FORMAT_VERSION, "written_by": written_by(),
                                         "weights": weights, **_features_record(run, so)}, so)


def copy_run(src: str, dst: str, src_options: dict | None = None, dst_options: dict | None = None) -> None:
    """Copy the files of the run folder ``src`` into ``dst`` as :func:`save_run` writes them:
    ``dst``'s own ``model.json`` removed first, each file renamed into place, ``model.json`` last."""
    sso, dso = folder_options(src, src_options), folder_options(dst, dst_options)
    fs, path = url_to_fs(src, **sso)
    # The source's writer lock is its trainer's, not the run's: the copy has its own.
    names = [b for n in fs.ls(path, detail=False) if fs.isfile(n)
             and (b := n.rstrip("/").rsplit("/", 1)[-1]) not in LOCK_FILES]
    unfinish(dst, dso)
    for name in sorted(names, key=lambda n: n == "model.json"):
        write_bytes(join(dst, name), read_bytes(join(src, name), sso), dso)
