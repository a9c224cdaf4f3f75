"""ui/dashboard/widgets.py: memory colours by how near spill and pause a
process is, on the workers' lines too."""
from __future__ import annotations

from lancetnic_flow.ui.dashboard import mem_style, render

from ..events import memory, script, state_after, worker


def test_workers_are_coloured_as_they_near_spill_and_pause():
    s = state_after(script(until_epoch=0))
    for frac, colour in ((0.3, "green"), (0.75, "dark_orange"), (0.85, "bold red")):
        s.update(*memory(20.0, workers=[worker(0, frac, 0.6 * frac)]))
        frame = render(s, 80)
        line = next(line for line in frame.lines if "worker 0" in line.plain)
        assert any(str(span.style) == colour for span in line.spans), (frac, line.spans)
        assert f"{frac:.0%}" in line.plain


def test_an_existing_clusters_own_memory_lines_colour_its_workers_and_are_named_in_the_legend():
    """A cluster that pauses at 50 %: a worker at 55 % was shown orange under 'pause at 80%'."""
    from lancetnic_flow.dataflow.plan import MemoryLines, plan_for_workers

    plan = plan_for_workers([{"memory_limit": 4 * 2**30}], trainer=768 * 2**20,
                            lines=[MemoryLines(target=None, spill=0.4, pause=0.5)]).to_dict()
    s = state_after([(k, {**v, "plan": plan}) if k == "plan" else (k, v) for k, v in script(until_epoch=0)])
    s.update(*memory(20.0, workers=[worker(0, 0.55, 0.3)]))
    frame = render(s, 100)
    line = next(line for line in frame.lines if "worker 0" in line.plain)
    assert any(str(span.style) == "bold red" for span in line.spans), line.spans
    text = "\n".join(x.plain for x in frame.lines)
    assert "spill at 40%, pause at 50%" in text and "pause at 80%" not in text
    never = plan_for_workers([{"memory_limit": 4 * 2**30}], trainer=0, lines=[MemoryLines(pause=None)])
    assert "spill at 70% · never pauses" in never.describe()


def test_memory_colours_go_green_yellow_orange_red():
    assert mem_style(0.3) == "green" and mem_style(0.65) == "yellow"
    assert mem_style(0.75) == "dark_orange" and mem_style(0.85) == "bold red"


def test_a_run_featurised_in_process_shows_no_worker_rows_and_says_where_in_its_budget():
    from lancetnic_flow.dataflow.plan import plan_in_process, plan_memory

    plan = plan_in_process(plan_memory(6 * 2**30, workers=2), 2).to_dict()
    events = [(k, {**v, "plan": plan}) if k == "plan" else memory(v["t"], workers=[]) if k == "memory" else (k, v)
              for k, v in script(until_epoch=0)]
    s = state_after(events)
    text = "\n".join(line.plain for line in render(s, 120).lines)
    assert "worker 0" not in text
    assert "featurising here, no workers" in text and "trainer" in text


def test_a_count_that_rounds_up_to_the_next_unit_is_written_in_it():
    from lancetnic_flow.ui.dashboard.widgets import count

    assert [count(n) for n in (99_999, 100_000, 999_499, 999_600, 999_999, 1_250_000)] == [
        "99,999", "100k", "999k", "1.0M", "1.0M", "1.2M"]
    assert count(999_960_000) == "1.0G" and count(999_940_000) == "999.9M"


def test_an_existing_cluster_of_workers_with_different_limits_is_shown_with_their_total():
    from lancetnic_flow.dataflow.plan import plan_for_workers

    limits = [4 * 2**30, 700 * 2**20, 4 * 2**30]
    plan = plan_for_workers([{"memory_limit": b} for b in limits], trainer=768 * 2**20).to_dict()
    events = [(k, {**v, "plan": plan}) if k == "plan" else (k, v) for k, v in script(until_epoch=0)]
    text = "\n".join(line.plain for line in render(state_after(events), 160).lines)
    assert "existing cluster 3 workers, 8.7G in all" in text and "3 × 700M" not in text


