"""dataflow/plan.py: the memory plan splits the budget explicitly, partitions
stay in their bounds, a too-small budget is refused with a budget that fits,
and someone else's workers' limits and threads set the partition and window."""
from __future__ import annotations

import re

import pytest

from lancetnic_flow.dataflow.plan import (MAX_PARTITION, MIN_WORKER, THRESHOLDS, TRAINER_BASE, GiB, MiB,
                                          plan_for_workers, plan_memory)
from lancetnic_flow.errors import UserError
from lancetnic_flow.sizes import format_size, parse_size


@pytest.mark.parametrize("budget", ["1.5GiB", "2GiB", "3GiB", "8GiB", "16GiB", "64GiB", "1TiB"])
@pytest.mark.parametrize("workers", [None, 1, 2])
def test_memory_plan_splits_add_up_to_at_most_the_budget(budget, workers):
    b = parse_size(budget)
    try:
        plan = plan_memory(b, workers=workers)
    except UserError:
        assert b <= 2 * GiB  # only small budgets may be refused
        return
    assert plan.budget == b
    assert plan.reserve + plan.trainer + plan.workers * plan.worker_limit <= b
    assert plan.reserve > 0 and plan.trainer >= TRAINER_BASE and plan.worker_limit >= MIN_WORKER
    assert 1 * MiB <= plan.partition <= 64 * MiB
    assert plan.partition % MiB == 0
    assert plan.in_flight >= 2
    if workers:
        assert plan.workers == workers
    text = plan.describe()
    assert "memory plan" in text and "partition" in text and len(text.splitlines()) == 2


def test_memory_plan_accounts_for_the_model_and_shuffle_buffer_in_the_trainer():
    plan = plan_memory(8 * GiB, workers=1, model_bytes=700 * MiB, shuffle_bytes=300 * MiB)
    assert plan.trainer >= TRAINER_BASE + 1000 * MiB
    assert plan.reserve + plan.trainer + plan.worker_limit <= 8 * GiB


def test_a_refused_plan_names_the_model_only_where_it_holds_one_and_its_workers_in_agreement():
    # predict's plan of the reading alone said "this process needs 450 MiB (the model 0 B) and 1 worker need ..."
    with pytest.raises(UserError) as err:
        plan_memory(MiB, workers=1, holder="this process")
    assert "(the model" not in err.value.message and " and 1 worker needs " in err.value.message
    with pytest.raises(UserError) as err:
        plan_memory(MiB, workers=2, model_bytes=5 * MiB)
    assert "(model and optimiser 5.0 MiB) and 2 workers need " in err.value.message


def test_explicit_blocksize_is_used_as_the_partition_size():
    assert plan_memory(8 * GiB, workers=1, blocksize=3 * MiB).partition == 3 * MiB


@pytest.mark.parametrize("kw", [{"budget": 10 * MiB}, {"budget": 4 * GiB, "model_bytes": 4 * GiB},
                                {"budget": 2 * GiB, "workers": 8}])
def test_memory_plan_refuses_a_budget_too_small_and_says_what_would_fit(kw):
    budget = kw.pop("budget")
    with pytest.raises(UserError) as err:
        plan_memory(budget, **kw)
    e = err.value
    assert "too small" in e.message
    hint = e.said("cli")[1]   # the command line's words; Python's name memory_budget
    assert hint and "--memory-budget" in hint and "memory_budget" in e.hint and "--" not in e.hint
    # the suggested budget is one the planner accepts
    m = re.search(r"--memory-budget (\S+)", hint)
    suggested = parse_size(m.group(1))
    assert suggested > budget
    plan = plan_memory(suggested, **kw)
    assert plan.reserve + plan.trainer + plan.workers * plan.worker_limit <= suggested


