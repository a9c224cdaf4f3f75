"""features/kernels.py: the compiled featurisation kernels, each checked on a
few real rows against a plain-Python statement of what its docstring
promises (FNV-1a 64 + splitmix64 keys, CSR bags, stable orders)."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.features import kernels
from lancetnic_flow.features.tokenize import text_buffers

MASK = (1 << 64) - 1
FNV_OFFSET, FNV_PRIME, GOLD = 0xCBF29CE484222325, 0x100000001B3, 0x9E3779B97F4A7C15


def mix(h: int) -> int:
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & MASK
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & MASK
    return h ^ (h >> 31)


def fnv(data: bytes) -> int:
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def key(token: str) -> int:
    return mix(fnv(token.encode()))


def ngram_key(tokens: list[str]) -> int:
    if len(tokens) == 1:
        return key(tokens[0])
    c = key(tokens[0])
    for t in tokens[1:]:
        c = mix((c * GOLD + key(t)) & MASK)
    return c ^ GOLD


def words(text: str) -> list[str]:
    return re.findall(r"(?u)\b\w\w+\b", text.lower())


def ngrams(tokens: list[str], lo: int, hi: int) -> list[list[str]]:
    """Per token, the n-grams ending there, shortest first (the kernels' order)."""
    return [tokens[j - n + 1:j + 1] for j in range(len(tokens)) for n in range(lo, min(hi, j + 1) + 1)]


def buffers(texts: list[str | None]):
    return text_buffers(pa.array(texts, pa.string()))


def empty_table():
    return np.zeros(2, np.uint64), np.full(2, -1, np.int64)


def rows_of(offsets, ids, counts) -> list[list[tuple[int, float]]]:
    return [list(zip(ids[offsets[r]:offsets[r + 1]].tolist(), counts[offsets[r]:offsets[r + 1]].tolist()))
            for r in range(len(offsets) - 1)]


TEXTS = ["The cat sat on the cat mat", "", "x y z", "Naïve café, naïve CAFÉ!", "a_b 12 3"]


def test_word_table_marks_letters_digits_and_underscore_as_word_characters():
    table = kernels.word_table()
    for ch in "aZя字5_é":
        assert table[ord(ch)] == 1, ch
    for ch in " -.,!\t€":
        assert table[ord(ch)] == 0, ch


def test_term_keys_are_fnv1a_then_splitmix_and_ngrams_chain_their_tokens_keys():
    terms = ["hello", "naïve", "big cat", "new york city"]
    data, offsets = buffers(terms)
    got = kernels.term_keys(data, offsets).tolist()
    assert got == [key("hello"), key("naïve"), ngram_key(["big", "cat"]), ngram_key(["new", "york", "city"])]


@pytest.mark.parametrize("buckets", [8, 7])   # a power of two (a mask) and not (a division): the same ids
def test_word_bags_count_each_rows_word_ngrams_into_key_modulo_buckets(buckets):
    data, offsets = buffers(TEXTS)
    row_offsets, ids, counts, tokens = kernels.word_bags(data, offsets, kernels.word_table(), 2, 1, 2, buckets,
                                                         *empty_table(), *empty_table())
    assert tokens == sum(len(words(t)) for t in TEXTS)
    for text, row in zip(TEXTS, rows_of(row_offsets, ids, counts)):
        want = Counter(ngram_key(g) % buckets for g in ngrams(words(text), 1, 2))
        assert dict(row) == dict(want), text
        assert len({i for i, _ in row}) == len(row)   # ids distinct within a row
        assert [i for i, _ in row] == sorted(want)    # ascending: a shard stores the gaps between them


def test_word_bags_with_a_vocabulary_table_keep_only_its_terms_under_its_ids():
    table = kernels.build_table(np.array([key("cat"), ngram_key(["the", "cat"])], np.uint64),
                                np.array([5, 9], np.int64))
    data, offsets = buffers(["the cat sat on the cat", "dog"])
    row_offsets, ids, counts, _ = kernels.word_bags(data, offsets, kernels.word_table(), 2, 1, 2, 0, *table,
                                                    *empty_table())
    assert rows_of(row_offsets, ids, counts) == [[(5, 2.0), (9, 2.0)], []]   # "cat" before "the cat"


def test_stop_words_are_dropped_before_word_pairs_are_formed():
    stop = kernels.build_table(np.array([key("the")], np.uint64), np.zeros(1, np.int64))
    data, offsets = buffers(["the cat the sat"])
    row_offsets, ids, counts, tokens = kernels.word_bags(data, offsets, kernels.word_table(), 2, 1, 2, 1 << 20,
                                                         *empty_table(), *stop)
    want = {key("cat") % (1 << 20): 1.0, key("sat") % (1 << 20): 1.0, ngram_key(["cat", "sat"]) % (1 << 20): 1.0}
    assert dict(rows_of(row_offsets, ids, counts)[0]) == want
    assert tokens == 2


def test_key_bags_over_given_token_keys_equal_word_bags_over_the_text():
    text = ["one two three two one"]
    data, offsets = buffers(text)
    w_off, w_ids, w_counts, _ = kernels.word_bags(data, offsets, kernels.word_table(), 2, 1, 3, 64, *empty_table(),
                                                  *empty_table())
    keys = np.array([key(t) for t in words(text[0])], np.uint64)
    k_off, k_ids, k_counts = kernels.key_bags(keys, np.array([0, len(keys)], np.int64), 1, 3, 64, *empty_table(),
                                              *empty_table())
    assert rows_of(k_off, k_ids, k_counts) == rows_of(w_off, w_ids, w_counts)


def test_sequences_give_the_first_max_len_token_ids_in_text_order_and_unknown_for_the_rest():
    table = kernels.build_table(np.array([key("cat"), key("sat")], np.uint64), np.array([2, 3], np.int64))
    data, offsets = buffers(["cat sat dog cat sat", "", "sat"])
    row_offsets, ids, cut = kernels.sequences(data, offsets, kernels.word_table(), 2, 4, *table, 1, *empty_table())
    assert row_offsets.tolist() == [0, 4, 4, 5]
    assert ids.tolist() == [2, 3, 1, 2, 3]
    assert cut.tolist() == [1, 0, 0]   # the first row held 5 tokens, the model reads 4


def test_a_row_is_cut_only_when_a_token_the_model_reads_is_left_out():
    """Exactly max_len tokens, or more with the rest stop words, lose nothing; one token more is cut
    (rows.noted.longer_than_max_len), over text and over a tokenizer's keys alike."""
    table = kernels.build_table(np.array([key("cat"), key("sat")], np.uint64), np.array([2, 3], np.int64))
    stop = kernels.build_table(np.array([key("the")], np.uint64), np.array([0], np.int64))
    texts = ["cat sat", "cat sat the the", "cat the sat dog", "cat sat dog", "the the the"]
    data, offsets = buffers(texts)
    _, _, cut = kernels.sequences(data, offsets, kernels.word_table(), 2, 2, *table, 1, *stop)
    assert cut.tolist() == [0, 0, 1, 1, 0]
    keys = np.array([key(w) for t in texts for w in words(t)], np.uint64)
    key_offsets = np.cumsum([0] + [len(words(t)) for t in texts]).astype(np.int64)
    _, _, key_cut = kernels.key_sequences(keys, key_offsets, 2, *table, 1, *stop)
    assert key_cut.tolist() == cut.tolist()


def test_a_huge_max_len_allocates_by_the_text_not_rows_times_max_len():
    # --max-len 100000000 asked rows × max_len × 8 bytes of a piece: MemoryError, exit 1
    table = kernels.build_table(np.array([key("cat"), key("sat")], np.uint64), np.array([2, 3], np.int64))
    texts = ["cat sat dog cat sat", "", "sat", "x y", "ab cd ef gh ij kl mn op"] * 2000
    data, offsets = buffers(texts)
    row_offsets, ids, cut = kernels.sequences(data, offsets, kernels.word_table(), 2, 10**9, *table, 1,
                                              *empty_table())
    assert row_offsets[-1] == len(ids) == sum(len(words(t)) for t in texts)
    keys = np.array([key(w) for t in texts for w in words(t)], np.uint64)
    key_offsets = np.cumsum([0] + [len(words(t)) for t in texts]).astype(np.int64)
    k_off, k_ids, k_cut = kernels.key_sequences(keys, key_offsets, 10**9, *table, 1, *empty_table())
    assert k_off.tolist() == row_offsets.tolist() and k_ids.tolist() == ids.tolist()
    assert not cut.any() and not k_cut.any()


def test_whole_hashes_hash_every_byte_of_the_string_and_a_null_as_empty():
    strings = ["", "abc", "a much longer string whose middle differs: 1", "a much longer string whose middle differs: 2"]
    data, offsets = buffers(strings)
    got = kernels.whole_hashes(data, offsets, np.array([1, 1, 1, 0], np.uint8)).tolist()
    assert got == [mix(fnv(b"")), mix(fnv(b"abc")), mix(fnv(strings[2].encode())), mix(fnv(b""))]


def test_token_spans_give_every_token_string_with_its_row_in_text_order():
    data, offsets = buffers(TEXTS)
    buf, tok_offsets, rows = kernels.token_spans(data, offsets, kernels.word_table(), 2)
    toks = [bytes(buf[tok_offsets[i]:tok_offsets[i + 1]]).decode() for i in range(len(rows))]
    assert toks == [w for t in TEXTS for w in words(t)]
    assert rows.tolist() == [r for r, t in enumerate(TEXTS) for _ in words(t)]


def test_term_stats_count_document_and_corpus_frequency_of_each_distinct_ngram():
    texts = ["a cat and a cat", "the cat and dog", "dog dog"]
    data, offsets = buffers(texts)
    keys, df, tf, buf, str_offsets, occurrences = kernels.term_stats(data, offsets, kernels.word_table(), 2, 1, 2,
                                                                     *empty_table())
    terms = [bytes(buf[str_offsets[i]:str_offsets[i + 1]]).decode() for i in range(len(keys))]
    per_row = [[" ".join(g) for g in ngrams(words(t), 1, 2)] for t in texts]
    want_tf = Counter(g for row in per_row for g in row)
    want_df = Counter(g for row in per_row for g in set(row))
    assert terms == list(dict.fromkeys(g for row in per_row for g in row))   # first-occurrence order
    assert dict(zip(terms, tf.tolist())) == dict(want_tf)
    assert dict(zip(terms, df.tolist())) == dict(want_df)
    assert keys.tolist() == [ngram_key(t.split()) for t in terms]
    assert occurrences == sum(want_tf.values())


def test_char_bags_count_character_ngrams_of_whitespace_collapsed_text_like_scikit_learns_char_analyzer():
    texts = ["ab  cd", "héllo"]
    data, offsets = buffers(texts)
    row_offsets, ids, counts = kernels.char_bags(data, offsets, 2, 3, False, 1 << 20, *empty_table())
    for text, row in zip(texts, rows_of(row_offsets, ids, counts)):
        norm = re.sub(r"\s\s+", " ", text)
        want = Counter(mix(fnv(norm[i:i + n].encode())) % (1 << 20) for n in (2, 3) for i in range(len(norm) - n + 1))
        assert dict(row) == dict(want), text


def test_key_order_is_the_stable_sorting_order_of_64_bit_keys():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2)
    keys[::7] = keys[0]   # ties keep their input order
    assert np.array_equal(kernels.key_order(keys), np.argsort(keys, kind="stable"))


