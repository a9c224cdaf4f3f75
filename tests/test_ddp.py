"""--ddp N: data-parallel training on Dask workers with torch.distributed (gloo).

Real ranks in real worker processes of the session's LocalCluster; no mocks."""
from __future__ import annotations

import json

import pytest

from conftest import make_config
from lancetnic_flow.ddp import share
from lancetnic_flow.errors import UserError
from lancetnic_flow.events import Events
from lancetnic_flow.predict import Predictor
from lancetnic_flow.shards import ShardInfo
from lancetnic_flow.trainer import train
from test_cli import cli


def _shards(rows: list[int]) -> list[ShardInfo]:
    return [ShardInfo(f"s{i}", "train", i, 0, n, n * 10, n * 80, 0) for i, n in enumerate(rows)]


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_shares_are_disjoint_cover_every_shard_and_hold_similar_rows(world):
    shards = _shards([900, 100, 500, 500, 300, 700, 200, 800])
    for epoch in range(3):
        parts = [share(shards, r, world, seed=5, epoch=epoch) for r in range(world)]
        urls = [s.url for p in parts for s in p]
        assert sorted(urls) == sorted(s.url for s in shards) and len(urls) == len(set(urls))
        rows = [sum(s.rows for s in p) for p in parts]
        assert max(rows) - min(rows) <= 900   # at most one partition apart
    # the deal follows the epoch's seeded order
    assert [s.url for s in share(shards, 0, 2, 5, 0)] != [s.url for s in share(shards, 0, 2, 5, 1)]


def test_ddp_two_ranks_reach_the_single_process_accuracy_with_equal_replicas(client, corpus4, tmp_path):
    single = train(make_config(corpus4, tmp_path, epochs=3, blocksize=256 * 1024), client=client)
    cfg = make_config(corpus4, tmp_path, epochs=3, blocksize=256 * 1024)
    cfg.training.ddp = 2
    seen: list[tuple[str, dict]] = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append((kind, e)) if kind in ("rank", "epoch", "ddp") else None)
    res = train(cfg, events, client=client)

    assert abs(res.metrics["val_accuracy"] - single.metrics["val_accuracy"]) <= 0.01
    ddp = res.metrics["ddp"]
    assert ddp["ranks"] == 2 and len(set(ddp["workers"])) == 2 and ddp["backend"] == "gloo"
    assert len(set(ddp["replica_digests"])) == 1   # every rank ended with the same weights
    ranks = {e["rank"]: e for k, e in seen if k == "rank"}
    assert set(ranks) == {0, 1} and {e["worker"] for e in ranks.values()} == set(ddp["workers"])
    assert [e["epoch"] for k, e in seen if k == "epoch"] == [1, 2, 3]
    # The ranks' epoch events carry the single-process names (val_precision, not val_macro_precision).
    assert all("val_precision" in e and "val_macro_precision" not in e for k, e in seen if k == "epoch")
    # The ranks' rows in the last epoch add up to every training row.
    last = {e["rank"]: e["rows"] for k, e in seen if k == "rank" and e.get("done") and e["epoch"] == 3}
    assert sum(last.values()) == res.metrics["rows"]["trained"]
    # The run folder is an ordinary run: it loads and predicts.
    p = Predictor(res.run).predict(["the match ended in a late goal"])
    assert p[0]["label"] in res.metrics["labels"]


def test_ddp_with_more_ranks_than_workers_is_a_user_error(client, small_corpus, tmp_path):
    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.training.ddp = 3
    with pytest.raises(UserError, match="--ddp 3 needs 3 Dask workers, the cluster has 2"):
        train(cfg, client=client)


@pytest.mark.slow
def test_train_ddp_through_the_cli_on_a_local_cluster(small_corpus, tmp_path):
    p = cli("train", small_corpus, "--ddp", "2", "--workers", "2", "--memory-budget", "3GiB", "--epochs", "2",
            "--blocksize", "128KiB", "--out", tmp_path / "runs", "--name", "d", "--json-log", tmp_path / "log.jsonl",
            cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.loads((tmp_path / "runs" / "d" / "metrics.json").read_text())
    assert m["ddp"]["ranks"] == 2 and m["val_accuracy"] > 0.5
    events = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert {e["rank"] for e in events if e["event"] == "rank"} == {0, 1}


def test_the_dashboard_shows_every_rank_and_their_rows_add_up():
    from lancetnic_flow.dashboard import DashboardState, render, status_line

    s = DashboardState(clock=lambda: 10.0)
    s.update("stage", {"stage": "training", "epoch": 1, "epochs": 2, "total_rows": 1000, "t": 1.0})
    for t, (rank, rows) in enumerate([(0, 200), (1, 150), (0, 400), (1, 380)]):
        s.update("rank", {"rank": rank, "world": 2, "worker": f"tcp://10.0.0.{rank + 1}:40000", "epoch": 1,
                          "epochs": 2, "rows": rows, "rows_per_s": 500.0, "loss": 0.5, "t": 2.0 + t})
    frame = render(s, width=100).plain
    assert "ranks (--ddp 2)" in frame
    assert "rank 0  tcp://10.0.0.1:40000  epoch 1/2 · rows 400" in frame
    assert "rank 1  tcp://10.0.0.2:40000  epoch 1/2 · rows 380" in frame
    assert s.rows == 780 and "rows 780/1,000" in status_line(s) and "ranks 0:400 1:380" in status_line(s)
