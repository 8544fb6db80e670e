"""What the console's cluster pages show, read through the Kafka protocol (and ZooKeeper when given).

Each function takes the signed-in identity's :class:`AdminClient` and returns plain data for a
template; they reuse the CLI tools' requests (:mod:`odradek.cli.log_dirs`,
:mod:`odradek.cli.reassign_partitions`, :mod:`odradek.cli.transactions`,
:mod:`odradek.cli.acls_admin`, :mod:`odradek.cli.configs_users`) so a page and a command show the
same thing. Results are bounded by :data:`MAX_ROWS` rows per table.

Run on the console's client loop (:class:`odradek.console.bridge.ClientLoop`) only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odradek.cli import log_dirs, reassign_partitions, transactions
from odradek.cli.acls_admin import AdminAcls
from odradek.cli.common import CommandError
from odradek.cli.configs_users import scram_users
from odradek.client.admin import AdminClient, ConfigResource
from odradek.console.guard import check, visible
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import (
    ANY_ENTRY_FILTER,
    ANY_PATTERN_FILTER,
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
)

__all__ = [
    "MAX_ROWS",
    "Overview",
    "acls",
    "broker_configs",
    "brokers_and_log_dirs",
    "overview",
    "reassignments",
    "scram_user_list",
    "transaction_list",
]

MAX_ROWS = 1000
"""The most rows a cluster table renders; the page says when some were left out."""


@dataclass
class Overview:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]
    api_versions: list[tuple[int, str, int, int]]
    """(api key, Kafka's name, min version, max version) of the broker answered."""
    features: list[tuple[str, str, str]]
    """(feature, supported min..max, finalized level)."""
    topic_count: int = 0
    partition_count: int = 0
    under_replicated: list[tuple[str, int, list[int], list[int]]] = field(default_factory=list)
    offline: list[tuple[str, int, list[int]]] = field(default_factory=list)


async def overview(admin: AdminClient) -> Overview:
    """Brokers, controller, ApiVersions ranges and features, under-replicated and offline partitions."""
    described = await admin.describe_cluster()
    conn = await admin.cluster.any_connection()
    apis = []
    for key, (low, high) in sorted(conn.api_versions.items()):
        try:
            name = ApiKey(key).name
        except ValueError:
            name = str(key)
        apis.append((key, name, low, high))
    features: list[tuple[str, str, str]] = []
    if conn.version_for(ApiKey.API_VERSIONS, 0, 4) >= 3:
        rb = conn.builder(ApiKey.API_VERSIONS, 3, 4)
        answer: Any = await conn.send(rb(client_software_name="odradek-console", client_software_version="1"))
        finalized = {f.name: f"{f.min_version_level}..{f.max_version_level}" for f in answer.finalized_features}
        supported = {f.name: f"{f.min_version}..{f.max_version}" for f in answer.supported_features}
        features = [(n, supported.get(n, "-"), finalized.get(n, "-")) for n in sorted({*supported, *finalized})]
    topics = await admin.describe_topics(None)
    live = {b[0] for b in described.brokers}
    view = Overview(described.cluster_id, described.controller_id, described.brokers, apis, features)
    for name, topic in sorted(topics.items()):
        if topic.error_code != ErrorCode.none:
            continue
        view.topic_count += 1
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            view.partition_count += 1
            if p.leader < 0 or p.leader not in live:
                view.offline.append((name, p.partition, p.replicas))
            elif len(p.isr) < len(p.replicas):
                view.under_replicated.append((name, p.partition, p.replicas, p.isr))
    view.offline = view.offline[:MAX_ROWS]
    view.under_replicated = view.under_replicated[:MAX_ROWS]
    return view


async def brokers_and_log_dirs(admin: AdminClient) -> list[dict[str, Any]]:
    """Per live broker: id, host, port, rack and its log dirs (DescribeLogDirs: total size, partitions)."""
    described = await admin.describe_cluster()
    dirs: dict[int, list[dict[str, Any]]] = {}
    if await visible(admin, AclOperation.DESCRIBE, ResourceType.CLUSTER, [CLUSTER_NAME]):
        dirs = {d["broker"]: d["logDirs"] for d in await log_dirs.describe(admin, None, None)}
    out = []
    for broker_id, host, port, rack in described.brokers:
        shown = []
        for d in dirs.get(broker_id, []):
            parts = d["partitions"]
            shown.append(
                {
                    "path": d["logDir"],
                    "error": d["error"],
                    "partitions": len(parts),
                    "size": sum(p["size"] for p in parts),
                }
            )
        out.append(
            {
                "id": broker_id,
                "host": host,
                "port": port,
                "rack": rack,
                "controller": broker_id == described.controller_id,
                "log_dirs": shown,
            }
        )
    return out


async def broker_configs(admin: AdminClient, broker_id: int) -> list[tuple[str, str | None, int, bool]]:
    """(name, value, source, read only) of broker ``broker_id``'s configs; sensitive values hidden."""
    await check(admin, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    resource = ConfigResource.broker(broker_id)
    result = (await admin.describe_configs([resource]))[resource]
    if result.error is not None:
        raise result.error
    return [
        (c.name, None if c.is_sensitive else c.value, c.source, c.read_only)
        for c in sorted(result.configs.values(), key=lambda c: c.name)
    ]


async def reassignments(admin: AdminClient) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    """(topic, partition, replicas, adding, removing) of each move in progress."""
    await check(admin, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    moves = await reassign_partitions.ongoing(admin)
    return [(t, p, *moves[(t, p)]) for t, p in sorted(moves)][:MAX_ROWS]


async def transaction_list(admin: AdminClient) -> list[list[str]]:
    """[transactional id, coordinator, producer id, state] of every transaction, as ``kafka-transactions --list``."""
    rows = await transactions.list_transactions(admin)
    shown = await visible(admin, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, [r[0] for r in rows])
    return [r for r in rows if r[0] in shown][:MAX_ROWS]


async def acls(admin: AdminClient) -> tuple[list[AclBinding], str | None]:
    """Every ACL binding the identity may describe (DescribeAcls, ANY filter), and the broker's
    refusal when it has no authorizer (SECURITY_DISABLED) or the identity may not describe ACLs."""
    if not await visible(admin, AclOperation.DESCRIBE, ResourceType.CLUSTER, [CLUSTER_NAME]):
        return [], "CLUSTER_AUTHORIZATION_FAILED"
    try:
        bindings = await AdminAcls(admin).describe(AclBindingFilter(ANY_PATTERN_FILTER, ANY_ENTRY_FILTER))
    except CommandError as exc:
        return [], str(exc)
    return sorted(bindings, key=str)[:MAX_ROWS], None


async def scram_user_list(admin: AdminClient) -> list[tuple[str, list[tuple[str, int]]]]:
    """(user, [(mechanism, iterations)]) of every SCRAM user."""
    await check(admin, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    return sorted(await scram_users(admin))[:MAX_ROWS]
