"""Bounds on the work a well-formed request may ask for.

The decoder bounds every length by the bytes that arrived, but a few bytes can still ask for a
lot: a CreateTopics topic of 2**31 - 1 partitions, a Fetch that waits for days, a request whose
arrays (topics, partitions, configs, ACL filters, ...) hold hundreds of thousands of entries. The
keys in :data:`LIMIT_CONFIGS` (odradek's own namespace, except Kafka's ``fetch.max.bytes``) bound
them (the table also holds the threshold of :mod:`odradek.metrics.loop_watchdog`); everything is
checked before any allocation proportional to the number asked for.

- :func:`bound_request` runs in the request handler right after decoding, for every API: a request
  with more array entries in all than ``odradek.request.max.entries`` is handled as a frame over
  ``socket.request.max.bytes`` is (the connection is closed with a log line naming the key; Kafka
  has no per-API error for it), and so is a DescribeConfigs / AlterConfigs /
  IncrementalAlterConfigs / DeleteAcls / CreateAcls with more resources, filters or creations than
  ``odradek.request.max.resources`` (each entry costs a config table or a pass over the ACLs);
  a ``timeout`` / ``max_wait`` above ``odradek.request.max.timeout.ms`` is lowered to it; a
  consumer Fetch's ``max_bytes`` above ``fetch.max.bytes`` is lowered to it (Kafka's KIP-541 cap;
  a follower's is not).
- :class:`PartitionLimits` checks what a CreateTopics or CreatePartitions topic (or an
  auto-creation) adds, from the admin manager, before replicas are assigned:
  more than ``odradek.max.partitions.per.request`` new partitions is INVALID_PARTITIONS, and
  taking the cluster's partition replicas above ``odradek.max.partitions.per.broker`` times the
  live brokers (counting creations validated but not yet in the metadata cache) is
  POLICY_VIOLATION. Each message names the key and its value.

Runs on the broker's event loop (the partition budget is not thread-safe).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from odradek.configdef import ConfigDef, at_least
from odradek.errors import InvalidPartitionsError, PolicyViolationError
from odradek.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from odradek.server.metadata_cache import MetadataCache

MAX_PARTITIONS_PER_REQUEST = "odradek.max.partitions.per.request"
MAX_PARTITIONS_PER_BROKER = "odradek.max.partitions.per.broker"
MAX_ENTRIES = "odradek.request.max.entries"
MAX_RESOURCES = "odradek.request.max.resources"
MAX_TIMEOUT_MS = "odradek.request.max.timeout.ms"
FETCH_MAX_BYTES = "fetch.max.bytes"
LOOP_STALL_THRESHOLD_MS = "odradek.loop.stall.threshold.ms"

LIMIT_CONFIGS = (
    ConfigDef()
    .define(
        MAX_PARTITIONS_PER_REQUEST,
        "int",
        1000,
        "odradek's own key: partitions one topic of a CreateTopics or CreatePartitions request (or an "
        "auto-creation) may add; more is refused with INVALID_PARTITIONS before any replica is assigned.",
        at_least(1),
    )
    .define(
        MAX_PARTITIONS_PER_BROKER,
        "int",
        4000,
        "odradek's own key: partition replicas the cluster may hold per live broker. A CreateTopics, "
        "CreatePartitions or auto-creation that would take the cluster above this times the live brokers "
        "(creations under way included) is refused with POLICY_VIOLATION.",
        at_least(1),
    )
    .define(
        MAX_ENTRIES,
        "int",
        10000,
        "odradek's own key: array entries (topics, partitions, configs, ACL filters, ...) one request may "
        "carry, counted over all its arrays; a request with more closes the connection, as a frame over "
        "socket.request.max.bytes does.",
        at_least(1),
    )
    .define(
        MAX_RESOURCES,
        "int",
        100,
        "odradek's own key: resources of one DescribeConfigs, AlterConfigs or IncrementalAlterConfigs "
        "request, filters of one DeleteAcls, creations of one CreateAcls (each costs a whole config table "
        "or a pass over the ACLs); more closes the connection, as odradek.request.max.entries does.",
        at_least(1),
    )
    .define(
        MAX_TIMEOUT_MS,
        "int",
        300000,
        "odradek's own key: the longest a request's timeout (CreateTopics, Produce, DeleteRecords, ...) or "
        "Fetch max_wait is honoured; a larger value is handled as this one.",
        at_least(0),
    )
    .define(
        FETCH_MAX_BYTES,
        "int",
        55 * 1024 * 1024,
        "Largest response a consumer's Fetch is given: its max_bytes is lowered to this (a follower's is not).",
        at_least(1024),
    )
    .define(
        LOOP_STALL_THRESHOLD_MS,
        "int",
        100,
        "odradek's own key: the event loop watchdog logs every stall (one callback running without "
        "yielding) longer than this, with the request being handled, and exports the longest as "
        "odradek_eventloop_stall_max_seconds.",
        at_least(1),
    )
)


CONTROLLER_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA})
"""Requests only the controller sends (served on the inter-broker or control-plane listener, or to
principals with CLUSTER_ACTION): their size grows with the cluster, so no entry limit applies."""


class ConfigValues(Protocol):
    """What the limits read of a configuration: a ``KafkaConfig`` or a plain mapping of keys (this
    module does not import ``server.config``, which imports :data:`LIMIT_CONFIGS` from here)."""

    def get(self, key: str, default: Any = None, /) -> Any: ...


def setting(config: ConfigValues, key: str) -> Any:
    """``key``'s value in ``config``, or its default where ``config`` lacks it (a partial mapping)."""
    return config.get(key, LIMIT_CONFIGS.keys[key].default)


