"""A run folder read back (:mod:`.folder` writes it): every file checked,
JSON and safetensors only, so a planted file cannot run code.

:func:`load_run` is the one loading path (``predict``, ``evaluate``,
``serve``, ``export``, :class:`~.predict.Predictor`, the estimators): a
damaged file (truncated, not JSON or not safetensors, a field missing,
weights that do not fit ``model.json``'s network, features that do not fit
its sizes, a format newer than this version reads) is a :class:`UserError`
naming the file and what to do. A damaged ``metrics.json`` is only warned
about: prediction does not read it.

A LinearSVM run on the CPU is loaded as NumPy arrays (``safetensors.numpy``,
:mod:`.linear_scores`), without torch, through the same checks, which say
the same words; every other network is built in torch.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from typing import Any

from ..data.sources import hint_for_missing
from ..errors import UserError
from ..features.vectorize import VERSION as FEATURES_VERSION
from ..features.vectorize import FittedFeatures
from ..registry import task_kind
from ..storage import join, read_bytes, url_to_fs
from .config_check import config_problem, meta_problem
from .folder import (CHECKPOINT_FILE, FORMAT_VERSION, NETWORK_DIGEST, READS_FORMATS, STAMP_KEYS, WEIGHTS_FILE,
                     folder_options, network_digest, written_by)
from .run_lock import run_holder

# features.json's fields since the first release: without one, a run would turn texts into other inputs.
FEATURES_REQUIRED = ("mode", "ngrams", "lowercase", "sublinear_tf", "buckets", "max_len", "labels", "target",
                     "numeric", "vocabulary", "idf")
RESTORE = "restore the run folder from a copy, or train it again (what was fitted and featurised is cached)"
SAME_RUN = ("keep model.json, model.safetensors and features.json of one run together: restore the folder from a "
            "copy, or train it again")
UPGRADE = "upgrade lancetnic_flow to read it (pip install -U lancetnic_flow), or train the run again with this one"


class LoadedRun:
    """A run folder read back: its URL, configuration, fitted features,
    network, ``model.json`` (``meta``) and metrics. A LinearSVM run loaded
    for NumPy holds its weights in ``linear`` (:class:`~.linear_scores.LinearScores`)
    and builds the torch network (``model``) only when something asks for it
    (``export``, ``export --compact``), from the same weights."""

    def __init__(self, url: str, config: dict, features: FittedFeatures, model: Any, meta: dict, metrics: dict,
                 linear: Any = None):
        self.url, self.config, self.features, self.meta, self.metrics = url, config, features, meta, metrics
        self._model, self.linear = model, linear

    @property
    def model(self) -> Any:
        """The torch network (imports torch, and builds it the first time for a run loaded for NumPy)."""
        if self._model is None and self.linear is not None:
            import torch

            state = {k: torch.from_numpy(v) for k, v in self.linear.state.items()}
            self._model = build_network(self.url, self.meta, state).eval()
        return self._model

    @model.setter
    def model(self, model: Any) -> None:
        self._model, self.linear = model, None

    def task(self):
        """The :class:`~lancetnic_flow.models.tasks.Task` this run was trained for, rebuilt from its JSON files."""
        from ..models.tasks import Task, label_cuts

        kw, tc = self.meta["kwargs"], self.config.get("training", {})
        # A margin network (LinearSVM) learned the hinge whatever config.json says, or lacks.
        return Task(task_kind(self.meta), classes=kw.get("classes", 0),
                    class_loss="hinge" if kw.get("margin") else tc.get("class_loss", "cross_entropy"), value_loss=tc.get("value_loss", "mse"),
                    loss_weights=tuple(tc.get("loss_weights", (1.0, 1.0))),
                    target=tuple(self.features.target or (0.0, 1.0)),
                    label_cuts=label_cuts(self.meta.get("thresholds")))


# ---------------------------------------------------------------- loading, and what a damaged file says


def no_such_run(run: str, storage_options: dict) -> UserError | None:
    """The error for a RUN that names nothing at all, or None where something is there. A typo
    (`predict runs/frist`) is told the runs beside it, the closest first: what was meant."""
    fs, path = url_to_fs(run, **storage_options)
    if fs.exists(path):
        return None
    return UserError(f"{run} is not a lancetnic_flow run folder: there is no such folder", hint_for_missing(fs, path))


def _not_a_run(run: str, missing: str, storage_options: dict) -> UserError:
    return no_such_run(run, storage_options) or UserError(
        f"{run} is not a lancetnic_flow run folder ({missing} missing)",
        "pass the folder printed at the end of `lancetnic-flow train`, e.g. runs/20261130-101500")


class FileNotARun(UserError):
    """A run folder's place names a file (:func:`a_file_not_a_run`)."""


