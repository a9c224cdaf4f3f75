"""A row's labels: one label (classify, multitask) or a set of them (multilabel).

``--task multilabel`` reads the label column as a set per row, from any of:

* a list (a JSON Lines array, a Parquet list column);
* a string holding a JSON list, ``'["a", "b"]'`` (CSV, TSV), or a Python
  list of quoted labels, ``"['a', 'b']"`` (a pandas list column written to CSV);
* a string split by ``--label-sep``, ``"a|b"`` with ``--label-sep "|"``;
* fastText lines with several ``__label__`` tags (see :mod:`.lines`);
* otherwise a plain string is a set of one label.

The output column is ``list<string>``: labels trimmed, empty ones dropped. An
empty list (``[]``, :func:`empty_lists`) is an empty set, a row no label applies
to; any other row left without a label (null, a blank cell) is skipped as
``missing_label``.

A single-label task never cuts a set down to one label silently: a list, or a
string holding a JSON or Python list, stops the run with :class:`LabelListError`.
Everything is vectorised with ``pyarrow.compute``: no Python loop per row.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import UserError, reworded
from ...plurals import counted, verb
from .times import is_time_type, iso_text

# A JSON array: "[", then an empty list or the start of a JSON value. "[deleted]"
# or "[draft]" are plain label names, not lists.
JSON_LIST_RE = r'^\[\s*(\]$|("|-?[0-9]|true\b|false\b|null\b)[\s\S]*\]$)'
# A Python list of quoted labels, as pandas' to_csv writes a list column: "['a', 'b']".
PYTHON_LIST_RE = r"^\[\s*'[\s\S]*'\s*\]$"
MULTILABEL_HINT = "train with {training.task} multilabel to learn every label of a row (see docs/multilabel.md)"


class LabelListError(UserError):
    """A single-label task met rows with several labels. Raised where the file
    is not known; :func:`~lancetnic_flow.data.readers.read_partition` names it."""

    def at(self, url: str) -> "LabelListError":
        """This error, naming the file it came from."""
        return self if self.message.startswith(url) else reworded(self, lambda message, hint: (f"{url}: {message}", hint))


def several_labels(what: str, example: str, rows: int) -> LabelListError:
    """The error of a single-label task given rows that hold several labels."""
    return LabelListError(f"{counted(rows, 'row')} {verb(rows, 'holds', 'hold')} {what} (e.g. {example[:80]!r}), but a single-label task "
                          "keeps one label per row: rerun with {training.task} multilabel", MULTILABEL_HINT)


def check_single(label) -> None:
    """Refuse a label column that holds lists (or JSON lists) under a single-label task."""
    t = label.type
    if is_list_type(t):
        lists = pc.drop_null(label)
        if len(lists):
            raise several_labels("a list of labels", str(lists[0].as_py()), len(lists))
        return
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return
    # Cheap first: most chunks have no label starting with "[" at all.
    if not (pc.any(pc.starts_with(label, "[")).as_py() or False):
        return
    for pattern, what in ((JSON_LIST_RE, "a JSON list of labels"), (PYTHON_LIST_RE, "a Python list of labels")):
        lists = pc.fill_null(pc.match_substring_regex(label, pattern), False)
        bad = pc.sum(lists).as_py() or 0
        if bad:
            raise several_labels(what, pc.filter(label, lists)[0].as_py(), bad)


# Noted (``noted`` of :func:`label_sets`, with a separator): the label strings it split into several
# labels, and the rows read as lists (a list column, a JSON list) with an item that holds it, kept whole
# since a list's items are its labels. The run says at its end where the separator split no label.
SEP_SPLIT = "label_sep_split"
SEP_IN_LISTS = "label_sep_in_lists"


def label_sets(label, sep: str | None, noted: dict[str, int] | None = None) -> pa.ListArray:
    """The label column as ``list<string>``, one set per row (see the module docstring);
    with ``sep``, what it split and left whole counted in ``noted`` (:data:`SEP_SPLIT`,
    :data:`SEP_IN_LISTS`)."""
    if isinstance(label, pa.ChunkedArray):
        label = label.combine_chunks()
    label = plain_lists(label)
    if is_list_type(label.type):
        values = _as_text(pc.list_flatten(label))
        parents = pc.list_parent_indices(label)
        _note_separator(noted, sep, 0, values, parents)
        return _rebuild(len(label), parents, values)
    text = _python_lists_as_json(pc.utf8_trim_whitespace(_as_text(label)))
    is_json = pc.fill_null(pc.match_substring_regex(text, JSON_LIST_RE), False)
    # Without a separator a plain string is a set of one label.
    parts = pc.split_pattern(text, sep) if sep else \
        pa.ListArray.from_arrays(pa.array(np.arange(len(text) + 1, dtype=np.int32)), text)
    split = 0
    if sep and noted is not None:   # a string cut in two or more parts (a JSON list's own are its items)
        split = pc.sum(pc.and_(pc.invert(is_json), pc.greater(pc.list_value_length(parts), 1))).as_py() or 0
    listed = pc.any(is_json).as_py()
    if listed:
        parts = _with_json_lists(text, is_json, parts)
    values, parents = pc.list_flatten(parts), pc.list_parent_indices(parts)
    # only a JSON list's items can hold the separator: a split string's parts hold none
    _note_separator(noted, sep if listed else None, split, values, parents)
    return _rebuild(len(label), parents, values)


# A cell holding an empty JSON or Python list: "[]", "[ ]".
EMPTY_LIST_RE = r"^\s*\[\s*\]\s*$"


def empty_lists(label) -> pa.Array:
    """Which rows of the label column hold an empty list (a JSON or Parquet ``[]``, or a
    cell reading ``[]``): an empty label set, no label applies, every class a negative.
    Null, an absent key, a blank cell, a list of empty items or a separator's string of
    empty parts (``|``) are none: their label is missing."""
    if isinstance(label, pa.ChunkedArray):
        label = label.combine_chunks()
    label = plain_lists(label)
    if is_list_type(label.type):
        return pc.fill_null(pc.equal(pc.list_value_length(label), 0), False)
    if pa.types.is_dictionary(label.type):
        label = pc.cast(label, label.type.value_type)
    if pa.types.is_string(label.type) or pa.types.is_large_string(label.type):
        return pc.fill_null(pc.match_substring_regex(label, EMPTY_LIST_RE), False)
    return pa.array(np.zeros(len(label), bool))


def separator_counts(noted: dict[str, int]) -> dict[str, int]:
    """Take the separator's counts out of ``noted`` (rows' notes, by reason): ``{"split": n,
    "in_lists": m}`` (:data:`SEP_SPLIT`, :data:`SEP_IN_LISTS`; a count of none left out)."""
    counts = {"split": noted.pop(SEP_SPLIT, 0), "in_lists": noted.pop(SEP_IN_LISTS, 0)}
    return {k: v for k, v in counts.items() if v}


def separator_warnings(sep: str | None, counts: dict[str, int], where: str = "rows.label_sep in metrics.json",
                       idle: bool = True) -> list[str]:
    """What to say of ``--label-sep`` ``sep`` at the end of a read (``counts``: :func:`separator_counts`
    over every row): with ``idle``, that it split no label string anywhere, so changed nothing (not
    of a separator the caller did not give), and of label sets read as lists whose items hold it,
    each kept whole as one label."""
    if not sep:
        return []
    said = []
    split, held = counts.get("split", 0), counts.get("in_lists", 0)
    if held:
        said.append(f"{counted(held, 'row')} whose labels are a list (a list column, a JSON array) "
                    f"{verb(held, 'holds', 'hold')} {sep!r} inside an item, kept whole as one label: a list's items "
                    f"are its labels, and {{data.label_sep}} splits label strings only ({where})")
    if idle and not split:
        said.append(f"{{data.label_sep}} {sep!r} split no label: no label string held it (the items of lists, "
                    "JSON arrays included, are each one label and are never split), so it changed nothing; "
                    "drop it, or pass the separator the labels are joined by")
    return said


def _note_separator(noted: dict[str, int] | None, sep: str | None, split: int, values: pa.Array, parents) -> None:
    """Count in ``noted`` the ``split`` label strings a separator split, and the rows whose label
    ``values`` (each of the row ``parents`` gives) hold ``sep``: the items of lists, which no
    separator splits (None: no values to look at)."""
    if split and noted is not None:
        noted[SEP_SPLIT] = noted.get(SEP_SPLIT, 0) + int(split)
    if noted is None or not sep:
        return
    held = pc.fill_null(pc.match_substring(values, sep), False)
    if pc.any(held).as_py():
        rows = np.asarray(parents.to_numpy(zero_copy_only=False))[np.asarray(held.to_numpy(zero_copy_only=False), bool)]
        noted[SEP_IN_LISTS] = noted.get(SEP_IN_LISTS, 0) + len(np.unique(rows))


def _python_lists_as_json(text: pa.Array) -> pa.Array:
    """Cells holding a Python list of labels (pandas writes a list column so:
    ``['a', 'b']``, which is no JSON) as the JSON list they mean, read by
    ``ast.literal_eval`` (literals only: no code runs). Each was a label of its
    own, ``"['a', 'b']"``. Such cells are rewritten in Python; others are left."""
    import ast
    import json

    py = pc.fill_null(pc.match_substring_regex(text, PYTHON_LIST_RE), False)
    if not pc.any(py).as_py():
        return text
    rows = pc.indices_nonzero(py)
    out = []
    for raw in pc.take(text, rows).to_pylist():
        try:
            items = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            items = None
        plain = isinstance(items, list) and all(isinstance(i, (str, int, float)) for i in items)
        out.append(json.dumps(items, ensure_ascii=False) if plain else raw)
    return pc.replace_with_mask(text, py, pa.array(out, text.type))


# What ends a word or a tag for fastText (its Dictionary::readWord): these ASCII bytes, \v and NUL
# included; a regular expression's \s left \v out, so "__label__a\vgood" was the label "a\vgood".
FASTTEXT_SPACE = r"[ \t\n\x0b\f\r\x00]"
FASTTEXT_WORD = r"[^ \t\n\x0b\f\r\x00]"


def fasttext_sets(tags: pa.Array) -> pa.ListArray:
    """fastText's ``__label__a __label__b`` prefixes → one label set per line."""
    tags = pc.utf8_trim_whitespace(pc.replace_substring_regex(tags, FASTTEXT_SPACE + "+", " "))
    parts = pc.split_pattern(tags, " ")
    names = pc.replace_substring_regex(pc.list_flatten(parts), "^__label__", "")
    return _rebuild(len(tags), pc.list_parent_indices(parts), names)


