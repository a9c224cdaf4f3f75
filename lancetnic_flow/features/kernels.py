"""Compiled kernels for featurisation's hot loop: one pass over a block's
UTF-8 bytes that finds the tokens, hashes them, and makes each row's bag of
terms — with no Python object per token or per row.

Tokens are maximal runs of word characters (:mod:`.wordchars`: Unicode
letters and numbers, and ``_``) of at least ``min_chars`` characters, in
text that is lower-cased beforehand (``pyarrow.compute.utf8_lower``). This
is scikit-learn's default ``token_pattern`` (``\\b\\w\\w+\\b``).

Hashes are stable across processes, machines and runs (nothing is salted):

* a token's key is FNV-1a 64 over its bytes, then the splitmix64 finaliser;
* a bigram's key is ``mix(key(a) * GOLD + key(b))`` of its two tokens;
* a whole string's hash (the validation split) is FNV-1a 64 over all its
  bytes, finalised the same way.

Compiled by numba on first use and cached on disk next to this file (or in
``NUMBA_CACHE_DIR``): a worker pays the compilation once per machine, then
about a tenth of a second to load it.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLD = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
S30, S27, S31 = np.uint64(30), np.uint64(27), np.uint64(31)
EMPTY = np.uint64(0)      # a free slot in a lookup table (a key of 0 is stored as 1)


@functools.lru_cache(maxsize=1)
def word_table() -> np.ndarray:
    """uint8 per code point (0..0x10FFFF): 1 for a word character."""
    from .wordchars import RANGES

    table = np.zeros(0x110000, np.uint8)
    for a, b in RANGES:
        table[a:b] = 1
    return table


@njit(cache=True, nogil=True, inline="always")
def _mix(h):
    h ^= h >> S30
    h *= M1
    h ^= h >> S27
    h *= M2
    h ^= h >> S31
    return h


@njit(cache=True, nogil=True, inline="always")
def _next_char(data, i, end):
    """(code point, bytes) of the UTF-8 character at ``i``; a malformed byte is one non-word character."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), 1
    if b >= 0xF0 and i + 3 < end:
        return ((np.int64(b) & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) | \
            ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F), 4
    if b >= 0xE0 and i + 2 < end:
        return ((np.int64(b) & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | \
            (np.int64(data[i + 2]) & 0x3F), 3
    if b >= 0xC0 and i + 1 < end:
        return ((np.int64(b) & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    return np.int64(-1), 1


@njit(cache=True, nogil=True)
def _lookup(keys, values, key):
    """``values`` at ``key`` in an open-addressing table (linear probing); -1 if absent."""
    if key == EMPTY:
        key = np.uint64(1)
    mask = np.uint64(len(keys) - 1)
    slot = key & mask
    while True:
        k = keys[slot]
        if k == key:
            return values[slot]
        if k == EMPTY:
            return np.int64(-1)
        slot = (slot + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def build_table(keys_in, values_in):
    """An open-addressing table of ``keys_in`` → ``values_in``, at most half full."""
    size = 1
    while size < 2 * len(keys_in) + 2:
        size *= 2
    keys = np.zeros(size, np.uint64)
    values = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for i in range(len(keys_in)):
        key = keys_in[i]
        if key == EMPTY:
            key = np.uint64(1)
        slot = key & mask
        while keys[slot] != EMPTY and keys[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        keys[slot] = key
        values[slot] = values_in[i]
    return keys, values


@njit(cache=True, nogil=True)
def _row_keys(data, start, end, word, min_chars, ngrams, scratch):
    """The keys of one row's terms into ``scratch``: its tokens, then (``ngrams == 2``)
    its adjacent pairs. Returns (terms written, tokens)."""
    n = 0
    i = start
    prev = EMPTY
    have_prev = False
    tokens = 0
    while i < end:
        cp, size = _next_char(data, i, end)
        if cp < 0 or word[cp] == 0:
            i += size
            continue
        h = FNV_OFFSET
        chars = 0
        while i < end:
            cp, size = _next_char(data, i, end)
            if cp < 0 or word[cp] == 0:
                break
            for k in range(size):
                h = (h ^ np.uint64(data[i + k])) * FNV_PRIME
            chars += 1
            i += size
        if chars < min_chars:
            continue
        key = _mix(h)
        scratch[n] = key
        n += 1
        tokens += 1
        if ngrams >= 2:
            if have_prev:
                scratch[n] = _mix(prev * GOLD + key) ^ GOLD   # kept beside the unigrams, sorted later
                n += 1
            prev = key
            have_prev = True
    return n, tokens


@njit(cache=True, nogil=True)
def bags(data, offsets, word, min_chars, ngrams, buckets, table_keys, table_values):
    """Each row's bag of terms as CSR: (row offsets, term ids, counts, tokens).

    A term's id is its key modulo ``buckets`` (``buckets > 0``), or its value
    in the lookup table (terms not in it are dropped). Ids within a row are
    distinct, in the order they first occur; counts are how often each occurs
    in the row (a small open-addressing set per row: no sort)."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    most = 0
    for r in range(n_rows):
        most = max(most, offsets[r + 1] - offsets[r])
    # A token takes at least 2 bytes and a separator; bigrams at most as many.
    scratch = np.empty(most + 2, np.uint64)
    size = 16
    while size < 2 * (most + 2):
        size *= 2
    set_keys = np.zeros(size, np.int64)    # id + 1; 0 = a free slot
    set_counts = np.zeros(size, np.float32)
    set_slots = np.empty(most + 2, np.int64)
    set_mask = size - 1
    cap = (offsets[n_rows] - base) + n_rows + 2
    out_ids = np.empty(cap, np.int64)
    out_counts = np.empty(cap, np.float32)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    nnz = 0
    tokens = 0
    nb = np.uint64(max(buckets, 1))
    mask = nb - np.uint64(1)
    pow2 = buckets > 0 and (buckets & (buckets - 1)) == 0   # a mask instead of a division, same result
    for r in range(n_rows):
        n, t = _row_keys(data, offsets[r] - base, offsets[r + 1] - base, word, min_chars, ngrams, scratch)
        tokens += t
        used = 0
        for j in range(n):
            if buckets > 0:
                v = np.int64(scratch[j] & mask) if pow2 else np.int64(scratch[j] % nb)
            else:
                v = _lookup(table_keys, table_values, scratch[j])
                if v < 0:
                    continue
            slot = (v * 0x9E3779B1) & set_mask
            while set_keys[slot] != 0 and set_keys[slot] != v + 1:
                slot = (slot + 1) & set_mask
            if set_keys[slot] == 0:
                set_keys[slot] = v + 1
                set_counts[slot] = 1.0
                set_slots[used] = slot
                used += 1
            else:
                set_counts[slot] += 1.0
        for u in range(used):
            slot = set_slots[u]
            out_ids[nnz] = set_keys[slot] - 1
            out_counts[nnz] = set_counts[slot]
            set_keys[slot] = 0
            nnz += 1
        row_offsets[r + 1] = nnz
    return row_offsets, out_ids[:nnz], out_counts[:nnz], tokens


@njit(cache=True, nogil=True)
def sequences(data, offsets, word, min_chars, max_len, table_keys, table_values, unknown):
    """Each row's first ``max_len`` token ids in text order, as CSR (row
    offsets, ids); a token not in the table gets ``unknown``."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    most = 0
    for r in range(n_rows):
        most = max(most, offsets[r + 1] - offsets[r])
    scratch = np.empty(most + 2, np.uint64)
    out = np.empty(n_rows * max_len, np.int64)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    nnz = 0
    for r in range(n_rows):
        n, t = _row_keys(data, offsets[r] - base, offsets[r + 1] - base, word, min_chars, 1, scratch)
        for j in range(min(n, max_len)):
            v = _lookup(table_keys, table_values, scratch[j])
            out[nnz] = v if v >= 0 else unknown
            nnz += 1
        row_offsets[r + 1] = nnz
    return row_offsets, out[:nnz]


@njit(cache=True, nogil=True)
def term_keys(data, offsets):
    """The key of each string taken as a term: a token, or two tokens joined
    by one space (a bigram) — the keys :func:`bags` gives them."""
    n = len(offsets) - 1
    base = offsets[0]
    out = np.empty(n, np.uint64)
    for r in range(n):
        s, e = offsets[r] - base, offsets[r + 1] - base
        h = FNV_OFFSET
        left = EMPTY
        pair = False
        for i in range(s, e):
            b = data[i]
            if b == 0x20 and not pair:
                left = _mix(h)
                h = FNV_OFFSET
                pair = True
                continue
            h = (h ^ np.uint64(b)) * FNV_PRIME
        out[r] = (_mix(left * GOLD + _mix(h)) ^ GOLD) if pair else _mix(h)
    return out


@njit(cache=True, nogil=True)
def whole_hashes(data, offsets, valid):
    """FNV-1a 64 of each whole string, finalised; a null (``valid == 0``) hashes as ""."""
    n = len(offsets) - 1
    base = offsets[0]
    out = np.empty(n, np.uint64)
    for r in range(n):
        h = FNV_OFFSET
        if valid[r]:
            for i in range(offsets[r] - base, offsets[r + 1] - base):
                h = (h ^ np.uint64(data[i])) * FNV_PRIME
        out[r] = _mix(h)
    return out


@njit(cache=True, nogil=True)
def token_spans(data, offsets, word, min_chars):
    """Every token as a string: (bytes of all tokens back to back, their
    offsets, the row of each), in text order."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    total = offsets[n_rows] - base
    buf = np.empty(total, np.uint8)
    tok_offsets = np.zeros(total // 2 + n_rows + 2, np.int64)
    rows = np.empty(total // 2 + n_rows + 1, np.int64)
    n = 0
    pos = 0
    for r in range(n_rows):
        i, end = offsets[r] - base, offsets[r + 1] - base
        while i < end:
            cp, size = _next_char(data, i, end)
            if cp < 0 or word[cp] == 0:
                i += size
                continue
            start = i
            chars = 0
            while i < end:
                cp, size = _next_char(data, i, end)
                if cp < 0 or word[cp] == 0:
                    break
                chars += 1
                i += size
            if chars < min_chars:
                continue
            buf[pos:pos + i - start] = data[start:i]
            pos += i - start
            rows[n] = r
            n += 1
            tok_offsets[n] = pos
    return buf[:pos], tok_offsets[:n + 1], rows[:n]


def warm() -> None:
    """Load (or compile, the first time on a machine) every kernel, on a tiny input."""
    data = np.frombuffer(b"warm up", np.uint8)
    offsets = np.array([0, 7], np.int64)
    table = build_table(np.array([1], np.uint64), np.array([0], np.int64))
    bags(data, offsets, word_table(), 2, 2, 8, *table)
    sequences(data, offsets, word_table(), 2, 4, *table, 1)
    term_keys(data, offsets)
    whole_hashes(data, offsets, np.ones(1, np.uint8))
    token_spans(data, offsets, word_table(), 2)
