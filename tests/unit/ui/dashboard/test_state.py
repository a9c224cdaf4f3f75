"""ui/dashboard/state.py: the state follows the run's events, rates come
from event times and decay when a counter stalls, and a JSON log replays into it."""
from __future__ import annotations

import pytest

from lancetnic_flow.ui.dashboard import Meter

from ..events import memory, script, state_after


def test_the_state_follows_the_run_and_rates_come_from_event_times():
    s = state_after(script(until_epoch=1))
    assert s.stage == "training" and s.epoch == 2 and s.epochs_done == 1
    assert s.fit_done == s.fit_total == 4 and s.feat_done == s.feat_total == 4
    assert s.bytes_read == 8 * 2_000_000
    assert s.best["epoch"] == 1 and s.last_epoch["epoch"] == 1
    assert [w["name"] for w in s.workers] == ["0", "1"]
    # 256 rows per 0.1 s of event time
    assert s.rows_rate() == pytest.approx(2560, rel=0.1)
    assert s.tokens_meter.rate(s.now()) == pytest.approx(90_000, rel=0.1)
    # a stalled counter decays to 0 instead of showing its last rate forever
    assert s.rows_meter.rate(s.now() + 60) == 0.0
    # the monitor sends an empty worker list every other sample: the last list stays
    s.update(*memory(100.0, workers=[]))
    assert len(s.workers) == 2


def test_a_meter_gives_the_rate_over_its_window():
    m = Meter(window=10, every=0.5)
    for i in range(40):
        m.add(i * 0.25, i * 100)
    assert m.rate(39 * 0.25) == pytest.approx(400, rel=0.05)


def _rank(t: float, rank: int, rows: int, epoch: int = 1, done: bool = False) -> tuple[str, dict]:
    return "rank", {"t": t, "rank": rank, "epoch": epoch, "epochs": 2, "rows": rows, "rows_per_s": 1000.0,
                    "loss": 0.5, "done": done}


def _training(t: float, epoch: int) -> tuple[str, dict]:
    return "stage", {"t": t, "stage": "training", "epoch": epoch, "epochs": 2, "total_rows": 4000,
                     "source": "cluster"}


def test_a_ddp_epoch_announced_again_after_a_periodic_checkpoint_keeps_its_rows_and_counts_them_once():
    s = state_after([_training(0.0, 1), _rank(1.0, 0, 1000), _rank(1.0, 1, 1000),
                     _training(2.0, 1),                       # the next segment of the same epoch
                     _rank(3.0, 0, 1500), _rank(3.0, 1, 1500),
                     _rank(4.0, 0, 2000, done=True), _rank(4.0, 1, 2000, done=True),
                     _training(5.0, 2), _rank(6.0, 0, 500, epoch=2), _rank(6.0, 1, 500, epoch=2)])
    assert s.epoch == 2 and s.rows == 1000
    assert s.rows_before == 4000   # epoch 1's rows once, not again at its second announcement


def test_a_resumed_run_counts_the_epochs_its_checkpoint_had_finished():
    s = state_after([("resumed", {"t": 0.0, "run": "r", "epoch": 2, "batches": 10, "step": 99}), _training(0.1, 2)])
    assert s.epochs_done == 1 and s.epoch == 2


def test_a_resumed_runs_best_and_last_epoch_include_the_epochs_before_its_checkpoint():
    before = [{"epoch": 1, "train_loss": 0.5, "val_loss": 0.30, "val_accuracy": 0.91},
              {"epoch": 2, "train_loss": 0.2, "val_loss": 0.35, "val_accuracy": 0.89}]
    resumed = ("resumed", {"t": 0.0, "run": "r", "epoch": 3, "batches": 0, "step": 99, "history": before,
                           "monitor": "val_accuracy"})
    after = ("epoch", {"t": 5.0, "epoch": 3, "train_loss": 0.1, "val_loss": 0.40, "val_accuracy": 0.90})
    s = state_after([resumed, _training(0.1, 3), after])
    assert s.best["epoch"] == 1 and s.last_epoch["epoch"] == 3   # epoch 3 alone would be called the best
    assert state_after([resumed]).last_epoch["epoch"] == 2


def test_ddp_ranks_tokens_give_the_dashboards_tokens_per_second():
    events = [_training(0.0, 1)]
    for i in range(1, 11):   # each rank reports 5,000 tokens every 0.5 s: 20,000 tokens/s together
        events += [(k, {**e, "tokens": 5000}) for k, e in (_rank(i * 0.5, 0, 100 * i), _rank(i * 0.5, 1, 100 * i))]
    s = state_after(events)
    assert s.tokens_meter.rate(s.now()) == pytest.approx(20_000, rel=0.1)


