"""A consumer-group member in its own process, for the group tests (so it can be killed).

``python group_worker.py CLIENT BOOTSTRAP GROUP TOPIC [ASSIGNOR]`` with CLIENT one of
``confluent``, ``kafka-python``, ``aiokafka``. It subscribes, and for every record prints a JSON
line ``{"e": "record", "p": partition, "o": offset}``, commits ``offset + 1`` synchronously, then
prints ``{"e": "committed", "p": ..., "o": ...}``. Whenever its assignment changes it prints
``{"e": "assigned", "partitions": [...]}``. SIGTERM makes it close cleanly (LeaveGroup); SIGKILL
is the crash case. Session timeout 6 s, heartbeats every 500 ms.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import signal
import sys
from typing import Any

SESSION_MS = 6000
HEARTBEAT_MS = 500

stop = False


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"e": event, **fields}), flush=True)


def _on_term(*_: object) -> None:
    global stop
    stop = True


def run_confluent(bootstrap: str, group: str, topic: str, assignor: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": assignor,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])
    last: list[int] | None = None
    while not stop:
        msg = consumer.poll(0.1)
        current = sorted(tp.partition for tp in consumer.assignment())
        if current != last:
            last = current
            emit("assigned", partitions=current)
        if msg is None or msg.error():
            continue
        emit("record", p=msg.partition(), o=msg.offset())
        try:
            consumer.commit(offsets=[TopicPartition(topic, msg.partition(), msg.offset() + 1)], asynchronous=False)
        except Exception as exc:
            emit("commit_failed", p=msg.partition(), o=msg.offset(), error=str(exc))
        else:
            emit("committed", p=msg.partition(), o=msg.offset())
    consumer.close()
    emit("closed")


def run_kafka_python(bootstrap: str, group: str, topic: str, assignor: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata, TopicPartition

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        partition_assignment_strategy=[assignors[assignor]],
        metadata_max_age_ms=1000,
    )
    consumer.subscribe([topic])
    last: list[int] | None = None
    while not stop:
        batches = consumer.poll(timeout_ms=100)
        current = sorted(tp.partition for tp in consumer.assignment())
        if current != last:
            last = current
            emit("assigned", partitions=current)
        for tp, records in batches.items():
            for rec in records:
                emit("record", p=tp.partition, o=rec.offset)
                try:
                    consumer.commit({TopicPartition(topic, tp.partition): OffsetAndMetadata(rec.offset + 1, "", -1)})
                except Exception as exc:
                    emit("commit_failed", p=tp.partition, o=rec.offset, error=str(exc))
                else:
                    emit("committed", p=tp.partition, o=rec.offset)
    consumer.close()
    emit("closed")


async def run_aiokafka(bootstrap: str, group: str, topic: str, assignor: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        partition_assignment_strategy=(assignors[assignor],),
        metadata_max_age_ms=1000,
    )
    await consumer.start()
    last: list[int] | None = None
    while not stop:
        batches = await consumer.getmany(timeout_ms=100)
        current = sorted(tp.partition for tp in consumer.assignment())
        if current != last:
            last = current
            emit("assigned", partitions=current)
        for tp, records in batches.items():
            for rec in records:
                emit("record", p=tp.partition, o=rec.offset)
                try:
                    await consumer.commit({TopicPartition(topic, tp.partition): rec.offset + 1})
                except Exception as exc:
                    emit("commit_failed", p=tp.partition, o=rec.offset, error=str(exc))
                else:
                    emit("committed", p=tp.partition, o=rec.offset)
    await consumer.stop()
    emit("closed")


def main() -> None:
    client, bootstrap, group, topic = sys.argv[1:5]
    assignor = sys.argv[5] if len(sys.argv) > 5 else "range"
    signal.signal(signal.SIGTERM, _on_term)
    if os.environ.get("GROUP_WORKER_LOG"):
        import logging

        logging.basicConfig(filename=f"{os.environ['GROUP_WORKER_LOG']}-{os.getpid()}.log", level=logging.INFO)
        logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stack dump for failure reports
    if client == "confluent":
        run_confluent(bootstrap, group, topic, assignor)
    elif client == "kafka-python":
        run_kafka_python(bootstrap, group, topic, assignor)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, group, topic, assignor))
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main()
