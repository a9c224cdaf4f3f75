"""The models users pick by name (lancetnic's names), and what each one is:
its network class (by name), fixed options, the tasks it does and the
feature modes it reads, the first of each being its default.

Plain data, free of torch: checking a configuration (and so a user's typo)
needs no 1.5 s torch import. :mod:`lancetnic_flow.models` builds the networks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_ALL = ("classify", "regress", "multitask")


@dataclass(frozen=True)
class ModelSpec:
    net: str
    fixed: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = _ALL
    features: tuple[str, ...] = ("hashing", "tfidf")
    ngrams: int = 0                 # the n-grams the model wants by default (0: as configured)
    summary: str = ""
    label_sets: bool = True         # whether it can also learn a set of labels per row (multilabel)

    @property
    def task(self) -> str:
        return self.tasks[0]

    @property
    def every_task(self) -> tuple[str, ...]:
        """``tasks``, plus multilabel for a model that classifies: the same class
        head, read through a sigmoid per label instead of a softmax."""
        return self.tasks + (("multilabel",) if "classify" in self.tasks and self.label_sets else ())


# The sparse input rows' optimiser and its per-example learning rate, by network:
# SGD for bags of terms (a term's weight grows with the evidence for it; lazy
# Adam there lets terms seen once memorise their rows), lazy Adam for token embeddings.
SPARSE_STEP: dict[str, tuple[str, float | None]] = {"ScalpelNet": ("sgd", 2.5), "SequenceNet": ("adam", None)}
# The per-example SGD rate of the input rows when a value head learns too
# (regress, multitask). A squared error's gradient grows with the error, where
# a class loss's is at most 1 per row, and the rows a batch shares add up their
# examples' steps: at 2.5, terms in most rows (a short or templated text)
# overshot and the run diverged to the mean (R² -0.02 where a ridge regression
# reaches 0.99). At 1.0 that text reaches 0.93 and two other corpora move
# within 0.002 of R² (docs/benchmarks.md, "Regression").
VALUE_SPARSE_LR = 1.0

# --model auto (the default) picks LinearSVM for one label per row over sparse
# rows, ScalpelMC otherwise (config.TrainConfig.validate says when); LinearSVM's
# weight is terms × classes, so past LINEAR_MAX_CLASSES it picks ScalpelMC too.
AUTO = "auto"
LINEAR_MAX_CLASSES = 256
# LinearSVM's per-example step (models/margin.py), at the schedule's share of this rate.
LINEAR_LR = 0.3

MODELS: dict[str, ModelSpec] = {
    "LinearSVM": ModelSpec("ScalpelNet", {"layers": 0, "margin": True}, tasks=("classify",), label_sets=False,
                           summary="linear one-vs-rest SVM over sparse rows, trained one example at a time "
                                   "(hinge loss); --model auto's choice for one label per row"),
    "ScalpelMC": ModelSpec("ScalpelNet", summary="MLP over sparse TF-IDF or hashed rows"),
    "ScalpelReg": ModelSpec("ScalpelNet", tasks=("regress", "classify", "multitask"),
                            summary="the same MLP, regressing a numeric target"),
    "ScalpelMTSK": ModelSpec("ScalpelNet", tasks=("multitask", "classify", "regress"),
                             summary="the same MLP with a class head and a regression head"),
    "FastTextBag": ModelSpec("ScalpelNet", {"activation": "identity", "pooling": "mean", "dropout": 0.0},
                             features=("hashing", "tfidf"), ngrams=2,
                             summary="fastText-style: mean of word + bigram embeddings, linear output"),
    "LancetMC": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                          summary="LSTM over token ids, last hidden state"),
    "LancetMCA": ModelSpec("SequenceNet", {"cell": "lstm", "attention": True}, features=("ids",),
                           summary="LSTM with attention pooling"),
    "LancetMCA_gru": ModelSpec("SequenceNet", {"cell": "gru", "attention": True}, features=("ids",),
                               summary="GRU with attention pooling"),
    "LancetReg": ModelSpec("SequenceNet", {"cell": "lstm", "attention": False}, features=("ids",),
                           tasks=("regress", "classify", "multitask"), summary="LSTM regressor"),
}


def task_kind(meta: dict) -> str:
    """classify, regress, multitask or multilabel: what the heads in a run's
    ``model.json`` do. Its ``task`` says so (written since multilabel, whose
    heads look like classify's); older runs are told by their heads."""
    if meta.get("task"):
        return meta["task"]
    kw = meta["kwargs"]
    return "multitask" if kw.get("classes") and kw.get("regress") else ("regress" if kw.get("regress") else "classify")
