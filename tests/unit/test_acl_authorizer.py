"""The ZooKeeper-mode AclAuthorizer over the embedded store: two brokers' authorizers on one tree,
Kafka's znodes and notices, literal and prefixed patterns, deny over allow, CreateAcls/DeleteAcls/
DescribeAcls results."""

from __future__ import annotations

import json
import logging

import pytest

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import (
    AclAuthorizer,
    AclBindingDeleteResult,
    AclCreateResult,
    Action,
    is_acl_authorizer,
)
from odradek.metadata.embedded import EmbeddedStore
from odradek.security.acl import (
    ANY_BINDING_FILTER,
    ANY_ENTRY_FILTER,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.security.principal import KafkaPrincipal

from .metadata_support import run, settle

ALICE, BOB, CAROL = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob"), KafkaPrincipal.user("carol")
ADMIN = KafkaPrincipal.user("admin")
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE


def ace(principal: str, op: AclOperation, allow: bool = True, host: str = "*") -> AccessControlEntry:
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    return AccessControlEntry(principal, host, op, permission)


def literal(name: str, rtype: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(rtype, name, PatternType.LITERAL)


def prefixed(name: str, rtype: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(rtype, name, PatternType.PREFIXED)


def test_class_names() -> None:
    assert is_acl_authorizer("kafka.security.authorizer.AclAuthorizer")
    assert is_acl_authorizer(" kafka.security.auth.SimpleAclAuthorizer ")
    assert not is_acl_authorizer("") and not is_acl_authorizer(None)
    with pytest.raises(ValueError, match="is not supported"):
        is_acl_authorizer("org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def test_two_brokers_follow_each_others_changes() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        one = AclAuthorizer(tree.session(), {"super.users": "User:admin"})
        two = AclAuthorizer(tree.session())
        await one.start()
        await two.start()
        assert not two.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")  # no ACL, not allowed
        results = await one.create_acls(
            [
                AclBinding(literal("orders"), ace("User:alice", READ)),
                AclBinding(prefixed("logs-"), ace("User:alice", WRITE, host="10.0.0.1")),
                AclBinding(literal("orders"), ace("User:*", DESCRIBE)),
            ]
        )
        assert results == [AclCreateResult()] * 3
        data = (await one.store.get("/kafka-acl/Topic/orders"))[0]
        assert json.loads(data) == {
            "version": 1,
            "acls": [
                {"principal": "User:*", "permissionType": "Allow", "operation": "Describe", "host": "*"},
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            ],
        }
        assert data.startswith(b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow"')
        assert await one.store.exists("/kafka-acl-extended/prefixed/Topic/logs-") is not None
        assert await one.store.get_children("/kafka-acl-changes") == ["acl_changes_0000000000"]
        assert (await one.store.get("/kafka-acl-changes/acl_changes_0000000000"))[0] == b"TOPIC:orders"
        extended = (await one.store.get("/kafka-acl-extended-changes/acl_changes_0000000000"))[0]
        assert json.loads(extended) == {
            "version": 1,
            "resourceType": "TOPIC",
            "name": "logs-",
            "patternType": "PREFIXED",
        }
        await settle()
        for authorizer in (one, two):
            assert authorizer.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")
            assert authorizer.authorize(ALICE, "10.0.0.1", DESCRIBE, TOPIC, "orders")  # implied and wildcard
            assert authorizer.authorize(BOB, "10.0.0.2", DESCRIBE, TOPIC, "orders")
            assert not authorizer.authorize(BOB, "10.0.0.2", READ, TOPIC, "orders")
            assert authorizer.authorize(ALICE, "10.0.0.1", WRITE, TOPIC, "logs-app")  # prefixed
            assert not authorizer.authorize(ALICE, "10.0.0.9", WRITE, TOPIC, "logs-app")  # host
            assert not authorizer.authorize(ALICE, "10.0.0.1", WRITE, TOPIC, "logs")  # not the prefix
        assert one.authorize(ADMIN, "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
        assert not two.authorize(ADMIN, "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")

        # deny over allow, written by the second broker and followed by the first
        await two.create_acls([AclBinding(prefixed("ord"), ace("User:alice", AclOperation.ALL, allow=False))])
        await settle()
        assert not one.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")
        assert one.authorize_actions(
            ALICE, "10.0.0.1", [Action(READ, TOPIC, "orders"), Action(WRITE, TOPIC, "logs-x")]
        ) == [
            False,
            True,
        ]

        # removal: the empty pattern's znode goes, the other broker follows
        deleted = await one.delete_acls([AclBindingFilter(prefixed("ord").to_filter(), ANY_ENTRY_FILTER)])
        assert [r.binding.pattern for r in deleted[0].bindings] == [prefixed("ord")]
        assert await one.store.exists("/kafka-acl-extended/prefixed/Topic/ord") is None
        await settle()
        assert two.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")
        await one.close()
        await two.close()

    run(scenario)


def test_a_restarted_broker_loads_everything_and_allow_everyone() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        writer = AclAuthorizer(tree.session())
        await writer.start()
        await writer.create_acls([AclBinding(literal("g1", GROUP), ace("User:bob", READ))])
        await writer.create_acls([AclBinding(prefixed("t", TOPIC), ace("User:bob", WRITE))])
        late = AclAuthorizer(tree.session(), {"allow.everyone.if.no.acl.found": "true"})
        await late.start()
        assert late.acls(ANY_BINDING_FILTER) == writer.acls(ANY_BINDING_FILTER)
        assert len(late.acls(ANY_BINDING_FILTER)) == 2
        assert late.authorize(BOB, "h", READ, GROUP, "g1")
        assert not late.authorize(ALICE, "h", READ, GROUP, "g1")  # ACLs exist: not everyone
        assert late.authorize(ALICE, "h", READ, GROUP, "other")  # no ACL at all: allowed
        assert not writer.authorize(ALICE, "h", READ, GROUP, "other")

    run(scenario)


def test_create_delete_describe_results() -> None:
    async def scenario() -> None:
        authorizer = AclAuthorizer(EmbeddedStore(None).session())
        await authorizer.start()
        results = await authorizer.create_acls(
            [
                AclBinding(literal("a/b"), ace("User:alice", READ)),
                AclBinding(literal("t"), ace("User:alice", AclOperation.UNKNOWN)),
                AclBinding(literal("t"), ace("User:alice", READ)),
                AclBinding(literal("t"), ace("User:alice", READ)),  # twice: one entry
            ]
        )
        assert results[0] == AclCreateResult(
            ErrorCode.invalid_request, "Failed to create ACL: ACL binding contains invalid resource name: a/b"
        )
        assert results[1].error_code == ErrorCode.invalid_request
        assert results[2:] == [AclCreateResult()] * 2
        await authorizer.create_acls(
            [
                AclBinding(literal("t"), ace("User:bob", WRITE)),
                AclBinding(literal("*"), ace("User:carol", DESCRIBE)),
                AclBinding(prefixed("t"), ace("User:dan", READ)),
            ]
        )
        assert len(authorizer.acls(ANY_BINDING_FILTER)) == 4
        match = AclBindingFilter(ResourcePatternFilter(TOPIC, "t", PatternType.MATCH), ANY_ENTRY_FILTER)
        assert {b.entry.principal for b in authorizer.acls(match)} == {
            "User:alice",
            "User:bob",
            "User:carol",
            "User:dan",
        }
        exact = AclBindingFilter(ResourcePatternFilter(TOPIC, "t", PatternType.ANY), ANY_ENTRY_FILTER)
        assert {b.entry.principal for b in authorizer.acls(exact)} == {"User:alice", "User:bob", "User:dan"}

        only_bob = AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY)
        deleted = await authorizer.delete_acls(
            [
                AclBindingFilter(literal("t").to_filter(), only_bob),
                AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.LITERAL), ANY_ENTRY_FILTER),
                AclBindingFilter(literal("nothing-here").to_filter(), ANY_ENTRY_FILTER),
            ]
        )
        assert deleted[0].bindings == [AclBindingDeleteResult(AclBinding(literal("t"), ace("User:bob", WRITE)))]
        assert sorted(r.binding.entry.principal for r in deleted[1].bindings) == ["User:alice", "User:carol"]
        assert deleted[2].bindings == []
        assert [b.pattern for b in authorizer.acls(ANY_BINDING_FILTER)] == [prefixed("t")]
        assert await authorizer.store.exists("/kafka-acl/Topic/t") is None

    run(scenario)


def test_concurrent_writers_on_one_pattern_merge() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        one, two = AclAuthorizer(tree.session()), AclAuthorizer(tree.session())
        await one.start()
        await two.start()
        await one.create_acls([AclBinding(literal("shared"), ace("User:alice", READ))])
        await settle()
        assert two.authorize(ALICE, "h", READ, TOPIC, "shared")
        await two.close()  # `two` stops following: its cached version of the pattern goes stale
        await one.create_acls([AclBinding(literal("shared"), ace("User:carol", READ))])
        await two.create_acls([AclBinding(literal("shared"), ace("User:bob", READ))])  # BadVersion, re-read, retry
        body = json.loads((await one.store.get("/kafka-acl/Topic/shared"))[0])
        assert {e["principal"] for e in body["acls"]} == {"User:alice", "User:bob", "User:carol"}
        await settle()
        assert one.authorize(BOB, "h", READ, TOPIC, "shared") and two.authorize(CAROL, "h", READ, TOPIC, "shared")

    run(scenario)


def test_refusals_are_audited_on_kafkas_logger(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        authorizer = AclAuthorizer(EmbeddedStore(None).session())
        await authorizer.start()
        with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
            assert authorizer.authorize_actions(
                ALICE, "10.0.0.1", [Action(READ, TOPIC, "t"), Action(DESCRIBE, TOPIC, "u", log_if_denied=False)]
            ) == [False, False]
        levels = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "kafka.authorizer.logger"]
        assert levels == [
            (
                logging.INFO,
                "Principal = User:alice is Denied Operation = READ from host = 10.0.0.1 on resource = "
                "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)",
            ),
            (
                logging.DEBUG,
                "Principal = User:alice is Denied Operation = DESCRIBE from host = 10.0.0.1 on resource = "
                "ResourcePattern(resourceType=TOPIC, name=u, patternType=LITERAL)",
            ),
        ]

    run(scenario)
