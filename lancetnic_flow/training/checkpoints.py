"""Trainer checkpoints: where a run is, so a killed run loses minutes, not hours.

A checkpoint is ONE safetensors file in the run folder,
``RUN/checkpoint.safetensors``: the tensors (model weights, optimiser
moments, the best epoch's weights, the torch RNG state, metric arrays) and,
in its string metadata, a JSON document with everything else (epoch, batches
of that epoch already trained, optimiser step, history, early-stopping
state, the cache key the run trained on). It is written under a temporary
name and renamed, so a kill during the write leaves the previous checkpoint
whole. Loading reads safetensors and JSON only: no pickle.

What a checkpoint holds is a :class:`~.state.TrainState`.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UserError
from ..events import Events
from ..storage import join, open_atomic, read_bytes, url_to_fs
from ..runs.folder import CHECKPOINT_FILE
from ..runs.tensor_file import write_safetensors
from .state import TrainState

if TYPE_CHECKING:
    import torch

CHECKPOINT = CHECKPOINT_FILE
FORMAT = 1


# ---------------------------------------------------------------- flattening
# Optimiser and metric states are nested dicts/lists of tensors, arrays and
# scalars. Tensors and arrays go to the safetensors side under a path key and
# leave a marker in the JSON side; everything else is JSON.

def _is_tensor(obj: Any) -> bool:
    # A state without a torch tensor (a model trained as arrays) is written without importing torch.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _flatten(obj: Any, path: str, tensors: dict[str, Any]) -> Any:
    if _is_tensor(obj):
        # No copy: the checkpoint is written before training moves on.
        tensors[path] = obj.detach().cpu().contiguous()
        return {"__tensor__": path}
    if isinstance(obj, np.ndarray):
        # np.ascontiguousarray would make a 0-d array (a scale) 1-d
        tensors[path] = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return {"__array__": path}
    if isinstance(obj, dict):
        # Tensors are named by their path (s/model/input.weight): readable with any safetensors tool.
        return {"__dict__": [[_flatten(k, f"{path}/k{i}", tensors),
                              _flatten(v, f"{path}/{k}" if isinstance(k, str) and "/" not in k else f"{path}/{i}",
                                       tensors)]
                             for i, (k, v) in enumerate(obj.items())]}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_flatten(v, f"{path}/{i}", tensors) for i, v in enumerate(obj)],
                "tuple": isinstance(obj, tuple)}
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint a {type(obj).__name__}")


def _unflatten(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__array__" in obj:
            return tensors[obj["__array__"]].numpy()
        if "__dict__" in obj:
            return {_unflatten(k, tensors): _unflatten(v, tensors) for k, v in obj["__dict__"]}
        if "__list__" in obj:
            items = [_unflatten(v, tensors) for v in obj["__list__"]]
            return tuple(items) if obj.get("tuple") else items
    return obj


def pack(state: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A nested state → (tensors and arrays by path, JSON for the rest)."""
    tensors: dict[str, Any] = {}
    doc = _flatten(state, "s", tensors)
    return tensors, json.dumps({"format": FORMAT, "state": doc})


def unpack(tensors: dict[str, torch.Tensor], meta: str) -> dict[str, Any]:
    doc = json.loads(meta)
    if doc.get("format") != FORMAT:
        raise UserError(f"the checkpoint has format {doc.get('format')}, this version reads {FORMAT}",
                        "finish the run with the version that started it, or start a new run")
    return _unflatten(doc["state"], tensors)


# ------------------------------------------------------------------ file I/O

def save_checkpoint(run: str, state: dict[str, Any], storage_options: dict | None = None) -> float:
    """Write ``state`` as ``run/checkpoint.safetensors`` under a temporary name,
    then rename it into place; return the seconds it took."""
    t0 = time.monotonic()
    tensors, meta = pack(state)
    # Synced before the rename: a crash right after it must not leave an empty checkpoint.
    with open_atomic(join(run, CHECKPOINT), storage_options or {}, sync=True) as f:
        write_safetensors(f, tensors, {"lancetnic_flow": meta})
    return time.monotonic() - t0


