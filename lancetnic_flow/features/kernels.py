"""Compiled kernels for featurisation's hot loop: one pass over a block's
UTF-8 bytes that finds the tokens, hashes them, and makes each row's bag of
terms — with no Python object per token or per row.

Tokens are maximal runs of word characters (:mod:`lancetnic_flow.wordchars`: Unicode
letters and numbers, and ``_``) of at least ``min_chars`` characters, in
text that is lower-cased beforehand (``pyarrow.compute.utf8_lower``). This
is scikit-learn's default ``token_pattern`` (``\\b\\w\\w+\\b``).

Hashes are stable across processes, machines and runs (nothing is salted):

* a token's key is FNV-1a 64 over its bytes, then the splitmix64 finaliser;
* a bigram's key is ``mix(key(a) * GOLD + key(b)) ^ GOLD`` of its two tokens;
  an n-gram's (n ≥ 3) extends the same chain, ``c = mix(c * GOLD + key(next))``
  from ``c = key(first)``, then ``^ GOLD`` — so the keys of unigrams and
  bigrams are those of every earlier version;
* a character n-gram's key is its UTF-8 bytes hashed like a token (the
  scikit-learn ``char`` / ``char_wb`` analyzers, :func:`char_bags`);
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
    from ..wordchars import RANGES

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
def _token_keys(data, start, end, word, min_chars, stop_keys, stop_values, keys, min_n, max_n, out, spans):
    """The keys of one row's tokens into ``keys``, in text order, stop words
    (keys in the stop table) left out, and (``max_n > 0``) the n-grams ending
    at each into ``out`` as it goes: one pass. Returns (tokens, n-grams).
    With a ``spans`` array (2 × tokens), token ``t``'s bytes are
    ``data[spans[2t]:spans[2t + 1]]``."""
    t = 0
    n = 0
    use_stop = len(stop_keys) > 2   # the empty table has 2 slots
    record = len(spans) > 0
    i = start
    while i < end:
        cp, size = _next_char(data, i, end)
        if cp < 0 or word[cp] == 0:
            i += size
            continue
        first = i
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
        if use_stop and _lookup(stop_keys, stop_values, key) >= 0:
            continue
        keys[t] = key
        if record:
            spans[2 * t] = first
            spans[2 * t + 1] = i
        if max_n > 0:
            n = _ngrams_ending(keys, t, min_n, max_n, out, n)
        t += 1
    return t, n


@njit(cache=True, nogil=True, inline="always")
def _ngrams_ending(keys, j, min_n, max_n, out, n):
    """The n-grams (``min_n`` ≤ n ≤ ``max_n``) ending at token ``j`` of
    ``keys`` into ``out`` from ``n`` on, shortest first — for (1, 2) the
    order earlier versions wrote (a word, then its pair with the word
    before). Returns the new count."""
    for size in range(min_n, min(max_n, j + 1) + 1):
        if size == 1:
            out[n] = keys[j]
        else:
            c = keys[j - size + 1]
            for m in range(j - size + 2, j + 1):
                c = _mix(c * GOLD + keys[m])
            out[n] = c ^ GOLD
        n += 1
    return n


@njit(cache=True, nogil=True)
def _ngram_keys(keys, t, min_n, max_n, out):
    """The n-grams of a row's ``t`` token keys into ``out``, token by token
    (:func:`_ngrams_ending`). Returns the number written."""
    n = 0
    for j in range(t):
        n = _ngrams_ending(keys, j, min_n, max_n, out, n)
    return n


@njit(cache=True, nogil=True)
def _grow(arr, need):
    """``arr`` with room for ``need`` items (doubled), its contents kept."""
    if need <= len(arr):
        return arr
    out = np.empty(max(need, 2 * len(arr)), arr.dtype)
    out[:len(arr)] = arr
    return out


@njit(cache=True, nogil=True)
def _bag_row(terms, n, buckets, table_keys, table_values, set_keys, set_counts, set_slots, out_ids, out_counts,
             nnz):
    """Count one row's ``n`` term keys into ``out_ids``/``out_counts`` from
    ``nnz`` on: ids distinct, ascending. Returns the new nnz."""
    set_mask = len(set_keys) - 1
    nb = np.uint64(max(buckets, 1))
    mask = nb - np.uint64(1)
    pow2 = buckets > 0 and (buckets & (buckets - 1)) == 0   # a mask instead of a division, same result
    used = 0
    for j in range(n):
        if buckets > 0:
            v = np.int64(terms[j] & mask) if pow2 else np.int64(terms[j] % nb)
        else:
            v = _lookup(table_keys, table_values, terms[j])
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
    # Ids ascending: a shard stores a row as gaps between its ids (features/packing.py), and a
    # row's sum is taken in one order wherever the row is built. Sorting (id, slot) pairs packed
    # in one integer orders the slots by id with one in-place sort and no allocation.
    shift = 1
    while (1 << shift) <= set_mask:
        shift += 1
    for u in range(used):
        slot = set_slots[u]
        set_slots[u] = ((set_keys[slot] - 1) << shift) | slot
    set_slots[:used].sort()
    for u in range(used):
        slot = set_slots[u] & set_mask
        out_ids[nnz] = set_keys[slot] - 1
        out_counts[nnz] = set_counts[slot]
        set_keys[slot] = 0
        nnz += 1
    return nnz


@njit(cache=True, nogil=True)
def _row_set(terms):
    """A row's counting set for at most ``terms`` distinct ids: (keys, counts, slots), at most half full."""
    size = 16
    while size < 2 * (terms + 2):
        size *= 2
    return np.zeros(size, np.int64), np.zeros(size, np.float32), np.empty(terms + 2, np.int64)