def a_file_not_a_run(run: str) -> UserError:
    """RUN names a file: the data, where the run folder goes (`evaluate data.csv RUN`)? It was
    an internal NotADirectoryError in every command that reads a run."""
    return FileNotARun(f"{run} is a file, not a run folder",
                     "pass the folder printed at the end of `lancetnic-flow train`, e.g. runs/20261130-101500 "
                     "(the run folder comes first: lancetnic-flow evaluate RUN DATA)")


def _unfinished(run: str, storage_options: dict) -> UserError:
    """A folder with config.json and no model.json: a run still being trained (its trainer
    holds the folder's writer lock, run_lock.py), or one stopped before it was saved."""
    holder = run_holder(run, storage_options)
    said = f"{run} is an unfinished run: no model.json yet, which training writes last; "
    if holder is not None:
        return UserError(said + f"it is still being trained ({holder})",
                         "wait for that training to end, then use the run")
    fs, path = url_to_fs(join(run, CHECKPOINT_FILE), **storage_options)
    said += "it stopped before its model was saved"
    if fs.exists(path):
        return UserError(said, f"continue it from its checkpoint with `lancetnic-flow train --resume {run}`")
    return UserError(said + " (it has no checkpoint to continue from)",
                     "train it again with the same command (what was fitted and featurised is cached)")


def _damaged(url: str, what: str, hint: str = RESTORE) -> UserError:
    return UserError(f"{url} is damaged: {what}", hint)


def _missing(run: str, name: str, holds: str) -> UserError:
    return UserError(f"{run} is a damaged run folder: {join(run, name)} is missing ({holds})", RESTORE)


def _exists(url: str, storage_options: dict) -> bool:
    fs, path = url_to_fs(url, **storage_options)
    return fs.exists(path)


def _json_problem(raw: bytes, exc: Exception) -> str:
    """Why ``raw`` is not JSON, in words. A run's JSON files end with a closing
    bracket: one that does not was most likely cut short."""
    if not raw.strip():
        return f"it is empty ({len(raw)} bytes)"
    if isinstance(exc, UnicodeDecodeError):
        return "it is not JSON (not UTF-8 text)"
    if raw.lstrip().startswith((b"{", b"[")) and not raw.rstrip().endswith((b"}", b"]")):
        return f"it is truncated: its JSON stops after {len(raw):,} bytes, mid-document ({exc})"
    return f"it is not JSON ({exc})"


def _read_doc(url: str, storage_options: dict, raw: bytes | None = None) -> dict:
    """The JSON object in the file ``url`` (or its bytes ``raw``; FileNotFoundError when there
    is none); anything else is damage."""
    raw = read_bytes(url, storage_options) if raw is None else raw
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:   # a JSONDecodeError is a ValueError
        raise _damaged(url, _json_problem(raw, exc)) from None
    if not isinstance(doc, dict):
        raise _damaged(url, f"it holds a JSON {type(doc).__name__}, not the object a run writes there")
    return doc


