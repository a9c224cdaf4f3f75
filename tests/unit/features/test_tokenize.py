"""features/tokenize.py: the built-in tokenizer finds scikit-learn's tokens
(\\b\\w\\w+\\b after lower-casing), n-grams join a row's adjacent tokens,
stop words go before n-grams, and Unicode normalisation comes before
lower-casing."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.features.tokenize import (Terms, add_bigrams, add_ngrams, drop_stop_words, prepare,
                                              terms_of, text_buffers, tokenize)

TEXTS = ["New York City is big", "", None, "Ünïcode wörds, and 42 numbers!", "a b c", "日本語 テキスト"]


def sk_tokens(text: str | None) -> list[str]:
    return re.findall(r"(?u)\b\w\w+\b", (text or "").lower())


def by_row(terms: Terms) -> list[list[str]]:
    out = [[] for _ in range(terms.n_rows)]
    for t, r in zip(terms.terms.to_pylist(), terms.rows.tolist()):
        out[r].append(t)
    return out


def test_tokenize_gives_scikit_learns_tokens_in_text_order_with_their_rows():
    toks = tokenize(pa.array(TEXTS))
    assert toks.n_rows == len(TEXTS)
    assert by_row(toks) == [sk_tokens(t) for t in TEXTS]
    assert (np.diff(toks.rows) >= 0).all()


def test_lower_casing_is_pythons_so_a_words_final_capital_sigma_is_the_lower_case_words():
    # pyarrow's utf8_lower gave "καλοσ" for "ΚΑΛΟΣ": a capitalised word had no term in common with its lower case
    greek = ["ΚΑΛΟΣ", "καλος", "ΟΔΟΣ, ΣΟΦΟΣ.", "ΑΣΣ", "Σ", "ΑΣ.ΒΣ", "ΑΣ\u0301 x", "ΑΣ'Α", "中Σ", "καλοσ"]
    assert prepare(pa.array(greek)).to_pylist() == [t.lower() for t in greek]
    assert by_row(tokenize(pa.array(["ΚΑΛΟΣ ταινια", "καλος ταινια"]))) == [["καλος", "ταινια"]] * 2
    import random
    rnd = random.Random(0)
    chars = list("ΑΒΣΟσςα .'\u0301,x1:中ªⅠⒶⓐ") + ["\u00ad", "\u2019", "\u2018", "\u0387", "\u2027", "\uff0e"]
    fuzz = ["".join(rnd.choice(chars) for _ in range(rnd.randint(1, 9))) for _ in range(3000)]
    assert prepare(pa.array(fuzz)).to_pylist() == [t.lower() for t in fuzz]


def test_tokenize_keeps_case_when_asked_and_min_len_sets_the_shortest_token():
    assert tokenize(pa.array(["Ab c"]), lowercase=False).terms.to_pylist() == ["Ab"]
    assert tokenize(pa.array(["Ab c"]), min_len=1).terms.to_pylist() == ["ab", "c"]


def test_add_bigrams_appends_each_rows_adjacent_pairs_never_across_rows():
    toks = tokenize(pa.array(["new york city", "san jose"]))
    rows = by_row(add_bigrams(toks))
    assert rows == [["new", "york", "city", "new york", "york city"], ["san", "jose", "san jose"]]


def test_add_ngrams_from_min_to_max_joins_tokens_with_one_space():
    toks = tokenize(pa.array(["one two three four", "solo"]))
    rows = by_row(add_ngrams(toks, 2, 3))
    assert rows == [["one two", "two three", "three four", "one two three", "two three four"], []]
    assert by_row(add_ngrams(tokenize(pa.array(["x"])), 1, 2)) == [[]]


def test_stop_words_are_dropped_before_the_pairs_are_formed():
    rows = by_row(terms_of(pa.array(["the cat and the hat"]), 2, stop_words=["the", "and"]))
    assert rows == [["cat", "hat", "cat hat"]]
    toks = tokenize(pa.array(["the cat"]))
    assert drop_stop_words(toks, None) is toks


def test_stop_words_in_capitals_are_lower_cased_as_the_text_is_and_kept_as_written_without_it():
    # "Movie" in a stop-word file matched no lower-cased token: the option was stored and did nothing
    from lancetnic_flow.features.vocab import term_counts

    texts = pa.array(["Movie film PLOT good", "a movie of films"])
    table, _ = term_counts(texts, stop_words=["Movie", "PLOT"])
    assert sorted(table.column("term").to_pylist()) == ["film", "films", "good", "of"]
    table, _ = term_counts(texts, stop_words=["Movie", "PLOT"], lowercase=False)   # tokens keep their case
    assert sorted(table.column("term").to_pylist()) == ["film", "films", "good", "movie", "of"]
    assert by_row(terms_of(texts, stop_words=["Movie"])) == [["film", "plot", "good"], ["of", "films"]]
    # normalised as the text is: full-width "ＦＩＬＭ" and a decomposed "café" are "film" and "café" after NFKC
    table, _ = term_counts(pa.array(["film café good"]), stop_words=["ＦＩＬＭ", "cafe\u0301"], normalize="nfkc")
    assert table.column("term").to_pylist() == ["good"]
    assert by_row(terms_of(pa.array(["film café good"]), stop_words=["ＦＩＬＭ", "cafe\u0301"],
                           normalize="nfkc")) == [["good"]]


def test_normalisation_comes_before_lower_casing():
    wide = pa.array(["ＡＢＣ ｆｕｌｌ"])   # full-width letters
    assert prepare(wide, normalize="nfkc").to_pylist() == ["abc full"]
    assert prepare(wide).to_pylist() == ["ａｂｃ ｆｕｌｌ"]
    assert terms_of(wide, normalize="nfkc").terms.to_pylist() == ["abc", "full"]


def test_text_buffers_are_the_utf8_bytes_and_offsets_with_nulls_as_empty():
    data, offsets = text_buffers(pa.array(["Ab", None, "é"]))
    assert offsets.tolist() == [0, 2, 2, 4]
    assert bytes(data[:4]) == "abé".encode()
    data, offsets = text_buffers(pa.array(["Ab"], pa.large_string()), lowercase=False)
    assert bytes(data[offsets[0]:offsets[1]]) == b"Ab"


def split_dashes(text: str) -> list[str]:
    return text.split("-")


def test_a_registered_tokenizers_lists_become_offsets_and_tokens_without_empty_ones():
    from lancetnic_flow.tokenizers import register_tokenizer, tokens_of

    spec = register_tokenizer("unit-dashes", split_dashes)
    offsets, tokens = tokens_of(spec, pa.array(["a-b--c", "", "solo"]))
    assert offsets.tolist() == [0, 3, 3, 4]
    assert tokens.to_pylist() == ["a", "b", "c", "solo"]
    rows = by_row(terms_of(pa.array(["New-York"]), 2, tokenizer=spec))
    assert rows == [["new", "york", "new york"]]


def spaced(text: str) -> list[str]:
    return [text]


def test_a_tokenizer_giving_a_token_with_a_space_is_refused_for_a_vocabulary():
    from lancetnic_flow.tokenizers import register_tokenizer

    spec = register_tokenizer("unit-whole", spaced)
    with pytest.raises(UserError, match="space"):
        terms_of(pa.array(["two words"]), 1, tokenizer=spec)


SEEN: list[str] = []


def split_and_note(text: str) -> list[str]:
    SEEN.append(text)
    return text.split()


def test_texts_of_a_readers_table_hands_its_token_lists_to_custom_tokens_which_does_not_tokenise_again():
    from lancetnic_flow.data.usable import TOKENS_COLUMN, text_rule, usable_tokens
    from lancetnic_flow.features.tokenize import TokenizedTexts, custom_tokens, texts_of
    from lancetnic_flow.tokenizers import register_tokenizer

    spec = register_tokenizer("unit-noted", split_and_note)
    texts = pa.array(["Ab cd", "  ", "EF gh ij", "k"])
    rule = text_rule(type("F", (), {"tokenizer": spec, "normalize": "none"})())
    keep, field, lists = usable_tokens(texts, rule)
    assert keep.to_pylist() == [True, False, True, True] and field.name == TOKENS_COLUMN
    assert lists.to_pylist() == [["ab", "cd"], [], ["ef", "gh", "ij"], ["k"]]
    table = pa.table({"text": texts}).append_column(field, lists).filter(keep)
    SEEN.clear()
    carried = texts_of(table, spec, lowercase=True).slice(1)
    assert isinstance(carried, TokenizedTexts)
    got = custom_tokens(carried, spec, lowercase=True)
    assert SEEN == [] and got.terms.to_pylist() == ["ef", "gh", "ij", "k"] and got.rows.tolist() == [0, 0, 0, 1]
    assert got.n_rows == 2
    fresh = custom_tokens(table["text"].slice(1), spec, lowercase=True)
    assert fresh.terms.to_pylist() == got.terms.to_pylist() and fresh.rows.tolist() == got.rows.tolist()


def test_token_lists_made_with_other_options_are_not_read_as_a_runs_tokens():
    from lancetnic_flow.data.usable import text_rule, usable_tokens
    from lancetnic_flow.features.tokenize import custom_tokens, texts_of
    from lancetnic_flow.tokenizers import register_tokenizer

    spec = register_tokenizer("unit-noted", split_and_note)
    texts = pa.array(["Ab cd"])
    keep, field, lists = usable_tokens(texts, text_rule(type("F", (), {"tokenizer": spec, "normalize": "none"})()))
    table = pa.table({"text": texts}).append_column(field, lists)
    assert isinstance(texts_of(table, spec, lowercase=False), pa.ChunkedArray)   # lists read lower-cased
    assert isinstance(texts_of(table, spec, lowercase=True, normalize="nfkc"), pa.ChunkedArray)
    assert isinstance(texts_of(table, None), pa.ChunkedArray)
    carried = texts_of(table, spec, lowercase=True)
    assert custom_tokens(carried, spec, lowercase=False).terms.to_pylist() == ["Ab", "cd"]   # tokenised again
