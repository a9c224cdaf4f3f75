"""docs/walkthrough.ipynb, executed top to bottom in a real Jupyter kernel:
it trains with live progress, shows the run's charts inline, explains
predictions whose contributions add up to their scores, and keeps learning
on new rows. A notebook in the docs that no longer runs fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "walkthrough.ipynb"


def _text(output: dict) -> str:
    return output.get("text") or output.get("data", {}).get("text/plain", "")


def test_the_walkthrough_notebook_trains_shows_its_charts_explains_and_keeps_learning(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "kept without outputs"
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    shown = "\n".join(_text(o) for o in outputs)
    # live progress, as the dashboard's lines
    assert "training epoch 4/4" in shown and "training finished" in shown
    # the charts, inline, from the run folder the notebook wrote
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3
    runs = sorted(p for p in (tmp_path / "walkthrough-runs").iterdir() if (p / "model.json").exists())
    assert len(runs) == 2 and (runs[0] / "top_terms.png").exists()
    # each explained text: its terms, rest and bias add up to the logit it shows
    sums = re.findall(r"sum\s+([+-]\d+\.\d+)\s+\(the logit: ([+-]\d+\.\d+)\)", shown)
    assert len(sums) == 3 and all(abs(float(a) - float(b)) < 2e-3 for a, b in sums), sums
    # keeps learning: the second run continues the first, and scores on the held-out rows
    assert "continuing" in shown and "no new label" in shown
    before, after = map(float, re.search(r"held-out accuracy: (\d\.\d+) after the first batch, (\d\.\d+)",
                                         shown).groups())
    assert before > 0.7 and after > 0.7
