"""``--track``: a training run in an experiment tracker (TensorBoard, MLflow).

A listener on the run's events, like the JSON log: the orchestrator starts it
once the run folder exists, so the command line, workflow files and the
Python API all get it from ``cfg.output.track``. Each epoch's record (the one
``metrics.json`` keeps) becomes one point per metric at step = the epoch;
the resolved options are the run's parameters; at the end the run folder
goes to MLflow as the run's artifacts (TensorBoard's event files live in it,
under ``RUN/tensorboard/``).

A tracker that fails (an unreachable server, a full disk, a missing package)
is reported once, as a ``warning`` event, and dropped: tracking never costs a
training run. ``RUN/tracking.json`` keeps the MLflow run's id, so
``--resume`` logs on into the same MLflow run (and the same TensorBoard
folder), each epoch once: an epoch logged before a stop that the resumed run
trains again (the process was killed between the epoch's end and the next
checkpoint) keeps its first point in MLflow, whose points cannot be replaced,
and its last in TensorBoard, whose readers drop what a resumed writer purges.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import time
from typing import Any, Iterator

from ..config import TrainConfig
from ..errors import UserError
from ..events import Events
from ..scores import BY_KEY
from ..storage import join, protocol, read_bytes, url_to_fs, write_bytes

TRACKING_FILE = "tracking.json"
# MLflow's oldest servers take parameter values of up to 500 characters (newer ones 6,000).
PARAM_CHARS = 500
# Bounded retries for our calls to an MLflow server (unless the user set them): MLflow's own
# defaults retry for minutes, and a dead server would stall training at every epoch.
MLFLOW_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def flat_options(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"training": {"lr": 0.01}}`` → ``{"training.lr": 0.01}``; lists as JSON, scalars kept."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flat_options(v, key + "."))
        elif isinstance(v, (list, tuple, dict)):
            out[key] = json.dumps(v, ensure_ascii=False, default=str)
        else:
            out[key] = v
    return out


def epoch_scalars(record: dict) -> dict[str, float]:
    """The numbers of an epoch record (``metrics.json``'s ``epochs`` item), its ``epoch`` (the step) and
    the event's clock ``t`` aside."""
    return {k: float(v) for k, v in record.items()
            if k not in ("epoch", "t") and isinstance(v, (int, float)) and not isinstance(v, bool)}


def tensorboard_tag(key: str) -> str:
    """``train_loss`` → ``train/loss``, ``val_macro_f1`` → ``val/macro_f1``: TensorBoard groups by the prefix."""
    for side in ("train_", "val_"):
        if key.startswith(side):
            return side[:-1] + "/" + key[len(side):]
    return key


def best_scores(metrics: dict) -> dict[str, float]:
    """The saved model's (best epoch's) validation scores of ``done``'s metrics, and that epoch."""
    out = {f"best_{k}": float(metrics[k]) for k in BY_KEY
           if isinstance(metrics.get(k), (int, float)) and math.isfinite(metrics[k])}
    if metrics.get("best_epoch") is not None:
        out["best_epoch"] = float(metrics["best_epoch"])
    return out


def missing_extra(name: str, package: str) -> UserError:
    """The error for a tracker whose package is not installed."""
    return UserError(f"{{output.track}} {name} needs the {package} package, which is not installed",
                     "pip install 'lancetnic_flow[track]'")


def _local_copy(run: str, storage_options: dict) -> contextlib.AbstractContextManager[str]:
    """The run folder as a local path: itself, or a temporary download of a remote one."""
    if protocol(run) == "file":
        return contextlib.nullcontext(str(run))
    return _downloaded(run, storage_options)


@contextlib.contextmanager
def _downloaded(run: str, storage_options: dict) -> Iterator[str]:
    fs, path = url_to_fs(run, **storage_options)
    tmp = tempfile.mkdtemp(prefix="lancetnic-run-")
    try:
        fs.get(path.rstrip("/") + "/", tmp + "/", recursive=True)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class TensorBoardTracker:
    """Scalars per epoch and the options (a text table and the HParams dashboard) in ``RUN/tensorboard/``.

    A remote run folder gets its event files when the run ends (TensorBoard's
    writer writes local files); a local one as they are written."""

    name = "tensorboard"

    def __init__(self, run: str, storage_options: dict, options: dict[str, Any], resumed: bool):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise missing_extra("tensorboard", "tensorboard") from None
        self.target, self.so = join(run, "tensorboard"), storage_options
        self.staging = None if protocol(run) == "file" else tempfile.mkdtemp(prefix="lancetnic-tb-")
        self.make = SummaryWriter
        self.writer: Any = None
        self.options = options
        # A resumed run wrote its options (and HParams) when it started.
        self.wrote_options = resumed
        if not resumed:
            rows = "\n".join(f"| {k} | {v} |" for k, v in options.items())
            self._writer().add_text("options", "| option | value |\n|---|---|\n" + rows, 0)
            self.writer.flush()

    def _writer(self, first_step: int | None = None) -> Any:
        """The event writer, made at the first point a resumed run logs: from its step on, what
        the stopped process logged is purged (an epoch it logged that the resume trains again
        reads once, as the resumed run logged it; TensorBoard's readers drop the rest)."""
        if self.writer is None:
            self.writer = self.make(log_dir=self.staging or self.target, purge_step=first_step)
        return self.writer

    def epoch(self, record: dict) -> None:
        step = int(record["epoch"])
        self._writer(step)
        scalars = epoch_scalars(record)
        for k, v in scalars.items():
            self.writer.add_scalar(tensorboard_tag(k), v, step)
        if not self.wrote_options:
            self._hparams([tensorboard_tag(k) for k in scalars])
        self.writer.flush()

    def _hparams(self, tags: list[str]) -> None:
        """The options in TensorBoard's HParams dashboard, against the epoch metrics' tags."""
        from torch.utils.tensorboard.summary import hparams

        values = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in self.options.items()}
        for summary in hparams(values, dict.fromkeys(tags, 0.0)):
            self.writer.file_writer.add_summary(summary)
        self.wrote_options = True

    def finish(self, run: str, metrics: dict) -> None:
        best = best_scores(metrics)
        step = int(best.pop("best_epoch", 0))
        for k, v in best.items():
            self._writer().add_scalar("best/" + k[len("best_"):], v, step)
        self.close("FINISHED")

    def close(self, status: str) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.staging:
            for name in sorted(os.listdir(self.staging)):
                with open(os.path.join(self.staging, name), "rb") as f:
                    write_bytes(join(self.target, name), f.read(), self.so)
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None


