"""The empty_text rule follows the analyzer: a text is usable iff scikit-learn's analyzer reads a term from it."""
from types import SimpleNamespace

import pyarrow as pa
import pytest

from lancetnic_flow.data.usable import text_rule, usable

sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")

TRICKY = ["", " ", "   ", "\t\n", "\u3000", "好", "差", "好 ", " 好", "好吃", "!!!", ":)", "!", "a", "ab", "a b",
          "a  b", "é", "e\u0301", "e\u0301e\u0301", "ﬁ", "ǅ", "\x00", "\x00\x00", "\x1f", "a\x1fb", "١٢", "_x",
          "😀", "😀😀", "- -", "x\u00a0y", "no, tokens here", "\u200b", "\u200b\u200b"]


def _features(analyzer, lo=1, hi=1, normalize="none", tokenizer=None):
    return SimpleNamespace(analyzer=analyzer, ngram_min=lo, ngrams=hi, normalize=normalize, tokenizer=tokenizer)


def _sklearn_reads(text, analyzer, lo, hi):
    """Whether scikit-learn's analyzer for the same options gives a term (blank text aside: see data/usable.py)."""
    build = sklearn_text.CountVectorizer(analyzer=analyzer, ngram_range=(lo, hi)).build_analyzer()
    return bool(build(text)) and bool(text.strip())


@pytest.mark.parametrize("analyzer,lo,hi", [("word", 1, 1), ("word", 1, 2), ("char", 1, 3), ("char", 2, 4),
                                            ("char", 3, 5), ("char_wb", 1, 3), ("char_wb", 2, 4), ("char_wb", 4, 5)])
def test_a_text_is_usable_iff_scikit_learns_analyzer_for_the_same_options_reads_a_term(analyzer, lo, hi):
    got = usable(pa.array(TRICKY, pa.string()), text_rule(_features(analyzer, lo, hi))).to_pylist()
    want = [_sklearn_reads(t, analyzer, lo, hi) for t in TRICKY]
    assert [t for t, g, w in zip(TRICKY, got, want) if g != w] == []


def test_the_word_analyzers_rule_is_unchanged_and_the_default():
    assert text_rule(_features("word", 1, 2)) == "word"
    got = usable(pa.array(["好", "好吃", "a", "ab", "!!!", "a b"], pa.string())).to_pylist()
    assert got == [False, True, False, True, False, False]


def test_one_character_chinese_and_punctuation_are_usable_under_character_analyzers_and_auto_undecided():
    texts = pa.array(["好", "差", "!!!", ":)", "  ", ""], pa.string())
    for features in (_features("char_wb", 1, 3), _features("char", 1, 3)):
        assert usable(texts, text_rule(features)).to_pylist() == [True] * 4 + [False] * 2


def test_auto_reads_the_widest_rule_until_it_is_decided_then_the_decided_analyzers():
    undecided = SimpleNamespace(analyzer="auto", ngram_min=1, normalize="none", tokenizer=None,
                                known_analyzer=lambda: None)
    words = SimpleNamespace(analyzer="auto", ngram_min=1, normalize="none", tokenizer=None,
                            known_analyzer=lambda: "word")
    assert text_rule(undecided) == "visible"
    assert text_rule(words) == "word"


def split_spaces(text):
    return text.split(" ")


def first_letters(texts):
    """A batch tokenizer: each text's words of two letters or more."""
    return pa.array([[w for w in t.split() if len(w) > 1] for t in texts.to_pylist()], pa.list_(pa.string()))


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("stop, lo, hi", [(None, 1, 1), (["the", "and", "of"], 1, 2), (None, 2, 3),
                                          (["the"], 2, 2)])
