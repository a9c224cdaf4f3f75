#!/usr/bin/env python
"""Build a real-English labelled text corpus offline: docstrings of installed
Python libraries, labelled by the library they come from.

    .venv/bin/python benchmarks/real_corpus.py                 # → benchmarks/out/data/docstrings-{train,test}.csv
    .venv/bin/python benchmarks/real_corpus.py --out DIR --per-class 6000 --test-share 0.2

No network: the text is the source of the libraries installed in the project's
venv (numpy, pandas, scipy, scikit-learn, torch, matplotlib, sympy, networkx).
The files are parsed with ``ast`` (nothing is imported, so nothing runs), and
``ast.get_docstring`` is read for every module, class, function and method.

Cleaning, so that a docstring reads as prose rather than as code or a
give-away: doctest lines (``>>>``, ``...``) and their output up to the next
blank line are dropped, every line that mentions the library's own name
(``numpy``, ``np.``, ``pd.``, ``torch`` …) is dropped, whitespace is collapsed
to one space, the text is cut to 1,500 characters, and texts under 40
characters are dropped.

Deduplication: exact duplicates after cleaning (inherited or templated
docstrings) are kept once; a text found in two libraries is dropped from both.
So no text is in both the train and the test file.

Balance: each library is capped at ``--per-class`` texts, chosen by a stable
hash (sha1 of the text) — the same on every machine with the same library
versions. The split is also by hash: a text goes to test when its hash's
fraction is below ``--test-share``. The library versions used are written to
``docstrings-meta.json`` next to the CSVs (a different version is a
different corpus). The data is never committed: ``benchmarks/out`` is
git-ignored.
"""
from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import importlib.metadata as md
import importlib.util
import json
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

# label → (import name, distribution, words whose lines are dropped)
LIBRARIES = {
    "numpy": ("numpy", "numpy", ("numpy", "np.")),
    "pandas": ("pandas", "pandas", ("pandas", "pd.")),
    "scipy": ("scipy", "scipy", ("scipy",)),
    "sklearn": ("sklearn", "scikit-learn", ("sklearn", "scikit-learn", "scikit learn")),
    "torch": ("torch", "torch", ("torch",)),
    "matplotlib": ("matplotlib", "matplotlib", ("matplotlib", "mpl.", "plt.")),
    "sympy": ("sympy", "sympy", ("sympy",)),
    "networkx": ("networkx", "networkx", ("networkx", "nx.")),
}
MIN_CHARS, MAX_CHARS = 40, 1500


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{name} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def docstrings(path: Path):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            d = ast.get_docstring(node, clean=True)
            if d:
                yield d


def clean(doc: str, banned: tuple[str, ...]) -> str:
    out, in_doctest = [], False
    for line in doc.splitlines():
        s = line.strip()
        if s.startswith(">>>") or (in_doctest and s):
            in_doctest = True
            continue
        in_doctest = False
        low = s.lower()
        if any(b in low for b in banned):
            continue
        out.append(s)
    text = re.sub(r"\s+", " ", " ".join(out)).strip()
    return text[:MAX_CHARS]


def h(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "out" / "data"))
    ap.add_argument("--per-class", type=int, default=6000, help="cap per library (default 6000)")
    ap.add_argument("--test-share", type=float, default=0.2, help="share of texts in the test file (default 0.2)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    where: dict[str, set[str]] = {}
    raw = Counter()
    for label, (name, _dist, banned) in LIBRARIES.items():
        root = package_dir(name)
        for p in sorted(root.rglob("*.py")):
            for d in docstrings(p):
                raw[label] += 1
                t = clean(d, banned)
                if len(t) >= MIN_CHARS:
                    where.setdefault(t, set()).add(label)
    texts: dict[str, list[str]] = {k: [] for k in LIBRARIES}
    ambiguous = 0
    for t, labels in where.items():
        if len(labels) == 1:
            texts[next(iter(labels))].append(t)
        else:
            ambiguous += 1
    unique = {k: len(v) for k, v in texts.items()}
    rows = []
    for label, ts in texts.items():
        ts.sort(key=h)  # a stable, content-defined order
        rows += [(t, label) for t in ts[: a.per_class]]
    rows.sort(key=lambda r: h("order:" + r[0]))
    cut = int(a.test_share * 2**64)
    train = [r for r in rows if h("split:" + r[0]) >= cut]
    test = [r for r in rows if h("split:" + r[0]) < cut]
    for name, part in (("train", train), ("test", test)):
        with open(out / f"docstrings-{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
            w.writerow(["text", "label"])
            w.writerows(part)
    assert not ({t for t, _ in train} & {t for t, _ in test})
    meta = {
        "source": "docstrings (ast.get_docstring of modules, classes, functions) of installed libraries",
        "python": sys.version.split()[0],
        "versions": {label: md.version(dist) for label, (_n, dist, _b) in LIBRARIES.items()},
        "docstrings_seen": dict(raw), "unique_texts_per_library": unique, "dropped_in_several_libraries": ambiguous,
        "per_class_cap": a.per_class, "test_share": a.test_share, "min_chars": MIN_CHARS, "max_chars": MAX_CHARS,
        "train_rows": len(train), "test_rows": len(test),
        "train_classes": dict(sorted(Counter(l for _, l in train).items())),
        "test_classes": dict(sorted(Counter(l for _, l in test).items())),
        "mean_chars": sum(len(t) for t, _ in rows) / max(1, len(rows)),
        "train_sha1": hashlib.sha1((out / "docstrings-train.csv").read_bytes()).hexdigest(),
        "test_sha1": hashlib.sha1((out / "docstrings-test.csv").read_bytes()).hexdigest(),
    }
    (out / "docstrings-meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
