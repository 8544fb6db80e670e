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

Each module also holds its request class (the controller's immutable snapshot, see
:func:`frozen_states`) and that class's builder (:class:`RequestBuilder`: the request with what
encoding it needs besides, e.g. the brokers' endpoints), which the channel queues.

This package holds the helpers the three share. Pure functions: safe from any thread.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ZERO_UUID", "RequestBuilder", "by_topic", "endpoint_of", "frozen_states", "set_frozen", "sorted_partitions"]

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


class RequestBuilder(Protocol):
    """One request as the controller queued it, able to give its wire message at any version
    (Kafka's ``AbstractControlRequest.Builder``): what the channel holds, so a request is encoded
    again at another version when the connection that sends it needs one."""

    def build(self, version: int) -> Any:
        """The kio request message at ``version``."""
        ...


def frozen_states(states: Mapping[TopicPartition, PartitionState]) -> Mapping[TopicPartition, PartitionState]:
    """A read-only copy holding a copy of each state (its replica lists copied too)."""
    return MappingProxyType(
        {
            tp: dataclasses.replace(state, isr=copy.copy(state.isr), replicas=copy.copy(state.replicas))
            for tp, state in states.items()
        }
    )


def set_frozen(obj: Any, name: str, value: object) -> None:
    """Set a field of a frozen dataclass from its ``__post_init__``."""
    object.__setattr__(obj, name, value)
