"""Label sets (``--task multilabel``) as multi-hot rows.

A reader gives each row a ``list<string>`` of labels; from here on a block's
``labels`` is a ``uint8`` matrix of rows × labels, 1 where the row has the
label. Its size is bounded by the block's rows times the label set, never by
the vocabulary, and it gathers, slices and concatenates like any per-row
array of a :class:`~.rows.RowBlock`. All array operations: no loop per row.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..options import bad


def is_label_sets(column) -> bool:
    """Whether a table's ``label`` column holds label sets (multilabel) rather than one label a row."""
    t = column.type
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _flat(sets) -> tuple[pa.Array, np.ndarray, int]:
    """(every label of every row, the row each belongs to, the number of rows)."""
    if isinstance(sets, pa.ChunkedArray):
        sets = sets.combine_chunks() if sets.num_chunks else pa.array([], sets.type)
    return pc.list_flatten(sets), pc.list_parent_indices(sets).to_numpy().astype(np.int64), len(sets)


def multi_hot(sets, names: list[str]) -> np.ndarray:
    """Label sets → rows × ``len(names)`` uint8, columns in ``names`` order;
    a label not in ``names`` (unseen in training) is left out of its row."""
    values, rows, n = _flat(sets)
    out = np.zeros((n, len(names)), np.uint8)
    if len(values):
        ids = pc.fill_null(pc.index_in(values, value_set=pa.array(names, pa.string())), -1).to_numpy()
        known = ids >= 0
        out[rows[known], ids[known]] = 1
    return out


def chunk_multi_hot(sets) -> tuple[np.ndarray, np.ndarray]:
    """Label sets → (rows × the chunk's own labels uint8, those labels' names):
    a raw shard's labels, before the run's label set is known."""
    values, rows, n = _flat(sets)
    if not len(values):
        return np.zeros((n, 0), np.uint8), np.array([], dtype=str)
    enc = values.dictionary_encode()
    out = np.zeros((n, len(enc.dictionary)), np.uint8)
    out[rows, enc.indices.to_numpy(zero_copy_only=False)] = 1
    return out, np.array(enc.dictionary.to_pylist(), dtype=str)


