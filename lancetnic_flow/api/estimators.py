"""Estimators in scikit-learn's conventions, over the same Dask dataflow.

``TextClassifier().fit(texts, labels).predict(more_texts)``: the constructor
stores the train options as given (``get_params``/``set_params``, so
``sklearn.base.clone`` and grid searches work); ``fit`` writes in-memory
data to a temporary Parquet file (or reads files and URLs as they are) and
runs :func:`~lancetnic_flow.api.progress.train` with the same memory plan as
the command line; data in memory is featurised in this process (no cluster
starts, ``run_on="cluster"`` asks for one), files as the command line does; prediction keeps one result per input row, in order.
scikit-learn itself is not needed.
"""
from __future__ import annotations

import inspect
import os
import re
import shutil
import tempfile
import weakref
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import DataConfig, TrainConfig, config_from_options
from ..data.frames import SUPPORTED, arrow_of, as_table, is_table, text_columns_of
from ..errors import UnknownParameter, UserError, close_matches, not_fitted
from ..features.label_values import in_run_names
from ..options import api_default as d
from ..options import api_options
from .labels import FILE as LABELS_FILE
from .labels import LabelNames, run_name
from ..plurals import counted, verb
from ..temporary_runs import new_temporary_parent

# Rows per Parquet row group of in-memory training data: each row group is a
# partition, so a few thousand rows give the workers several to share.
ROW_GROUP_ROWS = 16_384


# What an estimator's caller can do when no row of X could be trained on, by the reason most were skipped:
# the run's own hint names the columns of the file the estimator wrote for X, which its caller never named.
X_SKIP_HINTS = {
    "empty_text": "each text in X needs a term the analyzer reads: a word of two or more letters or digits "
                  "(one-letter words are not read), or characters with analyzer='char_wb'",
    "not_text": "give X as strings, one text per row",
    "missing_label": "give y one answer per row of X (None and NaN are missing answers)",
    "missing_target": "give y a number per row of X (None and NaN are missing)",
}


def in_terms_of_x(exc: UserError, path: str) -> UserError:
    """A run's refusal of the file an estimator wrote for in-memory ``X`` (``path``) said of
    X and y: the file and its columns are the estimator's, not the caller's."""
    if path not in exc.message:
        return exc
    message = exc.message.replace(path, "X")
    worst = re.search(r" skipped \([\d,]+ (\w+)", message)
    hint = X_SKIP_HINTS.get(worst.group(1)) if worst else None
    return UserError(message, hint or exc.hint, field=exc.field)


def _folder_files(folder: str) -> dict[str, bytes]:
    """Every file under a local ``folder``, by its path relative to it; not its
    writer lock, its trainer's (a copy written from these has its own)."""
    from ..runs.folder import LOCK_FILES

    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if rel in LOCK_FILES:
                continue
            with open(path, "rb") as f:
                files[rel] = f.read()
    return files


def _write_folder(folder: str, files: dict[str, bytes]) -> None:
    """The files :func:`_folder_files` read, written under ``folder``."""
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _is_files(X: Any) -> bool:
    if isinstance(X, (str, os.PathLike)):
        return True
    return isinstance(X, (list, tuple)) and bool(X) and all(isinstance(x, os.PathLike) for x in X)


def _values(y: Any) -> list:
    """The answers as a Python list, whatever holds them (one object per row: y is in memory already)."""
    _check_one_answer_per_row(y)
    y = arrow_of(y) if arrow_of(y) is not None else y     # a polars Series: its Arrow array
    if isinstance(y, (pa.Array, pa.ChunkedArray)):
        return y.to_pylist()
    if hasattr(y, "tolist"):          # NumPy, pandas
        return y.tolist()
    return list(y)


def _check_one_answer_per_row(y: Any) -> None:
    """Refuse a 2-D ``y`` that is not lists of labels: a table of several columns, or
    a numeric matrix (a label-indicator matrix or several targets), which would
    otherwise be read as label sets of "0" and "1"."""
    if is_table(y):
        raise UserError(f"y is a table of {len(as_table(y).column_names)} columns, not one answer per row",
                        "pass one column of it, or the name of a column of X")
    if isinstance(y, np.ndarray) and y.ndim == 2 and y.dtype.kind in "biuf":
        raise UserError(f"y is a {y.shape[0]:,} × {y.shape[1]:,} matrix of numbers: several targets or a "
                        "label-indicator matrix, and the estimators take one answer per row",
                        "for multi-label classification pass a list of labels per row "
                        "(MultiLabelBinarizer().fit(...).inverse_transform(Y)); for several targets, one "
                        "TextRegressor per target")