def check_format(url: str, doc: dict, required: bool = True) -> None:
    """Refuse a file in a run format this version does not read, saying which version wrote it.
    ``required``: a file written before it carried its format (config.json) may have none."""
    v = doc.get("format_version")
    known = isinstance(v, int) and not isinstance(v, bool)
    if (known and v in READS_FORMATS and v <= FORMAT_VERSION) or (v is None and not required):
        return
    by = doc.get("written_by") or "a lancetnic_flow that does not say which version"
    if known and by == written_by():   # this very version writes FORMAT_VERSION: the file was changed since
        raise _damaged(url, f"its format_version is {v}, yet {by} (this version, format {FORMAT_VERSION}) wrote it")
    if known and v > FORMAT_VERSION:
        raise UserError(f"{url} was written by {by} in run format {v}; this {written_by()} reads run format "
                        f"{FORMAT_VERSION}", UPGRADE)
    if known:
        raise UserError(f"{url} is in run format {v}, older than this {written_by()} reads (format "
                        f"{FORMAT_VERSION}); it was written by {by}", "train the run again with this version")
    raise _damaged(url, f"its format_version is {json.dumps(v)}, not a run format this {written_by()} knows "
                        f"(it reads format {FORMAT_VERSION})")


def read_config(run: str, storage_options: dict | None = None) -> dict:
    """``run``'s ``config.json``, checked (JSON, an object of sections, a format this version
    reads), without its stamp: the configuration as the run ran. FileNotFoundError when there is none."""
    url = join(run, "config.json")
    doc = _read_doc(url, folder_options(run, storage_options))
    check_format(url, doc, required=False)   # config.json carries its format since runs are checked on loading
    config = {k: v for k, v in doc.items() if k not in STAMP_KEYS}
    odd = [k for k, v in config.items() if not isinstance(v, dict)]
    if odd:
        raise _damaged(url, f"its section {odd[0]!r} is not an object")
    problem = config_problem(config)
    if problem is not None:
        raise _damaged(url, problem)
    return config


def read_run_json(run: str, storage_options: dict | None = None) -> tuple[dict, dict]:
    """A run folder's ``model.json`` and ``config.json``, checked, without
    torch: commands call it first, so a wrong folder is exit 2 at once."""
    so = folder_options(run, storage_options)
    try:
        config = read_config(run, so)
    except NotADirectoryError:
        raise a_file_not_a_run(run) from None
    except FileNotFoundError:
        if _exists(join(run, "model.json"), so):
            raise _missing(run, "config.json", "the configuration the run was trained with") from None
        raise _not_a_run(run, "model.json or config.json", so) from None
    url = join(run, "model.json")
    try:
        meta = _read_doc(url, so)
    except FileNotFoundError:
        raise _unfinished(run, so) from None
    check_format(url, meta)
    if not isinstance(meta.get("kwargs"), dict) or not isinstance(meta.get("net", ""), str):
        raise _damaged(url, 'it lacks the network\'s name and sizes ("net" and "kwargs")')
    problem = meta_problem(meta)
    if problem is not None:
        raise _damaged(url, problem)
    return meta, config


# features.json's fields and the JSON kinds they hold; a wrong kind fails only later, mid-prediction.
FEATURE_KINDS = {"mode": str, "ngrams": int, "buckets": int, "max_len": int, "labels": list, "numeric": dict,
                 "vocabulary": (list, type(None)), "idf": (dict, list, type(None)), "target": (list, type(None))}


def _newer_features(url: str, doc: dict, meta: dict) -> UserError | None:
    """A features.json in a feature format, or with fields, this version does not know."""
    version = doc.get("version", 1)   # written before features carried a version
    unknown = sorted(set(doc) - {f.name for f in dataclasses.fields(FittedFeatures)})
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return _damaged(url, f"its version is {json.dumps(version)}, not a feature format")
    if version <= FEATURES_VERSION and not unknown:
        return None
    what = (f"feature format {version}" if version > FEATURES_VERSION
            else f"fields this version does not know ({', '.join(unknown[:3])})")
    by = meta.get("written_by") or "a newer lancetnic_flow"
    if by == written_by():   # this very version wrote the run: the file was changed since
        return _damaged(url, f"it has {what}, yet {by}, this version (feature format {FEATURES_VERSION}), "
                             "wrote the run")
    return UserError(f"{url} was written by {by} with {what}; this {written_by()} reads feature format "
                     f"{FEATURES_VERSION}", UPGRADE)


