"""The controller's inter-broker messages, one module per message, each owning its versions.

:mod:`.leader_and_isr`, :mod:`.update_metadata` and :mod:`.stop_replica` each hold, for one Kafka
API: ``API_KEY``, the versions odradek speaks (``MIN_VERSION``..``MAX_VERSION``, Kafka 3.9's
``validVersions``, the classes of :mod:`odradek.protocol.inter_broker_messages`), ``encode``
(the controller's request dataclass of :mod:`odradek.controller.requests` -> the kio wire message
at a version), ``decode`` (wire message at a version -> request dataclass), the response at a
version as the receiving broker answers it, and the per-partition errors read back from a
response. The controller's channel (:mod:`odradek.controller.channel`) encodes with them; the
broker's API modules (``server/apis/leader_and_isr.py`` …) decode with them, so each layout is
written once.

This package holds the helpers the three share. Pure functions: safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TypeVar

from odradek.metadata.znodes import BrokerInfo
from odradek.storage import TopicPartition

__all__ = ["ZERO_UUID", "by_topic", "endpoint_of", "sorted_partitions"]

ZERO_UUID = uuid.UUID(int=0)
"""The topic id of a topic sent without one (Kafka's ``Uuid.ZERO_UUID``)."""

V = TypeVar("V")


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Partitions ordered by (topic, partition), the order every message lists them in."""
    return sorted(partitions, key=lambda tp: (tp.topic, tp.partition))


def by_topic(values: Mapping[TopicPartition, V]) -> dict[str, list[tuple[TopicPartition, V]]]:
    """``values`` grouped by topic name, topics and partitions in sorted order."""
    grouped: dict[str, list[tuple[TopicPartition, V]]] = {}
    for tp in sorted_partitions(values):
        grouped.setdefault(tp.topic, []).append((tp, values[tp]))
    return grouped


def endpoint_of(info: BrokerInfo, listener: str) -> tuple[str, int] | None:
    """(host, port) of ``listener`` in a broker's registration, or None if it lacks it."""
    return info.endpoint_map().get(listener)
