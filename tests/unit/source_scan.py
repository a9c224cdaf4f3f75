"""The package's source read as syntax trees, for the unit tests that scan every message
of a kind (a run's warnings, its errors) for what a reader would see in it."""
from __future__ import annotations

import ast
import pathlib


def package_index() -> tuple[dict[str, ast.Module], tuple[dict, dict]]:
    """Each module of lancetnic_flow parsed, by its path in the package; and the index
    :func:`reached` follows: the package's functions by name, its module constants."""
    import lancetnic_flow

    root = pathlib.Path(lancetnic_flow.__file__).parent
    trees = {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))}
    constants = {(rel, t.id): node.value for rel, tree in trees.items() for node in tree.body
                 if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    functions: dict[str, list] = {}
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, []).append((rel, node))
    return trees, (functions, constants)


def assigned(scope, name: str):
    """The values ``scope`` gives ``name``: assigned, added to, or appended to it."""
    for a in ast.walk(scope):
        if isinstance(a, (ast.Assign, ast.AugAssign)):
            targets = [a.target] if isinstance(a, ast.AugAssign) else a.targets
            if any(isinstance(t, ast.Name) and t.id == name for tt in targets for t in ast.walk(tt)):
                yield a.value
        elif isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "append" \
                and isinstance(a.func.value, ast.Name) and a.func.value.id == name:
            yield from a.args


def reached(expr, rel, scope, index, seen=None):
    """Every text a message expression can hold, as ``(where, text)``: its literals (an
    f-string whole, each value in it as ``{}``), the returns of the package's functions it
    calls by name, its variables' and module constants' values."""
    functions, constants = index
    seen = set() if seen is None else seen
    todo = [expr]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.JoinedStr):
            yield f"{rel}:{n.lineno}", "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
            todo += [v.value for v in n.values if isinstance(v, ast.FormattedValue)]
            continue
        todo += list(ast.iter_child_nodes(n))
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield f"{rel}:{n.lineno}", n.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            for frel, f in functions.get(n.func.id, []):
                if (frel, f.name) not in seen:
                    seen.add((frel, f.name))
                    for r in ast.walk(f):
                        if isinstance(r, ast.Return) and r.value is not None:
                            yield from reached(r.value, frel, f, index, seen)
        elif isinstance(n, ast.Name) and (rel, n.id) in constants and (rel, n.id) not in seen:
            seen.add((rel, n.id))
            yield from reached(constants[(rel, n.id)], rel, scope, index, seen)
        elif isinstance(n, ast.Name) and scope is not None and (id(scope), n.id) not in seen:
            seen.add((id(scope), n.id))
            for value in assigned(scope, n.id):
                yield from reached(value, rel, scope, index, seen)
