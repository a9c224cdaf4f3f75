"""tokenizers.py: registering a tokenizer by name, resolving it here or by
importing its module, refusing unknown names in words, and a TokenizerRef
that carries its function through pickle."""
from __future__ import annotations

import pickle

import pyarrow as pa

import pytest

from lancetnic_flow import tokenizers
from lancetnic_flow.errors import UserError
from lancetnic_flow.tokenizers import TokenizerRef, canonical, register_tokenizer, resolve


def by_commas(text: str) -> list[str]:
    return text.split(",")


def test_a_registered_tokenizer_is_named_with_its_importable_module_and_resolves():
    spec = register_tokenizer("unit-commas", by_commas, batch=False)
    assert spec == f"{__name__}:unit-commas"
    assert resolve(spec) == (by_commas, False) and resolve("unit-commas") == (by_commas, False)
    assert isinstance(canonical("unit-commas"), TokenizerRef) and canonical("unit-commas") == spec


@pytest.mark.parametrize("name", ["", "has space", "a/b"])
def test_a_bad_name_or_a_non_function_is_refused(name):
    with pytest.raises(UserError, match="tokenizer name"):
        register_tokenizer(name, by_commas)
    with pytest.raises(UserError, match="not a function"):
        register_tokenizer("ok-name", "not callable")


def test_an_unknown_name_or_module_is_a_user_error_saying_how_to_register():
    with pytest.raises(UserError, match="not registered") as e:
        resolve("never-registered")
    assert "register_tokenizer" in e.value.hint
    with pytest.raises(UserError, match="cannot be imported"):
        resolve("no_such_module_here:name")


def test_a_tokenizer_ref_pickles_with_its_function_and_registers_it_where_missing(monkeypatch):
    register_tokenizer("unit-carried", by_commas)
    data = pickle.dumps(TokenizerRef("unit-carried"))
    monkeypatch.delitem(tokenizers._TOKENIZERS, "unit-carried")
    back = pickle.loads(data)
    assert back == "unit-carried" and resolve("unit-carried")[0] is by_commas


def test_the_code_fingerprint_changes_when_the_tokenizers_module_is_edited(tmp_path, monkeypatch):
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(tmp_path))
    src = tmp_path / "edited_tok.py"
    src.write_text("from lancetnic_flow.tokenizers import register_tokenizer\n"
                   "def words(t):\n    return t.split()\n"
                   "register_tokenizer('edited-words', words)\n")
    importlib.import_module("edited_tok")
    before = tokenizers.code_fingerprint("edited_tok:edited-words")
    assert before == tokenizers.code_fingerprint("edited_tok:edited-words")   # stable
    src.write_text(src.read_text().replace("t.split()", "['constant']"))
    assert tokenizers.code_fingerprint("edited_tok:edited-words") != before
    sys.modules.pop("edited_tok", None)


def test_a_script_tokenizers_fingerprint_follows_its_compiled_code():
    def one(t):
        return t.split()

    def other(t):
        return [t]

    register_tokenizer("fp-a", one)
    a = tokenizers.code_fingerprint(canonical("fp-a"))
    register_tokenizer("fp-a", other)
    assert tokenizers.code_fingerprint(canonical("fp-a")) != a


def test_the_code_fingerprint_changes_when_a_helper_module_the_tokenizer_imports_is_edited(tmp_path, monkeypatch):
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(tmp_path))
    helper = tmp_path / "tok_helper_rule.py"
    helper.write_text("def rule(t):\n    return t.split()\n")
    (tmp_path / "tok_with_helper.py").write_text(
        "from lancetnic_flow.tokenizers import register_tokenizer\nfrom tok_helper_rule import rule\n"
        "def words(t):\n    return rule(t)\nregister_tokenizer('helped-words', words)\n")
    importlib.import_module("tok_with_helper")
    before = tokenizers.code_fingerprint("tok_with_helper:helped-words")
    helper.write_text("def rule(t):\n    return [w[:3] for w in t.split()]\n")
    assert tokenizers.code_fingerprint("tok_with_helper:helped-words") != before
    for name in ("tok_with_helper", "tok_helper_rule"):
        sys.modules.pop(name, None)


