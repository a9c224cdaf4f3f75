#!/usr/bin/env python
"""Build a second real-text corpus offline: Debian package descriptions,
labelled by the package's section (``admin``, ``libs``, ``python``, ``games`` …).

    sudo apt-get update -o Acquire::Languages=en          # the English long descriptions (a plain
                                                          # apt-get update, as the image check runs, drops them)
    .venv/bin/python benchmarks/debian_corpus.py          # → benchmarks/out/data/debian-{train,test}.csv
    sudo apt-get update -o Acquire::Languages=en,ja,zh_CN # and the Japanese and Chinese translations
    .venv/bin/python benchmarks/debian_corpus.py --language ja      # → debian-ja-{train,test}.csv
    .venv/bin/python benchmarks/debian_corpus.py --language zh_CN   # → debian-zh_CN-{train,test}.csv
    .venv/bin/python benchmarks/debian_corpus.py --tags     # multi-label: debtags, → debian-tags-{train,test}.csv

The text is what ``apt-cache show`` prints as a package's description: its
one-line summary and its long description (from the ``Translation-en``
list, which ``Acquire::Languages=en`` makes apt fetch), paragraph dots
dropped, whitespace collapsed. Nothing is downloaded by this script: it reads
the package lists apt already has in ``/var/lib/apt/lists`` (decompressed
with ``apt-helper cat-file``).

* Label: the section without its component (``contrib/utils`` → ``utils``).
* Duplicates: a text is kept once; a text found under two sections is dropped.
* Order: the package lists' order, i.e. sorted by package name — a sorted
  file, as real exports often are, so the stream's shuffle is tested too.
* Split: by a stable hash of the text (sha1), ``--test-share`` to test.
* Classes with fewer than ``--min-rows`` rows are dropped.
* ``--tags``: a multi-label corpus instead. A package's labels are its
  debtags (``Tag:``, e.g. ``devel::library|role::shared-lib``), joined with
  ``|``; tags on fewer than ``--min-rows`` packages (100 by default here)
  are dropped, then packages left without a tag. Packages without a
  ``Tag:`` field are not in it.

The lists' dates go to ``debian-meta.json`` (other lists, another corpus).
The data is never committed: ``benchmarks/out`` is git-ignored.
"""
from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
LISTS = "/var/lib/apt/lists"
APT_HELPER = "/usr/lib/apt/apt-helper"


def read_list(path: str) -> str:
    """A package list's text, decompressed by apt itself (lz4, xz, gz or plain)."""
    return subprocess.run([APT_HELPER, "cat-file", path], check=True, capture_output=True).stdout.decode(
        "utf-8", errors="replace")


def stanzas(text: str):
    """Deb822 paragraphs as dicts; continuation lines joined with newlines."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line[1:]
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def clean(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() != "."]
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def translation_lists(language: str) -> list[str]:
    """apt's description lists in ``language`` (``en``, ``ja``, ``zh_CN``: apt writes ``zh%5fCN``)."""
    return sorted(glob.glob(f"{LISTS}/*_i18n_Translation-{language.replace('_', '%5f')}*"))


def long_descriptions(language: str = "en") -> tuple[dict[str, str], list[str]]:
    """Each package description's text by its md5, from the translation
    lists in ``language``, and those lists. Refused when apt has none: an
    ``apt-get update`` without ``-o Acquire::Languages=en`` drops them, and
    the corpus would silently become the one-line summaries."""
    long_text: dict[str, str] = {}
    translations = translation_lists(language)
    if not translations:
        raise SystemExit(f"no {language} description lists in {LISTS}: run "
                         f"apt-get update -o Acquire::Languages={language} (a plain apt-get update removes them)")
    field = f"Description-{language}"
    for path in translations:
        for st in stanzas(read_list(path)):
            if "Description-md5" in st and field in st:
                summary, _, body = st[field].partition("\n")
                long_text[st["Description-md5"]] = clean(summary + "\n" + body)
    return long_text, translations


def tag_set(stanza: dict) -> str | None:
    """A package's debtags as one ``|``-joined, sorted label string; None without a ``Tag:`` field."""
    if "Tag" not in stanza:
        return None
    return "|".join(sorted({t.strip() for t in stanza["Tag"].replace("\n", " ").split(",") if t.strip()}))


def prune_tags(kept: list[tuple[str, str]], min_rows: int) -> list[tuple[str, str]]:
    """Tags on fewer than ``min_rows`` rows dropped from every row, then the rows left with none."""
    counts = Counter(t for _, labels in kept for t in labels.split("|"))
    out = []
    for text, labels in kept:
        left = [t for t in labels.split("|") if counts[t] >= min_rows]
        if left:
            out.append((text, "|".join(left)))
    return out


