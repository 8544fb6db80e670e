"""The ``/consumers`` znodes of the ZooKeeper-coordinated consumer (seed 004; Kafka's old consumer).

Re-exported by :mod:`odradek.metadata.znodes`. Pure functions: safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from odradek.metadata.codec import JsonReader, decode_long, dumps_json, now_ms

__all__ = [
    "ConsumerIdZNode",
    "ConsumerIdsZNode",
    "ConsumerOffsetZNode",
    "ConsumerOwnerZNode",
    "ConsumersZNode",
]


class ConsumersZNode:
    @staticmethod
    def path() -> str:
        return "/consumers"


class ConsumerIdsZNode:
    @staticmethod
    def path(group: str) -> str:
        return f"/consumers/{group}/ids"


class ConsumerIdZNode:
    """Ephemeral ``/consumers/<g>/ids/<consumer id>``:
    ``{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1452068227537"}``."""

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"/consumers/{group}/ids/{consumer_id}"

    @staticmethod
    def new_consumer_id(group: str, host: str) -> str:
        """Kafka's default id: ``<group>_<host>-<epoch ms>-<first 8 hex digits of a UUID>``."""
        return f"{group}_{host}-{now_ms()}-{uuid.uuid4().hex[:8]}"

    @staticmethod
    def encode(subscription: Mapping[str, int], pattern: str = "static", timestamp_ms: int | None = None) -> bytes:
        ts = now_ms() if timestamp_ms is None else timestamp_ms
        return dumps_json({"version": 1, "subscription": dict(subscription), "pattern": pattern, "timestamp": str(ts)})

    @staticmethod
    def decode(group: str, consumer_id: str, data: bytes) -> dict[str, int]:
        """The subscription: topic -> number of consumer threads."""
        r = JsonReader(ConsumerIdZNode.path(group, consumer_id), data)
        raw = r.as_object(r.required("subscription"), "'subscription'")
        return {topic: r.as_int(n, f"the thread count of {topic!r}") for topic, n in raw.items()}


class ConsumerOwnerZNode:
    """Ephemeral ``/consumers/<g>/owners/<t>/<p>``: text ``<consumer id>-<thread index>``."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/owners/{topic}/{partition}"


class ConsumerOffsetZNode:
    """Persistent ``/consumers/<g>/offsets/<t>/<p>``: the next offset to consume, decimal text."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode("ascii")

    @staticmethod
    def decode(group: str, topic: str, partition: int, data: bytes) -> int:
        return decode_long(ConsumerOffsetZNode.path(group, topic, partition), data)