def test_a_refused_plan_names_only_what_would_fit_each_with_a_value_the_planner_accepts():
    # Too many workers for the budget: --workers K that fits is named; no model option was given, none is named.
    with pytest.raises(UserError) as err:
        plan_memory(2 * GiB, workers=8)
    hint = err.value.said("cli")[1]
    k = int(re.search(r"--workers (\d+)", hint).group(1))
    assert 1 <= k < 8 and plan_memory(2 * GiB, workers=k).workers == k
    assert "--max-features" not in hint and "--hidden" not in hint and "--buckets" not in hint
    # One worker and a model too large: the options that shrink this model, with the size that fits.
    with pytest.raises(UserError) as err:
        plan_memory(4 * GiB, workers=1, model_bytes=4 * GiB, model_options="fewer --buckets")
    hint = err.value.said("cli")[1]
    assert "--workers" not in hint and "fewer --buckets" in hint and "--max-features" not in hint
    fits = parse_size(re.search(r"a model of at most (\S+ \S+|\S+)", hint).group(1).replace(" ", ""))
    assert plan_memory(4 * GiB, workers=1, model_bytes=int(fits * 0.99)).workers == 1


def test_a_plan_for_existing_workers_takes_the_smallest_limit_and_counts_every_thread():
    workers = [{"memory_limit": 8 * GiB, "nthreads": 2}, {"memory_limit": 4 * GiB, "nthreads": 1}]
    plan = plan_for_workers(workers, trainer=TRAINER_BASE)
    assert plan.external and plan.workers == 2 and plan.worker_limit == 4 * GiB and plan.threads == 2
    assert plan.in_flight == 6 and MiB <= plan.partition <= MAX_PARTITION
    assert "existing cluster: 2 workers" in plan.describe()
    assert plan.workers_bytes() == 12 * GiB
    assert plan_for_workers(workers, trainer=TRAINER_BASE, blocksize=5 * MiB).partition == 5 * MiB


def test_a_plan_for_workers_of_different_limits_says_their_total_and_the_smallest_not_n_times_the_smallest():
    """4 GiB, 700 MiB, 4 GiB: the plan said "3 workers × 700.0 MiB" and the summary
    "60% of 3 × 700M" for a peak of 1.2 GiB on 8.7 GiB of workers."""
    workers = [{"memory_limit": 4 * GiB}, {"memory_limit": 700 * MiB}, {"memory_limit": 4 * GiB}]
    plan = plan_for_workers(workers, trainer=TRAINER_BASE)
    assert plan.worker_limit == 700 * MiB and plan.workers_bytes() == 8 * GiB + 700 * MiB
    assert "existing cluster: 3 workers, 8.7 GiB in all, the smallest 700.0 MiB" in plan.describe()
    same = plan_for_workers(workers[:1] * 2, trainer=TRAINER_BASE)
    assert "existing cluster: 2 workers × 4.0 GiB" in same.describe() and same.workers_bytes() == 8 * GiB


def test_a_larger_worker_gets_a_larger_partition_up_to_the_cap():
    def partition(limit):
        return plan_for_workers([{"memory_limit": limit, "nthreads": 1}], trainer=0).partition

    assert partition(600 * MiB) == MiB                 # the floor
    assert MiB < partition(800 * MiB) < MAX_PARTITION  # what the limit leaves after the bases, per peak byte
    assert partition(64 * GiB) == MAX_PARTITION


def test_workers_that_hold_a_loaded_model_keep_it_under_the_pause_line_with_a_smaller_partition():
    model = 2 * GiB
    plan = plan_memory(16 * GiB, workers=2, model_bytes=model, worker_model_bytes=model)
    assert plan.worker_limit * THRESHOLDS["pause"] >= model + MIN_WORKER
    assert plan.reserve + plan.trainer + plan.workers * plan.worker_limit <= 16 * GiB
    assert plan.trainer >= TRAINER_BASE + model
    assert plan.partition <= plan_memory(16 * GiB, workers=2, model_bytes=model).partition


def test_a_refusal_for_workers_that_hold_a_model_names_the_model_and_a_budget_that_plans():
    model = 3 * GiB
    with pytest.raises(UserError) as e:
        plan_memory(8 * GiB, workers=2, model_bytes=model, worker_model_bytes=model, holder="this process")
    assert "each holding the model's 3.0 GiB" in e.value.message and "this process needs" in e.value.message
    budget = re.search(r"--memory-budget (\S+) or more", e.value.said("cli")[1]).group(1)
    plan = plan_memory(parse_size(budget), workers=2, model_bytes=model, worker_model_bytes=model)
    assert plan.worker_limit * THRESHOLDS["pause"] >= model + MIN_WORKER
    workers = re.search(r"--workers (\d+)", e.value.said("cli")[1])
    if workers:
        plan_memory(8 * GiB, workers=int(workers.group(1)), model_bytes=model, worker_model_bytes=model)


