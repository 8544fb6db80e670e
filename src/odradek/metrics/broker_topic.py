"""Kafka's ``BrokerTopicStats``: per-topic and all-topics meters of the produce and fetch paths.

MBeans ``kafka.server:type=BrokerTopicMetrics,name=<Name>PerSec[,topic=<t>]``, rendered by the
JMX exporter as ``kafka_server_brokertopicmetrics_<name>_total``, once without a ``topic`` label
(all topics) and once per topic, as Kafka registers them:

=========================  ===================================================================
``messagesin``             records appended to leaders: from producers (an idempotent retry
                           already in the log counts 0), and by the coordinators (offsets,
                           group and transaction state, transaction markers), as in Kafka
``bytesin``                bytes of those record batches
``bytesout``               record bytes of Fetch responses to consumers (not to followers)
``bytesrejected``          bytes of batches refused as too large (MESSAGE_TOO_LARGE)
``failedproducerequests``  partitions of Produce requests answered with an error
``failedfetchrequests``    partitions of Fetch requests answered with an error
``totalproducerequests``   partitions of Produce requests and coordinator appends (Kafka counts
                           per topic-partition append)
``totalfetchrequests``     partitions of Fetch requests (consumers and followers)
=========================  ===================================================================

plus ``replicationbytesout`` (all topics only): record bytes sent to followers
(``replicationbytesin`` comes from the replica manager, see :mod:`odradek.metrics.collectors`).

Counting is a list lookup and integer adds on plain ints (no locks, no prometheus_client calls on
the hot path); :meth:`BrokerTopicStats.collect` reads them at scrape time. ``remove_topic`` drops
a deleted topic's series (the all-topics totals keep what it counted), as Kafka does.
Not thread-safe: count and collect on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from odradek.metrics.families import counter

__all__ = ["METER_NAMES", "BrokerTopicStats"]

METER_NAMES: tuple[str, ...] = (
    "messagesin",
    "bytesin",
    "bytesout",
    "bytesrejected",
    "failedproducerequests",
    "failedfetchrequests",
    "totalproducerequests",
    "totalfetchrequests",
)
MESSAGES_IN, BYTES_IN, BYTES_OUT, BYTES_REJECTED, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH = range(8)

_DOCS = {
    "messagesin": "Records appended by producers (MessagesInPerSec)",
    "bytesin": "Bytes appended by producers (BytesInPerSec)",
    "bytesout": "Record bytes fetched by consumers (BytesOutPerSec)",
    "bytesrejected": "Bytes of produced batches rejected as too large (BytesRejectedPerSec)",
    "failedproducerequests": "Produce request partitions answered with an error (FailedProduceRequestsPerSec)",
    "failedfetchrequests": "Fetch request partitions answered with an error (FailedFetchRequestsPerSec)",
    "totalproducerequests": "Produce request partitions (TotalProduceRequestsPerSec)",
    "totalfetchrequests": "Fetch request partitions (TotalFetchRequestsPerSec)",
}


class BrokerTopicStats:
    """Per-topic and all-topics counters (see the module docstring); a ``prometheus_client``
    collector."""

    def __init__(self) -> None:
        self.all_topics: list[int] = [0] * len(METER_NAMES)
        self.topics: dict[str, list[int]] = {}
        self.replication_bytes_out = 0

    def _topic(self, topic: str) -> list[int]:
        found = self.topics.get(topic)
        if found is None:
            found = self.topics[topic] = [0] * len(METER_NAMES)
        return found

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        """One partition of a Produce request appended ``records`` records of ``nbytes`` bytes."""
        t = self._topic(topic)
        a = self.all_topics
        t[MESSAGES_IN] += records
        a[MESSAGES_IN] += records
        t[BYTES_IN] += nbytes
        a[BYTES_IN] += nbytes
        t[TOTAL_PRODUCE] += 1
        a[TOTAL_PRODUCE] += 1

    def produce_failed(self, topic: str, rejected_bytes: int = 0) -> None:
        """One partition of a Produce request failed; ``rejected_bytes`` when it was too large."""
        t = self._topic(topic)
        a = self.all_topics
        t[TOTAL_PRODUCE] += 1
        a[TOTAL_PRODUCE] += 1
        t[FAILED_PRODUCE] += 1
        a[FAILED_PRODUCE] += 1
        if rejected_bytes:
            t[BYTES_REJECTED] += rejected_bytes
            a[BYTES_REJECTED] += rejected_bytes

    def fetched(self, topic: str, nbytes: int, failed: bool, from_follower: bool) -> None:
        """One partition of a Fetch request answered with ``nbytes`` record bytes."""
        t = self._topic(topic)
        a = self.all_topics
        t[TOTAL_FETCH] += 1
        a[TOTAL_FETCH] += 1
        if failed:
            t[FAILED_FETCH] += 1
            a[FAILED_FETCH] += 1
        elif from_follower:
            self.replication_bytes_out += nbytes
        else:
            t[BYTES_OUT] += nbytes
            a[BYTES_OUT] += nbytes

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic's series."""
        self.topics.pop(topic, None)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        topics = sorted(self.topics.items())
        for index, meter in enumerate(METER_NAMES):
            samples: list[tuple[dict[str, str], float]] = [({}, self.all_topics[index])]
            samples.extend(({"topic": name}, values[index]) for name, values in topics)
            yield counter(f"kafka_server_brokertopicmetrics_{meter}", _DOCS[meter], samples)
        yield counter(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Record bytes fetched by followers (ReplicationBytesOutPerSec)",
            [({}, self.replication_bytes_out)],
        )