AMPLIFYING_ARRAYS: dict[int, str] = {
    ApiKey.DESCRIBE_CONFIGS: "resources",
    ApiKey.ALTER_CONFIGS: "resources",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "resources",
    ApiKey.DELETE_ACLS: "filters",
    ApiKey.CREATE_ACLS: "creations",
}
"""The top-level array of the APIs whose every entry costs far more than its bytes, bounded by
``odradek.request.max.resources``."""


class RequestTooLarge(Exception):
    """A request over ``odradek.request.max.entries``; the message names the key and the count."""


_ARRAY_FIELDS: dict[type, tuple[str, ...]] = {}


def _array_fields(cls: type) -> tuple[str, ...]:
    """Names of ``cls``'s fields that may hold a tuple of entries (kio's arrays), cached per class."""
    names = _ARRAY_FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        names = _ARRAY_FIELDS[cls] = tuple(f.name for f in fields if "tuple" in str(f.type))
    return names


def count_entries(value: Any, limit: int) -> int:
    """Array entries in a decoded request (nested arrays included), counting stops past ``limit``.

    Cost is at most ``limit`` entries visited: a request that is over is found without walking it all.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        for name in _array_fields(type(item)):
            entries = getattr(item, name)
            if not isinstance(entries, tuple):
                continue
            total += len(entries)
            if total > limit:
                return total
            stack.extend(e for e in entries if dataclasses.is_dataclass(e))
    return total


def _capped(value: datetime.timedelta, cap_ms: int) -> datetime.timedelta | None:
    cap = datetime.timedelta(milliseconds=cap_ms)
    return cap if value > cap else None


def entries_limit(api_key: int, config: ConfigValues) -> int | None:
    """The array entries a request of ``api_key`` may carry (None: the controller's APIs, unbounded):
    passed to the decoder, whose walk refuses a body over it before decoding anything."""
    return None if api_key in CONTROLLER_APIS else int(setting(config, MAX_ENTRIES))


def bound_request(api_key: int, request: Any, config: ConfigValues) -> Any:
    """``request`` with its time and size fields capped (see the module docstring).

    Raises :class:`RequestTooLarge` for a request over ``odradek.request.max.entries``. Returns
    ``request`` itself when nothing is capped (the common case: no copy).
    """
    if api_key in CONTROLLER_APIS:
        return request
    limit = setting(config, MAX_ENTRIES)
    entries = count_entries(request, limit)
    if entries > limit:
        raise RequestTooLarge(f"request of API key {api_key} carries more than {MAX_ENTRIES}={limit} array entries")
    amplifying = AMPLIFYING_ARRAYS.get(api_key)
    if amplifying is not None:
        resources = len(getattr(request, amplifying, None) or ())
        if resources > setting(config, MAX_RESOURCES):
            raise RequestTooLarge(
                f"request of API key {api_key} carries {resources} {amplifying}, more than "
                f"{MAX_RESOURCES}={setting(config, MAX_RESOURCES)}"
            )
    changes: dict[str, Any] = {}
    cap_ms = setting(config, MAX_TIMEOUT_MS)
    for name in ("timeout", "max_wait"):
        value = getattr(request, name, None)
        if isinstance(value, datetime.timedelta):
            capped = _capped(value, cap_ms)
            if capped is not None:
                changes[name] = capped
    replica_state = getattr(request, "replica_state", None)  # Fetch v15+
    replica_id = getattr(replica_state or request, "replica_id", -1)
    if api_key == ApiKey.FETCH and replica_id < 0:
        max_bytes = getattr(request, "max_bytes", None)
        cap = setting(config, FETCH_MAX_BYTES)
        if isinstance(max_bytes, int) and max_bytes > cap:
            changes["max_bytes"] = cap
    return dataclasses.replace(request, **changes) if changes else request


def cluster_replicas(cache: MetadataCache) -> int:
    """Partition replicas in the metadata cache over every topic."""
    return sum(len(state.replicas) for topic in cache.topics.values() for state in topic.partitions.values())


class PartitionLimits:
    """The partition limits of one broker (see the module docstring); event loop only."""

    def __init__(self, config: ConfigValues, cache: MetadataCache) -> None:
        self.per_request: int = setting(config, MAX_PARTITIONS_PER_REQUEST)
        self.per_broker: int = setting(config, MAX_PARTITIONS_PER_BROKER)
        self.cache = cache
        self.reserved = 0
        """Replicas of creations validated and under way, not yet counted by the metadata cache."""

    @contextmanager
    def reserve(self, topic: str, partitions: int, replication_factor: int, live_brokers: int) -> Iterator[None]:
        """Check that ``topic`` may add ``partitions`` partitions of ``replication_factor`` replicas
        and hold them in the budget for the ``with`` block.

        Raises InvalidPartitionsError (over ``odradek.max.partitions.per.request``) or
        PolicyViolationError (the cluster over ``odradek.max.partitions.per.broker`` x live brokers).
        """
        if partitions > self.per_request:
            raise InvalidPartitionsError(
                f"Topic '{topic}' asks for {partitions} new partitions, more than "
                f"{MAX_PARTITIONS_PER_REQUEST}={self.per_request}."
            )
        added = partitions * max(replication_factor, 1)
        allowed = self.per_broker * max(live_brokers, 1)
        held = cluster_replicas(self.cache) + self.reserved
        if held + added > allowed:
            raise PolicyViolationError(
                f"Topic '{topic}' would add {added} partition replicas to the cluster's {held}, more than "
                f"{MAX_PARTITIONS_PER_BROKER}={self.per_broker} x {live_brokers} live brokers."
            )
        self.reserved += added
        try:
            yield
        finally:
            self.reserved -= added