@contextlib.contextmanager
def bounded_mlflow_retries() -> Iterator[None]:
    """MLFLOW_LIMITS for the calls inside, where the user has not set them."""
    added = {k: v for k, v in MLFLOW_LIMITS.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class MlflowTracker:
    """A run in MLflow (``MLFLOW_TRACKING_URI``, else MLflow's local default): the options as
    parameters, each epoch's metrics at step = the epoch, the run folder as its artifacts."""

    name = "mlflow"

    def __init__(self, cfg: TrainConfig, run: str, storage_options: dict, options: dict[str, Any],
                 resumed: bool, events: Events):
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise missing_extra("mlflow", "mlflow-skinny (or mlflow)") from None
        self.so, self.state_file = storage_options, join(run, TRACKING_FILE)
        # (metric, step) points the run holds already: a resumed run's epoch that the stopped
        # process logged (killed before its checkpoint) is not logged twice.
        self.logged: set[tuple[str, int]] = set()
        with bounded_mlflow_retries():
            self.client = MlflowClient()
            self.run_id = self._reopen(events) if resumed else None
            if self.run_id is None:
                experiment = self._experiment(experiment_name(cfg))
                name = str(run).rstrip("/").rsplit("/", 1)[-1]
                self.run_id = self.client.create_run(experiment, run_name=name,
                                                     tags={"lancetnic_flow.run": str(run)}).info.run_id
                self._log_params(options)
        saved = {"mlflow": {"run_id": self.run_id, "tracking_uri": self.client.tracking_uri}}
        write_bytes(self.state_file, json.dumps(saved, indent=2).encode(), self.so)

    def _reopen(self, events: Events) -> str | None:
        """The run ``tracking.json`` names, running again; None (and a warning) if it cannot be."""
        try:
            run_id = json.loads(read_bytes(self.state_file, self.so))["mlflow"]["run_id"]
        except (FileNotFoundError, KeyError, ValueError):
            return None
        try:
            found = self.client.get_run(run_id)
            self.logged = {(k, m.step) for k in found.data.metrics
                           for m in self.client.get_metric_history(run_id, k)}
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        except Exception as exc:
            events.emit("warning", message=f"{{output.track}} mlflow: cannot continue MLflow run {run_id} ({exc}); "
                                           "logging the resumed epochs to a new run")
            return None

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:
            # Another run may have created it since: take that one, or report the first failure.
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def _log_params(self, options: dict[str, Any]) -> None:
        from mlflow.entities import Param

        params = [Param(k, str(v)[:PARAM_CHARS]) for k, v in options.items()]
        for i in range(0, len(params), 100):   # MLflow's limit per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def _log_metrics(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        ms = int(time.time() * 1000)
        metrics = [Metric(k, v, ms, step) for k, v in values.items() if (k, step) not in self.logged]
        if not metrics:
            return
        with bounded_mlflow_retries():
            self.client.log_batch(self.run_id, metrics=metrics)
        self.logged.update((m.key, step) for m in metrics)

    def epoch(self, record: dict) -> None:
        self._log_metrics(epoch_scalars(record), int(record["epoch"]))

    def finish(self, run: str, metrics: dict) -> None:
        best = best_scores(metrics)
        self._log_metrics(best, int(best.get("best_epoch", 0)))
        with _local_copy(run, self.so) as local, bounded_mlflow_retries():
            self.client.log_artifacts(self.run_id, local)
        self.close("FINISHED")

    def close(self, status: str) -> None:
        with bounded_mlflow_retries():
            self.client.set_terminated(self.run_id, status=status)


def experiment_name(cfg: TrainConfig) -> str:
    """``--experiment``, else ``MLFLOW_EXPERIMENT_NAME``, else the ``--out`` folder's name."""
    if cfg.output.experiment:
        return cfg.output.experiment
    if os.environ.get("MLFLOW_EXPERIMENT_NAME"):
        return os.environ["MLFLOW_EXPERIMENT_NAME"]
    out = str(cfg.output.out).rstrip("/")
    if protocol(out) == "file":
        out = os.path.abspath(out)
    return out.rsplit("/", 1)[-1] or "lancetnic-flow"


class Tracking:
    """The listener: epochs and the end of the run to each tracker; one that fails warns once and is dropped."""

    def __init__(self, events: Events):
        self.events, self.trackers, self.ended = events, [], False

    def add(self, name: str, start: Any) -> None:
        """Start a tracker (``start()``); if it cannot start, warn and go on without it."""
        try:
            self.trackers.append(start())
        except Exception as exc:
            self._warn(name, exc)

    def _warn(self, name: str, exc: BaseException) -> None:
        if isinstance(exc, UserError):   # in the words of the run's caller, which the warning is said in
            message, hint = exc.said(getattr(self.events, "words", "python"))
            why = message + (f" ({hint})" if hint else "")
        else:   # a server's error can be a page long: its first line, shortened
            first = (str(exc).strip().splitlines() or [""])[0]
            why = f"{type(exc).__name__}: {first[:300]}{'…' if len(first) > 300 else ''}"
        self.events.emit("warning", message=f"{{output.track}} {name} stopped: {why}; training goes on without it")

    def _each(self, call: str, *args: Any) -> None:
        for t in list(self.trackers):
            try:
                getattr(t, call)(*args)
            except Exception as exc:
                self.trackers.remove(t)
                self._warn(t.name, exc)
                with contextlib.suppress(Exception):
                    t.close("FAILED")

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        if kind == "epoch":
            self._each("epoch", e)
        elif kind == "done" and not self.ended:
            self.ended = True
            # TensorBoard first: its event files are closed before MLflow copies the run folder.
            self._each("finish", str(e["run"]), e.get("metrics") or {})

    def end(self, exc: BaseException | None) -> None:
        """The run ended without ``done``: interrupted (resumable: KILLED) or failed."""
        if self.ended:
            return
        self.ended = True
        self._each("close", "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")


def start_tracking(cfg: TrainConfig, run: str, storage_options: dict, events: Events, resumed: bool
                   ) -> Tracking | None:
    """``cfg.output.track``'s trackers for the run folder ``run``, subscribed to ``events``; None if none asked."""
    names = list(cfg.output.track or [])
    if not names:
        return None
    tracking = Tracking(events)
    options = flat_options(cfg.to_dict())
    starts = {"tensorboard": lambda: TensorBoardTracker(run, storage_options, options, resumed),
              "mlflow": lambda: MlflowTracker(cfg, run, storage_options, options, resumed, events)}
    for name in sorted(names, key=["tensorboard", "mlflow"].index):
        tracking.add(name, starts[name])
    events.subscribe(tracking)
    return tracking