def build(min_rows: int, test_share: float, language: str = "en", summaries: bool = False, tags: bool = False
          ) -> tuple[list[tuple[str, str]], dict]:
    long_text, translations = long_descriptions(language)
    packages = sorted(glob.glob(f"{LISTS}/*_binary-*_Packages*"))
    rows: list[tuple[str, str, str]] = []   # package, text, label
    for path in packages:
        for st in stanzas(read_list(path)):
            if "Package" not in st or "Section" not in st or "Description" not in st:
                continue
            text = long_text.get(st.get("Description-md5", ""))
            if text is None and language != "en":
                continue   # another language: only the packages translated into it
            text = text or clean(st["Description"])
            if summaries:   # the one-line summary alone: a short-text corpus
                text = clean(st["Description"].split("\n", 1)[0])
            label = tag_set(st) if tags else st["Section"].rsplit("/", 1)[-1]
            if label:
                rows.append((st["Package"], text, label))
    rows.sort(key=lambda r: r[0])
    labels_of: dict[str, set] = {}
    for _, text, label in rows:
        labels_of.setdefault(text, set()).add(label)
    seen: set[str] = set()
    kept = []
    for _, text, label in rows:
        if len(labels_of[text]) == 1 and text not in seen and len(text) >= 20:
            seen.add(text)
            kept.append((text, label))
    if tags:
        kept = prune_tags(kept, min_rows)
    else:
        counts = Counter(label for _, label in kept)
        kept = [(t, lab) for t, lab in kept if counts[lab] >= min_rows]
    labels = {t for _, lab in kept for t in lab.split("|")} if tags else {lab for _, lab in kept}
    meta = {"lists": [Path(p).name for p in translations + packages], "rows": len(kept),
            "classes": len(labels),
            "labels_per_row": sum(lab.count("|") + 1 for _, lab in kept) / max(1, len(kept)) if tags else 1, "mean_chars": sum(len(t) for t, _ in kept) / max(1, len(kept)),
            "packages_read": len(rows), "test_share": test_share, "min_rows": min_rows, "language": language,
            "summaries": summaries, "tags": tags}
    return kept, meta


def is_test(text: str, share: float) -> bool:
    h = int(hashlib.sha1(text.encode()).hexdigest()[:12], 16)
    return h / float(1 << 48) < share


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(HERE / "out" / "data"))
    p.add_argument("--test-share", type=float, default=0.2)
    p.add_argument("--min-rows", type=int, default=None,
                   help="drop sections (tags, with --tags) on fewer rows (default 20; 100 with --tags)")
    p.add_argument("--language", default="en",
                   help="the descriptions' language: en, or a translation apt fetched (ja, zh_CN, zh_TW, …); "
                        "other than en, only the packages translated into it, as debian-LANG-{train,test}.csv")
    p.add_argument("--summaries", action="store_true",
                   help="the one-line summaries alone (about 45 characters): a short-text corpus, "
                        "as debian-summaries-{train,test}.csv")
    p.add_argument("--tags", action="store_true",
                   help="multi-label: each package's debtags as its labels (joined with |), "
                        "as debian-tags-{train,test}.csv")
    a = p.parse_args(argv)
    default_min = 100 if a.tags else 20
    if a.min_rows is None:
        a.min_rows = default_min
    if not translation_lists(a.language):
        raise SystemExit(f"no {a.language} long descriptions in /var/lib/apt/lists: run "
                         f"`apt-get update -o Acquire::Languages={a.language}` once "
                         "(summaries alone are a weaker corpus)")
    rows, meta = build(a.min_rows, a.test_share, a.language, a.summaries, a.tags)
    stem = "debian" if a.language == "en" else f"debian-{a.language}"
    stem += "-summaries" if a.summaries else ""
    stem += "-tags" if a.tags else ""
    stem += f"-min{a.min_rows}" if a.min_rows != default_min else ""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    split = {"train": [r for r in rows if not is_test(r[0], a.test_share)],
             "test": [r for r in rows if is_test(r[0], a.test_share)]}
    for name, part in split.items():
        path = out / f"{stem}-{name}.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL)
            w.writerow(["text", "label"])
            w.writerows(part)
        meta[f"{name}_rows"] = len(part)
        meta[f"{name}_sha1"] = hashlib.sha1(path.read_bytes()).hexdigest()
    (out / f"{stem}-meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps({k: v for k, v in meta.items() if k != "lists"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