@pytest.mark.parametrize("mode", ["hashing", "ids"])
def test_with_a_tokenizer_of_ones_own_a_text_is_usable_iff_the_runs_features_hold_a_term_for_it(
        batch, stop, lo, hi, mode):
    # a text of stop words alone (or one token under --ngram-range 2,3) stayed ok, predicted from the bias,
    # where the built-in tokenizer's rule calls it empty_text
    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.tokenizers import register_tokenizer

    if mode == "ids" and lo > 1:
        return
    spec = register_tokenizer("unit-usable-batch" if batch else "unit-usable", first_letters if batch else split_spaces,
                              batch=batch)
    texts = TRICKY + ["the the and of", "The OF", "the cat", "cat", "cat dog", "  the  ", "x y", "ＴＨＥ"]
    f = FittedFeatures(mode=mode, ngram_min=lo, ngrams=hi, buckets=1 << 20, stop_words=stop, tokenizer=spec,
                       vocabulary=pa.array([], pa.string()) if mode == "ids" else None, max_len=64)
    block = f.transform(pa.table({"text": pa.array(texts, pa.string())}), [])
    terms = [int(block.offsets[i + 1] - block.offsets[i]) for i in range(len(texts))]
    got = usable(pa.array(texts, pa.string()), text_rule(f)).to_pylist()
    assert [t for t, g, n in zip(texts, got, terms) if g != (n > 0 and bool(t.strip()))] == []
    if stop and "and" in stop:   # stop words alone
        assert got[texts.index("the the and of")] is False


def test_a_tokenizer_rule_pickles_with_the_function_a_script_registered():
    # a worker that never imported the script reads rows by the rule: the function travels with it
    import pickle

    from lancetnic_flow import tokenizers

    spec = tokenizers.register_tokenizer("unit-carried", split_spaces)
    rule = text_rule(_features("word", tokenizer=spec))
    entry = tokenizers._TOKENIZERS.pop("unit-carried")
    try:
        tokenizers._TOKENIZERS["unit-carried"] = entry
        blob = pickle.dumps(rule)
        del tokenizers._TOKENIZERS["unit-carried"]
        back = pickle.loads(blob)
        assert back == rule and "unit-carried" in tokenizers._TOKENIZERS
        assert usable(pa.array(["a b", " "], pa.string()), back).to_pylist() == [True, False]
    finally:
        tokenizers._TOKENIZERS["unit-carried"] = entry


def test_normalisation_is_applied_before_the_rule_as_the_features_apply_it():
    texts = pa.array(["ﬁ", "ǅ", "e\u0301e\u0301", "éé"], pa.string())
    assert usable(texts, text_rule(_features("word"))).to_pylist() == [False, False, False, True]
    assert usable(texts, text_rule(_features("word", normalize="nfkc"))).to_pylist() == [True, True, True, True]
    assert usable(texts, text_rule(_features("word", normalize="nfd"))).to_pylist() == [False, False, False, False]
    assert usable(pa.array(["ﬁ"]), text_rule(_features("char", 2, 2, normalize="nfkc"))).to_pylist() == [True]
    assert usable(pa.array(["ﬁ"]), text_rule(_features("char", 2, 2))).to_pylist() == [False]


@pytest.mark.parametrize("analyzer,lo,hi", [("word", 1, 2), ("char", 1, 3), ("char", 2, 4), ("char_wb", 3, 5)])
@pytest.mark.parametrize("normalize", ["none", "nfkc", "nfd"])
def test_a_text_is_usable_iff_the_runs_own_features_hold_a_term_for_it(analyzer, lo, hi, normalize):
    from lancetnic_flow.features.vectorize import FittedFeatures

    texts = TRICKY + ["İ", "İİ", "Σ", "ß", "a\x85"]   # lower-cased one character for one, as the kernels read them
    f = FittedFeatures(mode="hashing", analyzer=analyzer, ngram_min=lo, ngrams=hi, buckets=1 << 20, normalize=normalize)
    block = f.transform(pa.table({"text": pa.array(texts, pa.string())}), [])
    terms = [int(block.offsets[i + 1] - block.offsets[i]) for i in range(len(texts))]
    got = usable(pa.array(texts, pa.string()), text_rule(f)).to_pylist()
    assert [t for t, g, n in zip(texts, got, terms) if g != (n > 0 and bool(t.strip()))] == []