def test_take_strings_gathers_strings_in_the_given_order():
    data, offsets = buffers(["zero", "one", "", "three"])
    out, out_offsets = kernels.take_strings(data, offsets, np.array([3, 0, 2, 1], np.int64))
    assert [bytes(out[out_offsets[i]:out_offsets[i + 1]]).decode() for i in range(4)] == ["three", "zero", "", "one"]


def test_row_document_frequencies_count_distinct_rows_and_refuse_rows_out_of_order():
    rows = np.array([0, 0, 1, 1, 2, 2], np.int64)
    codes = np.array([0, 0, 0, 1, 1, 1], np.int64)
    df, ordered = kernels.row_document_frequencies(rows, codes, 3)
    assert ordered and df.tolist() == [2, 2, 0]
    _, ordered = kernels.row_document_frequencies(np.array([1, 0], np.int64), np.array([0, 0], np.int64), 1)
    assert not ordered


def test_build_table_maps_every_key_to_its_value_at_most_half_full():
    keys = np.array([0, 1, 17, 33, 2**63], np.uint64)   # 0 is stored as 1: the free-slot marker
    table_keys, table_values = kernels.build_table(keys[1:], np.arange(4, dtype=np.int64))
    assert len(table_keys) >= 2 * 4
    assert set(table_values[table_values >= 0].tolist()) == {0, 1, 2, 3}
