"""A copy of a run with 8-bit weights (``lancetnic-flow export RUN --compact DIR``).

Every run already stores a mostly-zero matrix as its entries
(:mod:`.stored_weights`), which is exact. This goes further and keeps each
large matrix's entries as 8-bit integers with a scale per column: a quarter
to a half of the run's weight file (docs/serving.md), at a cost in accuracy that
``docs/benchmarks.md`` measures (``lancetnic-flow evaluate DIR test.csv``
measures it on your data). The copy is a run folder like any other:
``predict``, ``evaluate``, ``serve`` and ``export --onnx`` read it, and its
``model.json`` says it was quantised and from which run; its metrics.json
and charts are the float run's, and its metrics.json says so (``figures_of``).
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import UserError
from ..storage import join, read_bytes, url_to_fs, write_bytes
from .folder import (CHECKPOINT_FILE, LOCK_FILES, STAMP_KEYS, WEIGHTS_FILE, finish_run, folder_options,
                     network_digest, unfinish, write_weights)
from .loading import load_run
from .stored_weights import decode, encode, materialize

# Files a finished run holds besides these are copied as they are (features.json, metrics.json, plots, …).
REWRITTEN = ("model.json", WEIGHTS_FILE, CHECKPOINT_FILE)


def compact_run(src: str, dst: str, src_options: dict | None = None, dst_options: dict | None = None) -> dict:
    """Write ``src`` (a finished run folder) to ``dst`` with its large weight
    matrices as 8-bit integers. Returns ``run``, ``bytes`` (the new weights
    file), ``source_bytes`` (the old one), ``matrices`` (the names quantised)
    and ``max_error`` (the largest change of a weight, as a share of its
    column's largest magnitude)."""
    sso, dso = folder_options(src, src_options), folder_options(dst, dst_options)
    loaded = load_run(src, sso)   # every file checked before anything is written
    if loaded.meta.get("quantised"):
        raise UserError(f"{src} holds 8-bit weights already ({loaded.meta['quantised'].get('from', 'a copy')})",
                        "compact the run it was made from")
    state = {k: v.detach().cpu() for k, v in loaded.model.state_dict().items()}
    stored = encode(state, int8=True)
    matrices = sorted(k.rsplit(":", 1)[0] for k in stored if k.endswith(":scale"))
    if not matrices:
        raise UserError(f"{src}: its network has no weight matrix large enough to store in 8 bits",
                        "it is small already; copy the folder as it is")
    back = decode(materialize(stored))   # what a load of the copy will hold: the error measured, not assumed
    max_error = max(float(((back[n] - state[n]).abs() / state[n].abs().amax(dim=0).clamp_min(1e-30)).max())
                    for n in matrices)
    del back
    fs, path = url_to_fs(src, **sso)
    # The run's trainer's writer lock is no file of the run: the copy is a run of its own.
    names = [b for n in fs.ls(path, detail=False) if fs.isfile(n)
             and (b := n.rstrip("/").rsplit("/", 1)[-1]) not in LOCK_FILES]
    dfs, dpath = url_to_fs(dst, **dso)
    fresh = not dfs.exists(dpath) or (dfs.isdir(dpath) and not dfs.ls(dpath, detail=False))
    try:
        out = _write_copy(src, dst, sso, dso, names, loaded.meta, stored, matrices, max_error)
    except BaseException:
        # A copy stopped mid-way (a full disk) is removed when this call made its folder: it was
        # left as an unfinished run, said to be trained again, and a new export refused its folder.
        if fresh:
            try:
                dfs.rm(dpath, recursive=True)
            except OSError:
                pass
        raise
    return out


def _write_copy(src: str, dst: str, sso: dict, dso: dict, names: list[str], meta_src: dict, stored: dict,
                matrices: list[str], max_error: float) -> dict:
    """Write the copy's files: the run's as they are, metrics.json saying whose figures they are,
    the 8-bit weights, and model.json last."""
    unfinish(dst, dso)
    for name in names:
        if name not in REWRITTEN and ".tmp-" not in name:
            data = read_bytes(join(src, name), sso)
            if name == "metrics.json":   # the float run's figures: say so, where a reader of the copy looks
                data = json.dumps({**json.loads(data), "figures_of": {
                    "run": str(src), "weights": "the float weights this copy was made from",
                    "measure": f"lancetnic-flow evaluate {dst} DATA"}}, indent=1).encode()
            write_bytes(join(dst, name), data, dso)
    meta = {k: v for k, v in meta_src.items() if k not in (*STAMP_KEYS, "weights", "features")}
    meta["quantised"] = {"bits": 8, "scale": "per column, symmetric", "from": str(src),
                         "matrices": matrices, "max_error": max_error}
    weights = write_weights(dst, stored, dso, network_digest(meta))
    finish_run(dst, meta, dso, weights)
    source = meta_src.get("weights", {}).get("bytes")
    return {"run": str(dst), "bytes": weights["bytes"], "source_bytes": source, "matrices": matrices,
            "max_error": max_error}


__all__ = ["compact_run"]