def read_features(run: str, storage_options: dict | None = None, meta: dict | None = None,
                  config: dict | None = None) -> FittedFeatures:
    """``run``'s ``features.json``, checked: JSON, every field a run has always written,
    of its kind, in a feature format this version reads. With ``config`` (its
    config.json): hashed buckets no training row held weigh 0, as they do in a run
    fitted now, unless the run continued another (whose idf it kept) or its model
    learned its validation rows too (their buckets' weights were learned at that idf)."""
    from ..config import FEATURE_MODES

    url = join(run, "features.json")
    so = folder_options(run, storage_options)
    try:
        raw = read_bytes(url, so)
    except FileNotFoundError:
        raise _missing(run, "features.json", "the vocabulary, idf and labels that turn texts into the model's "
                                             "inputs") from None
    doc = _read_doc(url, so, raw)
    lacking = [k for k in FEATURES_REQUIRED if k not in doc]
    if lacking:
        raise _damaged(url, f"it lacks {', '.join(map(repr, lacking))}")
    newer = _newer_features(url, doc, meta or {})
    if newer is not None:
        raise newer
    wrong = [k for k, kind in FEATURE_KINDS.items() if not isinstance(doc[k], kind)]
    if wrong or doc["mode"] not in FEATURE_MODES:
        what = f"{wrong[0]} is {json.dumps(doc[wrong[0]])[:40]}" if wrong else f"mode is {doc['mode']!r}"
        raise _damaged(url, f"its {what}, not what a run writes there")
    try:
        features = FittedFeatures.from_dict(doc)
    except (TypeError, ValueError, KeyError) as exc:
        raise _damaged(url, f"a field holds a value it cannot hold ({type(exc).__name__}: {exc})") from None
    # idf weighs each vocabulary term (tfidf) or bucket (hashing): a short one fails mid-prediction.
    terms = features.buckets if features.mode == "hashing" else features.dim
    if features.idf is not None and features.mode != "ids" and len(features.idf) != terms:
        raise _damaged(url, f"its idf has {len(features.idf):,} weights for {terms:,} "
                            f"{'buckets' if features.mode == 'hashing' else 'terms'}")
    if meta is not None and isinstance(meta.get("kwargs"), dict):
        _check_pair(run, features, meta)
        # Another run's features of the same sizes fit as well: labels in another order, another idf.
        _check_saved_with(run, "features.json", raw, meta.get("features"))
    training = (config or {}).get("training") or {}
    if config is not None and not training.get("init_from") and not training.get("learn_val"):
        features.zero_unseen()
    return features


def _check_pair(run: str, features: FittedFeatures, meta: dict) -> None:
    """features.json must give the inputs and labels model.json's network takes:
    files copied in from another run would predict nonsense, or fail mid-way."""
    kw, labels, found = meta["kwargs"], len(features.labels), []
    if "dim" in kw and kw["dim"] != features.dim:
        found.append(f"{features.dim:,} input ids, the network takes {kw['dim']:,}")
    if kw.get("classes") and kw["classes"] != labels:
        found.append(f"{labels:,} labels, the network has {kw['classes']:,} classes")
    if "numeric" in kw and (kw["numeric"] or 0) != len(features.numeric):
        found.append(f"{len(features.numeric)} numeric columns, the network takes {kw['numeric'] or 0}")
    if isinstance(meta.get("thresholds"), list) and len(meta["thresholds"]) != labels:
        found.append(f"{labels:,} labels, model.json has {len(meta['thresholds']):,} thresholds")
    if found:
        raise UserError(f"{join(run, 'features.json')} does not fit the network {join(run, 'model.json')} "
                        f"describes ({'; '.join(found)}): the two come from different runs", SAME_RUN)


# safetensors' own limit on its header; a first 8 bytes that say more are not a safetensors file.
MAX_HEADER = 100_000_000


