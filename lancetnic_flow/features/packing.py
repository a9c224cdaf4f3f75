"""A :class:`~.rows.RowBlock` as compact bytes: how a shard is stored in the cache.

The rows of a bag of terms (hashed or vocabulary ids with their counts or
weights) are kept in ascending id order within each row, and each id is
stored as its distance from the row's previous one: a row of 100 terms out
of 2¹⁹ columns takes gaps of a few thousand, two bytes where an id takes
three. Integer values (the raw term counts of the hashed fit pass) go as
one or two bytes, other values as float32. Every array is split into its
byte planes (all first bytes, then all second bytes, …) and the whole is
compressed with zstd: bytes of one plane look alike, which zstd finds.
Token-id sequences (``values`` is None) keep their order: only the byte
planes and zstd.

The featurising kernels give each row's ids in ascending order already (so
a row is summed in the same order wherever it is built); a block that is
not (one built by hand) is sorted here, which changes only the order of a
row's terms. Decoding is vectorised NumPy, and one compiled pass that turns
the ids' byte planes back into ids (:func:`.row_kernels.ungap_planes`);
see docs/benchmarks.md.

The payload is one zstd frame of a small container: ``LFPK``, the length
of a JSON header naming each array's dtype, shape and place, then the
arrays' bytes. Only numbers and fixed-width strings are accepted (no object
dtype: nothing is ever unpickled), and decoding takes NumPy views of the
decompressed bytes, so an ``.npz``'s zip parsing and checksums are not paid
twice (the manifest keeps a CRC-32 of the shard). A shard written before
this codec is a plain ``.npz`` and reads as before.
"""
from __future__ import annotations

import json
import struct

import numpy as np
import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LEVEL = 3
# Arrays of a block besides the CSR ones, stored as they are (labels, targets, numeric columns, label
# names, and a label set's labels training never had: per row, and the block's by name).
EXTRA = ("labels", "targets", "numeric", "label_names", "missed", "missed_labels", "missed_rows")


