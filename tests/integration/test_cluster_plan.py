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
