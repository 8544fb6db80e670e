"""Requests whose numbers ask for huge work, against a broker process: each is answered at once
with Kafka's error (or, over the entry limit, its connection is closed), the broker's RSS stays
bounded, its event loop never stalls, and it keeps serving."""

from __future__ import annotations

import datetime
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.errors import ErrorCode
from odradek.protocol.codec import api_schema
from odradek.protocol.messages import build, nested

from .limits_support import ANSWER_WITHIN_S, HUGE, call, create_topics_request
from .process_support import BrokerProcess, free_port

RSS_GROWTH_BOUND = 100 * 1024 * 1024
PER_BROKER = 400


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("limits") / "data"
    metrics_port = free_port()
    proc = BrokerProcess(
        data,
        {
            "metrics.listener": f"http://127.0.0.1:{metrics_port}",
            "odradek.max.partitions.per.broker": str(PER_BROKER),
            "auto.create.topics.enable": "false",
        },
    )
    proc.metrics_port = metrics_port  # type: ignore[attr-defined]
    proc.start()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
    for future in admin.create_topics([NewTopic("existing", 2, 1)]).values():
        future.result(30)
    yield proc
    proc.stop()


def _create_topics(broker: BrokerProcess, *topics: dict[str, Any], wait_s: float = ANSWER_WITHIN_S) -> list[Any]:
    return list(call(broker, 19, 7, create_topics_request(*topics), wait_s).topics)


def _create_partitions(broker: BrokerProcess, name: str, count: int) -> Any:
    schema = api_schema(37, 3)
    topic = build(nested(schema.request_type, "CreatePartitionsTopic"), name=name, count=count, assignments=None)
    request = build(schema.request_type, topics=(topic,), timeout=datetime.timedelta(seconds=30), validate_only=False)
    return call(broker, 37, 3, request).results[0]


def _metric(broker: BrokerProcess, name: str) -> float:
    port = broker.metrics_port  # type: ignore[attr-defined]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    assert match, name
    return float(match.group(1))


class _RssPeak:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker, self.base, self.peak = broker, broker.rss_bytes(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.broker.rss_bytes())
            self._stop.wait(0.05)

    def __enter__(self) -> _RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_huge_create_topics_are_refused_at_once_with_kafkas_errors(broker: BrokerProcess) -> None:
    with _RssPeak(broker) as rss:
        results, took = _timed(
            lambda: _create_topics(
                broker,
                {"name": "existing", "partitions": HUGE, "rf": 1},
                {"name": "fresh", "partitions": HUGE, "rf": 1},
                {"name": "too-many-replicas", "partitions": 1, "rf": 32000},
                {"name": "unknown-broker", "assign": {0: [0, 7]}},
                {"name": "over-the-cluster", "partitions": PER_BROKER + 1, "rf": 1},
            )
        )
    assert took < ANSWER_WITHIN_S
    errors = {r.name: (r.error_code, r.error_message) for r in results}
    assert errors["existing"][0] == ErrorCode.invalid_partitions
    assert "odradek.max.partitions.per.request=1000" in errors["existing"][1]
    assert errors["fresh"][0] == ErrorCode.invalid_partitions
    assert errors["too-many-replicas"][0] == ErrorCode.invalid_replication_factor
    assert errors["unknown-broker"][0] == ErrorCode.invalid_replica_assignment
    assert errors["over-the-cluster"][0] == ErrorCode.policy_violation
    assert f"odradek.max.partitions.per.broker={PER_BROKER}" in errors["over-the-cluster"][1]
    assert rss.peak - rss.base < RSS_GROWTH_BOUND
    assert _metric(broker, "odradek_eventloop_stall_max_seconds") < 0.5


def test_huge_create_partitions_is_refused_at_once(broker: BrokerProcess) -> None:
    with _RssPeak(broker) as rss:
        result, took = _timed(lambda: _create_partitions(broker, "existing", HUGE))
    assert took < ANSWER_WITHIN_S
    assert result.error_code == ErrorCode.invalid_partitions
    assert "odradek.max.partitions.per.request" in result.error_message
    over = _create_partitions(broker, "existing", PER_BROKER + 2)  # 2 + 400 new > 400 on one broker
    assert over.error_code == ErrorCode.policy_violation
    grown = _create_partitions(broker, "existing", 4)
    assert grown.error_code == ErrorCode.none
    assert rss.peak - rss.base < RSS_GROWTH_BOUND
    assert _metric(broker, "odradek_eventloop_stall_max_seconds") < 0.5


def test_a_request_over_the_entry_limit_closes_only_its_connection(broker: BrokerProcess) -> None:
    schema = api_schema(3, 12)
    topic = nested(schema.request_type, "MetadataRequestTopic")
    many = tuple(build(topic, name=f"t{i}", topic_id=None) for i in range(10001))
    request = build(
        schema.request_type, topics=many, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert call(broker, 3, 12, request) is None
    few = build(
        schema.request_type, topics=many[:3], allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    answer = call(broker, 3, 12, few)
    assert [t.error_code for t in answer.topics] == [ErrorCode.unknown_topic_or_partition] * 3
    assert "odradek.request.max.entries=10000" in Path(broker.log_path).read_text()


def test_many_partitions_are_created_without_stalling_the_loop(broker: BrokerProcess) -> None:
    """300 partitions at once: the controller's LeaderAndIsr opens 300 logs (about 3 ms each) in
    slices, so the loop never stalls for the whole of it."""
    results = _create_topics(broker, {"name": "wide", "partitions": 300, "rf": 1}, wait_s=30)
    assert results[0].error_code == ErrorCode.none
    assert _metric(broker, "odradek_eventloop_stall_max_seconds") < 0.5