def test_what_the_process_held_before_the_run_is_part_of_the_trainers_share_and_said():
    """tune's final run: the search's process already holds memory past a trainer's base."""
    plan = plan_memory(8 * GiB, workers=1, model_bytes=700 * MiB, shuffle_bytes=300 * MiB, held=200 * MiB)
    assert plan.trainer >= TRAINER_BASE + 1200 * MiB and plan.held == 200 * MiB
    assert plan.reserve + plan.trainer + plan.worker_limit <= 8 * GiB
    assert "counts 200.0 MiB this process held before the run" in plan.describe()
    with pytest.raises(UserError) as e:   # the budget a refusal names plans with what is held
        plan_memory(2 * GiB, workers=2, model_bytes=300 * MiB, held=500 * MiB)
    budget = re.search(r"--memory-budget ([\d.]+GiB)", e.value.said("cli")[1]).group(1)
    plan_memory(parse_size(budget), workers=2, model_bytes=300 * MiB, held=500 * MiB)


def test_ddp_ranks_get_a_worker_each_when_workers_are_not_given_or_a_refusal_names_the_budget(monkeypatch):
    """--ddp 3 without --workers on 2 cores planned 2 workers, and the run was refused after its
    cluster started: the ranks now set the fewest workers (given --workers still decide), and a
    budget that cannot hold them is refused naming a budget that does, or fewer ranks."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert plan_memory(16 * GiB).workers == 2
    assert plan_memory(16 * GiB, ranks=3).workers == 3
    assert plan_memory(16 * GiB, ranks=2).workers == 2
    assert plan_memory(16 * GiB, workers=2, ranks=3).workers == 2   # asked for: the ranks are refused later, saying so
    with pytest.raises(UserError) as refused:
        plan_memory(2 * GiB, ranks=4)
    said = " ".join(refused.value.said("cli"))
    assert "4 workers (one per ddp rank)" in str(refused.value)   # to Python: ddp=
    assert "4 workers (one per --ddp rank)" in said and "--workers" not in said
    budget = re.search(r"--memory-budget (\S+)", said).group(1)
    fewer = int(re.search(r"--ddp (\d+)", said).group(1))
    assert plan_memory(parse_size(budget), ranks=4).workers == 4
    assert plan_memory(2 * GiB, ranks=fewer).workers == fewer


def test_the_plan_line_gives_the_size_the_inputs_were_cut_into_where_it_is_below_the_plans():
    """A 1.2 MiB input cut into 1 MiB partitions for two threads printed `partition 4.0 MiB`: the
    plan's largest, a size no partition of the run had."""
    plan = plan_memory(8 * GiB, workers=1)
    assert plan.partition == 4 * MiB
    assert "partition 1.0 MiB (peak ≈ 29× per task)" in plan.describe(cut=MiB)
    assert "partition 560.5 KiB (peak" in plan.describe(cut=int(560.5 * 1024))
    for cut in (0, -1, 4 * MiB):   # not known (an existing cluster), whole files (Parquet), the plan's own
        assert "partition 4.0 MiB (peak ≈ 29× per task)" in plan.describe(cut=cut)


def test_an_existing_clusters_partitions_leave_room_for_the_model_each_worker_holds():
    from lancetnic_flow.dataflow.plan import MiB, plan_for_workers

    workers = [{"memory_limit": 4 << 30, "nthreads": 1}, {"memory_limit": 2 << 30, "nthreads": 1}]
    bare = plan_for_workers(workers, trainer=0)
    holding = plan_for_workers(workers, trainer=0, worker_model_bytes=750 * MiB)
    assert bare.partition == 4 * MiB and holding.partition == 3 * MiB   # the smallest worker, less the model
    assert plan_for_workers(workers, trainer=0, blocksize=2 * MiB, worker_model_bytes=750 * MiB).partition == 2 * MiB


