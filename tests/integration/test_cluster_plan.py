"""The memory plan of an existing cluster (dataflow/cluster.py): its worker
limits and threads are read from its scheduler, and a worker still starting is
waited for. The plan's arithmetic is tests/unit/dataflow/test_plan.py's."""
from __future__ import annotations

import pytest

from lancetnic_flow.dataflow.cluster import plan_for_existing
from lancetnic_flow.dataflow.plan import TRAINER_BASE, GiB, MiB


def test_plan_for_existing_reads_worker_limits_and_threads_from_the_cluster(client):
    plan = plan_for_existing(client, trainer=TRAINER_BASE)
    assert plan.external
    assert plan.workers == 2
    assert plan.threads == 1
    assert plan.worker_limit == int(1.5 * GiB)
    assert plan.in_flight == 4  # 2 × total threads
    assert 1 * MiB <= plan.partition <= 64 * MiB
    assert "existing cluster: 2 workers" in plan.describe()
    assert plan_for_existing(client, trainer=TRAINER_BASE, blocksize=5 * MiB).partition == 5 * MiB


def test_an_existing_cluster_whose_worker_is_still_starting_is_waited_for():
    """A worker arriving a moment late (starting, or restarted by its nanny) is not 'no workers'."""
    import logging
    import threading

    from distributed import Client, LocalCluster

    from lancetnic_flow.dataflow.cluster import plan_for_existing
    from lancetnic_flow.errors import UserError

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        with pytest.raises(UserError, match="has no workers"):
            plan_for_existing(client, trainer=1 << 28, wait=0.5)
        threading.Timer(1.0, lambda: cluster.scale(1)).start()
        plan = plan_for_existing(client, trainer=1 << 28, wait=30)
        assert plan.workers == 1 and plan.external


def test_the_workers_asked_for_while_the_scheduler_connection_drops_are_the_clusters_not_none(client):
    """A dropped connection is not a cluster that lost its workers. Dask's
    ``scheduler_info()`` answers from its cache while the connection is down,
    and the cache its periodic refresh keeps lists no worker: the --ddp driver
    read that as its rank 0's worker gone, placed the ranks again and refused
    the run ("--ddp 1 needs 1 Dask workers, the cluster has 0")."""
    import time

    from distributed import Client

    from lancetnic_flow.dataflow.cluster import workers_info
    from lancetnic_flow.training.ddp.driver import gone_workers

    from servers import DroppingProxy

    host, port = client.scheduler.address.removeprefix("tcp://").rsplit(":", 1)
    expected = sorted(workers_info(client))
    with DroppingProxy(host, int(port)) as proxy, Client(f"tcp://127.0.0.1:{proxy.port}", timeout="30s") as c:
        assert sorted(workers_info(c)) == expected
        time.sleep(2.5)   # Dask's periodic refresh of its cache (every 2 s) has run
        proxy.drop(2.0)
        time.sleep(0.3)
        assert gone_workers(c, expected) == []
        assert sorted(workers_info(c)) == expected


def test_an_existing_clusters_own_memory_lines_are_read_from_its_workers_and_plan_the_run(client):
    """Someone else's workers configured to pause at 50 % and never target: the plan, the --ddp
    preflight and tune's trial room counted Dask's defaults (pause at 80 %), so a loaded run or a
    rank fitted under a line the worker never had, and the worker paused for good."""
    import logging

    import dask
    from distributed import Client, LocalCluster

    from lancetnic_flow.dataflow.cluster import memory_lines
    from lancetnic_flow.dataflow.plan import DEFAULT_LINES, MemoryLines
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.training.ddp.driver import preflight
    from lancetnic_flow.training.tune import worker_slots

    assert set(memory_lines(client).values()) == {DEFAULT_LINES}   # this project's LocalCluster: Dask's defaults
    with dask.config.set({"distributed.worker.memory.pause": 0.5, "distributed.worker.memory.target": False}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit="1.2GiB",
                               dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        with Client(cluster) as c:
            (addr, lines), = memory_lines(c).items()
            assert lines == MemoryLines(target=None, spill=0.7, pause=0.5, terminate=0.95)
            with pytest.raises(UserError, match=r"under Dask's pause line \(50% of the limit\)"):
                plan_for_existing(c, trainer=TRAINER_BASE, worker_model_bytes=512 * MiB)
            with pytest.raises(UserError, match="a rank needs about 700.0 MiB"):
                preflight(c, 1, 700 * MiB)   # under Dask's default pause line it would have been placed
            assert preflight(c, 1, 500 * MiB) == [addr]
            _, room = worker_slots(c)
            assert room == int(1.2 * GiB * 0.5) - TRAINER_BASE
    finally:
        cluster.close()
