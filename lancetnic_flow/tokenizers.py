"""Tokenizers of your own, registered by name (``lancetnic_flow.features.register_tokenizer``).

``register_tokenizer("name", fn)`` makes ``fn`` the word tokenizer of any
run trained with ``FeatureConfig(tokenizer="name")`` (``--tokenizer``). A
run stores the name, never the code: the process that trains, predicts or
evaluates with it, and every Dask worker that featurises for it, must have
registered it. Two ways it gets there:

* the name is recorded as ``"module:name"`` when ``fn`` lives in an
  importable module (not a script run as ``__main__``): a process that does
  not know the name imports that module, whose top level registers it —
  workers on any cluster, and ``predict``/``evaluate``/``serve`` later;
* a script's own functions (``__main__``) travel with the features: the
  name a run's options hold is a :class:`TokenizerRef`, which pickles with
  its function (Dask ships ``__main__`` functions by value), so a worker
  that receives the features registers it — on an existing cluster
  (``--scheduler``) too. Keep the ``register_tokenizer`` call at the
  script's top level all the same: local workers import the script again.

``fn`` either takes one text and returns its tokens (``batch=False``, the
default; applied row by row: a list, tuple or generator of strings; a string,
read as its characters, and a set, whose order changes from process to
process, are refused), or takes a ``pyarrow`` string array and
returns a list array of strings, one list per row (``batch=True``: no
Python object per token if ``fn`` is vectorised). It receives the texts as
the run preprocesses them (Unicode-normalised and lower-cased when asked);
stop words and n-grams are applied to its tokens afterwards
(``features/tokenize.py: custom_tokens``).

``depends_on`` names the files (or folders) ``fn`` reads — a word list, a
model: the shard cache keys on their content beside the code
(:func:`code_fingerprint`), so shards made from an earlier list are not
reused. Local paths, recorded absolute; read whole when a run makes its key.

The registry is part of the core, beside the model names (``registry.py``):
configuration checks a ``--tokenizer`` name before any work starts.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import re
from typing import Callable, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import UserError
from .plurals import counted

# name → (function, batch, the files it depends on)
_TOKENIZERS: dict[str, tuple[Callable, bool, tuple[str, ...]]] = {}
PathLike = Union[str, "os.PathLike[str]"]
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
HOW = ("call lancetnic_flow.features.register_tokenizer(NAME, fn) at the top level of a module this process "
       "imports (workflows/custom_tokenizer.py shows how), or give {features.tokenizer} MODULE:NAME")


def register_tokenizer(name: str, fn: Callable, *, batch: bool = False,
                       depends_on: PathLike | Sequence[PathLike] = ()) -> str:
    """Register ``fn`` as the tokenizer ``name``; returns the name to put in
    ``FeatureConfig(tokenizer=...)`` (``"module:name"`` when ``fn``'s module
    can be imported by other processes). ``depends_on``: a path, or a list of
    paths, of the local files or folders ``fn`` reads (a word list, a model),
    whose content enters the shard cache key."""
    if not _NAME.fullmatch(name or ""):
        raise UserError(f"tokenizer name {name!r}: use letters, digits, '_', '-' and '.'", "e.g. \"my_words\"")
    if not callable(fn):
        raise UserError(f"tokenizer {name!r}: {fn!r} is not a function")
    _TOKENIZERS[name] = (fn, batch, _paths(name, depends_on))
    module = getattr(fn, "__module__", None)
    return f"{module}:{name}" if module and module not in ("__main__", "__mp_main__") else name


def _paths(name: str, depends_on) -> tuple[str, ...]:
    """``depends_on`` checked, as absolute local paths."""
    given = [depends_on] if isinstance(depends_on, (str, os.PathLike)) else depends_on
    if not isinstance(given, (list, tuple)) or not all(isinstance(p, (str, os.PathLike)) for p in given):
        raise UserError(f"tokenizer {name!r}: depends_on={depends_on!r} is not a path or a list of paths",
                        "e.g. depends_on=[\"stop_words.txt\", \"model/\"]: the files the tokenizer reads")
    paths = [os.fspath(p) for p in given]
    for p in paths:
        if not p.strip():
            raise UserError(f"tokenizer {name!r}: depends_on holds an empty path", "name the files the tokenizer reads")
        if "://" in p:
            raise UserError(f"tokenizer {name!r}: depends_on {p!r} is a URL; it takes local paths",
                            "name a local copy of the file the tokenizer reads")
    return tuple(os.path.abspath(p) for p in paths)


def depends_on(spec: str) -> tuple[str, ...]:
    """The absolute paths tokenizer ``spec`` was registered as depending on."""
    resolve(spec)
    return _TOKENIZERS[spec.rpartition(":")[2]][2]


def resolve(spec: str) -> tuple[Callable, bool]:
    """The function and batch flag of ``"name"`` or ``"module:name"``: from
    this process' registry, else by importing the module; else a UserError."""
    module, _, name = spec.rpartition(":")
    if name not in _TOKENIZERS and module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UserError(f"tokenizer {name!r}: its module {module!r} cannot be imported here ({e})",
                            "install or put that module on PYTHONPATH in every process, workers included") from None
    if name not in _TOKENIZERS:
        raise UserError(f"tokenizer {name!r} is not registered in this process"
                        + (f" (importing {module!r} did not register it)" if module else ""), HOW)
    fn, batch, _ = _TOKENIZERS[name]
    return fn, batch


