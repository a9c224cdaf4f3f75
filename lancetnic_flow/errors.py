"""Errors a user can act on.

A :class:`UserError` means the input or the options are wrong, not the code:
the CLI prints its message (what is wrong, what would work) and exits 2
without a traceback.
"""
from __future__ import annotations

import difflib
import os
import re
from typing import Callable


class UserError(Exception):
    """Bad input or options. ``hint`` says what would work.

    ``field``: the configuration field at fault (``training.lr``), when one
    is; ``cli``: the message and hint as the command line says them (its
    flags, ``--lr``), where ``message`` and ``hint`` use the Python API's
    names (``lr``); ``workflow``: as a workflow file says them (its keys,
    ``lr: 0.5``). :func:`lancetnic_flow.options.bad` makes all three.

    A ``message`` and ``hint`` given alone (no ``cli``, no ``workflow``) may name
    options as ``{section.field}`` (``{features.max_len}``): each reader then
    reads them in its own words, ``max_len`` here, ``--max-len`` in ``cli``."""

    def __init__(self, message: str, hint: str | None = None, *, field: str | None = None,
                 cli: tuple[str, str | None] | None = None, workflow: tuple[str, str | None] | None = None):
        if cli is None and workflow is None and _said_as("cli", message, hint) != (message, hint):
            cli, workflow = _said_as("cli", message, hint), _said_as("workflow", message, hint)
            message, hint = _said_as("python", message, hint)
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.field = field
        self.cli = cli
        self.workflow = workflow

    def said(self, style: str) -> tuple[str, str | None]:
        """The message and hint as ``style`` (``cli``, ``python``, ``workflow``) reads
        them: its own words where the error was made with them, and any
        ``{section.field}`` still in the text (added later) named in them too."""
        message, hint = {"cli": self.cli, "workflow": self.workflow}.get(style) or (self.message, self.hint)
        message, hint = _said_as(style, message, hint)
        return local_paths(message), (local_paths(hint) if isinstance(hint, str) else hint)

    def __str__(self) -> str:
        message, hint = self.said("python")
        return message if not hint else f"{message}\n  hint: {hint}"

    def __reduce__(self) -> tuple:
        # A worker's exception travels back through Dask pickled: keep the
        # message, the hint and the field, whatever the subclass.
        return (rebuild_user_error, (type(self), self.message, self.hint, self.field, self.cli, self.workflow))


def local_paths(text: str) -> str:
    """``text`` with each local file's URL (``file:///tmp/w/data/x.csv``, as the readers name
    the files they open) as a plain path: relative to the working folder where it lies in it
    (``data/x.csv``, as typed there), else absolute. A remote URL stays as it is."""
    if "file://" not in text:
        return text
    try:
        here = os.getcwd().rstrip("/") + "/"
    except OSError:   # a working folder removed under the process: paths said whole
        here = "/"
    return _LOCAL_URL.sub("", text.replace("file://" + here, "") if here != "/" else text)


_LOCAL_URL = re.compile(r"file://(?=/)")


def _names_options(*texts: str | None) -> bool:
    return any(isinstance(t, str) and "{" in t for t in texts)


# How a reader names an option: lancetnic_flow.options' said, which it gives here as it loads
# (it builds its errors from this module, so this module does not import it).
_WORDING: list[Callable[[str, str], str]] = []


def name_options_with(said: Callable[[str, str], str]) -> None:
    """Say ``{section.field}`` in errors' texts with ``said(text, style)``."""
    _WORDING[:] = [said]


def _said_as(style: str, message: str, hint: str | None) -> tuple[str, str | None]:
    if not _WORDING or not _names_options(message, hint):
        return message, hint
    said = _WORDING[0]
    return said(message, style), (said(hint, style) if isinstance(hint, str) else hint)


class NotFittedError(UserError, ValueError, AttributeError):
    """An estimator used before ``fit`` (or ``load``): scikit-learn's meaning of
    ``sklearn.exceptions.NotFittedError`` (a ValueError and an AttributeError).
    Where scikit-learn is loaded, :func:`not_fitted` raises a subclass of its
    class too, so ``except NotFittedError`` of either package catches it."""


class UnknownParameter(UserError, TypeError):
    """A keyword a constructor does not take (``TextClassifier(epoch=3)``): a
    TypeError, as Python's own, that names the parameter and the closest valid ones."""


def not_fitted(message: str, hint: str | None = None) -> NotFittedError:
    """The error to raise for an estimator used before it was fitted."""
    import sys

    sk = sys.modules.get("sklearn.exceptions")
    if sk is None and "sklearn" in sys.modules:   # scikit-learn is in use here: its class is cheap to load
        import sklearn.exceptions as sk
    if sk is None:
        return NotFittedError(message, hint)
    return _with_sklearn(sk.NotFittedError)(message, hint)


_BOTH: dict[type, type] = {}


def _with_sklearn(theirs: type) -> type:
    if theirs not in _BOTH:
        _BOTH[theirs] = type("NotFittedError", (NotFittedError, theirs), {"__module__": __name__})
    return _BOTH[theirs]


def rebuild_user_error(cls: type, message: str, hint: str | None, field: str | None, cli: tuple | None,
                       workflow: tuple | None = None) -> UserError:
    """A pickled UserError again (its subclasses take message and hint)."""
    exc = cls(message, hint)   # a worker's placeholders, said here where options are named
    exc.field, exc.cli, exc.workflow = field, cli or exc.cli, workflow or exc.workflow
    return exc


def reworded(exc: UserError, change: Callable[[str, str | None], tuple[str, str | None]],
              cls: type | None = None) -> UserError:
    """``exc`` said again, ``change(message, hint)`` giving the new text, in each
    reader's words: an error that adds to another's keeps the command line's flags and
    a workflow's keys (``{section.field}`` in what ``change`` adds is named in them too).
    ``cls``: the new error's class (one taking message and hint), else ``exc``'s."""
    new = (cls or type(exc))(*_said_as("python", *change(exc.message, exc.hint)))
    new.field = exc.field
    new.cli, new.workflow = (_said_as(style, *change(*exc.said(style))) for style in ("cli", "workflow"))
    return new


def close_matches(word: str, options: list[str]) -> str:
    """A short 'did you mean' phrase, or '' when nothing is close."""
    found = difflib.get_close_matches(word, options, n=3, cutoff=0.5)
    return f" (did you mean {', '.join(repr(f) for f in found)}?)" if found else ""


class RunWarning(UserWarning):
    """What a run said it changed, skipped or could not trust (the command
    line's ``warning:`` lines), raised as a Python warning when a run from
    Python shows no progress (``progress=False``): never lost without a word."""

