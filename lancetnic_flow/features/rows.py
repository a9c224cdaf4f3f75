"""A block of feature rows in compressed sparse row (CSR) form.

This is what every stage after tokenisation passes along: the worker's
transform output, a shard on disk, the shuffle buffer and a training batch.
Row ``i`` owns ``indices[offsets[i]:offsets[i+1]]`` (feature ids, or token
ids in sequence mode) and the same slice of ``values``. No dense
rows × vocabulary array ever exists.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, fields

import numpy as np

# Arrays with one entry per row, which follow their rows through take, gather, slice and concat.
PER_ROW = ("labels", "targets", "numeric", "missed")


@dataclass
class RowBlock:
    indices: np.ndarray            # int32 (nnz,)
    offsets: np.ndarray            # int64 (n + 1,)
    values: np.ndarray | None = None    # float32 (nnz,); None for token-id sequences
    labels: np.ndarray | None = None    # int32 (n,), -1 = no usable label; or multi-hot uint8 (n, labels)
    targets: np.ndarray | None = None   # float32 (n,), standardised; NaN = missing
    numeric: np.ndarray | None = None   # float32 (n, k), standardised
    # A shard of raw counts, written before the label set was known: ``labels``
    # index these names (see FittedFeatures.finish); targets and numeric are raw.
    label_names: np.ndarray | None = None
    # Label sets: per row, how many labels of its set training never had (left out of ``labels``,
    # each a false negative of the row: runs/evaluate.py counts them so).
    missed: np.ndarray | None = None    # int32 (n,)
    # The whole block's such labels and the rows holding each (macro averages count every label):
    # they describe this block's rows together, so a block cut from it (take, slice, …) has none.
    missed_labels: np.ndarray | None = None   # str (k,)
    missed_rows: np.ndarray | None = None     # int64 (k,)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays().values())

    def _arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def empty(cls, like: "RowBlock | None" = None) -> "RowBlock":
        b = cls(np.zeros(0, np.int32), np.zeros(1, np.int64))
        if like is not None:
            for name, arr in like._arrays().items():
                if name not in ("indices", "offsets", "missed_labels", "missed_rows"):
                    setattr(b, name, np.zeros((0,) + arr.shape[1:], arr.dtype))
        return b

    def missed_by_label(self) -> dict[str, int]:
        """This block's labels training never had, by the rows holding each (empty when none)."""
        if self.missed_labels is None:
            return {}
        return {str(k): int(v) for k, v in zip(self.missed_labels.tolist(), self.missed_rows.tolist())}

    def set_missed(self, per_row: np.ndarray, by_label: dict[str, int]) -> None:
        """Record a label-set block's labels training never had: how many each row
        held (``per_row``) and, for the whole block, the rows holding each label."""
        self.missed = np.asarray(per_row, np.int32)
        self.missed_labels = np.array(list(by_label), dtype=str) if by_label else None
        self.missed_rows = np.array(list(by_label.values()), np.int64) if by_label else None

    def take(self, rows: np.ndarray) -> "RowBlock":
        """Gather rows (any order, repeats allowed), each row's entries copied
        in one compiled pass (:func:`.row_kernels.gather_rows`). Memory: the
        output, and one length per row gathered."""
        from .row_kernels import gather_rows

        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        indices = np.empty(offsets[-1], self.indices.dtype)
        gather_rows(self.indices, self.offsets, rows, offsets, indices)
        values = None
        if self.values is not None:
            values = np.empty(offsets[-1], self.values.dtype)
            gather_rows(self.values, self.offsets, rows, offsets, values)
        out = RowBlock(indices, offsets, values)
        for name in PER_ROW:
            arr = getattr(self, name)
            if arr is not None:
                setattr(out, name, arr[rows])
        out.label_names = self.label_names
        return out

    @staticmethod
    def gather(parts: list["RowBlock"], which: np.ndarray, rows: np.ndarray) -> "RowBlock":
        """Row ``rows[j]`` of block ``parts[which[j]]``, for each ``j``, as one block:
        :meth:`take` from several blocks at once, each row copied once, straight
        to its place (no concatenation of the blocks first)."""
        from .row_kernels import place_rows

        if len(parts) == 1:
            return parts[0].take(rows)
        if any(p.label_names is not None for p in parts):
            raise ValueError("raw shards (labels by name) are finished one by one, never gathered together")
        which, rows = np.asarray(which, np.int64), np.asarray(rows, np.int64)
        lengths = np.empty(len(rows), np.int64)
        mine = [np.flatnonzero(which == k) for k in range(len(parts))]
        for part, sel in zip(parts, mine):
            lengths[sel] = part.offsets[rows[sel] + 1] - part.offsets[rows[sel]]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        first = parts[0]
        out = RowBlock(np.empty(offsets[-1], first.indices.dtype), offsets,
                       np.empty(offsets[-1], first.values.dtype) if first.values is not None else None)
        for name in PER_ROW:
            arr = getattr(first, name)
            if arr is not None:
                setattr(out, name, np.empty((len(rows),) + arr.shape[1:], arr.dtype))
        for part, sel in zip(parts, mine):
            if not len(sel):
                continue
            here, starts = rows[sel], offsets[sel]
            place_rows(part.indices, part.offsets, here, starts, out.indices)
            if out.values is not None:
                place_rows(part.values, part.offsets, here, starts, out.values)
            for name in PER_ROW:
                arr = getattr(out, name)
                if arr is not None:
                    arr[sel] = getattr(part, name)[here]
        return out

    def slice(self, start: int, stop: int) -> "RowBlock":
        """Rows ``start:stop``: views of this block's arrays, no copy."""
        stop = min(stop, len(self))
        start = min(start, stop)
        a, b = self.offsets[start], self.offsets[stop]
        out = RowBlock(self.indices[a:b], self.offsets[start:stop + 1] - a,
                       self.values[a:b] if self.values is not None else None)
        for name in PER_ROW:
            arr = getattr(self, name)
            if arr is not None:
                setattr(out, name, arr[start:stop])
        out.label_names = self.label_names
        return out

    @staticmethod
    def concat(blocks: list["RowBlock"]) -> "RowBlock":
        blocks = [b for b in blocks if b is not None]
        if any(b.label_names is not None for b in blocks) and len(blocks) > 1:
            raise ValueError("raw shards (labels by name) are finished one by one, never concatenated")
        if len(blocks) == 1:
            return blocks[0]
        nnz = np.cumsum([0] + [len(b.indices) for b in blocks[:-1]])
        offsets = np.concatenate([np.zeros(1, np.int64)] + [b.offsets[1:] + s for b, s in zip(blocks, nnz)])
        out = RowBlock(np.concatenate([b.indices for b in blocks]), offsets)
        for name in ("values",) + PER_ROW:
            arrs = [getattr(b, name) for b in blocks]
            if all(a is not None for a in arrs):
                setattr(out, name, np.concatenate(arrs))
        return out

    def to_bytes(self) -> bytes:
        """The block as a shard's bytes: compact (:mod:`.packing`), a row's terms in id order."""
        from .packing import pack

        return pack(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> "RowBlock":
        from .packing import is_packed, unpack

        if is_packed(data):
            return cls(**unpack(data))
        # A shard of an earlier cache: a plain .npz. allow_pickle=False: a shard is numbers only, never code.
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return cls(**{k: z[k] for k in z.files})
