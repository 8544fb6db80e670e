"""Consumer groups with kafka-python 3.0: rebalances through leave and crash, commits, resume."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, run_member_churn

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignor", ["roundrobin", "sticky"])
def test_three_members_share_partitions_through_leave_and_crash(odradek_broker: BrokerRunner, assignor: str) -> None:
    b = odradek_broker.bootstrap_servers
    timings = run_member_churn(b, "kafka-python", assignor, f"kp-{assignor}", "kp-churn")
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
