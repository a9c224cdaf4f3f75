"""A trained run: its folder (save, load), prediction, evaluation and plots."""