def test_the_code_fingerprint_of_a_tokenizer_with_a_comprehension_is_the_same_for_the_same_code():
    source = "def words(t):\n    return [w for w in t.split() if w]\n"
    fingerprints = set()
    for _ in range(2):
        scope: dict = {}
        exec(compile(source, "<cell>", "exec"), scope)
        register_tokenizer("fp-comprehension", scope["words"])
        fingerprints.add(tokenizers.code_fingerprint(canonical("fp-comprehension")))
    assert len(fingerprints) == 1


def test_the_files_a_tokenizer_depends_on_enter_its_fingerprint_by_their_content(tmp_path):
    words = tmp_path / "stop.txt"
    words.write_text("the\nof\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("a b c")
    register_tokenizer("unit-listed", by_commas, depends_on=[str(words), model])
    before = tokenizers.code_fingerprint("unit-listed")
    assert tokenizers.code_fingerprint("unit-listed") == before   # unchanged files: the same entry
    words.write_text("the\nof\nand\n")
    after_list = tokenizers.code_fingerprint("unit-listed")
    assert after_list != before
    (model / "vocab.txt").write_text("a b d")
    assert tokenizers.code_fingerprint("unit-listed") not in (before, after_list)
    (model / "merges.txt").write_text("x")   # a file added to the folder
    last = tokenizers.code_fingerprint("unit-listed")
    (model / "merges.txt").rename(model / "other.txt")   # the same bytes under another name
    assert tokenizers.code_fingerprint("unit-listed") != last
    register_tokenizer("unit-unlisted", by_commas)
    register_tokenizer("unit-empty-list", by_commas, depends_on=[])
    assert tokenizers.code_fingerprint("unit-unlisted") == tokenizers.code_fingerprint("unit-empty-list")


def test_a_tokenizers_depends_on_is_recorded_absolute_and_carried_by_pickle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.txt").write_text("x")
    register_tokenizer("unit-carried-files", by_commas, depends_on="w.txt")
    assert tokenizers.depends_on("unit-carried-files") == (str(tmp_path / "w.txt"),)
    data = pickle.dumps(TokenizerRef("unit-carried-files"))
    monkeypatch.delitem(tokenizers._TOKENIZERS, "unit-carried-files")
    pickle.loads(data)
    assert tokenizers.depends_on("unit-carried-files") == (str(tmp_path / "w.txt"),)


@pytest.mark.parametrize("bad,says", [(3, "a path or a list of paths"), ([b"w.txt"], "a path or a list of paths"),
                                      ([""], "an empty path"), ("s3://bucket/w.txt", "local")])
def test_a_bad_depends_on_is_refused_naming_what_it_takes(bad, says):
    with pytest.raises(UserError, match=says):
        register_tokenizer("unit-bad-files", by_commas, depends_on=bad)


def test_a_file_the_tokenizer_depends_on_that_cannot_be_read_is_a_user_error_naming_it(tmp_path):
    register_tokenizer("unit-missing-file", by_commas, depends_on=tmp_path / "gone.txt")
    with pytest.raises(UserError, match="gone.txt") as e:
        tokenizers.code_fingerprint("unit-missing-file")
    assert "depends_on" in e.value.hint


def joined(text: str) -> str:
    return " ".join(text.split())


def word_set(text: str) -> set:
    return set(text.split())


def numbered(text: str) -> list:
    return [len(w) for w in text.split()]


def generated(text: str):
    yield from text.split()


@pytest.mark.parametrize("fn,says", [(joined, "returned str 'ab cd' for 'ab cd', not a list of tokens"),
                                     (word_set, "returned a set for 'ab cd': its order changes"),
                                     (numbered, r"returned the token 2 \(int\) for 'ab cd'")])
def test_a_per_text_tokenizer_returning_a_string_a_set_or_numbers_is_refused_not_read_as_characters(fn, says):
    from lancetnic_flow.tokenizers import tokens_of

    spec = register_tokenizer(f"unit-{fn.__name__}", fn)
    with pytest.raises(UserError, match=says):
        tokens_of(spec, pa.array(["ab cd", "ef"]))


def test_a_per_text_tokenizer_may_yield_its_tokens_or_return_a_tuple_or_none():
    from lancetnic_flow.tokenizers import tokens_of

    for fn in (generated, lambda t: tuple(t.split()), lambda t: t.split() if t != "ef" else None):
        offsets, tokens = tokens_of(register_tokenizer("unit-sequences", fn), pa.array(["ab cd", "ef", "gh"]))
        assert tokens.to_pylist()[:2] == ["ab", "cd"] and offsets[1] == 2 and len(offsets) == 4