def load_checkpoint(run: str, storage_options: dict | None = None) -> dict[str, Any] | None:
    """The state saved in ``run``, or None when the run has no checkpoint."""
    import safetensors
    import safetensors.torch

    url = join(run, CHECKPOINT)
    local = "://" not in run or run.startswith("file://")
    try:
        if local:
            path = url.removeprefix("file://")
            if not os.path.exists(path):
                return None
            with safetensors.safe_open(path, "pt") as f:   # memory-mapped: no second copy
                meta_doc = (f.metadata() or {}).get("lancetnic_flow")
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        else:
            try:
                data = read_bytes(url, storage_options or {})
            except FileNotFoundError:
                return None
            tensors = safetensors.torch.load(data)
            header_len = int.from_bytes(data[:8], "little")
            meta_doc = json.loads(data[8:8 + header_len]).get("__metadata__", {}).get("lancetnic_flow")
    except Exception as exc:
        raise UserError(f"{url} is damaged ({exc})",
                        "the run cannot continue from it; start a new run (cached shards are reused)") from None
    if not meta_doc:
        raise UserError(f"{url} is not a lancetnic_flow checkpoint")
    return unpack(tensors, meta_doc)


def restore_weights(run: str, model: Any, optimizers: list, saved: TrainState) -> None:
    """Put a checkpoint's weights and optimiser moments (``saved``) into this run's network and
    optimisers. A checkpoint of another network (another run's, copied in: its data and features
    the same, its sizes or optimiser not) is refused in words, not load_state_dict's error."""
    try:
        # --ddp: the trainer holds no optimiser (each rank builds its own from the checkpoint's)
        if optimizers and len(saved.optimizers or []) != len(optimizers):
            raise ValueError(f"{len(saved.optimizers or [])} optimiser state(s) for this run's {len(optimizers)}")
        model.load_state_dict(saved.model)
        for o, st in zip(optimizers, saved.optimizers):
            o.load_state_dict(st)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        why = "; ".join(lines[1:3] if len(lines) > 1 else lines)[:300]
        raise UserError(f"{join(run, CHECKPOINT)} does not fit the network and optimiser this run trains "
                        f"({why}): it is another run's checkpoint", "resume the run that wrote it, or start a new "
                        "run (what was fitted and featurised is cached)") from None


def network_of(model_meta: dict) -> dict:
    """What a checkpoint records of the network it holds: model.json's model, net and sizes, as JSON reads them."""
    return json.loads(json.dumps({k: model_meta.get(k) for k in ("model", "net", "kwargs")}, default=str))


def check_network(run: str, saved: TrainState, network: dict) -> None:
    """Refuse to continue ``saved`` (a checkpoint) as another network than the one it trained:
    config.json edited since, or another run's. A checkpoint written before it recorded its
    network is not checked."""
    if saved.network is None or saved.network == network:
        return
    was, now = saved.network, network
    diff = [f"{k} {was['kwargs'].get(k)!r} → {now['kwargs'].get(k)!r}"
            for k in sorted(set(was.get("kwargs") or {}) | set(now.get("kwargs") or {}))
            if (was.get("kwargs") or {}).get(k) != (now.get("kwargs") or {}).get(k)]
    if was.get("model") != now.get("model") or was.get("net") != now.get("net"):
        diff.insert(0, f"model {was.get('model')} ({was.get('net')}) → {now.get('model')} ({now.get('net')})")
    raise UserError(f"{join(run, CHECKPOINT)} holds a network other than the one {join(run, 'config.json')} "
                    f"now builds ({'; '.join(diff[:3])}): config.json was changed since, or is another run's",
                    "restore the run's config.json, or start a new run (what was fitted and featurised is cached)")


def has_checkpoint(run: str, storage_options: dict | None = None) -> bool:
    """Whether ``run`` holds a checkpoint to resume from."""
    fs, path = url_to_fs(join(run, CHECKPOINT), **(storage_options or {}))
    return fs.exists(path)


def remove_checkpoint(run: str, storage_options: dict | None = None) -> None:
    """Drop the checkpoint once the run is saved: it holds optimiser moments, ~3× the model."""
    fs, path = url_to_fs(join(run, CHECKPOINT), **(storage_options or {}))
    try:
        fs.rm(path)
    except FileNotFoundError:
        pass


def write_checkpoint(run: str, state: TrainState, storage_options: dict, events: Events, reason: str) -> None:
    """Write ``state`` as the run's checkpoint and tell the views (``reason``:
    periodic, epoch, interrupt or scheduler_lost)."""
    seconds = save_checkpoint(run, state.to_checkpoint(), storage_options)
    events.emit("checkpoint", run=str(run), epoch=state.epoch + 1, batches=state.batches, reason=reason,
                seconds=seconds)
