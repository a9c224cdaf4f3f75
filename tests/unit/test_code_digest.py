"""code_digest.py: the digest of a user's function follows every file of the
user's code it reaches and nothing that differs between processes."""
from __future__ import annotations

import importlib
import sys
import textwrap

from lancetnic_flow.code_digest import code_digest


def _module(tmp_path, monkeypatch, name: str, text: str):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def test_the_digest_changes_when_a_helper_module_the_function_imports_is_edited(tmp_path, monkeypatch):
    helper = tmp_path / "digest_helper.py"
    helper.write_text("def rule(t):\n    return t.split()\n")
    tok = _module(tmp_path, monkeypatch, "digest_tok", """
        from digest_helper import rule

        def words(t):
            return rule(t)
        """)
    before = code_digest(tok.words)
    assert code_digest(tok.words) == before
    helper.write_text("def rule(t):\n    return [w[:3] for w in t.split()]\n")
    assert code_digest(tok.words) != before
    monkeypatch.delitem(sys.modules, "digest_helper", raising=False)


def test_the_digest_of_a_function_with_nested_code_is_the_same_for_the_same_source():
    # A comprehension or lambda is a code object whose repr holds its address: the digest
    # changed in every process (each run made a new entry; --resume said the options changed).
    source = "def words(t):\n    return [w for w in t.split() if w not in {'a', 'the'} and (lambda x: x)(w)]\n"
    one: dict = {}
    other: dict = {}
    exec(compile(source, "<cell>", "exec"), one)
    exec(compile(source, "<cell>", "exec"), other)
    assert code_digest(one["words"]) == code_digest(other["words"])


def test_a_set_constant_counts_by_its_members_not_the_hash_seeds_order():
    from lancetnic_flow.code_digest import _stable_repr

    assert _stable_repr(frozenset({"b", "a", "c"})) == _stable_repr(frozenset(["c", "a", "b"])) == "{'a', 'b', 'c'}"


def test_a_notebooks_helper_without_a_file_counts_by_its_code():
    scope: dict = {}
    exec("def helper(t):\n    return t.split()\ndef words(t):\n    return helper(t)\n", scope)
    before = code_digest(scope["words"])
    exec("def helper(t):\n    return [t]\n", scope)
    assert code_digest(scope["words"]) != before


def test_installed_packages_and_the_standard_library_are_left_out(tmp_path, monkeypatch):
    from lancetnic_flow import code_digest as module

    tok = _module(tmp_path, monkeypatch, "digest_std", """
        import json
        import re
        import numpy

        def words(t):
            return re.findall(r"\\w+", t)
        """)
    assert module._user_files(tok.words) == {str((tmp_path / "digest_std.py").resolve())}
