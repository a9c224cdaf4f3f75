"""A local folder or glob listed through links to folders (data/local_walk.py), as Python's glob lists it."""
from __future__ import annotations

import glob
import os

from lancetnic_flow.data.local_walk import FollowingFileSystem


def _tree(root) -> None:
    (root / "real" / "deep").mkdir(parents=True)
    (root / "real" / "a.csv").write_text("x\n")
    (root / "real" / "deep" / "b.csv").write_text("x\n")
    os.symlink("real", root / "sub")
    os.symlink("../real/deep", root / "real" / "again")


def test_find_and_glob_go_through_links_to_folders_and_match_pythons_glob(tmp_path):
    _tree(tmp_path)
    fs = FollowingFileSystem()
    for pattern in ("*/*.csv", "*/*/*.csv", "**/*.csv", "sub/**"):
        want = sorted(p for p in glob.glob(str(tmp_path / pattern), recursive=True) if os.path.isfile(p))
        got = sorted(p for p, info in fs.glob(str(tmp_path / pattern), detail=True).items()
                     if os.path.isfile(p))
        assert got == want, pattern
    assert f"{tmp_path}/sub/again/b.csv" in fs.find(str(tmp_path))
    assert fs.find(str(tmp_path), maxdepth=1) == []   # a depth's limit holds through links too
    assert fs.cycles == []


def test_a_link_back_to_a_folder_it_lies_in_is_listed_once_and_named(tmp_path):
    _tree(tmp_path)
    os.symlink("..", tmp_path / "real" / "up")
    fs = FollowingFileSystem()
    found = fs.find(str(tmp_path))
    assert len(found) == 6   # a.csv, deep/b.csv and again/b.csv, each under real/ and sub/
    assert (f"{tmp_path}/real/up", str(tmp_path)) in fs.cycles
    assert FollowingFileSystem().cycles == []   # one listing's, never shared