# Parameters other text libraries name otherwise, and this estimator's name
# for each: a spelling match would not find them (learning_rate is nearer learn_val).
SPELLED_ELSEWHERE = {"learning_rate": "lr", "max_iter": "epochs", "n_epochs": "epochs", "epoch": "epochs",
                     "seed": "random_state", "n_jobs": "workers", "ngram": "ngram_range", "ngrams": "ngram_range",
                     "lower": "lowercase", "n_features": "buckets"}


def closest_parameter(name: str, valid: list[str]) -> str:
    """`` (did you mean 'epochs'?)`` for a parameter an estimator does not take, or nothing."""
    if name in SPELLED_ELSEWHERE:
        return f" (did you mean {SPELLED_ELSEWHERE[name]!r}?)"
    return close_matches(name, valid)


class _TextEstimator:
    """What :class:`TextClassifier` and :class:`TextRegressor` share."""

    _task = "classify"
    _default_model = "auto"   # LinearSVM for one label per row (resolve.choose_model)

    def __new__(cls, *args: Any, **params: Any) -> "_TextEstimator":
        # Python's own error for a misspelled keyword names _TextEstimator.__init__
        # and no valid parameter: name the estimator and the closest ones instead.
        valid = cls._param_names()
        unknown = [name for name in params if name not in valid]
        if unknown:
            said = "; ".join(f"{name!r}{closest_parameter(name, valid)}" for name in unknown)
            what = "an unexpected parameter" if len(unknown) == 1 else "unexpected parameters"
            raise UnknownParameter(f"{cls.__name__}() got {what} {said}", f"its parameters: {', '.join(valid)}")
        return super().__new__(cls)

    # Each parameter that sets an option takes the option's declared default
    # (lancetnic_flow/options.py: ``d("lr")`` is training.lr's, ``d("random_state")``
    # training.seed's); model, out and track default to None: the estimator's own.
    def __init__(self, model: str | None = d("model"), *, epochs: int = d("epochs"),
                 batch_size: int = d("batch_size"), lr: float = d("lr"), sparse_lr: float | None = d("sparse_lr"),
                 hidden: int | None = d("hidden"), dropout: float = d("dropout"),
                 features: str | None = d("features"), analyzer: str = d("analyzer"),
                 ngram_range: tuple[int, int] = d("ngram_range"), stop_words: str | list[str] | None = d("stop_words"),
                 lowercase: bool = d("lowercase"), buckets: int = d("buckets"),
                 max_features: int | None = d("max_features"), val_fraction: float = d("val_fraction"),
                 early_stopping: int | None = d("early_stopping"), learn_val: bool | None = d("learn_val"),
                 class_weights: str = d("class_weights"), random_state: int = d("random_state"),
                 memory_budget: str | int | None = d("memory_budget"), workers: int | None = d("workers"),
                 scheduler: str | None = d("scheduler"), run_on: str = d("run_on"), text_column: str = "text", out: str | None = d("out"),
                 plots: bool | None = d("plots"),
                 progress: bool = True, track: str | list[str] | None = d("track")):
        self.model = model
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.sparse_lr = sparse_lr
        self.hidden = hidden
        self.dropout = dropout
        self.features = features
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.stop_words = stop_words
        self.lowercase = lowercase
        self.buckets = buckets
        self.max_features = max_features
        self.val_fraction = val_fraction
        self.early_stopping = early_stopping
        self.learn_val = learn_val
        self.class_weights = class_weights
        self.random_state = random_state
        self.memory_budget = memory_budget
        self.workers = workers
        self.scheduler = scheduler
        self.run_on = run_on
        self.text_column = text_column
        self.out = out
        self.plots = plots
        self.progress = progress
        self.track = track

    # ------------------------------------------------------------ parameters

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters and their values (scikit-learn's convention)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "_TextEstimator":
        """Set constructor parameters; an unknown name is an error naming the valid ones."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                near = closest_parameter(name, valid)
                raise ValueError(f"{name!r} is not a parameter of {type(self).__name__}{near}; "
                                 f"valid parameters: {', '.join(valid)}")
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self):
        """What scikit-learn reads (scikit-learn ≥ 1.6): the estimator type, and
        inputs that are one text per row.

        Declared as they hold: ``X`` is 1-D text (``string``, ``one_d_array``;
        no numeric 2-D matrix, so ``two_d_array`` is False and
        ``check_estimator`` runs only its cloning check, the others needing
        numeric matrices); a missing text, NaN included, is accepted
        (``allow_nan``: skipped in fit, predicted as None or NaN). Not
        declared: ``multi_output`` (one answer per row) and ``multi_label``
        (scikit-learn's means a label-indicator matrix in and out; multi-label
        here is a list of labels per row in and out, and a matrix is refused)."""
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        classifier = self._task != "regress"
        return Tags(estimator_type="classifier" if classifier else "regressor",
                    target_tags=TargetTags(required=True),
                    input_tags=InputTags(one_d_array=True, two_d_array=False, string=True, allow_nan=True),
                    classifier_tags=ClassifierTags() if classifier else None,
                    regressor_tags=None if classifier else RegressorTags())

    @property
    def _estimator_type(self) -> str:   # scikit-learn before 1.6
        return "regressor" if self._task == "regress" else "classifier"

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if defaults.get(k) != v]
        return f"{type(self).__name__}({', '.join(changed)})"

    # ------------------------------------------------------------ fit

    def _config(self, data: DataConfig, task: str, out: str) -> TrainConfig:
        """The parameters → a TrainConfig, each by its declared option (``random_state`` → training.seed);
        ``data`` is built by :meth:`fit` (it holds ``val_fraction`` and ``text_column``)."""
        values = {o.dest: getattr(self, o.api) for o in api_options()}
        # A parameter off its default is one the caller set (hidden=64: no model without a hidden layer).
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        given = [o.dest for o in api_options() if o.api in defaults and values[o.dest] != defaults[o.api]]
        values.update(model=self.model or self._default_model, out=out, task=task, experiment=self._experiment(),
                      # charts nobody asked for: a temporary run folder's are not drawn
                      plots=self.plots if self.plots is not None else self.out is not None)
        return config_from_options(values, given=given, data=data)

    def _experiment(self) -> str | None:
        """MLflow's experiment: without ``out`` the runs' parent is a temporary folder, whose
        name (the default) would differ at every fit; the class name instead, unless the
        environment names one."""
        track = [self.track] if isinstance(self.track, str) else list(self.track or [])
        if self.out or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "mlflow" not in ",".join(track).lower():
            return None   # an experiment without MLflow tracking is refused (it would do nothing)
        return type(self).__name__

    def _training_table(self, X: Any, y: Any) -> tuple[pa.Table, str]:
        """In-memory ``X`` and ``y`` as one table (text, answer) and the task."""
        table = as_table(X, "text")
        text = text_columns_of(table, (self.text_column,)) if is_table(X) else ("text",)
        if isinstance(y, str):
            if not is_table(X) or y not in table.column_names:
                raise UserError(f"y={y!r} names no column of X", "pass the answers, or the name of a column of X")
            self._refuse_answers_as_text(y, text)
            values = table.column(y).to_pylist()
            self._label_names().note_dtype(table.column(y))
        elif y is None:
            raise UserError(f"{type(self).__name__}.fit needs y: the answers, or the name of a column of X")
        else:
            values = _values(y)
            self._label_names().note_dtype(y)
        if len(values) != table.num_rows:
            raise UserError(f"X has {counted(table.num_rows, 'row')} but y has {len(values):,}", "give one answer per row")
        task, answers = self._answers(values)
        text_cols = [table.column(c) for c in text]
        names = ["text"] if len(text) == 1 else [f"text{i}" for i in range(len(text))]
        return pa.table(text_cols + [answers], names=names + ["answer"]), task

    def _refuse_answers_as_text(self, y: str, text: Sequence[str]) -> None:
        """``y`` naming a column X's text is read from would put each row's answer in the model's input."""
        if y in text:
            raise UserError(f"y={y!r} is the text column X is read from (text_column={self.text_column!r}): "
                            "the model would read each row's answer in its input",
                            "pass the answers' column as y and the text's as text_column, two columns")

    def _answers(self, values: list) -> tuple[str, pa.Array]:
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> "_TextEstimator":
        """Train on ``X`` (texts: a list, NumPy array, pandas or polars Series or
        DataFrame, ``datasets.Dataset``, Arrow array or table; or a path, glob or URL, or a list of
        ``pathlib.Path``) and ``y`` (the answers, or a column name of ``X``).
        Returns ``self``."""
        before = getattr(self, "_labels", None), getattr(self, "_classes_declared", [])
        self._labels, self._classes_declared = LabelNames(), []
        try:
            self._train(X, y, lambda: self.out or self._run_parent())
        except BaseException:   # a refused fit leaves the fitted model as it was, its labels' values too
            self._labels, self._classes_declared = before
            raise
        return self

    def partial_fit(self, X: Any, y: Any = None, classes: Sequence | None = None) -> "_TextEstimator":
        """Keep learning (scikit-learn's ``partial_fit``): the first call trains as
        :meth:`fit` does; each later call continues the fitted model on ``X`` and ``y``
        alone (``lancetnic-flow train --init-from``): its features, model and labels
        are kept, labels ``y`` adds are appended (the output layer grows), the data of
        earlier calls is not read again. Every call trains ``epochs`` passes over its
        own rows, into a new run folder (``run_``; under ``out`` when given, else a
        temporary one that replaces the last). ``classes``: labels the model has
        even where ``y`` lacks them (scikit-learn needs them on the first call; here
        they are optional, as the model grows); given, a label of ``y`` outside them
        and the model's is refused. Returns ``self``."""
        previous = self.run_ if hasattr(self, "predictor_") else None
        declared = self._declared(classes, y)
        kept = getattr(self, "_runs_finalizer", None) if previous is not None and not self.out else None
        if kept is not None:
            self._runs_finalizer = None   # the previous run's folder stays until this one is trained
        try:
            self._train(X, y, lambda: self.out or self._run_parent(), init_from=previous, classes=declared)
        except BaseException:
            if kept is not None:          # the new folder goes; the previous run stays the fitted one
                new, self._runs_finalizer = self._runs_finalizer, kept
                if new is not None:
                    new()
            raise
        if kept is not None:
            kept()                        # the previous run's temporary folder
        self._classes_declared = declared or []
        return self

    def _declared(self, classes: Sequence | None, y: Any) -> list[str] | None:
        """``partial_fit``'s classes as labels (text), with those declared before; ``y``'s
        labels must be among them once any are declared."""
        if classes is None and not getattr(self, "_classes_declared", None):
            return None
        if classes is not None and self._task == "regress":
            raise UserError("classes= names labels; a regressor predicts values", "drop classes=")
        names = [] if classes is None else [n for n in self._label_names().add(_values(classes)) if n is not None]
        declared = list(dict.fromkeys([*getattr(self, "_classes_declared", []), *names]))
        if classes is not None and y is not None and not isinstance(y, str):
            given = {run_name(x) for v in _values(y) if v is not None
                     for x in (v if isinstance(v, (list, tuple, set, frozenset, np.ndarray)) else [v])} - {None}
            outside = sorted(given - set(declared) - {run_name(c) for c in getattr(self, "classes_", ())})
            if outside:
                raise UserError(f"y holds {verb(len(outside), 'a label', 'labels')} outside classes=: {', '.join(outside[:5])}",
                                "add them to classes=, or leave classes= out (the model's labels grow with y)")
        return declared

    def _label_names(self) -> LabelNames:
        """The values of y the run's label names came from (partial_fit: every call's)."""
        if getattr(self, "_labels", None) is None:
            self._labels = LabelNames()
        return self._labels

    def _train(self, X: Any, y: Any, parent: Callable[[], str], init_from: str | None = None,
               classes: list[str] | None = None) -> None:
        """One training run on ``X`` and ``y`` into the folder ``parent()`` gives once the
        data is read: from fresh weights, or continuing the run ``init_from``."""
        work = tempfile.mkdtemp(prefix="lancetnic-flow-data-")
        try:
            if _is_files(X):
                urls = [str(X)] if isinstance(X, (str, os.PathLike)) else [str(x) for x in X]
                answer = y if isinstance(y, str) else ("target" if self._task == "regress" else "label")
                self._refuse_answers_as_text(answer, (self.text_column,))
                data = DataConfig(train=urls, text=[self.text_column], val_fraction=self.val_fraction)
                task = self._task
            else:
                table, task = self._training_table(X, y)
                path = os.path.join(work, "train.parquet")
                pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS)
                text = [c for c in table.column_names if c != "answer"]
                # label sets are a list column, as the command line reads a Parquet's: no label is split
                data = DataConfig(train=[path], text=text, val_fraction=self.val_fraction)
                answer = "answer"
            if task == "regress":
                data.label, data.target = None, answer
            else:
                data.label = answer
            data.classes = classes
            cfg = self._config(data, task, parent())
            if not _is_files(X) and cfg.cluster.run_on == "auto" and not cfg.cluster.scheduler:
                # Already in memory, whatever its size: featurised here, never shipped to workers.
                cfg.cluster.run_on = "process"
            if init_from is not None:
                from ..training.keep_learning import PARTIAL_FIT, continue_config

                cfg.training.init_from = init_from
                if cfg.cluster.train_on == "auto":   # with a scheduler too: the network is built here
                    cfg.cluster.train_on = "client"
                # The columns are the estimator's own (its temporary file's), whatever the run read.
                cfg = continue_config(cfg, explicit=("data.text", "data.label", "data.target", "data.label_sep"),
                                      by=PARTIAL_FIT)
            try:
                self._fit_config(cfg)
            except UserError as exc:
                raise (in_terms_of_x(exc, data.train[0]) if not _is_files(X) else exc) from None
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _fit_config(self, cfg: TrainConfig) -> None:
        from ..runs.predict import Predictor
        from .progress import train

        result = train(cfg, progress=self.progress)
        self.run_ = result.run
        self.metrics_ = result.metrics
        self._set_predictor(Predictor(result.run))

    def _set_predictor(self, predictor) -> None:
        self.predictor_ = predictor

    def _run_parent(self) -> str:
        """A temporary parent for the run folder when no ``out`` is given: it
        goes when the estimator does (``save`` keeps a copy)."""
        old = getattr(self, "_runs_finalizer", None)
        if old is not None:
            old()
        parent = new_temporary_parent()
        self._runs_finalizer = weakref.finalize(self, shutil.rmtree, parent, True)
        return parent

    def __getstate__(self) -> dict:
        """A pickled estimator (``joblib.dump``, a process pool's result) carries the files
        of its temporary run folder: that folder goes with the estimator, and a copy that
        only named it could predict but not ``save`` or ``partial_fit`` once it had gone."""
        state = dict(self.__dict__)
        owned = state.pop("_runs_finalizer", None)
        if owned is not None and owned.alive and getattr(self, "run_", None):
            state["_run_files"] = _folder_files(str(self.run_))
            state.pop("predictor_", None)   # read again from those files: the weights travel once
        return state

    def __setstate__(self, state: dict) -> None:
        files = state.pop("_run_files", None)
        self.__dict__.update(state)
        if files is not None:
            from ..runs.predict import Predictor

            # A folder of its own, which goes with this copy as the original's went with it.
            run = os.path.join(self._run_parent(), os.path.basename(os.path.normpath(str(self.run_))))
            _write_folder(run, files)
            self.run_ = run
            self._set_predictor(Predictor(run))

    # ------------------------------------------------------------ use

    def _fitted(self):
        if not hasattr(self, "predictor_"):
            raise not_fitted(f"this {type(self).__name__} is not fitted yet", "call fit(X, y) first, or load(path)")
        return self.predictor_

    @property
    def longer_than_max_len_(self) -> int:
        """Texts of the last ``predict``/``predict_proba``/``score`` that held more tokens
        than the run's ``--max-len`` (a sequence model reads the first ones; each such call
        also says the count in a :class:`~lancetnic_flow.errors.RunWarning`); 0 for other models."""
        return getattr(self._fitted(), "longer_than_max_len", 0)   # a Predictor pickled before the count: none yet

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's ``check_is_fitted`` asks this."""
        return hasattr(self, "predictor_")

    def _rows(self, X: Any):
        if _is_files(X):
            raise UserError("predict() takes texts in memory; for files use `lancetnic-flow predict RUN --input "
                            "FILES --output OUT` (every row, over Dask, to any format)",
                            f"pass {SUPPORTED}")
        return self._fitted().rows(X, text_column=self.text_column if is_table(X) else None)

    def save(self, path: str | os.PathLike, storage_options: dict | None = None) -> str:
        """Copy the trained run folder to ``path`` (a local folder or any fsspec
        URL); :meth:`load` reads it, as does ``lancetnic-flow predict``. Saved over
        another run, a save stopped mid-way leaves an unfinished run, never half of each."""
        from ..runs.folder import copy_run
        from ..storage import join, write_bytes

        copy_run(self._fitted().run.url, str(path), dst_options=storage_options or {})
        labels = getattr(self, "_labels", None)
        if labels is not None and labels.values:   # the values of y the labels came from (3, not "3")
            write_bytes(join(str(path), LABELS_FILE), labels.to_json().encode(), storage_options or {})
        return str(path)

    @classmethod
    def load(cls, path: str | os.PathLike, storage_options: dict | None = None):
        """An estimator holding the run folder at ``path`` (from :meth:`save` or
        ``lancetnic-flow train``), ready to predict. Loading never unpickles code."""
        from ..runs.predict import Predictor

        from ..storage import join, read_bytes

        pred = Predictor(str(path), storage_options)
        est = cls()
        cfg = pred.run.config
        data, training = cfg.get("data", {}), cfg.get("training", {})
        # The run's own where a parameter names it alone: clone(loaded).fit trains as the run did.
        est.set_params(model=cfg.get("model", {}).get("name"), text_column=(data.get("text") or ["text"])[0],
                       **{p: v for p, v in (("epochs", training.get("epochs")), ("batch_size", training.get("batch_size")),
                                            ("random_state", training.get("seed")),
                                            ("val_fraction", data.get("val_fraction")),
                                            ("class_weights", training.get("class_weights"))) if v is not None})
        try:
            url = join(str(path), LABELS_FILE)
            est._labels = LabelNames.from_json(read_bytes(url, storage_options or {}).decode("utf-8", "replace"), url)
        except FileNotFoundError:   # a run from the command line: its labels are its names
            est._labels = LabelNames()
        est.run_ = str(path)
        est.metrics_ = pred.run.metrics
        est._set_predictor(pred)
        return est


