"""The suite's fault campaign (3 brokers, seeded mixed schedule, about two minutes) and the fixed
unclean-election schedule, whose lost writes prove the checker finds them.

Each starts its own ZooKeeper and brokers behind the fault proxy (chaos/cluster.py) on
127.0.0.11-13; the reports land in the test's tmp dir (paths in the failure message).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chaos.campaign import CampaignConfig, run_campaign, unclean_election
from chaos.report import write_report

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(420)]

SEED = int(os.environ.get("ODRADEK_CHAOS_SEED", "24"))
MINUTES = float(os.environ.get("ODRADEK_CHAOS_MINUTES", "1.0"))


def test_mixed_campaign_finds_no_anomaly(tmp_path: Path) -> None:
    config = CampaignConfig(minutes=MINUTES, seed=SEED, brokers=3, base_dir=tmp_path, hold_s=7.0, rate=60.0)
    result = run_campaign(config)
    paths = write_report(result, tmp_path / "report")
    counts = {k: v for k, v in result.check.counts.items() if v}
    assert result.valid, f"anomalies {counts} (seed {SEED}); see {paths['text']}"
    assert len(result.history.faults) >= 4
    stats = result.check.stats
    assert stats["acknowledged"] > 1000
    assert stats["acknowledged_and_read"] == stats["acknowledged"]
    polled = result.history.records_polled_by()
    assert polled.get("c0", 0) + polled.get("c1", 0) > 0  # the Kafka group consumed under faults
    assert polled.get("z0", 0) + polled.get("z1", 0) > 0  # and so did the ZooKeeper group
    assert sum(polled.get(f"cp{i}", 0) for i in range(3)) > 0  # and the consumer-protocol group
    assert any(a.kind == "assigned" for a in result.history.assignments)
    assert stats["share"]["acks"].get("accept", {}).get("confirmed", 0) > 0  # the share group consumed
    assert result.history.offsets, "no committed offsets observed"
    assert any(t.outcome == "committed" for t in result.history.txns)
    assert paths["timeline"].stat().st_size > 10_000


def test_unclean_election_loses_acknowledged_writes(tmp_path: Path) -> None:
    """Followers killed (ISR shrinks to the leader), writes acknowledged by the leader alone
    (min.insync.replicas=1), the leader killed, a stale follower elected outside the ISR, the old
    leader back: the records it acknowledged are overwritten, which the checker must report."""
    result = unclean_election(CampaignConfig(seed=SEED, base_dir=tmp_path, rate=100.0))
    paths = write_report(result, tmp_path / "report")
    counts = result.check.counts
    assert counts["lost-write"] > 0, f"no lost write found; see {paths['text']}"
    assert counts["inconsistent-offsets"] > 0  # the lost records' offsets hold the stale leader's writes
    assert [f.kind for f in result.history.faults] == [
        "kill-followers",
        "kill-leader",
        "start-stale-replica",
        "restart-old-leader",
    ]
