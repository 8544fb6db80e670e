"""Replication throttles: which partitions, and the sampled rate."""

from __future__ import annotations

from odradek.replication.quota import UNLIMITED, ReplicationQuota, parse_throttled_replicas
from odradek.storage import TopicPartition


def test_throttled_replicas_name_this_broker() -> None:
    assert parse_throttled_replicas("*", 1) is None
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == {0, 2}
    assert parse_throttled_replicas("0:1, 1:2", 2) == {1}
    assert parse_throttled_replicas("", 1) == set()
    assert parse_throttled_replicas(None, 1) == set()


def test_only_named_partitions_of_a_limited_quota_are_throttled() -> None:
    quota = ReplicationQuota()
    assert quota.set_throttled("t", {0}) is True
    assert not quota.is_throttled(TopicPartition("t", 0))  # unlimited rate: nothing is throttled
    quota.rate = 100
    assert quota.is_throttled(TopicPartition("t", 0)) and not quota.is_throttled(TopicPartition("t", 1))
    assert quota.set_throttled("t", None) is True and quota.is_throttled(TopicPartition("t", 7))
    assert quota.set_throttled("t", set()) is True and not quota.is_throttled(TopicPartition("t", 0))
    assert quota.set_throttled("t", set()) is False


def test_the_rate_is_sampled_over_the_windows() -> None:
    now = [1000.0]
    quota = ReplicationQuota(rate=1000, samples=11, window_s=1.0, clock=lambda: now[0])
    quota.record(9_000)  # 9,000 bytes over the 10 s minimum span: 900 B/s
    assert quota.measured_rate() == 900 and not quota.is_exceeded()
    quota.record(2_000)
    assert quota.measured_rate() == 1100 and quota.is_exceeded()
    now[0] += 12  # the windows age out
    assert quota.measured_rate() == 0 and not quota.is_exceeded()
    quota.rate = UNLIMITED
    quota.record(10**12)
    assert not quota.is_exceeded()
