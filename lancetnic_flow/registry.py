"""The models users pick by name (lancetnic's names), and everything the
trainer needs to know about each one: its network class (by name), the
options it fixes, the tasks it does and the feature modes it reads (the first
of each being its default), its training rule, its own defaults, what it
refuses, how much memory it takes and what ``tune`` searches for it.

A model is one :class:`ModelSpec`: no other module asks which model it is
running; each reads the fact it needs from the spec. Plain data, free of
torch: checking a configuration (and so a user's typo) needs no 1.5 s torch
import. :mod:`lancetnic_flow.models` builds the networks and
:mod:`lancetnic_flow.training.rules` the training rules.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

_ALL = ("classify", "regress", "multitask")

# The parameters ``tune`` may search (training/search.py says how each is ranged).
# The optimisers with a row-wise form for the input rows (training/optim.py); the others step every parameter.
ROW_WISE = ("adam", "sgd")
SEARCHABLE = ("lr", "sparse_lr", "hidden", "epochs", "batch_size", "dropout", "ngrams")


@dataclass(frozen=True)
class Refusal:
    """An option (``field``: ``section.name``) the model cannot honour:
    ``applies(config)`` says whether a configuration sets it. Named
    explicitly, the model refuses the run with ``why``; ``--model auto``
    passes the model by instead."""

    field: str
    applies: Callable[[Any], bool]
    why: str
    instead: str | None = None   # what would honour it, when not another model ("--layers 1")


@dataclass(frozen=True)
class ModelSpec:
    """One model: what it is, how it trains, and its defaults.

    ``sparse_optimizer``/``sparse_lr``: the input rows' optimiser and its rate
    (per example for sgd; None: as ``--lr``); ``value_sparse_lr`` replaces the
    sgd rate when a value head learns (regress, multitask). ``sets``: options
    the model fixes for itself (``section.field`` → value). ``memory``: the
    width of the sparse input rows (``"hidden"``, ``"embed"``, or
    ``"outputs"`` for a model without hidden layers) and the hidden × hidden
    weights per layer. ``search``: the parameters ``tune`` searches, with
    ``search_ranges`` overriding their default ranges."""

    net: str
    fixed: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = _ALL
    features: tuple[str, ...] = ("hashing", "tfidf")
    ngrams: int = 0                 # the n-grams the model is built for (0: any); a search keeps them, --ngrams sets them
    summary: str = ""
    label_sets: bool = True         # whether it can also learn a set of labels per row (multilabel)
    hidden: int = 64                # --hidden's default
    batch_size: int = 512           # --batch-size's default
    decay_steps: int = 0            # the linear schedule decays over this many steps at least (training/step.py)
    sparse_optimizer: str | None = "adam"   # None: the rule steps the rows itself (no optimiser)
    sparse_lr: float | None = None
    value_sparse_lr: float | None = None
    early_stopping: int = 2         # --early-stopping's default (patience in epochs; 0: every epoch)
    rule: str = "gradient"          # the training rule (training/rules.py): "gradient" or "hinge"
    sets: dict[str, Any] = field(default_factory=dict)
    refuses: tuple[Refusal, ...] = ()
    auto_avoids: tuple[Refusal, ...] = ()   # options that make --model auto pass it by, though it takes them
    learns_val: bool = False        # whether the saved model may also learn the validation rows (--learn-val)
    max_classes: int | None = None  # past this many classes --model auto takes its fallback instead
    max_labels: int | None = None   # the same for the labels of label sets (multilabel)
    input_width: str = "hidden"
    layer_weights: int = 1
    search: tuple[str, ...] = SEARCHABLE
    search_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def task(self) -> str:
        return self.tasks[0]

    @property
    def every_task(self) -> tuple[str, ...]:
        """``tasks``, plus multilabel for a model that classifies: the same class
        head, read through a sigmoid per label instead of a softmax."""
        return self.tasks + (("multilabel",) if "classify" in self.tasks and self.label_sets else ())

    def refusals(self, cfg: Any) -> list[Refusal]:
        """The options of ``cfg`` this model cannot honour: its refusals, and a
        model option its network fixes (FastTextBag's dropout) set otherwise."""
        fixed = [Refusal(f"model.{k}", lambda c, k=k, v=v: getattr(c.model, k) not in (v, _declared(f"model.{k}"))
                         or (given(c, f"model.{k}") and getattr(c.model, k) != v),
                         f"its network fixes {k} at {v}") for k, v in self.fixed.items() if k in _MODEL_FIELDS]
        return [r for r in (*self.refuses, *fixed) if r.applies(cfg)]

    def takes_classes(self, task: str, classes: int) -> bool:
        """Whether ``--model auto`` keeps this model for ``classes`` classes (labels, for ``multilabel``)."""
        limit = self.max_labels if task == "multilabel" else self.max_classes
        return limit is None or classes <= limit

    def accepts_for_auto(self, cfg: Any) -> bool:
        """Whether ``--model auto`` may choose this model for ``cfg``'s options."""
        return not self.refusals(cfg) and not any(r.applies(cfg) for r in self.auto_avoids)

    def default_sparse_lr(self, optimizer: str | None, task: str) -> float | None:
        """The input rows' rate for ``optimizer`` (the model's own, or one the user named) and ``task``."""
        if optimizer == "sgd" and task in ("regress", "multitask") and self.value_sparse_lr is not None:
            return self.value_sparse_lr
        if optimizer == self.sparse_optimizer:
            return self.sparse_lr
        return SGD_SPARSE_LR if optimizer == "sgd" else None


def given(c: Any, field: str) -> bool:
    """Whether the caller set ``field`` itself (``TrainConfig.given``), whatever its value."""
    return field in getattr(c, "given", ())


def _set_to(section: str, name: str, values: tuple, keeps: tuple = ()) -> Callable[[Any], bool]:
    """An option set: to a value outside ``values`` (its defaults, and what a resolved
    configuration holds), or given at all unless to one of ``keeps`` (what the model is)."""
    field = f"{section}.{name}"
    return lambda c: (getattr(getattr(c, section), name) not in values
                      or (given(c, field) and getattr(getattr(c, section), name) not in keeps))


def _declared_or_given(field: str) -> Callable[[Any], bool]:
    """An option set other than its declared default, or given at all: even at the
    default, a typed option names a wish the model cannot honour."""
    section, name = field.split(".")
    return lambda c: getattr(getattr(c, section), name) != _declared(field) or given(c, field)


# Sparse SGD's per-example rate for a model whose own optimiser is another.
SGD_SPARSE_LR = 2.5

# Bags of terms (Scalpel*, FastTextBag): the input rows step by per-example
# SGD (a term's weight grows with the evidence for it; lazy Adam there lets
# terms seen once memorise their rows). When a value head learns too, the
# rate is 1.0: a squared error's gradient grows with the error, where a class
# loss's is at most 1 per row, and the rows a batch shares add up their
# examples' steps; at 2.5 a short or templated text overshot and diverged to
# the mean (docs/benchmarks.md, "Regression").
# A bag's input rows are --hidden wide: --embed, the Lancet models' token width, would do nothing;
# with --layers 0 there is no hidden layer to size or drop units of.
# A resolved configuration holds the bag's own width (--layers 0 too): what config.json, tune's trials and
# --resume resolve again; typed, or another width, it asks for a layer there is not.
BAG_HIDDEN = 64
BAG_REFUSES = (Refusal("model.embed", _declared_or_given("model.embed"),
                       "its terms' embeddings are --hidden wide (--embed is the Lancet models' width)"),
               Refusal("model.hidden",
                       lambda c: c.model.layers == 0 and _set_to("model", "hidden", (None, BAG_HIDDEN))(c),
                       "with --layers 0 it has no hidden layer", "--layers 1"),
               Refusal("model.dropout", lambda c: c.model.layers == 0 and _declared_or_given("model.dropout")(c),
                       "with --layers 0 it has no hidden layer to drop units of", "--layers 1"))
# FastTextBag averages its terms' embeddings (fastText's mean, ScalpelNet's pooling "mean"): a term's
# value never reaches the model, so the options that weigh it would train the same bytes.
MEAN_REFUSES = tuple(Refusal(f"features.{name}", lambda c, name=name: given(c, f"features.{name}"),
                             "it averages its terms' embeddings unweighted (fastText's mean), so no term "
                             "weight reaches it") for name in ("idf", "sublinear_tf"))
BAG: dict[str, Any] = dict(hidden=BAG_HIDDEN, sparse_optimizer="sgd", sparse_lr=SGD_SPARSE_LR, value_sparse_lr=1.0,
                           search_ranges={"sparse_lr": (0.25, 25.0)}, refuses=BAG_REFUSES)
# Sequence models (Lancet*): lazy Adam for the token embeddings; an LSTM layer
# holds eight hidden × hidden matrices (four gates, input and recurrent).
# A recurrent network learns per step: batches of 128 (a row costs about the
# same as at 512) and a linear schedule that decays over 1,000 steps at
# least, so a short run is not at a tenth of its rate by its second epoch
# (docs/benchmarks.md, "The sequence models").
# A recurrent network has at least one recurrent layer: --layers 0 trained exactly --layers 1's network.
SEQUENCE_REFUSES = (Refusal("model.layers", lambda c: c.model.layers == 0,
                            "its tokens are read by at least one recurrent layer", "--layers 1 (or a bag model's "
                            "--layers 0: LinearSVM, ScalpelMC)"),)
SEQUENCE: dict[str, Any] = dict(hidden=128, batch_size=128, decay_steps=1000, sparse_optimizer="adam",
                                input_width="embed", layer_weights=8, refuses=SEQUENCE_REFUSES,
                                search=("lr", "hidden", "epochs", "batch_size", "dropout"))


# The model options a network's fixed arguments may override (ModelSpec.fixed).
_MODEL_FIELDS = ("hidden", "layers", "dropout", "embed")


def _declared(field: str) -> Any:
    """An option's declared default (options.py, imported when a refusal is asked)."""
    from .options import option

    return option(field).default


# LinearSVM trains one example at a time on the CPU with its own hinge step
# (models/margin.py): options that cannot apply are refused, not ignored.
LINEAR_REFUSES = (
    Refusal("data.numeric", lambda c: bool(c.data.numeric), "its step reads the sparse rows only"),
    Refusal("training.class_weights", lambda c: c.training.class_weights != "none",
            "its hinge step weighs every row alike"),
    Refusal("training.device", lambda c: c.training.device not in ("auto", "cpu"), "its step runs on the CPU"),
    Refusal("training.class_loss", _set_to("training", "class_loss", ("cross_entropy", "hinge"), ("hinge",)),
            "it trains the hinge loss"),
    Refusal("training.sparse_optimizer", _set_to("training", "sparse_optimizer", (None, "hinge"), ("hinge",)),
            "it has its own step"),
    Refusal("model.hidden", _set_to("model", "hidden", (None, 64)), "it has no hidden layer"),
    Refusal("model.layers", _set_to("model", "layers", (0, 1), (0,)), "it has no hidden layer"),
    Refusal("model.dropout", _set_to("model", "dropout", (0.2,)), "it has no hidden layer to drop units of"),
    Refusal("training.optimizer", _set_to("training", "optimizer", ("adam",)),
            "its hinge step moves the weights itself, with no optimiser (--sparse-lr sets its rate)"),
    Refusal("training.clip_grad", lambda c: c.training.clip_grad is not None,
            "its hinge step takes no gradient to clip"),
    Refusal("training.lr", _declared_or_given("training.lr"),
            "its hinge step's rate is --sparse-lr (--lr sets the dense layers' rate of the other models)"),
    Refusal("model.embed", _declared_or_given("model.embed"),
            "it has no token embeddings (--embed is the Lancet models' width)"),
)

# --model auto (the default) takes the first of these whose spec accepts the
# options (task, features, no refusal) and, after the fit pass, whose weights
# fit the plan with the data's classes; the last is the fallback.
AUTO = "auto"
AUTO_CHOICES = ("LinearSVM", "ScalpelMC")

MODELS: dict[str, ModelSpec] = {
    "LinearSVM": ModelSpec("ScalpelNet", {"layers": 0, "margin": True}, tasks=("classify",),
                           summary="linear one-vs-rest SVM over sparse rows, trained one example at a time "
                                   "(hinge loss, one margin per label for label sets); --model auto's choice "
                                   "for classes and label sets",
                           hidden=64, rule="hinge", sparse_optimizer=None, sparse_lr=0.3, early_stopping=0,
                           sets={"training.class_loss": "hinge", "training.device": "cpu", "model.layers": 0},
                           refuses=LINEAR_REFUSES, learns_val=True,
                           auto_avoids=(Refusal("model.layers", lambda c: c.model.layers != 1,
                                                "--layers 0 asks for the MLP's own linear form"),),
                           max_classes=256, max_labels=1024, input_width="outputs",
                           search=("sparse_lr", "epochs", "batch_size", "ngrams"),
                           search_ranges={"sparse_lr": (0.03, 3.0)}),
    "ScalpelMC": ModelSpec("ScalpelNet", summary="MLP over sparse TF-IDF or hashed rows", **BAG),
    "ScalpelReg": ModelSpec("ScalpelNet", tasks=("regress", "classify", "multitask"),
                            summary="the same MLP, regressing a numeric target", **BAG),
    "ScalpelMTSK": ModelSpec("ScalpelNet", tasks=("multitask", "classify", "regress"),
                             summary="the same MLP with a class head and a regression head", **BAG),
    "FastTextBag": ModelSpec("ScalpelNet", {"activation": "identity", "pooling": "mean", "dropout": 0.0},
                             features=("hashing", "tfidf"), ngrams=2,
                             summary="fastText-style: mean of word + bigram embeddings, linear output",
                             **{**BAG, "refuses": BAG_REFUSES + MEAN_REFUSES}),
    "LancetMC": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                          summary="LSTM over token ids, last hidden state", **SEQUENCE),
    "LancetMCA": ModelSpec("SequenceNet", {"cell": "lstm", "attention": True}, features=("ids",),
                           summary="LSTM with attention pooling", **SEQUENCE),
    "LancetMCA_gru": ModelSpec("SequenceNet", {"cell": "gru", "attention": True}, features=("ids",),
                               summary="GRU with attention pooling", **SEQUENCE),
    # A value's squared error wants the rate to decay over a short run too.
    "LancetReg": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                           tasks=("regress", "classify", "multitask"), summary="LSTM regressor",
                           **{**SEQUENCE, "decay_steps": 0}),
}


def task_kind(meta: dict) -> str:
    """classify, regress, multitask or multilabel: what the heads in a run's
    ``model.json`` do. Its ``task`` says so (written since multilabel, whose
    heads look like classify's); older runs are told by their heads."""
    if meta.get("task"):
        return meta["task"]
    kw = meta["kwargs"]
    return "multitask" if kw.get("classes") and kw.get("regress") else ("regress" if kw.get("regress") else "classify")
