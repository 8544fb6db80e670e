"""Reservoir quantiles and the JMX exporter's rendering of Kafka's meters, gauges and histograms."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.request_metrics import API_NAMES, STAGES, RequestMetrics
from odradek.metrics.reservoir import KAFKA_QUANTILES, Reservoir, quantile_of_sorted
from odradek.protocol.api_keys import ApiKey


def _scrape(*collectors: Any) -> str:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return generate_latest(registry).decode()


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(labels.items()))


def test_quantile_follows_codahale_interpolation() -> None:
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert quantile_of_sorted(values, 0.5) == pytest.approx(5.5)  # pos 5.5: between 5 and 6
    assert quantile_of_sorted(values, 0.75) == pytest.approx(8.25)
    assert quantile_of_sorted(values, 0.99) == 10.0  # pos 10.89 >= n: the largest
    assert quantile_of_sorted(values, 0.0) == 1.0
    assert quantile_of_sorted([], 0.99) == 0.0
    with pytest.raises(ValueError):
        quantile_of_sorted(values, 1.5)


def test_reservoir_keeps_the_last_window_and_counts_everything() -> None:
    r = Reservoir(8)
    for v in range(100):
        r.update(float(v))
    assert r.count == 100
    assert r.snapshot() == [float(v) for v in range(92, 100)]
    labels = [label for label, _ in r.quantiles()]
    assert labels == ["0.50", "0.75", "0.95", "0.98", "0.99", "0.999"]
    assert dict(r.quantiles())["0.999"] == 99.0
    assert Reservoir(4).quantiles() == [(label, 0.0) for label, _ in KAFKA_QUANTILES]
    with pytest.raises(ValueError):
        Reservoir(1000)


def test_api_names_are_kafkas() -> None:
    assert API_NAMES[ApiKey.PRODUCE] == "Produce"
    assert API_NAMES[ApiKey.LIST_OFFSETS] == "ListOffsets"
    assert API_NAMES[ApiKey.API_VERSIONS] == "ApiVersions"
    assert API_NAMES[ApiKey.OFFSET_FOR_LEADER_EPOCH] == "OffsetForLeaderEpoch"
    assert API_NAMES[ApiKey.LEADER_AND_ISR] == "LeaderAndIsr"


def _times(total: float) -> tuple[float, float, float, float, float, float]:
    return (0.1, total - 0.4, 0.0, 0.1, 0.2, total)


def test_request_metrics_render_as_the_exporter_does() -> None:
    metrics = RequestMetrics(reservoir_size=16)
    for total in (1.0, 2.0, 3.0):
        metrics.record(ApiKey.PRODUCE, 9, False, _times(total))
    metrics.record(ApiKey.PRODUCE, 7, False, _times(4.0))
    metrics.record(ApiKey.FETCH, 12, True, _times(5.0))
    metrics.record(ApiKey.FETCH, 12, False, _times(6.0))
    text = _scrape(metrics)
    samples = _samples(text)
    assert samples[_key("kafka_network_requestmetrics_requests_total", request="Produce", version="9")] == 3
    assert samples[_key("kafka_network_requestmetrics_requests_total", request="Produce", version="7")] == 1
    assert samples[_key("kafka_network_requestmetrics_requests_total", request="Fetch", version="12")] == 2
    assert samples[_key("kafka_network_requestmetrics_requests_total", request="FetchFollower", version="12")] == 1
    assert samples[_key("kafka_network_requestmetrics_requests_total", request="FetchConsumer", version="12")] == 1
    assert samples[_key("kafka_network_requestmetrics_totaltimems_count", request="Produce")] == 4
    assert samples[_key("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.50")] == 2.5
    assert samples[_key("kafka_network_requestmetrics_totaltimems", request="FetchFollower", quantile="0.99")] == 5.0
    for stage in STAGES:
        assert f'kafka_network_requestmetrics_{stage}{{quantile="0.999",request="Produce"}}' in text
        assert f"# TYPE kafka_network_requestmetrics_{stage} gauge" in text
        assert f"# TYPE kafka_network_requestmetrics_{stage}_count untyped" in text


def test_broker_topic_metrics_with_and_without_topic() -> None:
    stats = BrokerTopicStats()
    stats.produced("a", 10, 1000)
    stats.produced("b", 5, 300)
    stats.produce_failed("a", rejected_bytes=2048)
    stats.produce_failed("b")
    stats.fetched("a", 700, failed=False, from_follower=False)
    stats.fetched("a", 900, failed=False, from_follower=True)
    stats.fetched("b", 0, failed=True, from_follower=False)
    samples = _samples(_scrape(stats))

    def value(meter: str, **labels: str) -> float:
        return samples[_key(f"kafka_server_brokertopicmetrics_{meter}_total", **labels)]

    assert value("messagesin") == 15 and value("messagesin", topic="a") == 10
    assert value("bytesin") == 1300 and value("bytesin", topic="b") == 300
    assert value("bytesrejected") == 2048 and value("bytesrejected", topic="b") == 0
    assert value("totalproducerequests") == 4 and value("failedproducerequests", topic="a") == 1
    assert value("bytesout") == 700  # the follower's bytes are replication, not BytesOut
    assert value("replicationbytesout") == 900
    assert value("totalfetchrequests") == 3 and value("failedfetchrequests", topic="b") == 1
    stats.remove_topic("a")
    after = _samples(_scrape(stats))
    assert _key("kafka_server_brokertopicmetrics_messagesin_total", topic="a") not in after
    assert after[_key("kafka_server_brokertopicmetrics_messagesin_total")] == 15


def _names(families: Iterable[Any]) -> set[str]:
    return {f.name for f in families}


def test_every_issue_meter_name_is_exported() -> None:
    names = _names(BrokerTopicStats().collect())
    for meter in (
        "messagesin",
        "bytesin",
        "bytesout",
        "bytesrejected",
        "failedproducerequests",
        "failedfetchrequests",
        "totalproducerequests",
        "totalfetchrequests",
    ):
        assert f"kafka_server_brokertopicmetrics_{meter}" in names


def test_generate_text_matches_prometheus_clients_exposition() -> None:
    from types import SimpleNamespace

    from odradek.metrics.collectors import LogCollector
    from odradek.metrics.exposition import generate_text
    from odradek.metrics.families import gauge
    from odradek.storage import TopicPartition

    logs = [
        SimpleNamespace(
            topic_partition=TopicPartition("orders", p),
            size_in_bytes=1000 + p,
            num_segments=1,
            log_start_offset=0,
            log_end_offset=p,
        )
        for p in range(3)
    ]
    log_collector = LogCollector(cast(Any, SimpleNamespace(all_logs=lambda: logs)))

    class Odd:
        def collect(self) -> Any:
            yield gauge("odd", 'help with "quotes"\nand a newline \\ ', [({"g": 'a"b\\c\nd'}, 1.5)])
            yield gauge("inf", "infinite", [({}, float("inf")), ({"x": "-"}, float("-inf"))])

    metrics = RequestMetrics(reservoir_size=4)
    metrics.record(ApiKey.PRODUCE, 9, False, (0.1, 0.2, 0.0, 0.0, 0.3, 0.6))
    stats = BrokerTopicStats()
    stats.produced("orders", 2, 20)
    collectors = (log_collector, Odd(), metrics, stats)
    ours = _samples_of(generate_text(_registry(*collectors)).decode())
    theirs = _samples_of(generate_latest(_registry(*collectors)).decode())
    assert ours == theirs
    assert ours[("kafka_log_log_size", frozenset({("topic", "orders"), ("partition", "2")}))] == 1002
    assert ours[("odd", frozenset({("g", 'a"b\\c\nd')}))] == 1.5
    text = generate_text(_registry(*collectors)).decode()
    assert "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter" in text
    assert "# TYPE kafka_network_requestmetrics_totaltimems_count untyped" in text
    # a second scrape reuses the cached label text and gives the same answer
    assert generate_text(_registry(*collectors)).decode() == text


def _registry(*collectors: Any) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return registry


def _samples_of(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
