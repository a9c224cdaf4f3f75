"""The lancetnic-flow command: its parser, its commands and workflow files."""
from .main import main

__all__ = ["main"]
