"""Model families. Each is built from a name and plain keyword arguments,
so a run folder stores them as JSON, never as pickled code."""
from .scalpel import MODELS, ScalpelMC, build_model

__all__ = ["MODELS", "ScalpelMC", "build_model"]
