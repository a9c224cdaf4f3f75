"""Scripts that start local workers without an ``if __name__ == "__main__":`` guard.

Local Dask workers are new Python processes (multiprocessing's "spawn"),
and each one imports the script that started them, as ``__mp_main__``. A
call at the script's top level would run again in every worker, start its
own cluster there, and the first run would wait forever. Before a
LocalCluster starts, :func:`refuse_unguarded_script` finds the line of the
running script that led here and, when it is not under the guard, stops
with that line and the fix.
"""
from __future__ import annotations

import ast
import os
import sys
from types import FrameType

from ..errors import UserError

FIX = 'put the code that trains or predicts under `if __name__ == "__main__":` (docs/python.md)'


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def guarded(source: str, line: int) -> bool:
    """True when ``line`` of ``source`` lies inside an ``if __name__ == "__main__":`` block."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and _is_main_test(node.test):
            if node.body[0].lineno <= line <= max(n.end_lineno or n.lineno for n in node.body):
                return True
    return False


def _script_line(main) -> int | None:
    """The line of the main script's top-level code that is running now."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            return frame.f_lineno
        frame = frame.f_back
    return None


def refuse_unguarded_script() -> None:
    """Raise :class:`UserError` when local worker processes would re-run the
    calling script's top-level code (see the module docstring)."""
    import dask

    main = sys.modules.get("__main__")
    if main is None:
        return
    path = getattr(main, "__file__", None)
    if getattr(main, "__name__", None) == "__mp_main__":
        # A worker importing a script the check could not read: stop here, not start a cluster.
        raise UserError(f"{path}: a lancetnic_flow worker process is re-running this script's top level", FIX)
    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") != "spawn":
        return   # forkserver and fork do not import the script
    if not path or not os.path.isfile(path):
        return   # a notebook, `python -c`, stdin: nothing is re-imported
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name.endswith(".__main__"):
        return   # `python -m package`: multiprocessing does not re-import a package's __main__
    line = _script_line(main)
    if line is None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        if guarded(source, line):
            return
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return
    raise UserError(f"{os.path.basename(path)}, line {line}: this script starts lancetnic_flow's local Dask "
                    "workers from its top level; each worker process imports the script and would run that line "
                    "again, so it would never finish", FIX)


__all__ = ["refuse_unguarded_script", "guarded"]
