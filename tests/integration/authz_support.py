"""Helpers of the authorization tests: brokers with two PLAINTEXT listeners (EXTERNAL for the
clients, first so Metadata advertises it; INTERNAL for the controller), ACLs seeded in the
broker's embedded store before it starts and granted on its running authorizer.

Every connection is ``User:ANONYMOUS`` on PLAINTEXT, so the tests' ACLs name that principal; the
broker's own controller requests come as ANONYMOUS too, hence the seeded CLUSTER_ACTION.
:func:`start_scram_acl_broker` starts a broker whose clients authenticate with SCRAM-SHA-256 on
SASL_PLAINTEXT instead, users and ACLs seeded before it starts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from odradek.client.connection import KafkaConnection
from odradek.controller.messages import update_metadata
from odradek.controller.requests import UpdateMetadataRequest
from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS, AclAuthorizer
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.scram_credentials import upsert_password_credentials
from odradek.protocol.inter_broker_messages import request_class
from odradek.protocol.messages import nested
from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.server.runner import BrokerRunner

ANONYMOUS = "User:ANONYMOUS"
TWO_LISTENERS = {
    "listeners": "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}
WITH_AUTHORIZER = {
    **TWO_LISTENERS,
    "authorizer.class.name": ACL_AUTHORIZER_CLASS,
    "auto.create.topics.enable": "false",
}


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    deny: bool = False,
    prefixed: bool = False,
    principal: str = ANONYMOUS,
    host: str = "*",
) -> AclBinding:
    pattern = ResourcePattern(resource_type, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(pattern, AccessControlEntry(principal, host, operation, permission))


def cluster_acl(operation: AclOperation, **kwargs: Any) -> AclBinding:
    return acl(ResourceType.CLUSTER, CLUSTER_NAME, operation, **kwargs)


CLUSTER_ACTION = cluster_acl(AclOperation.CLUSTER_ACTION)
"""The broker's own controller requests (PLAINTEXT: ANONYMOUS) need it."""


def seed_acls(data_dir: str, bindings: list[AclBinding]) -> None:
    """Write ``bindings`` into the embedded store a broker on ``data_dir`` will open."""

    async def seed() -> None:
        store = EmbeddedStore(os.path.join(data_dir, "metadata"))
        authorizer = AclAuthorizer(store.session())
        await authorizer.start()
        results = await authorizer.create_acls(bindings)
        assert all(r.error_code == 0 for r in results), results
        await authorizer.close()
        await store.close()

    os.makedirs(data_dir, exist_ok=True)
    asyncio.run(seed())


def seed_scram_users(data_dir: str, users: Mapping[str, str]) -> None:
    """Write SCRAM-SHA-256 credentials (4096 iterations) of ``users`` (name to password) into the
    embedded store a broker on ``data_dir`` will open."""

    async def seed() -> None:
        store = EmbeddedStore(os.path.join(data_dir, "metadata"))
        for user, password in users.items():
            await upsert_password_credentials(store.session(), user, {"SCRAM-SHA-256": (password, 4096)})
        await store.close()

    os.makedirs(data_dir, exist_ok=True)
    asyncio.run(seed())


def start_scram_acl_broker(data_dir: str, users: Mapping[str, str], bindings: list[AclBinding]) -> BrokerRunner:
    """A started broker on ``data_dir`` whose clients' listener is SASL_PLAINTEXT (SCRAM-SHA-256,
    ``users`` seeded) and whose controller talks on a PLAINTEXT ``INTERNAL`` listener; Kafka's
    AclAuthorizer with ``bindings`` seeded, ``super.users=User:admin``, no automatic topic creation
    and no delay after a failed authentication. The caller stops it."""
    seed_scram_users(data_dir, users)
    seed_acls(data_dir, bindings)
    return BrokerRunner(
        data_dir,
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "authorizer.class.name": ACL_AUTHORIZER_CLASS,
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
            "connection.failed.authentication.delay.ms": "0",
        },
    ).start()


def start_with_acls(
    factory: Callable[..., BrokerRunner], data_dir: str, bindings: list[AclBinding], **overrides: str
) -> BrokerRunner:
    seed_acls(data_dir, [CLUSTER_ACTION, *bindings])
    return factory(data_dir, {**WITH_AUTHORIZER, **overrides})


def grant(runner: BrokerRunner, *bindings: AclBinding) -> None:
    """Add ACLs through the running broker's authorizer (effective at once on this broker)."""
    authorizer = runner.broker.authorizer if runner.broker else None
    assert authorizer is not None
    results = runner.call(lambda: authorizer.create_acls(list(bindings)))
    assert all(r.error_code == 0 for r in results), results


def revoke(runner: BrokerRunner, *bindings: AclBinding) -> None:
    authorizer = runner.broker.authorizer if runner.broker else None
    assert authorizer is not None
    filters = [
        AclBindingFilter(
            b.pattern.to_filter(),
            AccessControlEntryFilter(b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission_type),
        )
        for b in bindings
    ]
    runner.call(lambda: authorizer.delete_acls(filters))


def endpoint(runner: BrokerRunner, listener: str) -> tuple[str, int]:
    assert runner.broker is not None
    found = next(e for e in runner.broker.endpoints if e.listener == listener)
    return found.host, found.port


def leader_and_isr_replay(conn: KafkaConnection, topic: str) -> Any:
    """A LeaderAndIsr from a made-up controller with a far newer epoch making broker 7 the leader
    of ``topic``'s partition 0 (what a client replaying the controller's request would send)."""
    version = conn.version_for(4, max_version=7)
    cls = request_class(4, version)
    state = nested(cls, "LeaderAndIsrPartitionState")(
        partition_index=0,
        controller_epoch=1000,
        leader=7,
        leader_epoch=1000,
        isr=(7,),
        partition_epoch=1000,
        replicas=(7, 0),
        adding_replicas=(),
        removing_replicas=(),
    )
    topic_state = nested(cls, "LeaderAndIsrTopicState")(topic_name=topic, topic_id=None, partition_states=(state,))
    return cls(controller_id=7, controller_epoch=1000, type=0, topic_states=(topic_state,), live_leaders=())


def update_metadata_replay(conn: KafkaConnection, topic: str) -> Any:
    """An UpdateMetadata deleting ``topic`` and every live broker from the metadata cache."""
    version = conn.version_for(6, max_version=8)
    return update_metadata.encode(UpdateMetadataRequest(7, 1000, [], {}, {}, {topic}), version, "INTERNAL")
