"""The ``odradek`` source and exactly-once sink on a 3-broker cluster while leaders move.

One 3-broker cluster on a real ZooKeeper for the module (ZooKeeper session 6000 ms from
``odradek.testing.CLUSTER_DEFAULTS``; ``__consumer_offsets`` and ``__transaction_state`` with
replication factor 3, so groups and transactions outlive a broker). Topics have replication
factor 3 and ``min.insync.replicas=2``.

- A streaming query reads ``fo-in`` and writes it through the exactly-once sink to ``fo-out``;
  broker 1, the leader of ``fo-in`` partition 0 and of ``fo-out`` partition 0, is killed with
  SIGKILL in the middle of the stream (records keep arriving) and restarted. Spark runs in local
  mode, where one failed task fails the query, so the source and sink must ride out the leader
  change themselves. A read_committed consumer must then see every input value exactly once.
- A batch read of a topic whose only replica's broker stays down fails within a bound, with an
  error naming the partition, the broker and the options to raise.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import produce, read_committed

from odradek.cli.cluster import LocalCluster
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.spark, pytest.mark.zookeeper, pytest.mark.timeout(180)]

FIRST = 120
"""Input records before the kill."""
DURING = 120
"""Input records produced while the leader is down."""
PER_TRIGGER = 60


@pytest.fixture(scope="module")
def cluster(odradek_cluster_module: Any, zookeeper_server: ZooKeeperServer) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(
        3,
        zookeeper_connect=zookeeper_server.chroot_connect(),
        overrides={
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
        },
    )


def _create(cluster: LocalCluster, topic: str, assignment: list[list[int]], config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config=config)
    admin.create_topics([new])[topic].result(30)
    cluster.wait_until(
        lambda: _leaders(cluster, topic) == [replicas[0] for replicas in assignment],
        timeout_s=20,
        message=f"{topic} led by its preferred replicas",
    )


def _leaders(cluster: LocalCluster, topic: str) -> list[int] | None:
    """Leader of each partition of ``topic`` as a live broker's metadata says (-1: none)."""
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=2)
    except Exception:
        return None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        return None
    return [described.partitions[p].leader for p in sorted(described.partitions)]


def _rows_done(query: Any) -> int:
    """Input rows of the micro-batches the query has completed (its progress reports); a huge
    number once the query failed, so that waits end and the caller's assertion reports it."""
    if query.exception() is not None:
        return 1 << 62
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def test_a_stream_rides_out_the_input_and_output_leaders_dying(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    config = {"min.insync.replicas": "2"}
    _create(cluster, "fo-in", [[1, 2, 3], [2, 3, 1]], config)
    _create(cluster, "fo-out", [[1, 2, 3]], config)
    produce(bootstrap, "fo-in", ({"value": b"v%d" % i, "partition": i % 2} for i in range(FIRST)))
    frame = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "fo-in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .load()
        .select("value")
        .coalesce(1)
    )
    query = (
        frame.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "fo-out")
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        cluster.wait_until(lambda: _rows_done(query) >= PER_TRIGGER, timeout_s=60, message="a micro-batch written")
        assert query.exception() is None, query.exception()
        cluster.kill9(1)
        produce(bootstrap, "fo-in", ({"value": b"v%d" % i, "partition": i % 2} for i in range(FIRST, FIRST + DURING)))
        cluster.wait_until(
            lambda: (leaders := _leaders(cluster, "fo-in")) is not None and leaders[0] in (2, 3),
            timeout_s=30,
            message="fo-in-0 led by a surviving broker",
        )
        cluster.restart(1)
        total = FIRST + DURING
        cluster.wait_until(
            lambda: _rows_done(query) >= total,
            timeout_s=90,
            message=f"{total} records written through the leader change",
        )
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    seen = read_committed(bootstrap, "fo-out", 1, timeout=10, settle_s=0)
    assert len(seen) == FIRST + DURING
    assert sorted(seen) == sorted(b"v%d" % i for i in range(FIRST + DURING))


def test_a_partition_whose_only_broker_stays_down_fails_the_query_with_a_clear_error(
    spark: Any, cluster: LocalCluster
) -> None:
    bootstrap = cluster.bootstrap_servers
    _create(cluster, "fo-lonely", [[3]], {})
    produce(bootstrap, "fo-lonely", ({"value": b"x"} for _ in range(10)))
    cluster.kill9(3)  # stays down: the last test of the module
    cluster.wait_until(
        lambda: _leaders(cluster, "fo-lonely") == [-1], timeout_s=30, message="fo-lonely without a leader"
    )
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "fo-lonely")
            .option("fetchOffset.numRetries", "2")
            .option("fetchOffset.retryIntervalMs", "200")
            .option("kafka.default.api.timeout.ms", "2000")
            .load()
            .collect()
        )
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "fo-lonely-0: no leader, replicas broker 3 (not alive)" in message, message
    assert "after 2 attempt(s) 200 ms apart" in message, message
    assert "fetchOffset.numRetries" in message and "kafka.default.api.timeout.ms" in message, message
    assert elapsed < 20, elapsed  # 2 attempts x (2 s + 0.2 s), plus Spark's own planning