def tag_counts(tags: pa.Array) -> pa.Array:
    """How many ``__label__`` tags each fastText line starts with."""
    return pc.count_substring_regex(tags, rf"(^|{FASTTEXT_SPACE})__label__")


def several_tagged(tags: pa.Array) -> pa.Array:
    """Which fastText lines' tags name two labels or more (``__label__a __label__b``);
    one label tagged twice (``__label__a __label__a``) is one label. Only the rare
    lines of several tags are split."""
    tagged = pc.fill_null(pc.greater(tag_counts(tags), 1), False)
    if not pc.any(tagged).as_py():
        return tagged
    rows = pc.indices_nonzero(tagged)
    sets = fasttext_sets(pc.take(tags, rows))
    parents = pc.list_parent_indices(sets)
    differ = pc.not_equal(pc.list_flatten(sets), pc.take(pc.list_element(sets, 0), parents))
    per_row = np.bincount(parents.to_numpy(), weights=pc.cast(differ, pa.int8()).to_numpy(zero_copy_only=False),
                          minlength=len(rows))
    out = np.zeros(len(tags), bool)
    out[rows.to_numpy()] = per_row > 0
    return pa.array(out)


def is_list_type(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` holds lists (a JSON array, a Parquet list; an Arrow IPC
    file's list views, as pyarrow and polars may write them)."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
        or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)


def plain_lists(arr):
    """A column of list views as the plain lists they show (others as they are): a
    view's values may lie in any order in its buffer, where Arrow's kernels that
    pair values with rows (``list_parent_indices``) read them as a list's."""
    if not (pa.types.is_list_view(arr.type) or pa.types.is_large_list_view(arr.type)):
        return arr
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    large = pa.types.is_large_list_view(arr.type)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(arr) + 1, np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    kind = pa.LargeListArray if large else pa.ListArray
    return kind.from_arrays(pa.array(offsets), pc.list_flatten(arr), mask=pc.is_null(arr))


def nan_as_null(arr):
    """A float column as text reads it: NaN as missing (polars, Spark and pyarrow
    write a missing float as NaN, pandas as null; cast to text it would name a
    class "nan"), and -0.0 as 0.0 (one value, one class to pandas and
    scikit-learn, where Arrow writes "-0" and "0": two classes)."""
    if not pa.types.is_floating(arr.type):
        return arr
    nan = pc.is_nan(arr)
    if pc.any(nan).as_py():
        arr = pc.if_else(nan, pa.scalar(None, arr.type), arr)
    return pc.add(arr, pa.scalar(0.0, arr.type))   # IEEE: -0.0 + 0.0 is +0.0; every other value is kept


def _as_text(arr) -> pa.Array:
    """Labels as strings (JSON numbers and booleans as their text, like a single label)."""
    if pa.types.is_string(arr.type):
        return arr
    if pa.types.is_dictionary(arr.type):
        arr = pc.cast(arr, arr.type.value_type)
    if is_time_type(arr.type):   # as the CSV pandas writes from the same frame reads
        return iso_text(arr)
    arr = nan_as_null(arr)
    try:
        return pc.cast(arr, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise UserError(f"labels of type {arr.type} cannot be read as label names",
                        "give labels as strings or numbers, e.g. [\"a\", \"b\"]") from None


def _with_json_lists(text: pa.Array, is_json: pa.Array, parts: pa.ListArray) -> pa.ListArray:
    """``parts`` with the rows holding a JSON list replaced by that list's items.

    A list of plain quoted items, or of bare numbers and literals, is split
    vectorised: at ``","`` between quoted items (a comma inside a label
    stays), at commas between bare ones; a label there holds no quote, since
    JSON would escape it. A list holding an escape (``\\"``, ``\\u00e9``), a
    decimal, or quoted and bare items together is read by ``json.loads``, row by row: such
    rows are few, and splitting them by pattern cut an escaped quote at an
    item's end and kept ``\\u00e9`` as six characters."""
    inner = pc.replace_substring_regex(text, r"^\[\s*|\s*\]$", "")
    quoted = pc.match_substring(inner, '"')
    mixed = pc.and_(quoted, pc.invert(pc.and_(pc.starts_with(inner, '"'), pc.ends_with(inner, '"'))))
    # (bare decimals too: named as Arrow writes a JSON number, "2.0" → "2", as a JSON Lines list's are;
    # and a null, which is no label, as an Arrow-read list's null is none)
    floating = pc.and_(pc.invert(quoted), pc.match_substring_regex(inner, "[.eE]|null"))
    careful = pc.fill_null(pc.and_(is_json, pc.or_(pc.or_(pc.match_substring(inner, "\\"), mixed), floating)),
                           False)
    bare = pc.binary_join_element_wise('"', pc.replace_substring_regex(inner, r"\s*,\s*", '","'), '"', "")
    items = pc.split_pattern_regex(pc.if_else(quoted, inner, bare), r'"\s*,\s*"')
    values = pc.replace_substring_regex(pc.list_flatten(items), r'^\s*"|"\s*$', "")
    # Join them per row: a JSON row takes its items (read by json.loads where careful), any other its own parts.
    json_rows = np.asarray(is_json.to_numpy(zero_copy_only=False), bool)
    slow = np.asarray(careful.to_numpy(zero_copy_only=False), bool)
    json_parents = pc.list_parent_indices(items).to_numpy()
    other_parents = pc.list_parent_indices(parts).to_numpy()
    keep_json = json_rows[json_parents] & ~slow[json_parents]
    keep_other = ~json_rows[other_parents]
    slow_parents, slow_values = _json_items(text, np.flatnonzero(slow))
    parents = np.concatenate([json_parents[keep_json], other_parents[keep_other], slow_parents])
    merged = pa.concat_arrays([values.filter(pa.array(keep_json)),
                               pc.list_flatten(parts).filter(pa.array(keep_other)), slow_values])
    order = np.argsort(parents, kind="stable")
    counts = np.bincount(parents, minlength=len(text))
    offsets = np.zeros(len(text) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), merged.take(pa.array(order)))


def _json_items(text: pa.Array, rows: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """The items of the JSON lists in ``text[rows]`` as label names (numbers as
    Arrow writes them, booleans as ``true``/``false``): the row of each, and
    its text. A row that is no valid JSON list gives its whole text as one label."""
    import json

    parents: list[int] = []
    names: list = []
    for row in rows.tolist():
        raw = text[row].as_py()
        try:
            items = json.loads(raw)
        except ValueError:
            items = None
        if not isinstance(items, list):
            parents.append(row)
            names.append(raw)
            continue
        for item in items:
            parents.append(row)
            if isinstance(item, bool):
                names.append("true" if item else "false")
            elif isinstance(item, float):
                names.append(item)   # as text below, as Arrow writes it
            elif item is None:
                names.append("")
            else:
                names.append(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
                             if isinstance(item, (list, dict)) else str(item))
    return np.asarray(parents, np.int64), json_values_as_text(names)


def json_values_as_text(values: list) -> pa.Array:
    """Values a JSON reader gave (text, or a float left as it is) as text, each
    float written as Arrow's reader of the same lines writes it (``2.0`` → "2",
    ``1e-07`` → "1e-7"): a block read line by line names a label as a block
    read by Arrow does, so one class never becomes two by which path read it.
    A lone surrogate is written as U+FFFD (:func:`strings_array`)."""
    at = [i for i, v in enumerate(values) if isinstance(v, float)]
    if at:
        values = list(values)
        floats = nan_as_null(pa.array([values[i] for i in at], pa.float64()))   # JSON's NaN: missing
        for i, text in zip(at, floats.cast(pa.string()).to_pylist()):
            values[i] = text
    return strings_array(values)[0]


# A UTF-16 surrogate on its own: JSON's "\ud800" escape (json.loads joins only a valid pair into one
# character) or a Python str made from one. It is no Unicode character, and Arrow cannot hold it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def strings_array(values: list) -> tuple[pa.Array, np.ndarray | None]:
    """``values`` (str or None) as an Arrow string array, and which of them held
    a lone surrogate (None: none did), written there as U+FFFD — a character no
    token holds, as scikit-learn's tokenizer reads the surrogate. Converting them
    as they were stopped the run (``UnicodeEncodeError``) on the first one."""
    try:
        return pa.array(values, pa.string()), None
    except UnicodeEncodeError:
        pass   # rare: find them, value by value
    bad = np.array([isinstance(v, str) and LONE_SURROGATE.search(v) is not None for v in values], bool)
    fixed = [LONE_SURROGATE.sub("\ufffd", v) if b else v for v, b in zip(values, bad.tolist())]
    return pa.array(fixed, pa.string()), bad


def repeated_rows(sets: pa.ListArray) -> int:
    """Rows whose label set names a label more than once (a set keeps it once)."""
    values = pc.list_flatten(sets)
    if not len(values):
        return 0
    ids = np.asarray(values.dictionary_encode().indices.to_numpy(zero_copy_only=False), np.int64)
    rows = np.asarray(pc.list_parent_indices(sets).to_numpy(), np.int64)
    pairs = rows * (int(ids.max()) + 1) + ids
    uniq, counts = np.unique(pairs, return_counts=True)
    return len(np.unique(uniq[counts > 1] // (int(ids.max()) + 1)))


def _rebuild(n: int, parents, values: pa.Array) -> pa.ListArray:
    """``n`` label sets from flat ``values`` and the row each belongs to
    (rows in order), labels trimmed and empty ones dropped."""
    values = pc.utf8_trim_whitespace(values)
    keep = pc.fill_null(pc.greater(pc.utf8_length(values), 0), False)
    rows = np.asarray(parents.to_numpy(zero_copy_only=False) if hasattr(parents, "to_numpy") else parents, np.int64)
    kept = np.asarray(keep.to_numpy(zero_copy_only=False), bool)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows[kept], minlength=n), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values.filter(keep))