def _safetensors_problem(data: bytes) -> tuple[str, str] | None:
    """("truncated" or "format", why) when ``data`` cannot be a whole safetensors file, read from its header."""
    n = len(data)
    if n < 8:
        return "truncated", f"{n} bytes, fewer than the 8 a safetensors file starts with"
    size = int.from_bytes(data[:8], "little")
    if size > MAX_HEADER or data[8:9] not in (b"{", b""):
        return "format", "it does not start with a safetensors header"
    if 8 + size > n:
        return "truncated", f"{n:,} bytes, ending inside its {8 + size:,}-byte header"
    try:
        header = json.loads(data[8:8 + size])
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        return "format", f"its header does not describe tensors ({type(exc).__name__}: {exc})"
    if 8 + size + end > n:
        return "truncated", f"{n:,} bytes of the {8 + size + end:,} its header describes"
    return None


def _check_digest(run: str, data: bytes, meta: dict) -> None:
    """The weights must be the file model.json was saved with (a save records their size and SHA-256)."""
    _check_saved_with(run, WEIGHTS_FILE, data, meta.get("weights"))


def _check_network(run: str, so: dict, meta: dict) -> None:
    """model.json's network, sizes, task and thresholds must be those the weights were saved as
    (their file's header records the digest; weights saved before it are not checked). Checked
    once the weights fit the network, whose own words say more about other damage."""
    fs, path = url_to_fs(join(run, WEIGHTS_FILE), **so)
    with fs.open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    saved = (header.get("__metadata__") or {}).get(NETWORK_DIGEST)
    if saved is not None and saved != network_digest(meta):
        raise UserError(f"{join(run, 'model.json')} does not describe the network {join(run, WEIGHTS_FILE)} was saved "
                        "as (its net, sizes, task or thresholds were changed since, or come from another run)",
                        SAME_RUN)


def _check_saved_with(run: str, name: str, data: bytes, saved: Any) -> None:
    """The file ``name`` (its bytes ``data``) must be the one model.json recorded (``saved``:
    size and SHA-256; a run saved before model.json recorded it has none)."""
    if not isinstance(saved, dict):
        return
    got = hashlib.sha256(data).hexdigest()
    if len(data) == saved.get("bytes") and got == saved.get("sha256"):
        return
    raise UserError(f"{join(run, name)} is not the file {join(run, 'model.json')} was saved with "
                    f"({len(data):,} bytes, SHA-256 {got[:12]}…; model.json records {saved.get('bytes')} bytes, "
                    f"SHA-256 {str(saved.get('sha256'))[:12]}…): the two come from different saves", SAME_RUN)


def read_weights(run: str, storage_options: dict | None = None, meta: dict | None = None,
                 arrays: bool = False) -> dict:
    """``run``'s weights as tensors, checked: safetensors (never a pickle), whole, and the
    file ``meta`` (model.json) was saved with. ``arrays``: as NumPy arrays, read by
    ``safetensors.numpy`` without torch; the same checks, the same errors."""
    url = join(run, WEIGHTS_FILE)
    try:
        data = read_bytes(url, folder_options(run, storage_options))
    except FileNotFoundError:
        raise _missing(run, WEIGHTS_FILE, "the model's weights") from None
    problem = _safetensors_problem(data)
    not_safetensors = "weights are only loaded from safetensors, never from a pickle; " + RESTORE
    if problem is not None and problem[0] == "truncated":
        raise _damaged(url, f"it is truncated: {problem[1]}")
    if problem is not None:
        raise UserError(f"{url} is not a valid safetensors file ({problem[1]})", not_safetensors)
    _check_digest(run, data, meta or {})
    if arrays:
        import safetensors.numpy as reader

        from .stored_matrices import decode_arrays as decode
    else:
        import safetensors.torch as reader

        from .stored_weights import decode
    try:
        stored = reader.load(data)
    except Exception as exc:   # the library's own SafetensorError, among others
        raise UserError(f"{url} is not a valid safetensors file ({exc})", not_safetensors) from None
    try:
        return decode(stored)
    except ValueError as exc:
        raise _damaged(url, str(exc)) from None


