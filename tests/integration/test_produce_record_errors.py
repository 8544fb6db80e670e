"""Per-record errors of Produce (KIP-467) against a real broker: confluent-kafka's delivery reports
and raw ProduceRequests (v8+ ``record_errors`` / ``error_message``), as Kafka 3.9's LogValidator.

A keyless record on a compacted topic and a timestamp outside the topic's limits refuse the whole
batch; nothing is appended; compressed batches are checked after bounded decompression.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.protocol.records import LOG_APPEND_TIME, Record, build_batch
from odradek.protocol.records_compression import GZIP, LZ4, ZSTD
from odradek.testing import BrokerRunner

from .admin_support import create, module_broker, with_conn

COMPACTED_MESSAGE = "Compacted topic cannot accept message without key in topic partition {}-0."


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    yield from module_broker(tmp_path_factory, "record-errors-broker")


def _produce_raw(broker: BrokerRunner, topic: str, records: bytes, version: int = 11) -> Any:
    """One ProduceRequest (acks=1) of ``records`` to partition 0; the partition's response."""

    async def go(conn: KafkaConnection) -> Any:
        rb = RequestBuilder(0, version)
        partition = rb.make("PartitionProduceData", index=0, records=records)
        request = rb(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(rb.make("TopicProduceData", name=topic, partition_data=(partition,)),),
        )
        response = await conn.send(request)
        return response.responses[0].partition_responses[0]

    return with_conn(broker, go)


def _log_end_offset(broker: BrokerRunner, topic: str) -> int:
    async def go(conn: KafkaConnection) -> int:
        rb = RequestBuilder(2, 7)
        partition = rb.make("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1)
        response = await conn.send(
            rb(
                replica_id=-1,
                isolation_level=0,
                topics=(rb.make("ListOffsetsTopic", name=topic, partitions=(partition,)),),
            )
        )
        return int(response.topics[0].partitions[0].offset)

    return with_conn(broker, go)


def _deliver(broker: BrokerRunner, topic: str, key: bytes | None, compression: str = "none") -> KafkaError | None:
    """Produce one message with confluent-kafka; the delivery report's error (None when delivered)."""
    reports: list[KafkaError | None] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": compression,
            "message.send.max.retries": 0,
            "enable.idempotence": False,
        }
    )
    producer.produce(topic, value=b"value", key=key, on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(20) == 0
    assert len(reports) == 1
    return reports[0]


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_confluent_keyless_message_to_compacted_topic_is_invalid_record(broker: BrokerRunner, compression: str) -> None:
    topic = f"compacted-{compression}"
    create(broker, topic, **{"cleanup.policy": "compact"})
    error = _deliver(broker, topic, None, compression)
    assert error is not None and error.code() == KafkaError.INVALID_RECORD
    assert _log_end_offset(broker, topic) == 0
    assert _deliver(broker, topic, b"k", compression) is None
    assert _log_end_offset(broker, topic) == 1


def test_keyless_messages_to_an_ordinary_topic_are_appended(broker: BrokerRunner) -> None:
    create(broker, "plain-keyless")
    assert _deliver(broker, "plain-keyless", None) is None
    assert _deliver(broker, "plain-keyless", None, "zstd") is None
    assert _log_end_offset(broker, "plain-keyless") == 2


@pytest.mark.parametrize("codec", [0, GZIP, LZ4, ZSTD])
def test_raw_produce_reports_record_errors_and_appends_nothing(broker: BrokerRunner, codec: int) -> None:
    topic = f"compacted-raw-{codec}"
    create(broker, topic, **{"cleanup.policy": "compact,delete"})
    batch = build_batch(
        [Record(b"a", b"1"), Record(None, b"2"), Record(b"c", b"3"), Record(None, b"4")], compression=codec
    )
    part = _produce_raw(broker, topic, batch)
    assert part.error_code == ErrorCode.invalid_record
    assert part.base_offset == -1
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
        (1, COMPACTED_MESSAGE.format(topic)),
        (3, COMPACTED_MESSAGE.format(topic)),
    ]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{COMPACTED_MESSAGE.format(topic)}')" for i in (1, 3))
    assert part.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [{shown}]"
    )
    assert _log_end_offset(broker, topic) == 0
    ok = _produce_raw(broker, topic, build_batch([Record(b"a", b"1")], compression=codec))
    assert ok.error_code == 0 and ok.base_offset == 0 and list(ok.record_errors) == []