def _row_label_pairs(values: pa.Array, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """Each (row, label) of ``values`` once, a label twice in one row once as its set holds it:
    (the pairs' rows, their labels' ids, the labels' names). O(labels given), not rows × labels."""
    enc = values.dictionary_encode()
    ids = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    k = max(len(enc.dictionary), 1)
    pairs = np.unique(rows * k + ids)
    return pairs // k, pairs % k, enc.dictionary.to_pylist()


def set_counts(sets) -> dict[str, int]:
    """Rows per label (a label twice in one row counts once)."""
    values, rows, _ = _flat(sets)
    if not len(values):
        return {}
    _, ids, names = _row_label_pairs(values, rows)
    counts = np.bincount(ids, minlength=len(names))
    return {str(name): int(c) for name, c in zip(names, counts.tolist()) if c}


def remap(hot: np.ndarray, names: np.ndarray, labels: list[str]) -> np.ndarray:
    """A raw shard's multi-hot over its own ``names`` → columns in the run's
    ``labels`` order; labels the run does not know are dropped. Two names of one
    label (spellings read as the run's) set its column where either is set."""
    out = np.zeros((len(hot), len(labels)), np.uint8)
    if len(names):
        ids = pc.fill_null(pc.index_in(pa.array(names.tolist(), pa.string()),
                                       value_set=pa.array(labels, pa.string())), -1).to_numpy()
        known = np.flatnonzero(ids >= 0)
        out[:, ids[known]] = hot[:, known]
        columns, times = np.unique(ids[known], return_counts=True)
        for j in known[np.isin(ids[known], columns[times > 1])]:   # or-ed, per distinct name of the chunk
            out[:, ids[j]] |= hot[:, j].astype(np.uint8)
    return out


def unseen(labels, names: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Labels outside ``names`` (the run's) in a ``label`` column, one label or a
    set a row: (the rows holding one, how many rows hold each such label)."""
    per_row, counts = unseen_per_row(labels, names)
    return per_row > 0, counts


def unseen_per_row(labels, names: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Labels outside ``names`` in a ``label`` column: (per row, how many it holds,
    int32; how many rows hold each such label). A label named twice in one row's set
    counts once, as its multi-hot row (and :func:`left_out`) holds it once."""
    if is_label_sets(labels):
        values, rows, n = _flat(labels)
    else:
        values = labels.combine_chunks() if isinstance(labels, pa.ChunkedArray) else labels
        rows, n = np.arange(len(values)), len(values)
    if not len(values):
        return np.zeros(n, np.int32), {}
    # a missing label is no label the run never had (is_in gives it False, not null)
    known = pc.or_(pc.is_in(values, value_set=pa.array(names, pa.string())), pc.is_null(values)).to_numpy(
        zero_copy_only=False)
    if known.all():
        return np.zeros(n, np.int32), {}
    at, ids, unknown = _row_label_pairs(values.filter(pa.array(~known)), rows[~known])
    counts = np.bincount(ids, minlength=len(unknown))
    return (np.bincount(at, minlength=n).astype(np.int32),
            {str(name): int(c) for name, c in zip(unknown, counts.tolist()) if c})


def left_out(hot: np.ndarray, names: np.ndarray, labels: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """A raw shard's multi-hot over its own ``names``: the labels outside the run's
    ``labels`` that :func:`remap` drops, as :func:`unseen_per_row` counts them."""
    unknown = ~np.isin(names.astype(str), np.array(labels, dtype=str)) if len(names) else np.zeros(0, bool)
    if not unknown.any():
        return np.zeros(len(hot), np.int32), {}
    cols = hot[:, unknown]
    rows = cols.sum(0, dtype=np.int64)
    return cols.sum(1, dtype=np.int32), {str(k): int(v) for k, v in zip(names[unknown].tolist(), rows.tolist()) if v}


# Separators people join a row's labels with in one text column.
JOINERS = ("|", ";", ",", "+")


def joined_labels(labels: list[str]) -> tuple[str, list[str]] | None:
    """The separator a single-label run's labels look joined by, and examples,
    or None. Labels look joined when at least two of them are made of parts
    that are each a label of its own (``sports|tech`` and ``sports|politics``
    beside ``sports``, ``tech``, ``politics``): a run that reads each whole
    string as a class learns the combinations, not the labels (``--task
    multilabel --label-sep SEP`` learns each). Hierarchical names whose parts
    are not labels (``Science|Physics`` without ``Physics``) do not count."""
    found = joins_of(labels, labels)
    return (found[0], found[1][:3]) if found is not None and len(found[1]) >= 2 else None


def joins_of(names, labels) -> tuple[str, list[str]] | None:
    """The first separator of :data:`JOINERS` by which some of ``names`` are
    ``labels`` joined (each part a label other than the whole), and those names; or None."""
    known = {x.strip() for x in labels}
    for sep in JOINERS:
        joined = [x for x in names if sep in x
                  and all(p.strip() in known and p.strip() != x.strip() for p in x.split(sep))]
        if joined:
            return sep, joined
    return None


def joined_in_sets(labels: list[str], sep: str | None) -> tuple[str, list[str]] | None:
    """A multilabel run's ``labels`` that are others of them joined by a separator the run did not
    split by (``sports|tech`` beside ``sports`` and ``tech``, read without ``--label-sep``, or a list
    item holding the separator): (that separator, those labels), or None. Such a row learned the
    joined string as a label of its own, never the labels it joins."""
    found = joins_of(labels, labels)
    return found if found is not None and found[0] != sep else None


def refuse_joined_sets(unseen: dict[str, int], labels: list[str], read_with: str | None = None) -> None:
    """Refuse label sets whose labels the run never had (``unseen``: name → rows) are the run's
    own ``labels`` joined (``sports|tech`` for a run of ``sports`` and ``tech``): the data joins each
    row's labels by a separator it was not read with (a run trained on lists has none), and each such
    row was scored as missing every label it has. ``evaluate`` and ``train``'s validation alike.
    Joined by ``read_with``, the separator the data was read with, they are items of lists, which
    no separator splits: the error says so, not to pass the separator given."""
    found = joins_of(list(unseen), labels)
    if found is None:
        return
    sep, joined = found[0], sorted(found[1], key=lambda x: -unseen[x])   # the most rows first, whoever counted
    shown = ", ".join(f"{x!r} {unseen[x]:,}" for x in joined[:3]) + (", …" if len(joined) > 3 else "")
    if sep == read_with:
        raise bad("data.label", f"items of the label lists join this run's labels by {sep!r} ({shown}): a list's "
                  f"items are its labels, never split by {{data.label_sep}}, so each was read as one label the "
                  "run never saw", 'give each label as an item of its own (["sports", "tech"]), or the labels as '
                  f"one string joined by {sep!r}")
    raise bad("data.label_sep", f"the label column joins this run's labels by {sep!r} ({shown}), and each joined "
                                "set was read as one label the run never saw",
              # a shell would read the command line's separator (| ; +) unquoted
              lambda say: f"pass {say('data.label_sep')} {sep!r}" if say.style == "cli" else
              f"pass {say.setting('data.label_sep', sep)}")