def _misfit(want: dict[str, tuple], have: dict[str, tuple]) -> str:
    """How the tensors in a file (``have``: name → shape) differ from those a network needs
    (``want``), in words; '' if not."""
    def some(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")

    missing = [k for k in want if k not in have]
    extra = [k for k in have if k not in want]
    shapes = [f"{k} is {list(have[k])} there, {list(want[k])} in the network" for k in want
              if k in have and tuple(have[k]) != tuple(want[k])]
    return "; ".join(([f"it lacks {some(missing)}"] if missing else []) + ([f"it has no place for {some(extra)}"]
                     if extra else []) + ([some(shapes)] if shapes else []))


def build_network(run: str, meta: dict, state: dict) -> Any:
    """The network model.json describes, holding the weights ``state``; weights of another
    network are refused in words (load_state_dict's error names tensors, not files)."""
    from ..models import build_model

    url, net = join(run, "model.json"), meta.get("net", "ScalpelNet")
    try:
        model = build_model(net, **meta["kwargs"])
    except (TypeError, ValueError, RuntimeError) as exc:
        raise _damaged(url, f"its sizes do not build a {net} ({type(exc).__name__}: {exc})") from None
    _check_fit(run, {k: tuple(v.shape) for k, v in model.state_dict().items()}, state)
    model.load_state_dict(state)
    return model


def _check_fit(run: str, want: dict[str, tuple], state: dict) -> None:
    """Weights of another network (``state``, where ``want`` gives the shapes it needs) are refused in words."""
    misfit = _misfit(want, {k: tuple(v.shape) for k, v in state.items()})
    if misfit:
        raise UserError(f"{join(run, WEIGHTS_FILE)} does not hold the weights of the network "
                        f"{join(run, 'model.json')} describes ({misfit}): the two come from different runs", SAME_RUN)


def linear_run(run: str, meta: dict, state: dict) -> Any:
    """A LinearSVM run's NumPy weights (``state``, from :func:`read_weights` with
    ``arrays``) as :class:`~.linear_scores.LinearScores`, checked as
    :func:`build_network` checks the torch network's."""
    from .linear_scores import LinearScores, linear_shapes

    _check_fit(run, linear_shapes(meta), state)
    return LinearScores(state)


def read_metrics(run: str, storage_options: dict | None = None) -> dict:
    """``metrics.json``, or {} when it is missing or damaged (then with a warning): what a
    run measured is for reading, and prediction never needs it."""
    try:
        return _read_doc(join(run, "metrics.json"), folder_options(run, storage_options))
    except FileNotFoundError:
        return {}
    except UserError as exc:
        warnings.warn(f"{exc.message}; the run's metrics are left out (prediction does not read them)",
                      RuntimeWarning, stacklevel=3)
        return {}


def weights_stamp(run: str, storage_options: dict | None = None) -> str:
    """What tells one saved ``model.safetensors`` in ``run`` from the next one written
    there (size and modification time, or the store's ETag): the key under which a
    worker may keep the loaded run between tasks."""
    so = folder_options(run, storage_options)
    fs, path = url_to_fs(join(run, WEIGHTS_FILE), **so)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return ""
    when = info.get("mtime") or info.get("ETag") or info.get("LastModified") or info.get("created") or ""
    return f"{info.get('size')}:{when}"


def load_run(run: str, storage_options: dict | None = None, device: str = "cpu", numpy: bool = True) -> LoadedRun:
    """Load a run folder: JSON and safetensors only, each file checked (see the module's
    notes), a damaged one a :class:`UserError` naming it. ``storage_options``
    default to those ``run`` carries when it is a :class:`RunFolder`. A LinearSVM run
    on the CPU is loaded as NumPy arrays, without torch (``numpy=False``: as its torch
    network, the way of every other model; :mod:`.linear_scores`)."""
    from .linear_scores import linear_shapes

    so = folder_options(run, storage_options)
    meta, config = read_run_json(run, so)
    features = read_features(run, so, meta, config)
    _check_pair(run, features, meta)
    if numpy and device == "cpu" and linear_shapes(meta) is not None:
        linear = linear_run(run, meta, read_weights(run, so, meta, arrays=True))
        _check_network(run, so, meta)
        return LoadedRun(run, config, features, None, meta, read_metrics(run, so), linear=linear)
    model = build_network(run, meta, read_weights(run, so, meta))
    _check_network(run, so, meta)
    model.to(device).eval()
    return LoadedRun(run, config, features, model, meta, read_metrics(run, so))
