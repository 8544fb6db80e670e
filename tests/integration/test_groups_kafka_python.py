"""Consumer groups with kafka-python 3.0: rebalances through leave and crash, commits, resume."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, run_member_churn

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignor", ["roundrobin", "sticky"])
def test_three_members_share_partitions_through_leave_and_crash(odradek_broker_factory: Any, assignor: str) -> None:
    # kafka-python 3.0.12 loses a rejoin its leader starts when the subscribed topic's metadata
    # arrives after the leader's first assignment: the rejoin is never completed and heartbeats
    # stay disabled, so the leader's session expires. With Kafka's own default initial rebalance
    # delay (3000 ms; 1000 ms here) the first assignment comes after the metadata, as it does
    # against a Kafka broker.
    broker = odradek_broker_factory(overrides={"group.initial.rebalance.delay.ms": "1000"})
    timings = run_member_churn(broker.bootstrap_servers, "kafka-python", assignor, f"kp-{assignor}", "kp-churn")
    assert timings["after_kill"] < 6.0 + 5.0, timings


def test_commit_metadata_round_trips_and_consumer_resumes(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "kp-resume", 1)
    produce(b, "kp-resume", 30, partitions=1)
    tp = TopicPartition("kp-resume", 0)

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=b,
            group_id="kp-resumers",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            consumer_timeout_ms=10000,
        )

    first = consumer()
    first.subscribe(["kp-resume"])
    offsets = []
    for record in first:
        offsets.append(record.offset)
        if len(offsets) == 12:
            break
    first.commit({tp: OffsetAndMetadata(12, "kafka-python was here", -1)})
    assert first.committed(tp, metadata=True).metadata == "kafka-python was here"
    first.close()
    second = consumer()
    second.subscribe(["kp-resume"])
    assert next(iter(second)).offset == 12
    second.close()