class TextClassifier(_TextEstimator):
    """Text classification (``y``: one label per row) and multi-label
    classification (``y``: a list of labels per row), scikit-learn style."""

    def _answers(self, values: list) -> tuple[str, pa.Array]:
        first = next((v for v in values if v is not None), None)
        labels = self._label_names()   # labels travel as the run names them; answers come back as given
        if isinstance(first, (list, tuple, set, frozenset, np.ndarray)):
            # Lists, never joined: a separator would split a label that holds it (a unit separator, "|").
            labels.of_sets()
            sets = [None if v is None else [n for n in labels.add(v) if n is not None] for v in values]
            return "multilabel", pa.array(sets, pa.list_(pa.string()))
        return "classify", pa.array(labels.add(values), pa.string())

    def _set_predictor(self, predictor) -> None:
        self.predictor_ = predictor
        if predictor.regresses and not predictor.classifies:
            raise UserError(f"{predictor.run.url} is a regression run", "load it with TextRegressor")
        labels = self._label_names()
        shown = [labels.value(x) for x in predictor.labels]
        # scikit-learn's order (np.unique(y)'s, which its scorers and meta-estimators
        # assume); the run keeps its own, so predict_proba's columns are reordered.
        try:
            self._order = np.array(sorted(range(len(shown)), key=shown.__getitem__), dtype=np.intp)
        except TypeError:   # labels of several kinds (1 and "a"): the run's order
            self._order = np.arange(len(shown), dtype=np.intp)
        # of np.unique(y)'s dtype (int64 for ints): object made accuracy_score fail and scorers give NaN
        self.classes_ = labels.array([predictor.labels[i] for i in self._order])
        self.multilabel_ = predictor.multilabel

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities, one row per input row, columns in ``classes_`` order
        (sorted, as scikit-learn has them); a row sums to 1 (multi-label: each
        label's own probability); a row with no usable text is all NaN."""
        return self._fitted().predict_proba(self._rows(X))[:, self._order]

    def predict(self, X: Any, threshold: float | None = None) -> np.ndarray:
        """The label of each row (multi-label: a list of the labels at or above
        their threshold: ``threshold`` for every label, by default each label's
        own, chosen on the validation rows); None for a row with no usable text."""
        pred = self._fitted()
        pred.check_asks(None, threshold)
        rows = self._rows(X)
        labels = self._label_names()
        cut: list = []   # texts read only to the run's --max-len: said once, below
        if pred.multilabel:
            out = np.empty(rows.num_rows, dtype=object)
            out[:] = [None if d["labels"] is None else [labels.value(x) for x in d["labels"]]
                      for d in pred.label_sets(rows, threshold, cut=cut)]
        else:
            out = labels.array(pred.prediction_columns(rows, cut=cut)["predicted"].to_pylist(),
                               dtype=self.classes_.dtype)
        pred.note_cut(cut)
        return out

    def score(self, X: Any, y: Sequence) -> float:
        """Accuracy (multi-label: subset accuracy, every label of the row right);
        a row that cannot be predicted counts as wrong."""
        got = self.predict(X)
        want = list(y.tolist() if hasattr(y, "tolist") else y)
        if len(want) != len(got):
            raise UserError(f"X has {counted(len(got), 'row')} but y has {len(want):,}", "give one answer per row")
        # An answer the run holds in another spelling of its value (y's 1.0 for a CSV run's "1.0",
        # named "1") is the run's label, as evaluate reads it.
        labels = getattr(getattr(self, "predictor_", None), "labels", None) or []
        if getattr(self, "multilabel_", False):
            sets = [_answer_set(ws) for ws in want]
            run = _as_run_names(set().union(*sets), labels)
            return float(np.mean([g is not None and {run_name(x) for x in g} == {run[n] for n in ws}
                                  for g, ws in zip(got, sets)]))
        names = [run_name(w) for w in want]
        run = _as_run_names({n for n in names if n is not None}, labels)
        return float(np.mean([g is not None and run_name(g) == run.get(n) for g, n in zip(got, names)]))


def _as_run_names(names: set, labels: list[str]) -> dict:
    """Each distinct answer name as the run's ``labels`` hold it
    (:func:`~lancetnic_flow.features.label_values.in_run_names`)."""
    names = sorted(names)
    return dict(zip(names, in_run_names(names, labels)))


def _answer_set(answer: Any) -> set:
    """A multi-label row's answer as the set of label names the run would read: a
    list (tuple, set, array) of labels; one label alone (a string, a number) is a
    set of one, as the readers take a plain label, not the characters of its name."""
    if answer is None or isinstance(answer, (str, bytes, np.str_, np.bytes_)) or np.ndim(answer) == 0:
        return {n for n in (run_name(answer),) if n is not None}
    return {n for n in (run_name(x) for x in answer) if n is not None}


class TextRegressor(_TextEstimator):
    """Text regression (``y``: a number per row), scikit-learn style."""

    _task = "regress"
    _default_model = "ScalpelReg"

    def _answers(self, values: list) -> tuple[str, pa.Array]:
        try:
            return "regress", pc.cast(as_table(values, "y").column(0), pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise UserError(f"y must hold numbers for a regressor ({exc})", "use TextClassifier for labels") from None

    def predict(self, X: Any) -> np.ndarray:
        """The value of each row in the target's units; NaN for a row with no usable text."""
        return self._fitted().predict_values(self._rows(X))

    def score(self, X: Any, y: Sequence) -> float:
        """R² of the predictions; a row that cannot be predicted counts as predicting the mean."""
        got = self.predict(X)
        want = np.asarray(y, dtype=np.float64)
        if len(want) != len(got):
            raise UserError(f"X has {counted(len(got), 'row')} but y has {len(want):,}", "give one answer per row")
        if not np.isfinite(want).all():   # as scikit-learn's r2_score: a NaN would make the score NaN
            raise UserError(f"y holds {counted(int((~np.isfinite(want)).sum()), 'NaN or infinite value')}",
                            "score the rows whose answer is a number")
        got = np.where(np.isnan(got), want.mean(), got)
        total, missed = ((want - want.mean()) ** 2).sum(), ((want - got) ** 2).sum()
        if not total:   # a constant y: scikit-learn's r2_score gives 1.0 to exact predictions, 0.0 otherwise
            return 1.0 if not missed else 0.0
        return float(1 - missed / total)


__all__ = ["TextClassifier", "TextRegressor"]
