"""``--resume``: the configuration an interrupted run was started with."""
from __future__ import annotations

from typing import Any, Iterable

from ..config import TrainConfig
from ..dataflow.cluster import scheduler_address
from ..errors import UserError
from ..options import Words, bad
from ..registry import MODELS
from ..resolve import LOCAL_SIZES, config_places
from ..runs.loading import a_file_not_a_run, no_such_run, read_config
from ..storage import refuse_local_storage_options
from .keep_learning import mark_continued, own_label_sep


def resume_config(run: str, *, storage_options: dict | None = None, memory_budget: int | None = None,
                  workers: int | None = None, threads: int | None = None, scheduler: str | None = None,
                  scheduler_wait: str | None = None) -> TrainConfig:
    """The configuration ``run`` was started with, to continue it with :func:`train` (``resume=run``).

    Secrets were masked when the configuration was saved, so storage options
    given here are merged over the saved ones; the cluster may differ."""
    so = storage_options or {}
    try:
        saved = read_config(run, so)   # damaged, or of a newer run format: refused in words
    except NotADirectoryError:
        raise a_file_not_a_run(run) from None
    except FileNotFoundError:
        raise no_such_run(run, so) or UserError(
            f"{run} is not a run folder (no config.json)",
            "pass the folder named by the interrupted run, e.g. runs/20261130-101500") from None
    cfg = TrainConfig.from_dict(saved)
    if cfg.training.init_from:   # a continued run's config.json is merged with its old run's already
        mark_continued(cfg)
    refuse_local_storage_options(so, {"the run": run, **config_places(cfg)})
    cfg.data.storage_options = _merge(cfg.data.storage_options, so)
    masked = _masked_keys(cfg.data.storage_options)
    if masked:
        raise UserError(f"the run's storage options {', '.join(masked)} were masked when it was saved",
                        "give them again: " + " ".join(f"{{data.storage_options}} {k}=..." for k in masked))
    c = cfg.cluster
    if "train_on" not in saved.get("cluster", {}):   # a run of a version that trained in the client unless --ddp
        c.train_on = "cluster" if cfg.training.ddp else "client"
    c.scheduler = scheduler or c.scheduler
    # The run's own LocalCluster size and budget do not carry over to an existing cluster, which has its
    # own workers and their limits.
    local = not scheduler_address(c.scheduler)
    c.memory_budget = memory_budget or (c.memory_budget if local else None)
    c.workers = workers or (c.workers if local else None)
    c.threads = threads or (c.threads if local else None)
    c.scheduler_wait = scheduler_wait or c.scheduler_wait
    t, spec = cfg.training, MODELS.get(cfg.model.name)
    trains_here = not t.ddp and c.train_on != "cluster" and local   # resolve's _train_on: else a trainer task
    if t.threads is not None and trains_here and spec is not None and spec.rule == "hinge":
        t.threads = None   # taken by earlier versions where it did nothing (resolve refuses it typed now)
    # The sizes given again are this resume's own: train(cfg, client=...) refuses them, and leaves the run's.
    cfg.given = frozenset(f for f, v in zip(LOCAL_SIZES, (memory_budget, workers, threads)) if v is not None)
    if own_label_sep(cfg):   # a continued run's --label-sep, given at its start: warned of as given, not as taken
        cfg.given |= {"data.label_sep"}
    return cfg


# What a resume may change (resume_config's arguments): where the data and the cluster are. A LinearSVM
# run's --threads in this process, taken by earlier versions, is dropped there (resume_config).
MAY_CHANGE = ("cluster.memory_budget", "cluster.workers", "cluster.threads", "cluster.scheduler",
              "cluster.scheduler_wait", "cluster.dashboard", "data.storage_options", "training.threads")


def refuse_other_config(run: str, config: dict, saved: dict) -> None:
    """``train(cfg, resume=run)`` with a ``cfg`` (``config``, as config.json would hold it) other
    than the run's (``saved``, its config.json) in what it trains: refused naming each option
    and the run's value, as the command line's ``--resume`` refuses it. The run would go on
    with them, and its config.json would say so, as if it had trained with them from the start.
    Fields the run's config.json does not hold (added since it was written) count as its own."""
    differ = [f"{section}.{key}" for section, values in saved.items() for key, value in values.items()
              if f"{section}.{key}" not in MAY_CHANGE
              and key in config.get(section, {}) and _json(config[section][key]) != _json(value)]
    if differ:
        def runs(say: Words) -> str:   # each reader sees the run's values as it spells them
            return ", ".join(say.setting(f, _field(saved, f)) for f in differ)

        raise bad(differ[0], lambda say: f"resuming {run} continues it with the options it was started with (its "
                  f"config.json); the configuration given changes {', '.join(f'{{{f}}}' for f in differ)} "
                  f"(the run's: {runs(say)})",
                  "pass resume_config(RUN) as it is (the cluster and the storage options may change), or "
                  "start a new run")


def _field(doc: dict, field: str) -> Any:
    section, name = field.split(".")
    return doc[section][name]


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def changed_fields(typed: TrainConfig, saved: TrainConfig, fields: Iterable[str]) -> list[str]:
    """Of ``fields`` (those a command typed), the ones whose value in ``typed`` is not
    the run's (``saved``, as its config.json holds it). Typed at the run's own value an
    option changes nothing; at any other, the default too, --resume would drop it."""
    return [f for f in fields if _plain(field_value(typed, f)) != _plain(field_value(saved, f))]


def field_value(cfg: TrainConfig, field: str) -> Any:
    section, name = field.split(".")
    return getattr(getattr(cfg, section), name)


def _plain(value: Any) -> Any:
    """A value as config.json holds it: tuples as lists."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def _merge(base: dict, new: dict) -> dict:
    out = dict(base)
    for k, v in new.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _masked_keys(options: dict, prefix: str = "") -> list[str]:
    found: list[str] = []
    for k, v in options.items():
        if isinstance(v, dict):
            found += _masked_keys(v, f"{prefix}{k}.")
        elif v == "***":
            found.append(f"{prefix}{k}")
    return found
