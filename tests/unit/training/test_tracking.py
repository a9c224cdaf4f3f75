"""training/tracking.py: a tracker that cannot start is a warning, in the words of the run's caller."""
from __future__ import annotations

from lancetnic_flow.events import Events
from lancetnic_flow.training.tracking import Tracking, missing_extra


def test_a_tracker_that_cannot_start_is_a_warning_naming_the_option_as_the_caller_typed_it():
    """`--track mlflow` without its package warned `track mlflow needs ...` on the command line: the
    error's text was Python's by the time the warning took it. Each caller now reads its own name."""
    said = {}
    for words in ("cli", "python"):
        events = Events(words=words)
        events.subscribe(lambda kind, e, words=words: said.__setitem__(words, e["message"]))

        def start():
            raise missing_extra("mlflow", "mlflow-skinny (or mlflow)")

        Tracking(events).add("mlflow", start)
    assert said["cli"].startswith("--track mlflow stopped: --track mlflow needs the mlflow-skinny")
    assert said["python"].startswith("track mlflow stopped: track mlflow needs the mlflow-skinny")