def test_produce_v7_gets_the_error_code_without_record_errors(broker: BrokerRunner) -> None:
    create(broker, "compacted-v7", **{"cleanup.policy": "compact"})
    part = _produce_raw(broker, "compacted-v7", build_batch([Record(None, b"x")]), version=7)
    assert part.error_code == ErrorCode.invalid_record
    assert _log_end_offset(broker, "compacted-v7") == 0


def test_timestamps_outside_before_and_after_limits_are_invalid_timestamp(broker: BrokerRunner) -> None:
    create(
        broker,
        "ts-limits",
        **{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"},
    )
    now = int(time.time() * 1000)
    records = [
        Record(b"k", b"ok", timestamp_ms=now),
        Record(b"k", b"old", timestamp_ms=now - 3_600_000),
        Record(b"k", b"future", timestamp_ms=now + 3_600_000),
    ]
    part = _produce_raw(broker, "ts-limits", build_batch(records, timestamp_ms=now))
    assert part.error_code == ErrorCode.invalid_timestamp
    assert part.error_message == "One or more records have been rejected due to invalid timestamp"
    errors = {e.batch_index: e.batch_index_error_message for e in part.record_errors}
    assert sorted(errors) == [1, 2]
    assert errors[1].startswith(f"Timestamp {now - 3_600_000} of message with offset 1 is out of range.")
    assert errors[2].startswith(f"Timestamp {now + 3_600_000} of message with offset 2 is out of range.")
    assert "The timestamp should be within [" in errors[1]
    assert _log_end_offset(broker, "ts-limits") == 0
    fine = _produce_raw(broker, "ts-limits", build_batch([Record(b"k", b"v")]))
    assert fine.error_code == 0


def test_deprecated_difference_max_ms_still_limits_timestamps(broker: BrokerRunner) -> None:
    create(broker, "ts-difference", **{"message.timestamp.difference.max.ms": "1000"})
    old = int(time.time() * 1000) - 86_400_000
    part = _produce_raw(broker, "ts-difference", build_batch([Record(b"k", b"v", timestamp_ms=old)]))
    assert part.error_code == ErrorCode.invalid_timestamp
    assert [e.batch_index for e in part.record_errors] == [0]


def test_producer_set_log_append_time_is_refused_on_log_append_time_topics(broker: BrokerRunner) -> None:
    create(broker, "lat-topic", **{"message.timestamp.type": "LogAppendTime"})
    batch = build_batch([Record(b"k", b"v"), Record(None, b"w")], timestamp_type=LOG_APPEND_TIME)
    part = _produce_raw(broker, "lat-topic", batch)
    assert part.error_code == ErrorCode.invalid_timestamp
    messages = [e.batch_index_error_message for e in part.record_errors]
    assert [e.batch_index for e in part.record_errors] == [0, 1]
    assert messages[0].startswith("Invalid timestamp type in message DefaultRecord(offset=0, timestamp=")
    assert messages[0].endswith(
        ", key=1 bytes, value=1 bytes). Producer should not set timestamp type to LogAppendTime."
    )
    assert _produce_raw(broker, "lat-topic", build_batch([Record(None, b"v")])).error_code == 0


def test_compressed_batch_expanding_past_the_bound_is_refused(broker: BrokerRunner) -> None:
    create(broker, "compacted-bomb", **{"cleanup.policy": "compact", "max.message.bytes": "100000"})
    # 8 MB of zeros compress to a few KB; 32 x max.message.bytes is 3.2 MB.
    bomb = build_batch([Record(b"k", bytes(8 * 1024 * 1024))], compression=ZSTD)
    assert len(bomb) < 100_000
    part = _produce_raw(broker, "compacted-bomb", bomb)
    assert part.error_code == ErrorCode.message_too_large
    assert "more than the limit of 3200000 bytes" in part.error_message
    assert _log_end_offset(broker, "compacted-bomb") == 0
    assert (
        _produce_raw(
            broker, "compacted-bomb", build_batch([Record(b"k", bytes(1_000_000))], compression=ZSTD)
        ).error_code
        == 0
    )
