"""Helpers that build ``prometheus_client`` metric families the way the JMX exporter renders
Kafka's MBeans (``lowercaseOutputName: true`` in ``example_configs/kafka-2_0_0.yml``):

- a Yammer ``Meter``'s ``Count`` (names ending ``PerSec``) becomes a counter
  ``kafka_<domain>_<type>_<name without PerSec>_total``;
- a ``Gauge``'s ``Value`` becomes a gauge ``kafka_<domain>_<type>_<name>``;
- a ``Histogram``/``Timer`` becomes gauges ``kafka_<domain>_<type>_<name>{quantile="0.50"}`` ..
  ``{quantile="0.999"}`` plus ``kafka_<domain>_<type>_<name>_count`` (the exporter emits no
  ``_sum``; ``_count`` is rendered untyped so its name stays exactly ``..._count``).

Label names keep Kafka's case (``networkProcessor``, ``clientId``); metric names are lower case.
Pure functions over plain values: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.samples import Sample

from odradek.storage import TopicPartition

__all__ = ["LabelCache", "Quantiles", "RenderedGauge", "counter", "gauge", "histogram", "label_text"]


class Quantiles(Protocol):
    """A histogram's state: (quantile label, value) pairs and the samples ever recorded
    (:class:`~odradek.metrics.reservoir.Reservoir`)."""

    @property
    def count(self) -> int: ...

    def quantiles(self) -> list[tuple[str, float]]: ...


def counter(name: str, doc: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> CounterMetricFamily:
    """A counter family ``name`` (without ``_total``; the exposition adds it) whose samples may
    carry different label sets (Kafka's all-topics MBean has no ``topic`` key)."""
    family = CounterMetricFamily(name, doc)
    for labels, value in samples:
        family.add_sample(name + "_total", dict(labels), value)
    return family


def gauge(name: str, doc: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> GaugeMetricFamily:
    """A gauge family whose samples may carry different label sets."""
    family = GaugeMetricFamily(name, doc)
    for labels, value in samples:
        family.add_sample(name, dict(labels), value)
    return family


def histogram(name: str, doc: str, series: Iterable[tuple[Mapping[str, str], Quantiles]]) -> list[Metric]:
    """A Kafka histogram as the exporter renders it: the quantile gauges ``name`` and the
    untyped ``name_count``; one entry of ``series`` per label set."""
    quantiles = GaugeMetricFamily(name, doc)
    counts = UnknownMetricFamily(name + "_count", doc + " (samples recorded)")
    for labels, reservoir in series:
        for label, value in reservoir.quantiles():
            quantiles.add_sample(name, {**labels, "quantile": label}, value)
        counts.add_sample(name + "_count", dict(labels), float(reservoir.count))
    return [quantiles, counts]


def label_text(labels: Mapping[str, str]) -> str:
    """``{name="value",...}`` of the text format, values escaped (backslash, quote, newline)."""
    parts = []
    for k, v in labels.items():
        if "\\" in v or '"' in v or "\n" in v:
            v = v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append(f'{k}="{v}"')
    return "{" + ",".join(parts) + "}"


class LabelCache:
    """``{topic, partition}`` label sets and their rendered text per partition, kept between
    scrapes; cleared when it holds more than twice the partitions of the last scrape (deleted ones)."""

    def __init__(self) -> None:
        self._entries: dict[TopicPartition, tuple[dict[str, str], str]] = {}

    def get(self, tp: TopicPartition) -> tuple[dict[str, str], str]:
        found = self._entries.get(tp)
        if found is None:
            made = {"topic": tp.topic, "partition": str(tp.partition)}
            found = self._entries[tp] = (made, label_text(made))
        return found

    def trim(self, live: int) -> None:
        if len(self._entries) > 2 * live + 64:
            self._entries.clear()


class RenderedGauge(Metric):
    """A gauge family of many labelled integer samples kept as rows shared by several families:
    ``rows[i] = (label set, its rendered text, value_0, value_1, ...)`` and this family's value
    is item ``column`` of each row. :func:`odradek.metrics.exposition.generate_text` writes them
    without a Sample object each; ``samples`` builds the Sample objects for any other reader
    (``generate_latest``)."""

    def __init__(self, name: str, doc: str, rows: list[tuple[Any, ...]], column: int) -> None:
        super().__init__(name, doc, "gauge")
        self.rows = rows
        self.column = column

    def lines(self) -> list[str]:
        """The family's sample lines of the text format."""
        name = self.name
        column = self.column
        return [f"{name}{row[1]} {int(row[column])}\n" for row in self.rows]

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        return [Sample(self.name, row[0], float(row[self.column])) for row in self.rows]

    @samples.setter
    def samples(self, _value: list[Sample]) -> None:
        """Metric.__init__ sets an empty list; the rows are the samples."""
