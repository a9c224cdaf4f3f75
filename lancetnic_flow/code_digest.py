"""A digest of the code behind a function of the user's (a custom tokenizer).

The shard cache keys a custom tokenizer's entries on it: a run records the
tokenizer's name only, so tokens featurised by earlier code must not be
reused once any code they came from changed. That code is the function's
own module and every module of the user's it reaches through module globals
(a helper imported from another file counts), with the functions it calls by
name when they live where no file is (a notebook, ``python -c``). Modules of
the standard library and of installed packages are left out: they change
with an upgrade, not an edit, and hashing them would cost every run.

The digest must be the same in every process that computes it, so nothing
that holds an address (a code object's ``repr``) or a hash seed's order (a
set's ``repr``) enters it. Data files the code reads (a model, a word list)
are not found by the walk: a tokenizer names them (``register_tokenizer(...,
depends_on=...)``) and :func:`files_digest` hashes their content. Not
covered: values that change while neither the code nor those files do.
"""
from __future__ import annotations

import functools
import hashlib
import os
import stat
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

# Enough for a project's own modules; a walk that would go further stops (what it saw still counts).
MAX_MODULES = 500


def code_digest(fn: Callable) -> str:
    """A hex digest of ``fn``'s compiled code, the functions it calls by name that
    have no source file, and the source files of the user's modules it reaches."""
    h = hashlib.sha256()
    seen: set[int] = set()
    _function(h, fn, seen)
    for path in sorted(_user_files(fn)):
        h.update(path.encode())
        try:
            h.update(Path(path).read_bytes())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


def files_digest(paths: Iterable[str]) -> str:
    """A hex digest of the content of ``paths`` (files, or folders: every file in them,
    by its path inside the folder), each under its own path. An ``OSError`` for a path
    that cannot be read, naming it."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode() + b"\0")
        if stat.S_ISDIR(os.stat(path).st_mode):
            for inner in sorted(_files_in(path)):
                h.update(b"file " + os.path.relpath(inner, path).encode() + b"\0")
                _file(h, inner)
        else:
            _file(h, path)
    return h.hexdigest()


def _files_in(folder: str) -> Iterator[str]:
    def fail(e: OSError) -> None:
        raise e

    for root, _, names in os.walk(folder, onerror=fail):
        yield from (os.path.join(root, n) for n in names)


def _file(h: Any, path: str) -> None:
    with open(path, "rb") as f:
        h.update(str(os.fstat(f.fileno()).st_size).encode() + b"\0")
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    h.update(b"\0")


def _function(h: Any, fn: Any, seen: set[int]) -> None:
    """``fn``'s code (or its ``__call__``'s), and that of the functions its code names in its globals."""
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    h.update(repr((getattr(fn, "__module__", None), getattr(fn, "__qualname__", type(fn).__qualname__))).encode())
    if code is None or id(code) in seen:   # a builtin or a C function has no code: its name is all there is
        return
    seen.add(id(code))
    _code(h, code)
    scope = getattr(fn, "__globals__", None) or getattr(getattr(fn, "__call__", None), "__globals__", {})
    for name in _names(code):
        value = scope.get(name)
        if isinstance(value, types.FunctionType) and _fileless(value):
            _function(h, value, seen)   # a notebook's helper: no file holds its code


def _code(h: Any, code: types.CodeType) -> None:
    """A code object's bytecode, names and constants, nested code (a lambda, a comprehension) by its content."""
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(h, const)
        else:
            h.update(_stable_repr(const).encode())


def _stable_repr(value: Any) -> str:
    """``repr`` with a set's members sorted: a set of strings is listed in the hash seed's order."""
    if isinstance(value, (frozenset, set)):
        return "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_stable_repr(v) for v in value) + ")"
    return repr(value)


def _names(code: types.CodeType) -> list[str]:
    """Every global name ``code`` and the code nested in it read."""
    out = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out += _names(const)
    return out


def _user_files(fn: Callable) -> set[str]:
    """The source files of the user's modules reachable from ``fn``'s module through
    module globals (modules, and the functions and classes they hold)."""
    first = sys.modules.get(getattr(fn, "__module__", None) or "") or \
        sys.modules.get(getattr(type(fn), "__module__", None) or "")
    todo, seen, files = [first] if first is not None else [], set(), set()
    while todo and len(seen) < MAX_MODULES:
        module = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        path = _source_file(module)
        if path is None:
            continue
        files.add(path)
        for value in list(vars(module).values()):
            reached = value if isinstance(value, types.ModuleType) else \
                sys.modules.get(getattr(value, "__module__", None) or "") if callable(value) else None
            if isinstance(reached, types.ModuleType) and id(reached) not in seen:
                todo.append(reached)
    return files


def _fileless(fn: types.FunctionType) -> bool:
    """Whether ``fn``'s module has no source file (``__main__`` of a notebook or of ``python -c``)."""
    module = sys.modules.get(fn.__module__ or "")
    return module is None or not getattr(module, "__file__", None)


def _source_file(obj: Any) -> str | None:
    """The source file of a user's module (or of a function's module), None for the
    standard library, installed packages, lancetnic_flow itself and code without a file."""
    module = obj if isinstance(obj, types.ModuleType) else sys.modules.get(getattr(obj, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py") or module.__name__.split(".")[0] == "lancetnic_flow":
        return None
    resolved = str(Path(path).resolve())
    return None if any(resolved.startswith(root + os.sep) for root in _installed_roots()) else resolved


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[str, ...]:
    """The folders of the standard library and installed packages (a venv's and the base Python's)."""
    roots = set()
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            try:
                roots.add(str(Path(sysconfig.get_path(key, vars={"base": prefix, "platbase": prefix,
                                                                  "installed_base": prefix,
                                                                  "installed_platbase": prefix})).resolve()))
            except (KeyError, OSError):
                continue
    return tuple(sorted(roots))
