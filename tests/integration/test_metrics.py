"""One broker with ``metrics.listener``, real clients (confluent-kafka): the counters move, the
request log has per-stage times, the health endpoints answer, bad HTTP is refused."""

from __future__ import annotations

import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from odradek.testing import BrokerRunner

TOPIC = "metered"


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _k(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(labels.items()))


def test_counters_move_with_real_clients(
    odradek_broker_factory: Callable[..., BrokerRunner], caplog: pytest.LogCaptureFixture
) -> None:
    runner = odradek_broker_factory(overrides={"metrics.listener": "http://127.0.0.1:0", "num.partitions": "1"})
    assert runner.broker.metrics.bound is not None
    host, port = runner.broker.metrics.bound
    url = f"http://{host}:{port}"
    caplog.set_level(logging.DEBUG, logger="kafka.request.logger")
    producer = Producer({"bootstrap.servers": runner.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(50):
        producer.produce(TOPIC, value=b"v%03d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": runner.bootstrap_servers, "group.id": "metered-group", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    received = 0
    deadline = time.monotonic() + 30
    while received < 50 and time.monotonic() < deadline:
        received += len([m for m in consumer.consume(100, 0.5) if m.error() is None])
    assert received == 50
    consumer.commit(asynchronous=False)
    consumer.close()

    v = _scrape(url)
    assert v[_k("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC)] == 50
    assert v[_k("kafka_server_brokertopicmetrics_messagesin_total")] >= 50
    assert v[_k("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)] > 50 * 4
    assert v[_k("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC)] > 50 * 4
    assert v[_k("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=TOPIC)] >= 1
    produce_versions = [
        labels for (name, labels), n in v.items() if name == "kafka_network_requestmetrics_requests_total" and n > 0
    ]
    assert any(("request", "Produce") in labels for labels in produce_versions)
    assert any(("request", "FetchConsumer") in labels for labels in produce_versions)
    assert v[_k("kafka_network_requestmetrics_totaltimems_count", request="Produce")] >= 1
    assert v[_k("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")] > 0
    assert v[_k("kafka_log_log_logendoffset", topic=TOPIC, partition="0")] == 50
    assert v[_k("kafka_consumergroup_lag", consumergroup="metered-group", topic=TOPIC, partition="0")] == 0
    assert v[_k("kafka_controller_kafkacontroller_activecontrollercount")] == 1
    assert v[_k("kafka_server_replicamanager_underreplicatedpartitions")] == 0
    assert v[_k("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT", networkProcessor="0")] >= 0
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.request.logger"]
    assert any(line.startswith("Completed request:Produce(") and "remoteTime:" in line for line in lines)

    assert urllib.request.urlopen(url + "/health/live", timeout=5).status == 200
    assert urllib.request.urlopen(url + "/health/ready", timeout=5).read() == b"ready\n"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(url + "/metrics", method="POST", data=b"x"), timeout=5)
    assert err.value.code == 405
    with socket.create_connection((host, port), timeout=5) as s:  # an oversized head: 431, and closed
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
        answer = s.recv(100)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert urllib.request.urlopen(url + "/health/live", timeout=5).status == 200  # the listener still serves


def test_no_listener_no_counting(odradek_broker: Any) -> None:
    broker = odradek_broker.broker
    assert broker.metrics.bound is None and broker.topic_stats is None