def test_an_existing_cluster_whose_workers_cannot_hold_the_loaded_run_beside_a_task_is_refused_naming_the_limit():
    """A 700 MiB worker and a run whose loading holds 512 MiB: the plan gave it 1 MiB partitions,
    and the worker was killed past its limit while predicting (or, paused, would have waited
    forever). Refused before anything is loaded, naming a --memory-limit that holds it."""
    from lancetnic_flow.dataflow.plan import MiB, plan_for_workers, worker_minimum

    model = 512 * MiB
    need = worker_minimum(model)
    assert need * THRESHOLDS["pause"] >= MIN_WORKER + model
    small = [{"memory_limit": 4 * GiB, "nthreads": 3}, {"memory_limit": 700 * MiB, "nthreads": 3}]
    with pytest.raises(UserError) as refused:
        plan_for_workers(small, trainer=0, worker_model_bytes=model)
    assert "1 worker of 2 has a memory limit of 700.0 MiB" in str(refused.value)
    assert f"a worker needs {format_size(need)} or more" in str(refused.value)
    assert "--memory-limit 1.1GiB" in refused.value.hint and parse_size("1.1GiB") >= need
    plan = plan_for_workers([{"memory_limit": parse_size("1.1GiB"), "nthreads": 3}], trainer=0,
                            worker_model_bytes=model)   # the limit it names holds the run
    assert plan.partition == MiB
    assert plan_for_workers(small, trainer=0).worker_limit == 700 * MiB   # nothing loaded: planned as before
    assert plan_for_workers(small, trainer=0, worker_model_bytes=64 * MiB).worker_limit == 700 * MiB


def test_a_workers_memory_lines_name_where_it_acts_and_where_it_stops_running_tasks():
    from lancetnic_flow.dataflow.plan import DEFAULT_LINES, MemoryLines

    assert DEFAULT_LINES.acts() == THRESHOLDS["target"] and DEFAULT_LINES.stops() == ("pause", THRESHOLDS["pause"])
    assert MemoryLines(target=None).acts() == THRESHOLDS["spill"]   # target off: it spills first
    assert MemoryLines(None, None, None, 0.9).acts() == 0.9
    assert MemoryLines(pause=None).stops() == ("terminate", THRESHOLDS["terminate"])   # never pauses: killed
    assert MemoryLines(None, None, None, None).stops() == ("limit", 1.0) and MemoryLines(None, None, None, None).acts() == 1.0


def test_an_existing_cluster_that_pauses_sooner_than_dasks_default_is_planned_by_its_own_lines():
    """A cluster configured to pause at 50 %: the plan counted Dask's 80 %, so a loaded run the
    worker holds left no task room under its real pause line and the worker waited forever."""
    from lancetnic_flow.dataflow.plan import MemoryLines, plan_for_workers, worker_minimum

    model, limit = 512 * MiB, int(1.2 * GiB)
    workers = [{"memory_limit": limit, "nthreads": 1}]
    assert plan_for_workers(workers, trainer=0, worker_model_bytes=model).worker_limit == limit   # Dask's lines: fits
    early = MemoryLines(pause=0.5)
    with pytest.raises(UserError) as refused:
        plan_for_workers(workers, trainer=0, worker_model_bytes=model, lines=[early])
    assert "under Dask's pause line (50% of the limit)" in str(refused.value)
    need = worker_minimum(model, early)
    assert need * 0.5 >= MIN_WORKER + model and f"a worker needs {format_size(need)} or more" in str(refused.value)
    never = MemoryLines(pause=None)   # never pauses: what it holds must stay under the kill line
    assert worker_minimum(model, never) < worker_minimum(model)
    small = [{"memory_limit": 1 * GiB, "nthreads": 1}]
    with pytest.raises(UserError, match=r"the line where its nanny kills it \(it never pauses\) \(95% of the limit\)"):
        plan_for_workers(small, trainer=0, worker_model_bytes=800 * MiB, lines=[never])


def test_an_existing_clusters_partitions_fit_under_the_first_line_its_workers_act_at():
    from lancetnic_flow.dataflow.plan import MemoryLines, plan_for_workers

    workers = [{"memory_limit": 2 * GiB, "nthreads": 1}, {"memory_limit": 2 * GiB, "nthreads": 1}]
    default = plan_for_workers(workers, trainer=0).partition
    assert default == MAX_PARTITION
    spills_soon = [MemoryLines(), MemoryLines(target=None, spill=0.22)]   # the second acts sooner: it sizes them
    assert plan_for_workers(workers, trainer=0, lines=spills_soon).partition == 2 * MiB
    assert plan_for_workers(workers, trainer=0, lines=[MemoryLines()] * 2).partition == default