@njit(cache=True, nogil=True)
def _distinct(terms, buckets, table_keys):
    """At most how many distinct ids a row of ``terms`` terms has: no more
    than the buckets, or the vocabulary (half its table), so the set stays small."""
    return min(terms, buckets if buckets > 0 else len(table_keys) // 2 + 1)


@njit(cache=True, nogil=True)
def _longest(offsets):
    most = 0
    for r in range(len(offsets) - 1):
        most = max(most, offsets[r + 1] - offsets[r])
    return most


@njit(cache=True, nogil=True)
def word_bags(data, offsets, word, min_chars, min_n, max_n, buckets, table_keys, table_values, stop_keys,
              stop_values):
    """Each row's bag of word n-grams (``min_n`` ≤ n ≤ ``max_n``) as CSR:
    (row offsets, term ids, counts, tokens). Stop words are dropped before
    the n-grams are formed, as scikit-learn does.

    A term's id is its key modulo ``buckets`` (``buckets > 0``), or its value
    in the lookup table (terms not in it are dropped). Ids within a row are
    distinct and ascending; counts are how often each occurs in the row (a
    small open-addressing set per row, its ids sorted once at the row's end). The working
    arrays are the block's: its longest row × the number of n-gram lengths."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    # A token takes at least one byte and a separator.
    most_tokens = (_longest(offsets) + 1) // 2 + 1
    lengths = max_n - min_n + 1
    keys = np.empty(most_tokens, np.uint64)
    scratch = np.empty(most_tokens * lengths + 2, np.uint64)
    set_keys, set_counts, set_slots = _row_set(_distinct(len(scratch), buckets, table_keys))
    cap = (offsets[n_rows] - base) + n_rows + 2
    out_ids = np.empty(cap, np.int64)
    out_counts = np.empty(cap, np.float32)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    nnz = 0
    tokens = 0
    for r in range(n_rows):
        t, n = _token_keys(data, offsets[r] - base, offsets[r + 1] - base, word, min_chars, stop_keys, stop_values,
                           keys, min_n, max_n, scratch, np.empty(0, np.int64))
        tokens += t
        out_ids = _grow(out_ids, nnz + n)
        out_counts = _grow(out_counts, nnz + n)
        nnz = _bag_row(scratch, n, buckets, table_keys, table_values, set_keys, set_counts, set_slots, out_ids,
                       out_counts, nnz)
        row_offsets[r + 1] = nnz
    return row_offsets, out_ids[:nnz], out_counts[:nnz], tokens


@njit(cache=True, nogil=True)
def bags(data, offsets, word, min_chars, ngrams, buckets, table_keys, table_values):
    """Each row's words (and word pairs, ``ngrams == 2``) as CSR: :func:`word_bags` over (1, ``ngrams``)."""
    none_keys, none_values = np.zeros(2, np.uint64), np.full(2, -1, np.int64)
    return word_bags(data, offsets, word, min_chars, 1, ngrams, buckets, table_keys, table_values, none_keys,
                     none_values)


@njit(cache=True, nogil=True)
def key_bags(keys, key_offsets, min_n, max_n, buckets, table_keys, table_values, stop_keys, stop_values):
    """:func:`word_bags` over tokens already found (a registered tokenizer's):
    ``keys[key_offsets[r]:key_offsets[r + 1]]`` are row ``r``'s token keys."""
    n_rows = len(key_offsets) - 1
    most = _longest(key_offsets) + 1
    lengths = max_n - min_n + 1
    kept = np.empty(most, np.uint64)
    scratch = np.empty(most * lengths + 2, np.uint64)
    set_keys, set_counts, set_slots = _row_set(_distinct(len(scratch), buckets, table_keys))
    out_ids = np.empty(len(keys) + n_rows + 2, np.int64)
    out_counts = np.empty(len(keys) + n_rows + 2, np.float32)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    use_stop = len(stop_keys) > 2
    nnz = 0
    for r in range(n_rows):
        t = 0
        for j in range(key_offsets[r], key_offsets[r + 1]):
            if not (use_stop and _lookup(stop_keys, stop_values, keys[j]) >= 0):
                kept[t] = keys[j]
                t += 1
        n = _ngram_keys(kept, t, min_n, max_n, scratch)
        out_ids = _grow(out_ids, nnz + n)
        out_counts = _grow(out_counts, nnz + n)
        nnz = _bag_row(scratch, n, buckets, table_keys, table_values, set_keys, set_counts, set_slots, out_ids,
                       out_counts, nnz)
        row_offsets[r + 1] = nnz
    return row_offsets, out_ids[:nnz], out_counts[:nnz]


@njit(cache=True, nogil=True, inline="always")
def _is_space(cp):
    """Python's ``str.isspace`` (what ``\\s`` and ``str.split()`` use), by code point."""
    if cp < 0x80:
        return (0x09 <= cp <= 0x0D) or (0x1C <= cp <= 0x20)
    return cp == 0x85 or cp == 0xA0 or cp == 0x1680 or (0x2000 <= cp <= 0x200A) or cp == 0x2028 or \
        cp == 0x2029 or cp == 0x202F or cp == 0x205F or cp == 0x3000


@njit(cache=True, nogil=True)
def _char_grams(data, ustart, ulen, lo, hi, min_n, max_n, out, n):
    """Every run of ``min_n``..``max_n`` characters of ``[lo, hi)`` (character
    ``i`` is ``data[ustart[i]:ustart[i] + ulen[i]]``, or a space where
    ``ustart[i] < 0``), hashed like a token, into ``out`` from ``n`` on."""
    for a in range(lo, hi):
        h = FNV_OFFSET
        for m in range(max_n):
            b = a + m
            if b >= hi:
                break
            if ustart[b] < 0:
                h = (h ^ np.uint64(0x20)) * FNV_PRIME
            else:
                for k in range(ustart[b], ustart[b] + ulen[b]):
                    h = (h ^ np.uint64(data[k])) * FNV_PRIME
            if m + 1 >= min_n:
                out[n] = _mix(h)
                n += 1
    return n


@njit(cache=True, nogil=True)
def _row_chars(data, start, end, ustart, ulen):
    """A row's characters after scikit-learn's ``\\s\\s+`` → " " (a single
    whitespace character stays itself). Returns their number."""
    u = 0
    i = start
    while i < end:
        cp, size = _next_char(data, i, end)
        if cp >= 0 and _is_space(cp):
            j = i + size
            run = 1
            while j < end:
                cp2, size2 = _next_char(data, j, end)
                if cp2 < 0 or not _is_space(cp2):
                    break
                run += 1
                j += size2
            ustart[u] = i if run == 1 else -1
            ulen[u] = size
            u += 1
            i = j
        else:
            ustart[u] = i
            ulen[u] = size
            u += 1
            i += size
    return u


@njit(cache=True, nogil=True)
def _wb_grams(data, ustart, ulen, u, min_n, max_n, wstart, wlen, out, n):
    """scikit-learn's ``char_wb``: each whitespace-separated word, padded
    with a space each side, gives its character n-grams; a word shorter
    than ``min_n`` (padded) counts once, whole."""
    i = 0
    while i < u:
        if ustart[i] >= 0 and not _is_space(_next_char(data, ustart[i], ustart[i] + ulen[i])[0]):
            w = 1
            wstart[0] = -1
            while i < u and ustart[i] >= 0 and not _is_space(_next_char(data, ustart[i], ustart[i] + ulen[i])[0]):
                wstart[w] = ustart[i]
                wlen[w] = ulen[i]
                w += 1
                i += 1
            wstart[w] = -1
            w += 1
            n = _char_grams(data, wstart, wlen, 0, w, min_n, max_n, out, n)
            if w < min_n:
                n = _char_grams(data, wstart, wlen, 0, w, w, w, out, n)
        else:
            i += 1
    return n


@njit(cache=True, nogil=True)
def char_bags(data, offsets, min_n, max_n, wb, buckets, table_keys, table_values):
    """Each row's bag of character n-grams (``min_n`` ≤ n ≤ ``max_n``) as CSR
    (row offsets, term ids, counts), as scikit-learn's ``char`` analyzer
    (``wb`` false: n-grams of the whole text, whitespace runs collapsed to one
    space) or ``char_wb`` (``wb`` true: within words, padded with spaces).
    Ids as in :func:`word_bags`. The working arrays are the block's: its
    longest row × the number of n-gram lengths."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    most = _longest(offsets)
    lengths = max_n - min_n + 1
    ustart = np.empty(most + 2, np.int64)
    ulen = np.zeros(most + 2, np.int64)
    wstart = np.empty(most + 2, np.int64)
    wlen = np.zeros(most + 2, np.int64)
    # char_wb: a word of w characters adds w + 2 (its padding), and a short word once more.
    scratch = np.empty((2 * most + 2) * lengths + most + 2, np.uint64)
    set_keys, set_counts, set_slots = _row_set(_distinct(len(scratch), buckets, table_keys))
    cap = (offsets[n_rows] - base) + n_rows + 2
    out_ids = np.empty(cap, np.int64)
    out_counts = np.empty(cap, np.float32)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    nnz = 0
    for r in range(n_rows):
        u = _row_chars(data, offsets[r] - base, offsets[r + 1] - base, ustart, ulen)
        if wb:
            n = _wb_grams(data, ustart, ulen, u, min_n, max_n, wstart, wlen, scratch, 0)
        else:
            n = _char_grams(data, ustart, ulen, 0, u, min_n, max_n, scratch, 0)
        out_ids = _grow(out_ids, nnz + n)
        out_counts = _grow(out_counts, nnz + n)
        nnz = _bag_row(scratch, n, buckets, table_keys, table_values, set_keys, set_counts, set_slots, out_ids,
                       out_counts, nnz)
        row_offsets[r + 1] = nnz
    return row_offsets, out_ids[:nnz], out_counts[:nnz]


@njit(cache=True, nogil=True)
def sequences(data, offsets, word, min_chars, max_len, table_keys, table_values, unknown, stop_keys, stop_values):
    """Each row's first ``max_len`` token ids in text order (stop words left
    out), as CSR (row offsets, ids), and which rows held more tokens (cut, 1 a
    row); a token not in the table gets ``unknown``."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    keys = np.empty((_longest(offsets) + 1) // 2 + 1, np.uint64)
    # A row holds at most one token per min_chars bytes: the text bounds the ids, not rows × max_len
    # (a --max-len of 1e6 asked 8192 × 8 MB of a piece).
    out = np.empty(min(n_rows * max_len, (offsets[n_rows] - base) // max(min_chars, 1) + n_rows), np.int64)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    cut = np.zeros(n_rows, np.uint8)
    nnz = 0
    for r in range(n_rows):
        t, _ = _token_keys(data, offsets[r] - base, offsets[r + 1] - base, word, min_chars, stop_keys, stop_values,
                           keys, 0, 0, keys, np.empty(0, np.int64))
        cut[r] = t > max_len
        for j in range(min(t, max_len)):
            v = _lookup(table_keys, table_values, keys[j])
            out[nnz] = v if v >= 0 else unknown
            nnz += 1
        row_offsets[r + 1] = nnz
    return row_offsets, out[:nnz], cut


@njit(cache=True, nogil=True)
def key_sequences(keys, key_offsets, max_len, table_keys, table_values, unknown, stop_keys, stop_values):
    """:func:`sequences` over tokens already found (a registered tokenizer's)."""
    n_rows = len(key_offsets) - 1
    out = np.empty(min(n_rows * max_len, key_offsets[n_rows] - key_offsets[0]), np.int64)
    row_offsets = np.zeros(n_rows + 1, np.int64)
    cut = np.zeros(n_rows, np.uint8)
    use_stop = len(stop_keys) > 2
    nnz = 0
    for r in range(n_rows):
        t = 0
        for j in range(key_offsets[r], key_offsets[r + 1]):
            if use_stop and _lookup(stop_keys, stop_values, keys[j]) >= 0:
                continue
            if t == max_len:   # one more token than the model reads: the row is cut
                cut[r] = 1
                break
            v = _lookup(table_keys, table_values, keys[j])
            out[nnz] = v if v >= 0 else unknown
            nnz += 1
            t += 1
        row_offsets[r + 1] = nnz
    return row_offsets, out[:nnz], cut


@njit(cache=True, nogil=True)
def term_keys(data, offsets):
    """The key of each string taken as a term: a token, or tokens joined by
    single spaces (an n-gram) — the keys :func:`word_bags` gives them."""
    n = len(offsets) - 1
    base = offsets[0]
    out = np.empty(n, np.uint64)
    for r in range(n):
        s, e = offsets[r] - base, offsets[r + 1] - base
        h = FNV_OFFSET
        chain = EMPTY
        parts = 0
        for i in range(s, e):
            b = data[i]
            if b == 0x20:
                chain = _mix(h) if parts == 0 else _mix(chain * GOLD + _mix(h))
                h = FNV_OFFSET
                parts += 1
                continue
            h = (h ^ np.uint64(b)) * FNV_PRIME
        out[r] = (_mix(chain * GOLD + _mix(h)) ^ GOLD) if parts else _mix(h)
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


@njit(cache=True, nogil=True)
def _rehash(keys, values, size):
    """The table of ``keys`` → ``values`` (both the table's own slots) in ``size`` slots."""
    out_keys = np.zeros(size, np.uint64)
    out_values = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for s in range(len(keys)):
        if keys[s] != EMPTY:
            slot = keys[s] & mask
            while out_keys[slot] != EMPTY:
                slot = (slot + np.uint64(1)) & mask
            out_keys[slot] = keys[s]
            out_values[slot] = values[s]
    return out_keys, out_values


@njit(cache=True, nogil=True)
def _count_row(data, tokens, spans, t, r, min_n, max_n, grams, table_keys, table_values, keys, df, tf, last, buf,
               str_offsets, distinct, pos):
    """Count row ``r``'s n-grams (its ``t`` token keys and spans) into the
    table of :func:`term_stats`, which has room for all of them. Returns
    (distinct terms, string bytes written, n-gram occurrences)."""
    mask = np.uint64(len(table_keys) - 1)
    occurrences = 0
    for j in range(t):
        n = _ngrams_ending(tokens, j, min_n, max_n, grams, 0)
        occurrences += n
        for g in range(n):
            key = grams[g]
            probe = np.uint64(1) if key == EMPTY else key
            slot = probe & mask
            while table_keys[slot] != EMPTY and table_keys[slot] != probe:
                slot = (slot + np.uint64(1)) & mask
            d = table_values[slot]
            if d < 0:   # a new term: its slot, its counts, its string
                d = distinct
                distinct += 1
                table_keys[slot] = probe
                table_values[slot] = d
                keys[d] = key
                df[d] = 0
                tf[d] = 0
                last[d] = -1
                first = j - (min_n + g) + 1
                for m in range(first, j + 1):
                    if m > first:
                        buf[pos] = 0x20
                        pos += 1
                    for i in range(spans[2 * m], spans[2 * m + 1]):
                        buf[pos] = data[i]
                        pos += 1
                str_offsets[d + 1] = pos
            tf[d] += 1
            if last[d] != r:
                last[d] = r
                df[d] += 1
    return distinct, pos, occurrences


@njit(cache=True, nogil=True)
def term_stats(data, offsets, word, min_chars, min_n, max_n, stop_keys, stop_values):
    """The distinct word n-grams (``min_n`` ≤ n ≤ ``max_n``) of a block of
    rows, for fitting a vocabulary, in one pass with no string per occurrence:
    (keys, df, tf, string bytes, string offsets, n-gram occurrences).

    ``keys[d]`` is term ``d``'s key (the one :func:`word_bags` and
    :func:`term_keys` give it), ``df[d]`` the rows it occurs in, ``tf[d]``
    its occurrences; its string (tokens joined by single spaces) is written
    once, when it first occurs. Terms are in first-occurrence order. The
    working memory is the block's distinct terms (a table at most half full,
    and 40 bytes and the string of each) and one row's tokens; the arrays
    grow between rows, so a row's loop runs on fixed arrays."""
    n_rows = len(offsets) - 1
    base = offsets[0]
    most_tokens = (_longest(offsets) + 1) // 2 + 1
    lengths = max_n - min_n + 1
    tokens = np.empty(most_tokens, np.uint64)
    spans = np.empty(2 * most_tokens, np.int64)
    grams = np.empty(lengths + 1, np.uint64)
    table_keys = np.zeros(1 << 12, np.uint64)
    table_values = np.full(1 << 12, -1, np.int64)
    keys = np.empty(1 << 11, np.uint64)
    df = np.empty(1 << 11, np.int64)
    tf = np.empty(1 << 11, np.int64)
    last = np.empty(1 << 11, np.int64)
    str_offsets = np.zeros((1 << 11) + 1, np.int64)
    buf = np.empty(1 << 16, np.uint8)
    distinct = 0
    occurrences = 0
    pos = 0
    for r in range(n_rows):
        start, end = offsets[r] - base, offsets[r + 1] - base
        t, _ = _token_keys(data, start, end, word, min_chars, stop_keys, stop_values, tokens, 0, 0, tokens, spans)
        most = distinct + t * lengths   # at most one new term per n-gram of the row
        if 2 * most >= len(table_keys):
            size = len(table_keys)
            while 2 * most >= size:
                size *= 2
            table_keys, table_values = _rehash(table_keys, table_values, size)
        keys, df, tf, last = _grow(keys, most), _grow(df, most), _grow(tf, most), _grow(last, most)
        str_offsets = _grow(str_offsets, most + 1)
        # The row's n-grams of size n take at most n × (its bytes + its tokens) of strings (a token's bytes
        # in n windows, a space after each of a window's first n - 1 tokens): room for all of them.
        buf = _grow(buf, pos + (end - start + t) * (min_n + max_n) * lengths // 2 + 1)
        distinct, pos, n = _count_row(data, tokens, spans, t, r, min_n, max_n, grams, table_keys, table_values, keys,
                                      df, tf, last, buf, str_offsets, distinct, pos)
        occurrences += n
    return keys[:distinct], df[:distinct], tf[:distinct], buf[:pos], str_offsets[:distinct + 1], occurrences


@njit(cache=True, nogil=True)
def key_order(keys):
    """The stable order that sorts ``keys`` (uint64): an LSD radix sort, six
    passes of 11 bits, O(n) where numpy's argsort of random 64-bit keys is
    O(n log n) and 5–10 × slower at a partition's hundred thousand terms."""
    n = len(keys)
    order = np.arange(n)
    spare = np.empty(n, np.int64)
    counts = np.empty(2049, np.int64)
    for shift in range(0, 64, 11):
        counts[:] = 0
        s = np.uint64(shift)
        for i in range(n):
            counts[np.int64((keys[i] >> s) & np.uint64(2047)) + 1] += 1
        if counts.max() == n:   # every key has this digit: nothing moves
            continue
        for b in range(2048):
            counts[b + 1] += counts[b]
        for i in range(n):
            o = order[i]
            b = np.int64((keys[o] >> s) & np.uint64(2047))
            spare[counts[b]] = o
            counts[b] += 1
        order, spare = spare, order
    return order


@njit(cache=True, nogil=True)
def take_strings(data, offsets, order):
    """Strings ``order[i]`` of (``data``, ``offsets``), back to back: (bytes, offsets)."""
    base = offsets[0]
    total = 0
    for i in range(len(order)):
        total += offsets[order[i] + 1] - offsets[order[i]]
    out = np.empty(total, np.uint8)
    out_offsets = np.zeros(len(order) + 1, np.int64)
    pos = 0
    for i in range(len(order)):
        a, b = offsets[order[i]] - base, offsets[order[i] + 1] - base
        for j in range(a, b):
            out[pos] = data[j]
            pos += 1
        out_offsets[i + 1] = pos
    return out, out_offsets


@njit(cache=True, nogil=True)
def row_document_frequencies(rows, codes, n_terms):
    """Per term code, the number of distinct rows it occurs in, in one pass:
    O(terms) where sorting (row, term) pairs is O(n log n). Needs each term's
    occurrences in non-decreasing row order (as :class:`~.tokenize.Terms`
    keeps them); returns ``(df, False)`` as soon as that does not hold."""
    last = np.full(n_terms, -1, np.int64)
    df = np.zeros(n_terms, np.int64)
    for i in range(codes.shape[0]):
        c, r = codes[i], rows[i]
        if r != last[c]:
            if r < last[c]:
                return df, False
            last[c] = r
            df[c] += 1
    return df, True


def warm() -> None:
    """Load (or compile, the first time on a machine) every kernel, on a tiny input."""
    data = np.frombuffer(b"warm up", np.uint8)
    offsets = np.array([0, 7], np.int64)
    table = build_table(np.array([1], np.uint64), np.array([0], np.int64))
    bags(data, offsets, word_table(), 2, 2, 8, *table)
    word_bags(data, offsets, word_table(), 2, 1, 3, 8, *table, *table)
    key_bags(np.ones(2, np.uint64), np.array([0, 2], np.int64), 1, 2, 8, *table, *table)
    char_bags(data, offsets, 2, 4, True, 8, *table)
    sequences(data, offsets, word_table(), 2, 4, *table, 1, *table)
    key_sequences(np.ones(2, np.uint64), np.array([0, 2], np.int64), 4, *table, 1, *table)
    term_keys(data, offsets)
    whole_hashes(data, offsets, np.ones(1, np.uint8))
    token_spans(data, offsets, word_table(), 2)
    row_document_frequencies(np.zeros(1, np.int64), np.zeros(1, np.int64), 1)
    term_stats(data, offsets, word_table(), 2, 1, 2, *table)
    take_strings(data, offsets, key_order(np.array([5], np.uint64)))
    from .row_kernels import warm as warm_rows

    warm_rows()   # the rows' gather and weighting, which every reader of shards runs