def test_the_running_loss_of_a_short_epoch_is_near_its_batches_mean_not_its_first_batchs():
    # started at the first batch's loss, 0.95 of it remained after each batch: six batches of
    # 4, 1, 0.6, 0.5, 0.4, 0.3 showed 3.0 where they average 1.13
    from lancetnic_flow.ui.dashboard.state import DashboardState

    s = DashboardState()
    losses = [4.0, 1.0, 0.6, 0.5, 0.4, 0.3]
    for i, loss in enumerate(losses):
        s.update("batch", {"rows": 64 * (i + 1), "loss": loss, "t": float(i)})
    assert abs(s.loss - sum(losses) / len(losses)) < 0.2 and s.loss < losses[0] / 3
    for i in range(500):   # a long run follows its recent batches
        s.update("batch", {"rows": 64 * (i + 7), "loss": 0.1, "t": float(i + 6)})
    assert s.loss == pytest.approx(0.1, abs=1e-6)


def _epoch_of_batches(t0: float, epoch: int, batches: int = 20) -> list[tuple[str, dict]]:
    """An epoch of 256-row batches every 0.1 s (2,560 rows/s), its losses falling from 1.0 by 0.01."""
    events = [_training(t0, epoch)]
    for b in range(1, batches + 1):
        events.append(("batch", {"t": t0 + b * 0.1, "epoch": epoch, "rows": 256 * b, "total_rows": 4000,
                                 "loss": 1.0 - b / 100, "tokens": 1000}))
    return events


def test_a_new_epochs_rows_per_second_are_its_rows_over_its_time_not_over_the_validation_pause_before_it():
    epoch1 = _epoch_of_batches(0.0, 1)
    pause = [("stage", {"t": 2.0, "stage": "evaluating", "epoch": 1, "epochs": 2}),
             ("epoch", {"t": 4.0, "epoch": 1, "train_loss": 0.9, "val_loss": 0.8})]
    s = state_after(epoch1 + pause + _epoch_of_batches(4.0, 2, batches=10))
    # the last epoch's samples in the window counted the 2 s pause as time spent on rows: about 1,200 rows/s
    assert s.rows_rate() == pytest.approx(2560, rel=0.1)
    assert s.tokens_meter.rate(s.now()) == pytest.approx(10_000, rel=0.1)


def test_a_finished_epoch_shows_its_own_train_loss_and_the_next_epochs_running_loss_is_its_own():
    epoch1 = _epoch_of_batches(0.0, 1)
    s = state_after(epoch1 + [("epoch", {"t": 2.5, "epoch": 1, "train_loss": 0.7, "val_loss": 0.8})])
    assert s.loss == 0.7   # what the epoch line and metrics.json say, not the running mean's last value
    s = state_after(epoch1 + [("epoch", {"t": 2.5, "epoch": 1, "train_loss": 0.7, "val_loss": 0.8}),
                              _training(3.0, 2), ("batch", {"t": 3.1, "epoch": 2, "rows": 256, "loss": 0.2})])
    assert s.loss == pytest.approx(0.2)   # epoch 1's batches do not blend into epoch 2's first


def test_a_worker_gone_from_the_schedulers_answer_leaves_the_memory_panel():
    s = state_after(script(until_epoch=0))
    assert [w["name"] for w in s.workers] == ["0", "1"]
    kind, e = memory(50.0, workers=[])
    s.update(kind, {**e, "workers_asked": True})   # the scheduler answered: no workers left
    assert s.workers == []


def test_a_continued_runs_starting_weights_are_the_best_from_the_start_when_no_epoch_beats_them():
    """--init-from: the run keeps its start when no epoch beats it, and the dashboard named
    epoch 1 the best until the summary said otherwise."""
    from lancetnic_flow.ui.dashboard.summary import milestone
    from lancetnic_flow.ui.dashboard.widgets import val_text

    start = ("start_scored", {"t": 0.0, "epoch": 0, "val_loss": 0.20, "val_accuracy": 0.95})
    worse = ("epoch", {"t": 5.0, "epoch": 1, "train_loss": 0.1, "val_loss": 0.40, "val_accuracy": 0.90})
    better = ("epoch", {"t": 9.0, "epoch": 2, "train_loss": 0.1, "val_loss": 0.10, "val_accuracy": 0.97})
    s = state_after([_training(0.0, 1), start, worse])
    assert s.best["epoch"] == 0 and s.last_epoch["epoch"] == 1
    assert "the start: --init-from's weights" in val_text(s.best).plain
    assert state_after([_training(0.0, 1), start, worse, better]).best["epoch"] == 2
    line = milestone(*start)
    assert line.startswith("start    --init-from's weights · val ") and "0.2" in line