def test_a_40_column_dashboard_shows_every_figure_an_80_column_one_does():
    import re

    s = state_after(script(until_epoch=1))   # mid-epoch 2: ETA, rates, last and best epoch, workers
    narrow, normal = (render(s, w).plain for w in (40, 80))
    figures = set(re.findall(r"\d[\d,.:/%]*\d|\d", normal))
    missing = sorted(f for f in figures if f not in narrow)
    assert not missing, (missing, narrow)   # cut at the edge, these were lost without a word
    for needle in ("ETA", "F1 0.9050", "(epoch 1)", "MB/s read", "training epoch 2/2", "9,000 training rows",
                   "spill at 70%", "pause at 80%", "http://127.0.0.1:8787/status"):
        assert needle in narrow, needle
    assert "…" not in narrow and all(line.cell_len <= 40 for line in render(s, 40).lines)


def test_a_dashboard_narrower_than_40_columns_draws_no_line_wider_than_the_terminal():
    """Under 40 columns the view was drawn at 40 all the same: every line the terminal wrapped
    pushed the live view down a line, and each redraw left a broken copy above it."""
    import re

    s = state_after(script(until_epoch=1))
    for width in (39, 30, 20, 12):
        frame = render(s, width)
        assert all(line.cell_len <= width for line in frame.lines), (width, max(x.cell_len for x in frame.lines))
    normal, narrow = render(s, 80).plain, render(s, 39).plain
    figures = set(re.findall(r"\d[\d,.:/%]*\d|\d", normal))
    assert not sorted(f for f in figures if f not in narrow)   # unboxed, 39 columns still show every figure
    assert "╭" not in narrow and "training epoch 2/2" in narrow and "8,960/9,0" in render(s, 20).plain


def test_workers_named_by_their_address_are_told_apart():
    s = state_after(script(until_epoch=0))
    ws = [{**worker(0, 0.3), "name": f"tcp://10.0.0.{i}:38111"} for i in (5, 6)]
    s.update(*memory(20.0, workers=ws))
    for width in (40, 80, 160):
        text = render(s, width).plain
        assert "10.0.0.5:38111" in text or width < 80, text
        assert text.count("0.5:38111") == text.count("0.6:38111") == 1, text   # told apart, cut or not
        assert "400M/768M (52%)" in text and text.count("614M") == text.count("30%") == 2, text   # no name cuts a figure


def test_the_epochs_bar_never_goes_back_while_an_epoch_is_evaluated():
    from lancetnic_flow.ui.dashboard.widgets import progress_lines

    events = script(until_epoch=1)
    evaluating = next(i for i, (k, e) in enumerate(events) if k == "stage" and e["stage"] == "evaluating")

    def filled(n: int) -> float:
        s = state_after(events[:n])
        line = next(t for t in progress_lines(s, s.now(), 76) if t.plain.startswith("epochs"))
        done = sum(span.end - span.start for span in line.spans if str(span.style) in ("cyan", "green"))
        return done / line.plain.count("━")   # of the bar's width, which the notes' column changes

    before, during, after = filled(evaluating), filled(evaluating + 1), filled(evaluating + 2)
    assert before > 0.4 and during >= before - 0.05 and after >= during - 0.05, (before, during, after)


def test_a_40_column_memory_panel_of_a_run_featurised_in_process_says_so_in_full():
    from lancetnic_flow.dataflow.plan import plan_in_process, plan_memory

    plan = plan_in_process(plan_memory(16 * 2**30, workers=2), 2).to_dict()
    events = [(k, {**v, "plan": plan}) if k == "plan" else memory(v["t"], workers=[]) if k == "memory" else (k, v)
              for k, v in script(until_epoch=0)]
    text = render(state_after(events), 40).plain
    assert "(featurising here, no workers)" in text and "…" not in text, text


def test_the_bytes_read_so_far_are_in_the_unit_of_the_read_rate():
    s = state_after(script(until_epoch=1))   # 8 partitions of 2,000,000 bytes
    text = render(s, 80).plain
    assert "MB/s read (16.0 MB so far)" in text, text   # not "15M": mebibytes beside megabytes per second
