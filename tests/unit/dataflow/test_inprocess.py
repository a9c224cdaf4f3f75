"""dataflow/inprocess.py: the thread-pool client answers the dataflow's
Dask calls (futures passed as arguments, as_completed, release), and
choose_where keeps small runs here, sends large or cluster-bound ones to a
cluster, and says why in words the run prints."""
from __future__ import annotations

import threading

import pytest

from lancetnic_flow.dataflow.inprocess import (IN_PROCESS_MAX_BYTES, InProcessClient, choose_where,
                                               in_process_peak, is_in_process)
from lancetnic_flow.dataflow.plan import GiB, MiB, plan_in_process, plan_memory
from lancetnic_flow.errors import UserError


def _merge(a, b):
    return a + b


def test_in_process_client_resolves_futures_given_as_arguments_in_a_merge_tree():
    # The fit pass's shape: leaves, then pairwise merges of earlier futures,
    # on fewer threads than tasks in the tree (a waiting task must not starve its input).
    with InProcessClient(2) as client:
        level = client.map(lambda x: [x], range(9))
        while len(level) > 1:
            nxt = [client.submit(_merge, level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        assert sorted(level[0].result(timeout=10)) == list(range(9))


def test_in_process_client_resolves_futures_inside_lists_and_keyword_arguments():
    with InProcessClient(1) as client:
        parts = [client.submit(lambda v=v: v * 10) for v in range(3)]
        total = client.submit(lambda xs, extra=0: sum(xs) + extra, parts, extra=client.submit(lambda: 5))
        assert total.result(timeout=10) == 35


def test_in_process_client_as_completed_yields_every_future_once_in_finish_order():
    gate = threading.Event()
    with InProcessClient(2) as client:
        slow = client.submit(lambda: gate.wait(5) and "slow")
        fast = client.submit(lambda: "fast")
        order = []
        for fut in client.as_completed([slow, fast]):
            order.append(fut.result())
            gate.set()
        assert order == ["fast", "slow"]


def test_in_process_client_raises_a_tasks_error_from_result():
    with InProcessClient(1) as client:
        fut = client.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            fut.result(timeout=10)


def test_in_process_client_runs_tasks_on_at_most_its_threads():
    seen, lock, peak = [0], threading.Condition(), [0]

    def task():
        with lock:
            seen[0] += 1
            peak[0] = max(peak[0], seen[0])
            lock.notify_all()
            # Until two ran at once: a second thread that waited 0.02 s for the CPU had never overlapped.
            lock.wait_for(lambda: peak[0] >= 2, timeout=10)
        threading.Event().wait(0.02)
        with lock:
            seen[0] -= 1

    with InProcessClient(2) as client:
        for f in [client.submit(task) for _ in range(8)]:
            f.result(timeout=10)
    assert peak[0] == 2


def test_in_process_client_has_no_workers_and_says_so():
    with InProcessClient(1) as client:
        assert is_in_process(client)
        assert client.scheduler_info()["workers"] == {}
        assert client.dashboard_link is None
    assert not is_in_process(object())


@pytest.fixture
def plan():
    return plan_memory(16 * GiB, workers=2)


def test_choose_where_keeps_small_inputs_in_this_process_and_says_why(plan):
    here, why = choose_where("auto", input_bytes=1 * MiB, needs_cluster=None, plan=plan, trainer_need=GiB // 2,
                             threads=2)
    assert here and why.startswith("in this process, 2 threads")
    assert "--run-on cluster" in why


def test_choose_where_sends_inputs_over_the_threshold_to_a_cluster(plan):
    here, why = choose_where("auto", input_bytes=IN_PROCESS_MAX_BYTES + 1, needs_cluster=None, plan=plan,
                             trainer_need=GiB // 2, threads=2)
    assert not here and "over" in why and "--run-on process" in why
    here, _ = choose_where("auto", input_bytes=IN_PROCESS_MAX_BYTES, needs_cluster=None, plan=plan,
                           trainer_need=GiB // 2, threads=2)
    assert here


def test_choose_where_sends_unknown_sizes_to_a_cluster(plan):
    here, why = choose_where("auto", input_bytes=None, needs_cluster=None, plan=plan, trainer_need=0, threads=2)
    assert not here and "not known" in why


def test_choose_where_sends_a_trainer_that_would_not_fit_beside_the_tasks_to_a_cluster(plan):
    whole = plan.trainer + plan.workers * plan.worker_limit
    here, why = choose_where("auto", input_bytes=MiB, needs_cluster=None, plan=plan,
                             trainer_need=whole - in_process_peak(plan, 2) + 1, threads=2)
    assert not here and "over the plan" in why


def test_choose_where_follows_an_explicit_choice_whatever_the_size(plan):
    assert choose_where("process", input_bytes=10 * GiB, needs_cluster=None, plan=plan, trainer_need=0,
                        threads=1)[0]
    assert not choose_where("cluster", input_bytes=1, needs_cluster=None, plan=plan, trainer_need=0, threads=1)[0]


def test_choose_where_gives_way_to_an_option_that_needs_a_cluster_and_names_it(plan):
    here, why = choose_where("auto", input_bytes=1, needs_cluster="--ddp trains on workers", plan=plan,
                             trainer_need=0, threads=2)
    assert not here and "--ddp" in why


def test_run_on_process_with_an_option_that_needs_a_cluster_is_a_user_error(plan):
    with pytest.raises(UserError, match="run_on process.*ddp trains") as e:   # to Python: run_on=, ddp=
        choose_where("process", input_bytes=1, needs_cluster="{training.ddp} trains on workers", plan=plan,
                     trainer_need=0, threads=2)
    assert e.value.said("cli")[0].startswith("--run-on process cannot hold this run: --ddp trains on workers")


def test_plan_in_process_gives_the_workers_share_to_the_trainer_and_keeps_the_budget(plan):
    here = plan_in_process(plan, 4)
    assert here.in_process and here.workers == 0 and here.threads == 4
    assert here.trainer == plan.trainer + plan.workers * plan.worker_limit
    assert here.reserve + here.trainer <= here.budget
    assert here.partition == plan.partition
    assert "featurising in this process (4 threads, no workers)" in here.describe()
