"""Local folders and globs listed through symbolic links to folders, as Python's glob lists them.

fsspec's local ``find`` (and so its ``glob``) lists a link to a folder as one
entry and never what it holds: ``data/*/*.csv`` with ``data/sub`` a link said
"no files match", and a folder of linked folders read nothing. pandas, pyarrow's
datasets and Python's ``glob`` go through such links. :class:`FollowingFileSystem`
is fsspec's local filesystem whose ``find`` does too, so its ``glob`` keeps
fsspec's patterns (``*``, ``**``, a trailing ``/``) while reaching through links.

A link back to a folder it lies in (``data/real/up -> ..``) would be walked
without end: such a link is not followed, and :attr:`FollowingFileSystem.cycles`
names it. A file reached by two names (through a link and directly) is listed by
both; the planner reads it once and says so (``data/sources.py``'s ``_Links``).
"""
from __future__ import annotations

import os

from fsspec.implementations.local import LocalFileSystem


class FollowingFileSystem(LocalFileSystem):
    """fsspec's local filesystem, whose ``find`` and ``glob`` go through links to folders."""

    cachable = False   # ``cycles`` belongs to one listing, never to a shared instance

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cycles: list[tuple[str, str]] = []   # (link, the folder above it that it leads back to)
        self.unreadable: list[str] = []   # folders that could not be listed (no permission)

    def find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        """Every file below ``path`` (and folder, ``withdirs``), sorted; links to folders are followed."""
        path = self._strip_protocol(path)
        out: dict[str, dict] = {}
        try:
            top = os.stat(path)
        except OSError:
            top = None
        if top is not None and os.path.isdir(path):
            if withdirs and path != "":
                out[path] = self.info(path)
            self._walk(path, {(top.st_dev, top.st_ino): path}, 1, maxdepth, withdirs, out)
        elif top is not None:
            out[path] = self.info(path)
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def _walk(self, folder: str, above: dict, depth: int, maxdepth, withdirs: bool, out: dict) -> None:
        """List ``folder`` into ``out``; ``above``: the folders it lies in, by (device, inode)."""
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return   # gone since it was listed
        except PermissionError:   # fsspec's walk and Python's glob leave its files out unsaid
            self.unreadable.append(folder)
            return
        for entry in entries:
            full = self._strip_protocol(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
                info = self.info(full) if is_dir else self.info(entry)
            except OSError:   # a link to nothing, or one that loops on itself: said as such later
                out[full] = self.info(entry)
                continue
            if not is_dir:
                out[full] = info
                continue
            if withdirs:
                out[full] = info
            if maxdepth is not None and depth >= maxdepth:
                continue
            st = os.stat(full)
            key = (st.st_dev, st.st_ino)
            if key in above:   # a link back to a folder it lies in: walked, it would never end
                self.cycles.append((full, above[key]))
                continue
            self._walk(full, {**above, key: full}, depth + 1, maxdepth, withdirs, out)
