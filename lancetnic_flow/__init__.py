"""lancetnic_flow: train text models on more text than fits in memory.

Public API (imported lazily, so Dask workers that only read and featurise
data never import torch)::

    from lancetnic_flow import TextClassifier, TextRegressor         # scikit-learn style
    from lancetnic_flow import TrainConfig, DataConfig, train, Predictor, write_corpus
    from lancetnic_flow import tune                                  # a time-bounded search, then train
"""
from __future__ import annotations

import importlib
import os
from typing import Any

# torch's OpenMP threads wait for work by spinning. When anything else wants
# the same cores (Dask workers featurising, a second run, the user's own
# processes) a spinning team is many times slower than one thread: the
# sequence models trained ten to seventeen times slower on two busy cores
# (docs/benchmarks.md, "The sequence models"). Sleeping waits cost little
# when the cores are free. OpenMP reads this when torch loads, so it is set
# here, before any of this package imports torch, and never over a choice
# the user made.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

_EXPORTS = {
    "train": "lancetnic_flow.api.progress",
    "TextClassifier": "lancetnic_flow.api.estimators",
    "TextRegressor": "lancetnic_flow.api.estimators",
    "TrainResult": "lancetnic_flow.training.orchestrator",
    "tune": "lancetnic_flow.training.tune",
    "TuneResult": "lancetnic_flow.training.tune",
    "TrainConfig": "lancetnic_flow.config",
    "DataConfig": "lancetnic_flow.config",
    "FeatureConfig": "lancetnic_flow.config",
    "ModelConfig": "lancetnic_flow.config",
    "TrainingConfig": "lancetnic_flow.config",
    "ClusterConfig": "lancetnic_flow.config",
    "OutputConfig": "lancetnic_flow.config",
    "Predictor": "lancetnic_flow.runs.predict",
    "load_run": "lancetnic_flow.runs.loading",
    "write_corpus": "lancetnic_flow.data.synth",
    "Events": "lancetnic_flow.events",
    "UserError": "lancetnic_flow.errors",
    "RunWarning": "lancetnic_flow.errors",
    "register_tokenizer": "lancetnic_flow.tokenizers",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'lancetnic_flow' has no attribute {name!r}")


__all__ = sorted(_EXPORTS) + ["__version__"]
