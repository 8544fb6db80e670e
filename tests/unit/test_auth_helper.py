"""The request authorization helper and the authorizer's by-resource-type question: no sockets,
an embedded store, a stand-in broker holding only what the helper reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.embedded import EmbeddedStore
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
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server import auth_helper
from odradek.server.config import KafkaConfig
from odradek.server.request import RequestContext
from odradek.server.session import Session

from .metadata_support import run

TWO_LISTENERS = KafkaConfig(
    {
        "listeners": "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    }
)


@dataclass
class FakeBroker:
    config: KafkaConfig
    authorizer: AclAuthorizer | None = None


def context(broker: FakeBroker, listener: str = "EXTERNAL", principal: KafkaPrincipal = ANONYMOUS) -> RequestContext:
    session = Session(principal, "10.0.0.1", listener, "PLAINTEXT")
    return RequestContext(cast(Any, broker), cast(Any, None), cast(Any, None), None, "10.0.0.1:1", "c-1", session)


def binding(
    rtype: ResourceType, name: str, op: AclOperation, *, deny: bool = False, prefixed: bool = False
) -> AclBinding:
    pattern = ResourcePattern(rtype, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(pattern, AccessControlEntry("User:ANONYMOUS", "*", op, permission))


async def authorizer_with(*bindings: AclBinding, **config: str) -> AclAuthorizer:
    authorizer = AclAuthorizer(EmbeddedStore().session(), config)
    await authorizer.start()
    results = await authorizer.create_acls(list(bindings))
    assert all(r.error_code == ErrorCode.none for r in results)
    return authorizer


def test_without_an_authorizer_everything_passes_but_controller_requests_need_the_inter_broker_listener() -> None:
    broker = FakeBroker(TWO_LISTENERS)
    external, internal = context(broker, "EXTERNAL"), context(broker, "INTERNAL")
    assert auth_helper.authorize(external, AclOperation.DELETE, ResourceType.TOPIC, "t")
    assert auth_helper.filter_authorized(external, AclOperation.READ, ResourceType.TOPIC, ["a", "b"]) == {"a", "b"}
    assert not auth_helper.authorize_cluster_action(external)
    assert auth_helper.authorize_cluster_action(internal)
    single = FakeBroker(KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0"}))
    assert auth_helper.authorize_cluster_action(
        context(single, "PLAINTEXT")
    )  # one listener: it is the inter-broker one


def test_with_an_authorizer_cluster_action_decides_on_every_listener() -> None:
    async def scenario() -> None:
        broker = FakeBroker(TWO_LISTENERS, await authorizer_with(binding(ResourceType.TOPIC, "t", AclOperation.READ)))
        assert not auth_helper.authorize_cluster_action(context(broker, "INTERNAL"))
        assert broker.authorizer is not None
        await broker.authorizer.create_acls([binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)])
        assert auth_helper.authorize_cluster_action(context(broker, "EXTERNAL"))

    run(scenario)


def test_filters_operations_field_and_config_refusals() -> None:
    async def scenario() -> None:
        authorizer = await authorizer_with(
            binding(ResourceType.TOPIC, "logs-", AclOperation.WRITE, prefixed=True),
            binding(ResourceType.TOPIC, "logs-secret", AclOperation.WRITE, deny=True),
            binding(ResourceType.TOPIC, "orders", AclOperation.ALTER_CONFIGS),
        )
        ctx = context(FakeBroker(TWO_LISTENERS, authorizer))
        names = ["logs-a", "logs-secret", "orders", "logs-a"]
        assert auth_helper.filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names) == {"logs-a"}
        # WRITE implies DESCRIBE: bits 4 (WRITE) and 8 (DESCRIBE)
        assert auth_helper.authorized_operations(ctx, ResourceType.TOPIC, "logs-a") == (1 << 4) | (1 << 8)
        assert auth_helper.operations_field(ctx, False, ResourceType.TOPIC, "logs-a") == -(2**31)
        assert auth_helper.config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, 2, "orders") is None  # implied
        assert auth_helper.config_refusal(ctx, AclOperation.ALTER_CONFIGS, 2, "logs-a") == (
            ErrorCode.topic_authorization_failed
        )
        assert auth_helper.config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, 4, "0") == (
            ErrorCode.cluster_authorization_failed
        )
        assert auth_helper.config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, 99, "x") is None

    run(scenario)


def test_authorize_by_resource_type_as_kafka() -> None:
    async def scenario() -> None:
        anonymous = ANONYMOUS
        write, topic = AclOperation.WRITE, ResourceType.TOPIC

        async def allowed(*bindings: AclBinding, **config: str) -> bool:
            authorizer = await authorizer_with(*bindings, **config)
            return authorizer.authorize_by_resource_type(anonymous, "10.0.0.1", write, topic)

        assert not await allowed()
        assert await allowed(**{"allow.everyone.if.no.acl.found": "true"})
        assert await allowed(**{"super.users": "User:ANONYMOUS"})
        assert await allowed(binding(topic, "orders", write))
        assert await allowed(binding(topic, "orders", AclOperation.ALL))
        assert not await allowed(binding(topic, "orders", AclOperation.READ))
        assert not await allowed(binding(topic, "orders", write), binding(topic, "orders", write, deny=True))
        assert not await allowed(
            binding(topic, "orders", write), binding(topic, "ord", write, deny=True, prefixed=True)
        )
        assert await allowed(binding(topic, "orders", write), binding(topic, "x", write, deny=True, prefixed=True))
        assert not await allowed(binding(topic, "orders", write), binding(topic, "*", write, deny=True))
        assert await allowed(binding(topic, "logs-", write, prefixed=True))
        assert not await allowed(
            binding(topic, "logs-", write, prefixed=True), binding(topic, "lo", write, deny=True, prefixed=True)
        )

    run(scenario)


def test_remembered_decisions_follow_acl_changes() -> None:
    async def scenario() -> None:
        authorizer = await authorizer_with()
        principal, topic = ANONYMOUS, ResourceType.TOPIC

        def may_read() -> bool:
            return authorizer.authorize(principal, "10.0.0.1", AclOperation.READ, topic, "orders")

        assert not may_read() and not may_read()
        await authorizer.create_acls([binding(topic, "ord", AclOperation.READ, prefixed=True)])
        assert may_read() and may_read()
        await authorizer.create_acls([binding(topic, "orders", AclOperation.READ, deny=True)])
        assert not may_read()
        denied = binding(topic, "orders", AclOperation.READ, deny=True)
        entry = denied.entry
        entry_filter = AccessControlEntryFilter(entry.principal, entry.host, entry.operation, entry.permission_type)
        await authorizer.delete_acls([AclBindingFilter(denied.pattern.to_filter(), entry_filter)])
        assert may_read()

    run(scenario)
