#!/usr/bin/env python
"""Regression on few rows and on few distinct texts: ``TextRegressor`` (the
default model, no validation rows, 2 and 10 epochs) against a ridge regression
over scikit-learn's TF-IDF of the same training rows, test R².

    .venv/bin/python benchmarks/small_regression.py

Corpora (written under ``benchmarks/out/data``):

* ``few-texts``: three texts, twenty times each, targets 0/1/2, scored on its
  own rows (a data set smaller than one batch, each term in a third of it);
* ``templated``: 6,000 rows ``"value word<k> thing<j>"``, target k plus a
  uniform fraction, the first 5,000 train (benchmarks/regression.py's corpus, smaller);
* ``make-data 200`` / ``make-data 5000``: ``lancetnic-flow make-data`` rows,
  column ``target``, the first 80 % train.

Prints one Markdown row per corpus.
"""
from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def corpora(data: Path):
    texts = ["the cat sat on the mat", "dogs run fast in the park", "stock prices fell sharply today"] * 20
    y = np.array([0.0, 1.0, 2.0] * 20)
    yield "few-texts (60 rows)", texts, y, texts, y
    rng = random.Random(0)
    values = [rng.random() * 10 for _ in range(6000)]
    rows = [f"value word{int(v)} thing{i % 7}" for i, v in enumerate(values)]
    yield "templated (5,000 / 1,000)", rows[:5000], np.array(values[:5000]), rows[5000:], np.array(values[5000:])
    import pandas as pd

    for n in (200, 5000):
        path = data / f"make-data-{n}.csv"
        if not path.exists():
            subprocess.run([sys.executable, "-m", "lancetnic_flow", "make-data", "--rows", str(n), "--quiet",
                            str(path)], check=True)
        d = pd.read_csv(path)
        k = int(len(d) * 0.8)
        yield (f"make-data ({k:,} / {n - k:,})", list(d.text[:k]), d.target.to_numpy(float)[:k],
               list(d.text[k:]), d.target.to_numpy(float)[k:])


def main() -> int:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score

    from lancetnic_flow.api.estimators import TextRegressor

    data = HERE / "out" / "data"
    data.mkdir(parents=True, exist_ok=True)
    print("| corpus | ridge | 2 epochs | 10 epochs |\n|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as out:
        for name, X, y, Xt, yt in corpora(data):
            vec = TfidfVectorizer()
            ridge = r2_score(yt, Ridge(alpha=1.0).fit(vec.fit_transform(X), y).predict(vec.transform(Xt)))
            ours = [TextRegressor(epochs=e, val_fraction=0, progress=False, out=out).fit(X, y).score(Xt, yt)
                    for e in (2, 10)]
            print(f"| {name} | {ridge:.4f} | {ours[0]:.4f} | {ours[1]:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