def test_the_word_rule_and_the_tokenizer_agree_on_every_letter_newer_unicode_included():
    # RE2's \pL knows Unicode 15 (U+31350, U+1E030): rows of such letters passed the rule and gave
    # no token, trained without features instead of counted empty_text.
    import numpy as np

    from lancetnic_flow.features.tokenize import tokenize

    points = [c for c in range(0x30, 0x32000, 7) if not 0xD800 <= c < 0xE000] + [0x31350, 0x1E030, 0x1E06D]
    texts = pa.array([chr(c) * 2 for c in points])
    tokens = tokenize(texts, lowercase=False)   # lower-cased, U+A7DC (Unicode 16) becomes U+019B: left
    has_token = np.zeros(len(points), bool)
    has_token[tokens.rows] = True
    assert usable(texts, "word").to_pylist() == has_token.tolist()
    assert usable(pa.array(["\U00031350\U00031351", "\U0001e030\U0001e031"]), "word").to_pylist() == [False, False]


WORDY = TRICKY + ["the the and of", "The AND of", "THE", "of the cat", "hello", "hello world", "cat, the",
                  "the cat sat", "Σ the", "ﬁ the", "a the b", "_the", "the_", "de la", "de la la",
                  "ΚΑΛΟΣ", "ΚΑΛΟΣ the", "καλοσ", "the１２"]
# str.lower gives "İ" a combining dot, which scikit-learn's \w leaves out and the tokenizer keeps: the run's terms decide.
OWN_TERMS = WORDY + ["İİ the", "İİ"]


@pytest.mark.parametrize("stop", [None, "english", ["the", "and", "of", "la", "καλος"]])
@pytest.mark.parametrize("lo,hi", [(1, 1), (1, 2), (2, 2), (2, 3), (3, 3)])
@pytest.mark.parametrize("lowercase", [True, False])
def test_a_text_of_stop_words_alone_or_of_fewer_words_than_min_is_empty_text_as_scikit_learn_reads_it(
        stop, lo, hi, lowercase):
    """`the the and of` with --stop-words english, and `hello` with --ngram-range 2,3, were `ok`
    rows without one feature, predicted from the bias: scikit-learn's word analyzer reads no term
    from them, nor do the run's own features."""
    from lancetnic_flow.features.vectorize import FittedFeatures

    features = SimpleNamespace(analyzer="word", ngram_min=lo, ngrams=hi, normalize="none", tokenizer=None,
                               stop_words=stop, lowercase=lowercase)
    got = usable(pa.array(WORDY, pa.string()), text_rule(features)).to_pylist()
    build = sklearn_text.CountVectorizer(analyzer="word", ngram_range=(lo, hi), stop_words=stop,
                                         lowercase=lowercase).build_analyzer()
    assert [t for t, g in zip(WORDY, got) if g != (bool(build(t)) and bool(t.strip()))] == []
    words = sorted(sklearn_text.ENGLISH_STOP_WORDS) if stop == "english" else stop
    run = FittedFeatures(mode="hashing", analyzer="word", ngram_min=lo, ngrams=hi, buckets=1 << 20,
                         lowercase=lowercase, stop_words=words)
    block = run.transform(pa.table({"text": pa.array(OWN_TERMS, pa.string())}), [])
    terms = [int(block.offsets[i + 1] - block.offsets[i]) for i in range(len(OWN_TERMS))]
    assert usable(pa.array(OWN_TERMS, pa.string()), text_rule(run)).to_pylist() == [n > 0 for n in terms]
    if stop is None and lo == 1:
        assert text_rule(features) == "word"   # the rule, and the cache keys of entries made with it, unchanged


@pytest.mark.parametrize("normalize", ["nfkc", "nfd"])
def test_stop_words_are_read_as_the_normalised_text_is(normalize):
    """A stop word of a file (`ﬁne`, `Café`) matches the text as the features match it: both normalised
    and lower-cased first."""
    from lancetnic_flow.features.vectorize import FittedFeatures

    texts = ["ﬁne", "fine", "FINE the", "café", "CAFE\u0301", "cafe", "ﬁne café x"]
    run = FittedFeatures(mode="hashing", analyzer="word", ngrams=2, buckets=1 << 20, normalize=normalize,
                         stop_words=["ﬁne", "Café", "the"])
    block = run.transform(pa.table({"text": pa.array(texts, pa.string())}), [])
    terms = [int(block.offsets[i + 1] - block.offsets[i]) for i in range(len(texts))]
    assert usable(pa.array(texts, pa.string()), text_rule(run)).to_pylist() == [n > 0 for n in terms]
