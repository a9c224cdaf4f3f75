"""Errors a user can act on.

A :class:`UserError` means the input or the options are wrong, not the code:
the CLI prints its message (what is wrong, what would work) and exits 2
without a traceback.
"""
from __future__ import annotations

import difflib


class UserError(Exception):
    """Bad input or options. ``hint`` says what would work."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def __reduce__(self) -> tuple:
        # A worker's exception travels back through Dask pickled: keep the
        # message and the hint, whatever the subclass.
        return (type(self), (self.message, self.hint))


def close_matches(word: str, options: list[str]) -> str:
    """A short 'did you mean' phrase, or '' when nothing is close."""
    found = difflib.get_close_matches(word, options, n=3, cutoff=0.5)
    return f" (did you mean {', '.join(repr(f) for f in found)}?)" if found else ""
