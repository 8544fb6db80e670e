"""Compaction on three broker processes (real ZooKeeper): a follower down while the leader cleans.

A compacted topic with replicas [1, 2, 3] (led by 1) takes a first round of keyed data; broker 3
is killed with SIGKILL; more rounds and tombstones follow and the leader and broker 2 clean their
copies. Broker 3 comes back, fetches from its log end across the leader's gaps and rejoins the
ISR; after one more roll it cleans its own copy too. Then every replica's files, read with
``odradek dump-log``'s reader, hold each key once with its last value, a consumer reading the
leader sees the same, and every replica has the same log end offset. The files are not compared
byte for byte: each replica cleans on its own (docs/replication.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.storage.dump import dump_log
from odradek.testing_zk import ZooKeeperServer

from .compaction_support import (
    ROLL_KEY,
    Row,
    cleaner_checkpoint,
    keys_seen_more_than_once,
    last_values,
    produce,
    read_confluent,
    roll,
)

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "cdc"
SEGMENT_BYTES = 4096
KEYS = 80


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(
        3, zookeeper_connect=zookeeper_server.chroot_connect(), overrides={"log.cleaner.backoff.ms": "100"}
    )


def _isr(cluster: LocalCluster) -> list[int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    metadata = admin.list_topics(TOPIC, timeout=5)
    return sorted(metadata.topics[TOPIC].partitions[0].isrs)


def _replica_rows(cluster: LocalCluster, broker_id: int) -> list[Row]:
    """The records of broker ``broker_id``'s copy of ``cdc-0``, from its segment files."""
    rows: list[Row] = []
    for segment in sorted((Path(cluster.broker(broker_id).data_dir) / f"{TOPIC}-0").glob("*.log")):
        for line in dump_log(segment, print_data_log=True).lines:
            if not line.startswith("| offset: "):
                continue
            offset = int(line.split()[2])
            key = line.split(" key: ", 1)[1].split(" payload: ", 1)[0].encode()
            value = line.split(" payload: ", 1)[1].encode() if " payload: " in line else None
            rows.append((offset, key, value))
    return rows


def _checkpoint(cluster: LocalCluster, broker_id: int) -> int:
    return cleaner_checkpoint([Path(cluster.broker(broker_id).data_dir)]).get((TOPIC, 0), -1)


def test_a_follower_down_while_the_leader_cleans_catches_up_and_cleans_its_own_copy(cluster: LocalCluster) -> None:
    config = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]], config=config)])[TOPIC].result(30)
    cluster.wait_until(lambda: _isr(cluster) == [1, 2, 3], timeout_s=20, message="every replica in sync")
    bootstrap = cluster.bootstrap_servers
    expected: dict[bytes | None, bytes | None] = {}

    first = [(b"key-%03d" % k, b"v0-%03d" % k) for k in range(KEYS)]
    produce(bootstrap, TOPIC, first)
    expected.update(first)
    cluster.kill9(3)
    for round_ in range(1, 4):
        records = [(b"key-%03d" % k, b"v%d-%03d" % (round_, k)) for k in range(KEYS)]
        produce(bootstrap, TOPIC, records)
        expected.update(records)
    tombstones = [(b"key-%03d" % k, None) for k in range(0, KEYS, 8)]
    produce(bootstrap, TOPIC, tombstones)
    expected.update(tombstones)
    end = roll(bootstrap, TOPIC, SEGMENT_BYTES)
    cluster.wait_until(
        lambda: _checkpoint(cluster, 1) >= end and _checkpoint(cluster, 2) >= end,
        timeout_s=30,
        message="the leader and broker 2 cleaned their copies",
    )
    assert _checkpoint(cluster, 3) < end  # broker 3 was down meanwhile

    cluster.restart(3)
    cluster.wait_until(lambda: _isr(cluster) == [1, 2, 3], timeout_s=30, message="broker 3 back in the ISR")
    # one more roll replicated live: every copy's active segment now starts at or after `target`
    target = roll(bootstrap, TOPIC, SEGMENT_BYTES) - 1
    cluster.wait_until(
        lambda: all(_checkpoint(cluster, b) >= target for b in (1, 2, 3)),
        timeout_s=30,
        message="every replica cleaned its own copy",
    )

    tables = {}
    for broker_id in (1, 2, 3):
        rows = _replica_rows(cluster, broker_id)
        assert keys_seen_more_than_once(rows) == [], broker_id
        table = last_values(rows)
        table.pop(ROLL_KEY, None)
        tables[broker_id] = table
        assert max(offset for offset, _, _ in rows) == target + 1, broker_id
    assert tables[1] == tables[2] == tables[3] == expected
    from_leader = last_values(read_confluent(bootstrap, TOPIC))
    from_leader.pop(ROLL_KEY, None)
    assert from_leader == expected
