"""Tokenisation options (issue 16): --analyzer word|char|char_wb and
--ngram-range with scikit-learn's meaning, --stop-words, --no-lowercase,
--normalize nfkc and a registered tokenizer — compared with scikit-learn's
analyzers through the same hash, stored with the run and applied alike in
training and prediction; the keys of words and word pairs are unchanged."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

from lancetnic_flow import tokenizers
from lancetnic_flow.config import ADDED_FIELDS, FeatureConfig, TrainConfig, ngram_options
from lancetnic_flow.errors import UserError
from lancetnic_flow.features import kernels, register_tokenizer
from lancetnic_flow.features.tokenize import terms_of, text_buffers
from lancetnic_flow.features.vectorize import FittedFeatures

from helpers import CLUSTER, cli, transform_in_worker

TEXTS = [
    "The quick brown fox -- jumps over the lazy dog!! The fox again.",
    "Hello  world\t\tfoo\tbar   typo wrld helo wordl",
    "日本語のテキストです。東京都に住んでいます",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Café crème, naïve résumé; Straße über Öl",
    "tabs\tand\nnewlines\r\n  and   runs of   spaces ",
    "a", "", "  ", "x y z a b c the of and",
]
M64 = (1 << 64) - 1
GOLD = 0x9E3779B97F4A7C15
BIG = 2**31 - 1   # ids fit int32; no two of these terms share a bucket
NONE_TABLE = (np.zeros(2, np.uint64), np.full(2, -1, np.int64))


def mix(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def key(s: str) -> int:
    """FNV-1a 64 over the UTF-8 bytes, then the splitmix finaliser: a token's or a character n-gram's key."""
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return mix(h)


def word_key(ngram: str) -> int:
    """A word n-gram's key: one word as itself, else the chain of its words' keys, then ^ GOLD."""
    words = ngram.split(" ")
    if len(words) == 1:
        return key(words[0])
    c = key(words[0])
    for w in words[1:]:
        c = mix((c * GOLD + key(w)) & M64)
    return c ^ GOLD


def rows_of(block) -> list[Counter]:
    return [Counter({int(i): int(c) for i, c in zip(block.indices[block.offsets[r]:block.offsets[r + 1]],
                                                   block.values[block.offsets[r]:block.offsets[r + 1]])})
            for r in range(len(block.offsets) - 1)]


def sklearn_rows(analyzer, texts, hasher, buckets=BIG) -> list[Counter]:
    return [Counter(hasher(g) % buckets for g in analyzer(t)) for t in texts]


@pytest.mark.parametrize("analyzer", ["char", "char_wb"])
@pytest.mark.parametrize("low,high", [(1, 1), (1, 3), (2, 4), (3, 5), (5, 5)])
def test_character_ngrams_are_scikit_learns_hashed(analyzer, low, high):
    f = FittedFeatures(mode="hashing", analyzer=analyzer, ngram_min=low, ngrams=high, buckets=BIG)
    want = sklearn_rows(CountVectorizer(analyzer=analyzer, ngram_range=(low, high)).build_analyzer(), TEXTS, key)
    assert rows_of(f.counts(pa.array(TEXTS))) == want


@pytest.mark.parametrize("low,high", [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 4)])
@pytest.mark.parametrize("stop", [None, "english"])
def test_word_ngram_ranges_and_stop_words_are_scikit_learns_hashed(low, high, stop):
    f = FittedFeatures(mode="hashing", ngram_min=low, ngrams=high, buckets=BIG,
                       stop_words=sorted(ENGLISH_STOP_WORDS) if stop else None)
    want = sklearn_rows(CountVectorizer(ngram_range=(low, high), stop_words=stop).build_analyzer(), TEXTS, word_key)
    assert rows_of(f.counts(pa.array(TEXTS * 2))) == want * 2


def test_the_keys_of_words_and_word_pairs_are_those_of_earlier_versions():
    """bags (the old entry point) and word_bags over (1, 2) agree array for array, and a pair's key is
    mix(key(a) * GOLD + key(b)) ^ GOLD as before; term_keys of 'a b' gives the same."""
    data, offsets = text_buffers(pa.array(TEXTS))
    old = kernels.bags(data, offsets, kernels.word_table(), 2, 2, 2**19, *NONE_TABLE)
    new = kernels.word_bags(data, offsets, kernels.word_table(), 2, 1, 2, 2**19, *NONE_TABLE, *NONE_TABLE)
    for a, b in zip(old, new):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    d, o = text_buffers(pa.array(["quick brown", "quick", "new york city"]), lowercase=False)
    ks = kernels.term_keys(d, o)
    assert int(ks[0]) == mix((key("quick") * GOLD + key("brown")) & M64) ^ GOLD
    assert int(ks[1]) == key("quick") and int(ks[2]) == word_key("new york city")


@pytest.mark.parametrize("low,high,stop", [(1, 3, None), (2, 2, "english"), (1, 2, "english")])
def test_a_fitted_vocabulary_takes_ngram_ranges_and_stop_words_like_scikit_learn(low, high, stop):
    words = sorted(ENGLISH_STOP_WORDS) if stop else None
    terms = terms_of(pa.array(TEXTS), high, ngram_min=low, stop_words=words)
    vocab = pa.array(sorted(set(terms.terms.to_pylist())), pa.string())
    cv = CountVectorizer(ngram_range=(low, high), stop_words=stop)
    X = cv.fit_transform(TEXTS)
    assert set(cv.vocabulary_) == set(vocab.to_pylist())
    f = FittedFeatures(mode="tfidf", vocabulary=vocab, ngram_min=low, ngrams=high, stop_words=words)
    got = rows_of(f.counts(pa.array(TEXTS)))
    index = {t: i for i, t in enumerate(vocab.to_pylist())}
    want = [Counter({index[t]: int(X[r, j]) for t, j in cv.vocabulary_.items() if X[r, j]})
            for r in range(len(TEXTS))]
    assert got == want


def test_nfkc_folds_full_width_letters_before_lower_casing():
    texts = pa.array(["ＨＥＬＬＯ Ｗｏｒｌｄ ﬁne", "hello world fine"])
    plain = rows_of(FittedFeatures(mode="hashing", buckets=BIG).counts(texts))
    nfkc = rows_of(FittedFeatures(mode="hashing", buckets=BIG, normalize="nfkc").counts(texts))
    assert plain[0] != plain[1] and nfkc[0] == nfkc[1]
    raw = rows_of(FittedFeatures(mode="hashing", buckets=BIG, lowercase=False).counts(pa.array(["Hello"])))
    assert raw[0] == Counter({key("Hello") % BIG: 1})


def test_options_are_validated_naming_the_flag_and_stored_with_the_features(tmp_path):
    for kw, needle in [({"analyzer": "chars"}, "--analyzer"), ({"ngram_min": 3, "ngrams": 2}, "--ngram-range"),
                       ({"analyzer": "char", "stop_words": "english"}, "--stop-words"),
                       ({"normalize": "nfkx"}, "--normalize")]:
        with pytest.raises(UserError) as e:
            FeatureConfig(**kw).validate()
        # The command line names the flag; Python, the parameter (options.bad).
        assert e.value.cli[0].startswith(needle) and e.value.message.startswith(needle[2:].replace("-", "_"))
    cfg = TrainConfig.from_dict({"data": {"train": ["x.csv"]},
                                 "features": {"mode": "tfidf", "analyzer": "char_wb"}})
    with pytest.raises(UserError, match="features hashing"):
        cfg.validate()
    assert ngram_options("2,4", None) == {"ngram_min": 2, "ngrams": 4} and ngram_options(None, 1) == {"ngrams": 1}
    with pytest.raises(UserError, match="one of them"):
        ngram_options("1,3", 2)
    words = tmp_path / "stop.txt"
    words.write_text("foo\n\nbar \nfoo\n")
    fcfg = FeatureConfig(mode="hashing", stop_words=str(words))
    fcfg.validate()
    assert fcfg.stop_words == ["bar", "foo"]      # read once: the run needs the file no more
    words.unlink()
    from lancetnic_flow.features.vectorize import text_options

    f = FittedFeatures(mode="hashing", **text_options(fcfg))
    back = FittedFeatures.from_json(f.to_json())
    assert back.stop_words == ["bar", "foo"]
    assert rows_of(back.counts(pa.array(["foo bar baz"]))) == rows_of(f.counts(pa.array(["baz"])))
    # A default run's features.json holds none of the new keys; an old one reads as word unigrams/bigrams.
    from lancetnic_flow.features.vectorize import TEXT_DEFAULTS

    assert not set(TEXT_DEFAULTS) & set(json.loads(FittedFeatures(mode="hashing").to_json()))


def test_new_options_count_in_the_cache_key_only_when_set():
    from pathlib import Path

    from lancetnic_flow.data.sources import Columns, plan_source
    from lancetnic_flow.dataflow.manifest import entry_key

    src = plan_source([str(Path(__file__))], format="text", blocksize=2**20)
    cols = Columns(text=("text",))
    default = FeatureConfig(mode="hashing", analyzer="word").__dict__   # what --analyzer auto decides for words
    before = {k: v for k, v in default.items() if k not in ADDED_FIELDS["features"] or k == "idf"}
    assert entry_key(src, None, default, cols, 0.1) == entry_key(src, None, before, cols, 0.1)
    assert entry_key(src, None, {**default, "analyzer": "char"}, cols, 0.1) != entry_key(src, None, default, cols, 0.1)


# ---- a tokenizer of your own ------------------------------------------------
def split_on_spaces(texts: pa.Array) -> pa.Array:
    """A vectorised tokenizer: whitespace-separated pieces, punctuation kept."""
    return pc.utf8_split_whitespace(texts)


SPEC = register_tokenizer("spaces", split_on_spaces, batch=True)


def test_a_registered_tokenizer_matches_scikit_learn_with_that_tokenizer_and_round_trips(client):
    assert SPEC.endswith(":spaces") and SPEC.split(":")[0] in ("test_tokenisation", "tests.test_tokenisation")
    fcfg = FeatureConfig(mode="hashing", tokenizer="spaces", ngram_min=1, ngrams=2, stop_words="english")
    fcfg.validate()
    assert fcfg.tokenizer == SPEC     # recorded with its module: workers import it
    from lancetnic_flow.features.vectorize import text_options

    f = FittedFeatures(mode="hashing", buckets=BIG, **text_options(fcfg))
    cv = CountVectorizer(tokenizer=str.split, token_pattern=None, ngram_range=(1, 2), stop_words="english")
    assert rows_of(f.counts(pa.array(TEXTS))) == sklearn_rows(cv.build_analyzer(), TEXTS, word_key)
    back = FittedFeatures.from_json(f.to_json())
    assert back.tokenizer == SPEC
    here = back.transform_texts(pa.array(TEXTS))
    there = client.submit(transform_in_worker, back, TEXTS, pure=False).result()
    np.testing.assert_array_equal(here.indices, there.indices)
    np.testing.assert_allclose(here.values, there.values)
    per_text = register_tokenizer("spaces_per_text", str.split)
    g = FittedFeatures(mode="hashing", buckets=BIG, tokenizer=per_text, ngrams=2, stop_words=f.stop_words)
    assert rows_of(g.counts(pa.array(TEXTS))) == rows_of(f.counts(pa.array(TEXTS)))


def test_a_run_whose_tokenizer_is_not_registered_is_a_clear_error():
    f = FittedFeatures(mode="hashing", tokenizer="nowhere_to_be_found", buckets=64)
    with pytest.raises(UserError, match="nowhere_to_be_found.*not registered") as e:
        FittedFeatures.from_json(f.to_json())
    assert "register_tokenizer" in e.value.hint
    f.tokenizer = "no_such_module_xyz:mine"
    with pytest.raises(UserError, match="no_such_module_xyz"):
        FittedFeatures.from_json(f.to_json())
    with pytest.raises(UserError, match="tokenizer splits words") as e:
        FeatureConfig(tokenizer="spaces", analyzer="char").validate()
    assert e.value.cli[0].startswith("--tokenizer splits words")
    saved = tokenizers._TOKENIZERS.pop("spaces")
    try:
        with pytest.raises(UserError, match="importing .* did not register it"):
            tokenizers.resolve("lancetnic_flow.errors:spaces")
    finally:
        tokenizers._TOKENIZERS["spaces"] = saved


# ---- through the command line ---------------------------------------------
def test_a_char_wb_run_trained_by_the_cli_predicts_as_the_predictor_does_after_reload(tmp_path):
    from lancetnic_flow import Predictor

    assert cli("make-data", "x.csv", "--rows", "1500", cwd=tmp_path).returncode == 0
    p = cli("train", "x.csv", *CLUSTER, "--analyzer", "char_wb", "--ngram-range", "2,4", "--buckets", "65536",
            "--stop-words", "english", "--epochs", "1", "--out", tmp_path / "runs", "--name", "chars",
            cwd=tmp_path)
    assert p.returncode == 2 and "--stop-words applies to words" in p.stdout + p.stderr
    p = cli("train", "x.csv", *CLUSTER, "--analyzer", "char_wb", "--ngram-range", "2,4", "--buckets", "65536",
            "--normalize", "nfkc", "--epochs", "2", "--out", tmp_path / "runs", "--name", "chars", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    run = tmp_path / "runs" / "chars"
    stored = json.loads((run / "features.json").read_text())
    assert (stored["analyzer"], stored["ngram_min"], stored["ngrams"], stored["normalize"]) == ("char_wb", 2, 4, "nfkc")
    assert json.loads((run / "config.json").read_text())["features"]["analyzer"] == "char_wb"
    texts = ["morani tesu kalop", "ＭＯＲＡＮＩ  tesu", "typo: moranni tsu"]
    q = cli("predict", run, *[a for t in texts for a in ("--text", t)], cwd=tmp_path)
    assert q.returncode == 0, q.stdout + q.stderr
    by_cli = [json.loads(line) for line in q.stdout.splitlines() if line.strip()]
    by_api = Predictor(str(run)).predict(texts)
    assert [x["label"] for x in by_cli] == [x["label"] for x in by_api]
    np.testing.assert_allclose([x["probability"] for x in by_cli], [x["probability"] for x in by_api], rtol=1e-5)
    # NFKC: the full-width text reads as its plain form.
    assert by_api[1]["probability"] == pytest.approx(Predictor(str(run)).predict(["MORANI tesu"])[0]["probability"])


def _spaceless_corpus(path, rows: int, seed: int) -> None:
    """Two classes of Japanese-like text: no spaces, each class its own characters among shared ones."""
    rng = np.random.default_rng(seed)
    shared, own = "のはをにがでとしたするです", {"games": "戦略遊戯盤駒勝負", "libs": "関数処理共有実行"}
    lines = ["text,label"]
    for i in range(rows):
        label = "games" if i % 2 else "libs"
        pool = shared + own[label] * 2
        lines.append("".join(rng.choice(list(pool), 24)) + "," + label)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_text_without_spaces_trains_on_character_ngrams_by_default_and_the_run_says_so(tmp_path):
    _spaceless_corpus(tmp_path / "ja.csv", 800, seed=1)
    out = {}
    for name, extra in (("auto", []), ("word", ["--analyzer", "word"]), ("tfidf", ["--features", "tfidf"])):
        p = cli("train", "ja.csv", *CLUSTER, "--epochs", "3", "--out", tmp_path / "runs", "--name", name, *extra,
                cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        out[name] = (p.stdout + p.stderr, json.loads((tmp_path / "runs" / name / "metrics.json").read_text()))
    text, metrics = out["auto"]
    assert "decided  analyzer char_wb 1,3:" in text and "written without spaces" in text and "Korean" in text
    stored = json.loads((tmp_path / "runs" / "auto" / "features.json").read_text())
    assert (stored["analyzer"], stored.get("ngram_min", 1), stored["ngrams"]) == ("char_wb", 1, 3)
    assert metrics["decided"]["analyzer"]["char_script_share"] > 0.9
    assert metrics["val_accuracy"] > 0.9
    # The user's --analyzer wins: no decision, and words (each line one token) learn nothing here.
    text, metrics = out["word"]
    assert "decided" not in text and not metrics["decided"]
    assert json.loads((tmp_path / "runs" / "word" / "config.json").read_text())["features"]["analyzer"] == "word"
    assert metrics["val_accuracy"] < 0.7
    # A fitted vocabulary holds words: auto cannot turn to characters, and the run says what would.
    text, metrics = out["tfidf"]
    assert "warning: " in text and "--features hashing reads character n-grams" in text
    assert metrics["decided"]["analyzer"]["analyzer"] == "word" and metrics["decided"]["analyzer"]["warning"]
    # said as the command line was told it, not as "{features.mode} hashing"
    assert "--features hashing reads" in metrics["decided"]["analyzer"]["warning"]


def test_hindi_whose_vowel_signs_cut_its_words_trains_on_character_ngrams_and_keeps_every_row(tmp_path):
    # Each of these words holds a vowel sign after its every letter: the word pattern reads no token in it.
    words = {"books": "किताबें पढ़ाई कहानी", "food": "खाना रोटी मिठाई"}
    rng = np.random.default_rng(3)
    lines = ["text,label"] + [" ".join(rng.choice(words[label].split(), 6)) + "," + label
                              for _ in range(300) for label in words]
    (tmp_path / "hi.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = cli("train", "hi.csv", *CLUSTER, "--epochs", "2", "--out", tmp_path / "runs", "--name", "hi", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "decided  analyzer char_wb 1,3:" in p.stdout + p.stderr and "Hindi" in p.stdout + p.stderr
    metrics = json.loads((tmp_path / "runs" / "hi" / "metrics.json").read_text())
    assert metrics["rows"]["skipped"] == {} and metrics["val_accuracy"] == 1.0


def test_vocalised_arabic_whose_marks_cut_its_words_trains_on_character_ngrams_even_under_nfkc(tmp_path):
    """Auto read vocalised Arabic as words cut at every mark, only warning (and not at all under
    --normalize nfkc, which composes nothing there): `كَتَبَ` gave no token."""
    words = {"sport": "كُرَةُ المُبَارَاةِ الفَرِيقُ اللَّاعِبُ", "money": "السُّوقُ الاِقْتِصَادُ البَنْكُ المَالُ"}
    rng = np.random.default_rng(5)
    lines = ["text,label"] + [" ".join(rng.choice(words[label].split(), 5)) + "," + label
                              for _ in range(300) for label in words]
    (tmp_path / "ar.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = cli("train", "ar.csv", *CLUSTER, "--epochs", "2", "--normalize", "nfkc", "--out", tmp_path / "runs",
            "--name", "ar", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "decided  analyzer char_wb 1,3:" in p.stdout + p.stderr and "vocalised Arabic" in p.stdout + p.stderr
    cfg = json.loads((tmp_path / "runs" / "ar" / "config.json").read_text())
    assert (cfg["features"]["analyzer"], cfg["features"]["ngram_min"], cfg["features"]["ngrams"]) == ("char_wb", 1, 3)
    metrics = json.loads((tmp_path / "runs" / "ar" / "metrics.json").read_text())
    assert metrics["rows"]["skipped"] == {} and metrics["val_accuracy"] == 1.0


def test_text_written_decomposed_warns_that_its_words_are_cut_and_names_normalize_nfc(tmp_path):
    import unicodedata

    rng = np.random.default_rng(4)
    words = {"a": "résumé élégant été très", "b": "problème fenêtre forêt hôpital"}
    lines = ["text,label"] + [unicodedata.normalize("NFD", " ".join(rng.choice(words[label].split(), 5))) + "," + label
                              for _ in range(200) for label in words]
    (tmp_path / "nfd.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = cli("train", "nfd.csv", *CLUSTER, "--epochs", "1", "--out", tmp_path / "runs", "--name", "nfd", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "where the word pattern" in p.stdout + p.stderr and "--normalize nfc joins" in p.stdout + p.stderr
    decided = json.loads((tmp_path / "runs" / "nfd" / "metrics.json").read_text())["decided"]
    assert decided["cut_words"]["share"] > 0.9 and "--normalize nfc" in decided["cut_words"]["warning"]


def test_english_text_keeps_words_by_default_with_nothing_said(tmp_path):
    assert cli("make-data", "en.csv", "--rows", "800", cwd=tmp_path).returncode == 0
    p = cli("train", "en.csv", *CLUSTER, "--epochs", "1", "--out", tmp_path / "runs", "--name", "en", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "decided" not in p.stdout + p.stderr
    cfg = json.loads((tmp_path / "runs" / "en" / "config.json").read_text())
    assert (cfg["features"]["analyzer"], cfg["features"]["ngram_min"], cfg["features"]["ngrams"]) == ("word", 1, 2)


def test_a_tokenizer_reference_pickles_with_its_function():
    import pickle

    from lancetnic_flow.tokenizers import TokenizerRef, canonical

    ref = canonical("spaces_per_text") if "spaces_per_text" in tokenizers._TOKENIZERS else \
        canonical(register_tokenizer("spaces_per_text", str.split))
    assert isinstance(ref, TokenizerRef) and json.dumps({"t": ref}) == json.dumps({"t": str(ref)})
    blob = pickle.dumps(FeatureConfig(tokenizer=ref))
    saved = tokenizers._TOKENIZERS.pop("spaces_per_text")
    try:
        back = pickle.loads(blob)     # as a worker that never registered it
        assert back.tokenizer == ref and tokenizers.resolve(ref)[0] is str.split
    finally:
        tokenizers._TOKENIZERS["spaces_per_text"] = saved


def _reviews_with_one_character_rows(path, rows: int = 240, seed: int = 0) -> list[tuple[str, str]]:
    """Chinese reviews of a few phrases each, 40 of one character (好 "good", 差 "bad"), 4 blank texts."""
    rng = np.random.default_rng(seed)
    pos, neg = ["很好吃", "服务很好", "非常满意", "味道不错", "推荐"], ["太难吃了", "服务很差", "非常失望", "不会再来", "太贵"]
    data = [("".join(rng.choice(pos if i % 2 else neg, 3)), "pos" if i % 2 else "neg") for i in range(rows)]
    data += [("好", "pos") if i % 2 else ("差", "neg") for i in range(40)] + [("  ", "pos")] * 4
    data = [data[i] for i in rng.permutation(len(data))]
    path.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in data), encoding="utf-8")
    return data


def test_one_character_chinese_rows_are_trained_evaluated_and_predicted_under_character_ngrams(tmp_path):
    data = _reviews_with_one_character_rows(tmp_path / "zh.csv")
    p = cli("train", "zh.csv", *CLUSTER, "--epochs", "3", "--out", tmp_path / "runs", "--name", "zh", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.loads((tmp_path / "runs" / "zh" / "metrics.json").read_text())
    assert m["decided"]["analyzer"]["analyzer"] == "char_wb"
    # Only the blank texts hold nothing the analyzer reads; every one-character review is a row.
    assert m["rows"]["skipped"] == {"empty_text": 4} and m["rows"]["read"] == len(data)
    assert m["rows"]["trained"] + m["rows"]["validated"] == len(data) - 4
    ask = ["好", "差", ":)", "   ", "服务很差"]
    (tmp_path / "ask.csv").write_text("id,text\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(ask)),
                                      encoding="utf-8")
    p = cli("predict", "runs/zh", "--input", "ask.csv", "--output", "out.jsonl", "--keep", "id", *CLUSTER,
            cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["status"] for r in out] == ["ok", "ok", "ok", "empty_text", "ok"]
    assert [r["predicted"] for r in out[:2]] == ["pos", "neg"]
    p = cli("predict", "runs/zh", "--text", "好", "--text", " ", cwd=tmp_path)
    said = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["status"], r["label"]) for r in said] == [("ok", "pos"), ("empty_text", None)]
    p = cli("evaluate", "runs/zh", "zh.csv", "--json", *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads(p.stdout.splitlines()[-1])["rows"]
    assert rows == {"read": len(data), "evaluated": len(data) - 4, "skipped": {"empty_text": 4}}