def tokens_of(spec: str, texts: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(row offsets into the tokens, the tokens as one string array) of
    ``texts`` by the registered tokenizer ``spec``."""
    fn, batch = resolve(spec)
    if batch:
        lists = fn(texts)
        if isinstance(lists, pa.ChunkedArray):
            lists = lists.combine_chunks()
    else:
        lists = _per_text(spec, fn, texts)
    if not isinstance(lists, (pa.ListArray, pa.LargeListArray)) or len(lists) != len(texts):
        raise UserError(f"tokenizer {spec!r} returned {type(lists).__name__} for {counted(len(texts), 'text')}",
                        "return a list of tokens per text (batch=True: a pyarrow list array, one list per text)")
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    tokens = pc.fill_null(lists.flatten().cast(pa.string()), "")
    keep = pc.greater(pc.binary_length(tokens), 0)
    if not pc.all(keep).as_py():   # an empty token is no token (e.g. a split at each of two spaces)
        rows = np.repeat(np.arange(len(lists)), lengths)[keep.to_numpy(zero_copy_only=False)]
        tokens, lengths = tokens.filter(keep), np.bincount(rows, minlength=len(lists))
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, tokens



def _per_text(spec: str, fn: Callable, texts: pa.Array) -> pa.ListArray:
    """A per-text tokenizer's tokens of ``texts``, one list a text. Arrow would read a
    string returned as its characters, and a set's order changes from process to
    process (word pairs are read in order): both are refused, as are tokens that are not
    strings; a generator, or another sequence, is read as its list."""
    # The function's own lists: a Python object per token is the price of a per-text tokenizer.
    out = []
    for text in texts.to_pylist():
        tokens = fn(text)
        if type(tokens) is not list and tokens is not None:
            tokens = _as_list(spec, text, tokens)
        out.append(tokens)
    try:
        return pa.array(out, pa.list_(pa.string()))
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        text, token = next(((t, w) for t, ws in zip(texts.to_pylist(), out) for w in ws or ()
                            if w is not None and not isinstance(w, str)), ("", None))
        raise UserError(f"tokenizer {spec!r} returned the token {token!r} ({type(token).__name__}) for "
                        f"{_short(text)}: a token is a string", "return a list of strings per text") from None


def _as_list(spec: str, text: str, tokens) -> list:
    if isinstance(tokens, (str, bytes)):
        raise UserError(f"tokenizer {spec!r} returned {type(tokens).__name__} {_short(tokens)} for {_short(text)}, "
                        "not a list of tokens: it would be read as its characters",
                        "return a list of tokens per text (e.g. text.split(), not a joined string)")
    if isinstance(tokens, (set, frozenset, dict)):
        raise UserError(f"tokenizer {spec!r} returned a {type(tokens).__name__} for {_short(text)}: its order "
                        "changes from process to process, and word n-grams are read in order",
                        "return a list of tokens in text order (sorted(...) if a set is meant)")
    try:
        return list(tokens)
    except TypeError:
        raise UserError(f"tokenizer {spec!r} returned {type(tokens).__name__} for {_short(text)}",
                        "return a list of tokens per text") from None


def _short(text) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "…")


class TokenizerRef(str):
    """A tokenizer's name (``"name"`` or ``"module:name"``) that, pickled,
    carries the registered function with it: the process that unpickles it
    registers the function if it lacks the name. Reads, compares and writes
    to JSON as the plain name."""

    def __reduce__(self):
        entry = _TOKENIZERS.get(self.rpartition(":")[2])
        return (_restore, (str(self), *entry) if entry else (str(self),))


class CarriesTokenizer(str):
    """A string about tokenizer ``spec`` (the ``empty_text`` rule of a run
    with one, data/usable.py) that, pickled, carries the registered function
    as :class:`TokenizerRef` does: a worker that reads rows by the rule can run
    the tokenizer a script registered. Reads, compares and writes as the plain string."""

    spec: str

    def __new__(cls, text: str, spec: str) -> "CarriesTokenizer":
        out = super().__new__(cls, text)
        out.spec = str(spec)
        return out

    def __reduce__(self):
        entry = _TOKENIZERS.get(self.spec.rpartition(":")[2])
        return (_restore_carried, (str(self), self.spec, *entry) if entry else (str(self), self.spec))


def _restore_carried(text: str, spec: str, fn: Callable | None = None, batch: bool = False,
                     files: tuple[str, ...] = ()) -> CarriesTokenizer:
    _restore(spec, fn, batch, files)
    return CarriesTokenizer(text, spec)


def _restore(spec: str, fn: Callable | None = None, batch: bool = False, files: tuple[str, ...] = ()) -> TokenizerRef:
    name = spec.rpartition(":")[2]
    if fn is not None and name not in _TOKENIZERS:
        _TOKENIZERS[name] = (fn, batch, tuple(files))
    return TokenizerRef(spec)


def code_fingerprint(spec: str, parts: dict | None = None) -> str:
    """A hash of the code behind tokenizer ``spec`` (code_digest.py): its
    module's source file, those of the user's modules it reaches (a helper
    imported from another file), and the function's compiled code; and the
    content of the files it was registered as depending on (``depends_on``).
    The shard cache keys on it, since a run records the name only: tokens
    featurised by an earlier version of the code, or of its word list, are not
    reused. The same in every process, so a run's entry is found again (and
    its checkpoint resumed). ``parts``: :func:`code_parts` of ``spec``, where the caller has them."""
    _, batch = resolve(spec)
    parts = parts or code_parts(spec)
    h = hashlib.sha256((b"batch" if batch else b"row") + parts["code"].encode())
    if parts["files"] is not None:   # none: the hash of the code alone, as entries made before depends_on keyed it
        h.update(parts["files"].encode())
    return h.hexdigest()[:16]


def code_parts(spec: str) -> dict:
    """What :func:`code_fingerprint` hashes, each part on its own: the code's digest, and the
    ``depends_on`` files' (None without any), so that a changed entry names which of them changed.
    A file that cannot be read is a UserError naming it."""
    from .code_digest import code_digest, files_digest

    fn, _ = resolve(spec)
    files = depends_on(spec)
    try:
        listed = files_digest(files) if files else None
    except OSError as e:
        raise UserError(f"tokenizer {spec.rpartition(':')[2]!r} depends on {e.filename or files[0]}, which "
                        f"cannot be read ({type(e).__name__}: {e.strerror or e})",
                        "create it, or register the tokenizer with depends_on naming the files it reads") from None
    return {"code": code_digest(fn), "files": listed}


def canonical(spec: str) -> TokenizerRef:
    """``spec`` checked (it resolves here), recorded with its module when it
    has an importable one, as a :class:`TokenizerRef`."""
    fn, _ = resolve(spec)
    module, _, name = spec.rpartition(":")
    owner = getattr(fn, "__module__", None)
    if not module and owner and owner not in ("__main__", "__mp_main__"):
        spec = f"{owner}:{name}"
    return TokenizerRef(spec)


def _import_error(module: str) -> str | None:
    """On a worker or the scheduler: why ``module`` cannot be imported there, or None."""
    try:
        importlib.import_module(module)
    except Exception as e:   # noqa: BLE001 - reported to the caller, by process
        return f"{type(e).__name__}: {e}"
    return None


def check_on_cluster(client, spec: str) -> None:
    """A tokenizer from a module (``"module:name"``) must import on every worker and on
    the scheduler, which unpickle the tasks that carry it: where it does not, the run
    ended in an internal error (lost dependencies) with the cause in the scheduler's
    log. Said here, before any work, naming where and why."""
    module, _, name = str(spec).rpartition(":")
    if not module:   # registered in the caller's script: travels with the tasks by value
        return
    failed = {w: e for w, e in client.run(_import_error, module).items() if e}
    scheduler = client.run_on_scheduler(_import_error, module)
    if scheduler:
        failed["the scheduler"] = scheduler
    if failed:
        where, why = next(iter(failed.items()))
        raise UserError(f"tokenizer {name!r}: its module {module!r} cannot be imported on the cluster "
                        f"({len(failed)} of its processes, e.g. {where}: {why})",
                        "install or put that module on PYTHONPATH in every process, workers and scheduler "
                        "included (docs/cluster.md)")