def _planes(a: np.ndarray) -> tuple[np.ndarray, int]:
    """An unsigned integer array as its low byte planes (the high all-zero ones
    dropped); returns the planes (bytes × n) and how many there are."""
    a = np.ascontiguousarray(a)
    width = a.dtype.itemsize
    top = int(a.max()) if len(a) else 0
    keep = max(1, min(width, (top.bit_length() + 7) // 8))
    planes = a.view(np.uint8).reshape(-1, width)[:, :keep]   # little-endian: low bytes first
    return np.ascontiguousarray(planes.T), keep


def _unplanes(planes: np.ndarray, dtype: np.dtype) -> np.ndarray:
    # Each plane copied into its byte of the output: strided writes of whole planes,
    # several times quicker than shifting and or-ing widened copies.
    dtype = np.dtype(dtype)
    n = planes.shape[1]
    out = np.zeros(n, dtype)
    view = out.view(np.uint8).reshape(n, dtype.itemsize)
    for i, plane in enumerate(planes):
        view[:, i] = plane
    return out


MAGIC = b"LFPK"
KINDS = "biufU"   # booleans, integers, floats and fixed-width strings: never objects


def _container(arrays: dict[str, np.ndarray]) -> bytes:
    """The arrays as MAGIC + header length + JSON header + their bytes, each at a multiple of 8."""
    header, chunks, at = {}, [], 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.kind not in KINDS:
            raise TypeError(f"cannot pack a {a.dtype} array ({name})")
        header[name] = [a.dtype.str, list(a.shape), at]
        chunks.append(a.tobytes())
        pad = -len(chunks[-1]) % 8
        chunks.append(b"\0" * pad)
        at += a.nbytes + pad
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-(len(head) + 8) % 8)
    return b"".join([MAGIC, struct.pack("<I", len(head)), head, *chunks])


def _arrays(raw: bytes) -> dict[str, np.ndarray]:
    """:func:`_container`'s arrays, as read-only views of ``raw``; a malformed payload is a ValueError."""
    if raw[:4] != MAGIC:
        raise ValueError("it is not a packed shard (no LFPK header)")
    (n,) = struct.unpack_from("<I", raw, 4)
    header = json.loads(raw[8:8 + n])
    base, out = 8 + n, {}
    for name, (dtype, shape, at) in header.items():
        dt = np.dtype(dtype)
        if dt.kind not in KINDS:
            raise ValueError(f"its array {name} is of dtype {dtype}, which a shard never holds")
        count = int(np.prod(shape, dtype=np.int64))
        if base + at + count * dt.itemsize > len(raw):
            raise ValueError(f"its array {name} runs past the end of the payload")
        out[name] = np.frombuffer(raw, dt, count, base + at).reshape(shape)
    return out


def _row_of(offsets: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def _gaps(indices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sorted-within-row ids → each id's distance from the row's previous one (the first: itself)."""
    ids = indices.astype(np.int64)
    gaps = np.empty_like(ids)
    if len(ids):
        gaps[0] = ids[0]
        gaps[1:] = ids[1:] - ids[:-1]
        starts = offsets[:-1][np.diff(offsets) > 0]
        gaps[starts] = ids[starts]
    return gaps


def pack(block) -> bytes:
    """``block`` as compact bytes (see the module's docstring)."""
    arrays: dict[str, np.ndarray] = {}
    indices, values, offsets = block.indices, block.values, block.offsets
    bag = values is not None
    if bag:
        gaps = _gaps(indices, offsets)
        if (gaps < 0).any():   # ids out of order in a row (the kernels sort them): sort here
            order = np.lexsort((indices, _row_of(offsets)))
            indices, values = indices[order], values[order]
            gaps = _gaps(indices, offsets)
        arrays["ids"], _ = _planes(gaps.astype(np.uint32))
        whole = values.size and np.array_equal(values, np.round(values)) and values.min() >= 0 \
            and values.max() < 2 ** 16
        if whole or not values.size:
            arrays["counts"], _ = _planes(values.astype(np.uint16))
        else:
            arrays["values"] = np.ascontiguousarray(values.astype(np.float32).view(np.uint32).view(np.uint8)
                                                    .reshape(-1, 4).T)
    else:
        arrays["ids"], _ = _planes(indices.astype(np.uint32))
    arrays["lengths"], _ = _planes(np.diff(offsets).astype(np.uint32))
    for name in EXTRA:
        a = getattr(block, name)
        if a is not None:
            arrays[name] = a
    return zstandard.ZstdCompressor(level=LEVEL).compress(_container(arrays))


def unpack(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of the :class:`~.rows.RowBlock` that :func:`pack` wrote, by field name."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError as exc:
        raise ValueError(f"it is not a whole zstd frame ({exc})") from None
    arrays = _arrays(raw)
    lengths = _unplanes(arrays.pop("lengths"), np.uint32).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = None
    if "counts" in arrays:
        values = _unplanes(arrays.pop("counts"), np.uint16).astype(np.float32)
    elif "values" in arrays:
        values = _unplanes(arrays.pop("values"), np.uint32).view(np.float32)
    if values is not None:
        from .row_kernels import ungap_planes

        planes = arrays.pop("ids")
        if planes.shape[1] != offsets[-1]:
            raise ValueError(f"its rows hold {offsets[-1]} terms, its ids {planes.shape[1]}")
        indices = np.empty(planes.shape[1], np.int32)
        ungap_planes(planes, offsets, indices)
    else:
        indices = _unplanes(arrays.pop("ids"), np.uint32).view(np.int32)
    # The extras are views of the payload (read-only): copies, as a plain .npz gave.
    return {"indices": indices, "offsets": offsets, "values": values,
            **{k: arrays[k].copy() for k in EXTRA if k in arrays}}


def float_planes(a: np.ndarray) -> bytes:
    """A float32 array, compactly (``features.json``'s idf): an idf takes one
    value per document frequency, a few thousand distinct values over a
    million buckets, so it is stored as the table of its distinct values and
    each element's index into it (byte planes); an array of more distinct
    values than 65,536 goes as its four float byte planes. One zstd frame."""
    a = np.asarray(a, "<f4").reshape(-1)
    table, index = np.unique(a, return_inverse=True)
    if len(table) <= 1 << 16 and np.array_equal(table[index].view(np.uint32), a.view(np.uint32)):   # -0.0 is 0.0 to unique
        arrays = {"table": table.astype("<f4"), "index": _planes(index.astype(np.uint16))[0]}
    else:
        arrays = {"planes": _planes(a.view(np.uint32))[0]}
    return zstandard.ZstdCompressor(level=LEVEL).compress(_container(arrays))


def float_unplanes(data: bytes) -> np.ndarray:
    """:func:`float_planes`' array back (float32); a damaged payload is a ValueError."""
    try:
        arrays = _arrays(zstandard.ZstdDecompressor().decompress(data))
        if "table" in arrays:
            return arrays["table"].astype(np.float32)[_unplanes(arrays["index"], np.uint16)]
        return _unplanes(arrays["planes"], np.uint32).view(np.float32)
    except (zstandard.ZstdError, ValueError, KeyError, IndexError, struct.error) as exc:
        # a damaged file says so as a ValueError, as a damaged JSON would
        raise ValueError(f"its float table is not readable ({exc})") from None


def is_packed(data: bytes) -> bool:
    """Whether ``data`` is :func:`pack`'s (a zstd frame), not a plain ``.npz`` of an earlier cache."""
    return data[:4] == ZSTD_MAGIC
