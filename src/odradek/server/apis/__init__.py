"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx: RequestContext) -> response | bytes | None``.

The handler modules are imported on first use, not at start-up: each imports kio's generated
classes of the versions it serves, and a broker that never serves, say, DescribeAcls should not
pay for them (importing every handler cost about 0.4 s of a broker's start).

- :data:`ADVERTISED_VERSIONS` is the (``MIN_VERSION``, ``MAX_VERSION``) of every served API key,
  known without importing a handler: the request handler checks a request's version against it
  and ApiVersions answers from it. A unit test imports every handler and holds the table to the
  modules' constants.
- :func:`handler` returns an API key's module, importing it the first time;
  :data:`LOADED_HANDLERS` holds the ones imported so far (the request path's dict lookup).
  The module of API key ``k`` is named after Kafka's API in snake case
  (``ApiKey(k).name.lower()``: ``produce``, ``describe_acls``, ...).
- ``API_HANDLERS`` (API key -> module, every handler) imports them all on first access, for
  tools and tests that walk the registry; ``docs/compatibility.md`` is checked against it by a
  unit test.

Advertised versions are one Kafka release: every served API's maximum is Kafka 3.9's
(``KAFKA_3_9_VERSIONS``, from 3.9's message specs; clients infer the broker's release from the
maxima), but for the Kafka 4 group APIs (``KAFKA_4_GROUP_VERSIONS``: KIP-848's consumer group
APIs, KIP-932's share group APIs and the share coordinator's state APIs), which 3.9 does not have.
Minima are Kafka 3.9's too, except where the protocol library has no codec for the
oldest versions: there they are Kafka 4.0's (KIP-896 removed Produce v0-2, Fetch v0-3,
CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0, DescribeLogDirs v0,
DescribeAcls v0, CreateAcls v0, DeleteAcls v0, OffsetForLeaderEpoch v0-1, WriteTxnMarkers v0 and
AlterReplicaLogDirs v0). Versions 4.0 removed that odradek defines itself
(:mod:`odradek.protocol.legacy_messages`: OffsetCommit v0-1, OffsetFetch v0, ListOffsets v0;
:mod:`odradek.protocol.token_messages`: the four delegation token APIs' v0) keep 3.9's minimum.
A unit test holds the registry to this table.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from odradek.protocol.api_keys import ApiKey

KAFKA_RELEASE = "3.9"
KAFKA_3_9_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CREATE_DELEGATION_TOKEN: (0, 3),
    ApiKey.RENEW_DELEGATION_TOKEN: (0, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 3),
}
"""(min, max) of each API Kafka 3.9's ZooKeeper-mode broker serves that odradek serves too."""

KAFKA_4_0_MINIMA: dict[int, int] = {
    ApiKey.PRODUCE: 3,
    ApiKey.FETCH: 4,
    ApiKey.CREATE_TOPICS: 2,
    ApiKey.DELETE_TOPICS: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.DESCRIBE_CONFIGS: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
}
"""Where odradek's minimum is above 3.9's: Kafka 4.0's minimum (KIP-896)."""

KAFKA_4_GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
}
"""(min, max) of the Kafka 4.x group APIs odradek serves (KIP-848 consumer groups, KIP-932 share
groups and the share coordinator's state APIs), from Kafka 4.2's message specs (the share APIs'
v0 was early access, removed in 4.1); Kafka serves them in KRaft mode only, odradek beside its
ZooKeeper-era APIs."""

SERVED_VERSIONS: dict[int, tuple[int, int]] = {**KAFKA_3_9_VERSIONS, **KAFKA_4_GROUP_VERSIONS}
"""Every API odradek may serve, with the Kafka release's (min, max) it follows."""

ADVERTISED_VERSIONS: dict[int, tuple[int, int]] = {
    key: (KAFKA_4_0_MINIMA.get(key, low), high) for key, (low, high) in sorted(SERVED_VERSIONS.items())
}
"""API key -> (``MIN_VERSION``, ``MAX_VERSION``) of its handler: every API odradek serves, in key
order, known without importing the handlers (ApiVersions and the request handler's version check
read it)."""

LOADED_HANDLERS: dict[int, ModuleType] = {}
"""The handler modules imported so far, by API key (filled by :func:`handler`; read on every
request). Only ever grows; a race between two threads importing the same handler stores the same
module twice."""


def handler_module_name(api_key: int) -> str:
    """The dotted name of the module that serves (or would serve) ``api_key``; ValueError for a
    number that is no :class:`~odradek.protocol.api_keys.ApiKey`."""
    return f"{__name__}.{ApiKey(api_key).name.lower()}"


def handler(api_key: int) -> ModuleType:
    """The handler module of a served API key, imported on first use.

    Raises KeyError for an API key not in :data:`ADVERTISED_VERSIONS`. Safe from any thread (the
    import system serialises imports, and the server modules import no cycle); on the broker's event
    loop the first call for an API blocks the loop for that module's import, a few milliseconds
    (handlers import no kio message classes: all of them load in about 0.07 s)."""
    module = LOADED_HANDLERS.get(api_key)
    if module is None:
        if api_key not in ADVERTISED_VERSIONS:
            raise KeyError(api_key)
        module = importlib.import_module(handler_module_name(api_key))
        LOADED_HANDLERS[api_key] = module
    return module


def all_handlers() -> dict[int, ModuleType]:
    """API key -> handler module for every served API, importing any not loaded yet."""
    return {key: handler(key) for key in ADVERTISED_VERSIONS}


def __getattr__(name: str) -> dict[int, ModuleType]:
    """``API_HANDLERS``: :func:`all_handlers`, built on first access and kept (PEP 562)."""
    if name == "API_HANDLERS":
        handlers = all_handlers()
        globals()["API_HANDLERS"] = handlers
        return handlers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
