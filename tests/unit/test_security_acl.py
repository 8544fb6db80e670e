"""Kafka's ACL model: codes and names, filters, ZooKeeper JSON and paths, and AclAuthorizer's decision."""

from __future__ import annotations

from collections import defaultdict

import pytest

from odradek.errors import ErrorCode
from odradek.security import acl_znodes as znodes
from odradek.security.acl import (
    ANY_BINDING_FILTER,
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
    authorization_error,
    authorize,
    from_code,
    from_name,
    matching_acls,
    parse_super_users,
    pascal_name,
    supported_operations,
    validate_acl_binding,
)
from odradek.security.principal import KafkaPrincipal

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE = KafkaPrincipal("User", "alice")


def topic(name: str, pattern_type: PatternType = LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def ace(
    operation: AclOperation, permission: AclPermissionType = ALLOW, principal: str = "User:alice", host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def test_wire_codes_and_names() -> None:
    assert [(t.name, t.value) for t in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7),
    ]  # fmt: skip
    assert [(p.name, p.value) for p in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4),
    ]  # fmt: skip
    assert [o.value for o in AclOperation] == list(range(15))
    assert AclOperation.IDEMPOTENT_WRITE == 12 and AclOperation.DESCRIBE_TOKENS == 14
    assert [(p.name, p.value) for p in AclPermissionType] == [("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]
    assert pascal_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert pascal_name(AclOperation.DESCRIBE_CONFIGS) == "DescribeConfigs"
    assert from_code(AclOperation, 99) == AclOperation.UNKNOWN
    assert from_name(ResourceType, "topic") == ResourceType.TOPIC
    assert from_name(ResourceType, "TransactionalId") == ResourceType.TRANSACTIONAL_ID
    assert from_name(AclOperation, "ClusterAction") == AclOperation.CLUSTER_ACTION
    assert from_name(AclOperation, "Fly") == AclOperation.UNKNOWN


def test_patterns_and_entries_refuse_filter_values() -> None:
    with pytest.raises(ValueError, match="resourceType must not be ANY"):
        ResourcePattern(ResourceType.ANY, "t", LITERAL)
    with pytest.raises(ValueError, match="patternType must not be MATCH"):
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH)
    with pytest.raises(ValueError):
        AccessControlEntry("User:a", "*", AclOperation.ANY, ALLOW)
    validate_acl_binding(AclBinding(topic("t"), ace(AclOperation.READ)))
    with pytest.raises(ValueError, match="unknown elements"):
        validate_acl_binding(AclBinding(topic("t"), ace(AclOperation.UNKNOWN)))
    with pytest.raises(ValueError, match="invalid resource name: a/b"):
        validate_acl_binding(AclBinding(topic("a/b"), ace(AclOperation.READ)))


def test_resource_pattern_filter_matching() -> None:
    literal, prefixed, wildcard = topic("orders"), topic("ord", PREFIXED), topic("*")
    match = ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)
    assert match.matches(literal) and match.matches(prefixed) and match.matches(wildcard)
    assert not match.matches(topic("ordersX")) and not match.matches(topic("x", PREFIXED))
    assert not match.matches(ResourcePattern(ResourceType.GROUP, "orders", LITERAL))
    any_type = ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.ANY)
    assert any_type.matches(literal) and any_type.matches(topic("orders", PREFIXED)) and not any_type.matches(prefixed)
    exact = ResourcePatternFilter(ResourceType.TOPIC, "ord", PREFIXED)
    assert exact.matches(prefixed) and not exact.matches(topic("ord"))
    assert ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY).matches(wildcard)
    assert ResourcePatternFilter(ResourceType.TOPIC, "*", LITERAL).matches(wildcard)
    assert not ResourcePatternFilter(ResourceType.TOPIC, "*", LITERAL).matches(literal)
    assert match.find_indefinite_field() == "Resource pattern type is MATCH."
    assert literal.to_filter().find_indefinite_field() is None


def test_binding_filters_for_describe_and_delete() -> None:
    binding = AclBinding(topic("orders"), ace(AclOperation.READ))
    assert ANY_BINDING_FILTER.matches(binding) and not ANY_BINDING_FILTER.matches_at_most_one()
    by_principal = AclBindingFilter(
        ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
        AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY),
    )
    assert not by_principal.matches(binding)
    deny_only = AclBindingFilter(
        topic("orders").to_filter(), AccessControlEntryFilter(None, None, AclOperation.ANY, DENY)
    )
    assert not deny_only.matches(binding)
    exact = AclBindingFilter(
        topic("orders").to_filter(), AccessControlEntryFilter("User:alice", "*", AclOperation.READ, ALLOW)
    )
    assert exact.matches(binding) and exact.matches_at_most_one()
    assert deny_only.find_indefinite_field() == "Principal is NULL"
    unknown = AclBindingFilter(
        topic("x").to_filter(), AccessControlEntryFilter("User:a", "*", AclOperation.UNKNOWN, ALLOW)
    )
    assert unknown.is_unknown and unknown.find_indefinite_field() == "Operation is UNKNOWN"


def test_super_users() -> None:
    assert parse_super_users("User:admin; User:broker") == {
        KafkaPrincipal("User", "admin"),
        KafkaPrincipal("User", "broker"),
    }
    assert parse_super_users("") == frozenset() and parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_supported_operations_and_errors() -> None:
    assert AclOperation.CLUSTER_ACTION in supported_operations(ResourceType.CLUSTER)
    assert supported_operations(ResourceType.TRANSACTIONAL_ID) == {AclOperation.DESCRIBE, AclOperation.WRITE}
    assert authorization_error(ResourceType.GROUP) == ErrorCode.group_authorization_failed
    assert authorization_error(ResourceType.TRANSACTIONAL_ID) == ErrorCode.transactional_id_authorization_failed
    with pytest.raises(ValueError):
        supported_operations(ResourceType.ANY)


# --- ZooKeeper ---------------------------------------------------------------------------------

KAFKA_EXAMPLE = (
    b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
)


def test_acl_json_is_byte_compatible_with_kafka() -> None:
    entry = ace(AclOperation.READ)
    assert znodes.encode_acls([entry]) == KAFKA_EXAMPLE
    assert znodes.decode_acls(KAFKA_EXAMPLE) == [entry]
    several = [
        ace(AclOperation.DESCRIBE_CONFIGS, DENY, "User:bob", "10.0.0.1"),
        ace(AclOperation.IDEMPOTENT_WRITE, principal="User:*"),
        ace(AclOperation.ALL, principal="User:zoë"),
    ]
    encoded = znodes.encode_acls([*several, several[0]])
    assert b'"operation":"DescribeConfigs"' in encoded and b'"permissionType":"Deny"' in encoded
    assert b'"operation":"IdempotentWrite"' in encoded and "User:zoë".encode() in encoded
    assert znodes.decode_acls(encoded) == several
    # Kafka's own spaced layout (the ZkData comment) decodes the same
    spaced = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert znodes.decode_acls(spaced) == [ace(AclOperation.READ, DENY, host="host1")]
    assert znodes.decode_acls(b"") == [] and znodes.decode_acls(None) == []
    unknown = znodes.decode_acls(KAFKA_EXAMPLE.replace(b"Read", b"Teleport"))
    assert unknown[0].operation == AclOperation.UNKNOWN
    for bad in (KAFKA_EXAMPLE.replace(b'"version":1', b'"version":2'), b"{", b'{"version":1}',
                KAFKA_EXAMPLE.replace(b"User:alice", b"alice")):  # fmt: skip
        with pytest.raises(ValueError):
            znodes.decode_acls(bad)


def test_znode_paths() -> None:
    assert znodes.resource_path(topic("orders")) == "/kafka-acl/Topic/orders"
    assert znodes.resource_path(topic("orders-", PREFIXED)) == "/kafka-acl-extended/prefixed/Topic/orders-"
    assert (
        znodes.resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL))
        == "/kafka-acl/TransactionalId/tx"
    )
    assert znodes.resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL)) == (
        "/kafka-acl/Cluster/kafka-cluster"
    )
    assert znodes.change_path(LITERAL) == "/kafka-acl-changes"
    assert znodes.change_path(PREFIXED) == "/kafka-acl-extended-changes"
    paths = znodes.paths_to_create()
    assert "/kafka-acl/DelegationToken" in paths and "/kafka-acl-extended/prefixed/User" in paths
    assert "/kafka-acl-changes" in paths and "/kafka-acl-extended-changes" in paths


def test_change_notifications() -> None:
    assert znodes.encode_change(topic("orders")) == b"TOPIC:orders"
    assert znodes.decode_literal_change(b"TOPIC:orders") == topic("orders")
    assert znodes.decode_literal_change(b"Topic:orders") == topic("orders")
    # Kafka's two-part rule: only the first colon separates
    group = ResourcePattern(ResourceType.GROUP, "PREFIXED:a:b", LITERAL)
    assert znodes.decode_literal_change(znodes.encode_change(group)) == group
    with pytest.raises(ValueError, match="ResourceType:ResourceName"):
        znodes.decode_literal_change(b"no-separator")
    prefixed = topic("orders-", PREFIXED)
    body = znodes.encode_change(prefixed)
    assert body == b'{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}'
    assert znodes.decode_extended_change(body) == prefixed
    assert znodes.decode_change("/kafka-acl-extended-changes", body) == prefixed
    with pytest.raises(ValueError, match="unsupported version"):
        znodes.decode_extended_change(body.replace(b'"version":1', b'"version":2'))


# --- authorize ---------------------------------------------------------------------------------


def cache(*bindings: tuple[ResourcePattern, AccessControlEntry]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    acls: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
    for pattern, entry in bindings:
        acls[pattern].append(entry)
    return dict(acls)


def allowed(
    acls: dict[ResourcePattern, list[AccessControlEntry]],
    operation: AclOperation,
    name: str = "orders",
    principal: KafkaPrincipal = ALICE,
    host: str = "10.0.0.1",
    **kwargs: object,
) -> bool:
    found = matching_acls(acls, ResourceType.TOPIC, name)
    return authorize(principal, host, operation, topic(name), found, **kwargs)  # type: ignore[arg-type]


def test_no_acl_found_falls_back_to_allow_everyone() -> None:
    assert not allowed({}, AclOperation.READ)
    assert allowed({}, AclOperation.READ, allow_everyone_if_no_acl_found=True)
    other = cache((topic("payments"), ace(AclOperation.READ)))
    assert allowed(other, AclOperation.READ, allow_everyone_if_no_acl_found=True)
    # ACLs on the resource (even for someone else) switch the fallback off
    bobs = cache((topic("orders"), ace(AclOperation.READ, principal="User:bob")))
    assert not allowed(bobs, AclOperation.READ, allow_everyone_if_no_acl_found=True)


def test_deny_wins_over_allow() -> None:
    acls = cache((topic("orders"), ace(AclOperation.READ)), (topic("ord", PREFIXED), ace(AclOperation.READ, DENY)))
    assert not allowed(acls, AclOperation.READ)
    only_other_host = cache(
        (topic("orders"), ace(AclOperation.READ)), (topic("orders"), ace(AclOperation.READ, DENY, host="10.9.9.9"))
    )
    assert allowed(only_other_host, AclOperation.READ)
    assert not allowed(only_other_host, AclOperation.READ, host="10.9.9.9")
    deny_all_users = cache(
        (topic("*"), ace(AclOperation.ALL, DENY, principal="User:*")), (topic("orders"), ace(AclOperation.ALL))
    )
    assert not allowed(deny_all_users, AclOperation.WRITE)


def test_prefixed_and_wildcard_resources() -> None:
    acls = cache(
        (topic("ord", PREFIXED), ace(AclOperation.WRITE)), (topic("*"), ace(AclOperation.READ, principal="User:bob"))
    )
    assert allowed(acls, AclOperation.WRITE, "orders")
    assert allowed(acls, AclOperation.WRITE, "ord")
    assert not allowed(acls, AclOperation.WRITE, "payments")
    assert not allowed(acls, AclOperation.WRITE, "or")
    bob = KafkaPrincipal("User", "bob")
    assert allowed(acls, AclOperation.READ, "anything", principal=bob)
    assert not allowed(acls, AclOperation.WRITE, "anything", principal=bob)


def test_wildcard_principal_and_host() -> None:
    acls = cache((topic("orders"), ace(AclOperation.READ, principal="User:*", host="10.0.0.1")))
    assert allowed(acls, AclOperation.READ, principal=KafkaPrincipal("User", "anyone"))
    assert not allowed(acls, AclOperation.READ, host="10.0.0.2")
    # Kafka's wildcard is the ACL principal User:*, whatever the session principal's type
    assert allowed(acls, AclOperation.READ, principal=KafkaPrincipal("Group", "anyone"))
    groups = cache((topic("orders"), ace(AclOperation.READ, principal="Group:*")))
    assert not allowed(groups, AclOperation.READ, principal=KafkaPrincipal("Group", "anyone"))


@pytest.mark.parametrize(
    ("granted", "asked", "result"),
    [
        (AclOperation.READ, AclOperation.DESCRIBE, True),
        (AclOperation.WRITE, AclOperation.DESCRIBE, True),
        (AclOperation.DELETE, AclOperation.DESCRIBE, True),
        (AclOperation.ALTER, AclOperation.DESCRIBE, True),
        (AclOperation.CREATE, AclOperation.DESCRIBE, False),
        (AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS, True),
        (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, False),
        (AclOperation.DESCRIBE, AclOperation.READ, False),
        (AclOperation.ALL, AclOperation.CLUSTER_ACTION, True),
        (AclOperation.ALL, AclOperation.DESCRIBE, True),
        (AclOperation.READ, AclOperation.WRITE, False),
    ],
)
def test_implied_operations(granted: AclOperation, asked: AclOperation, result: bool) -> None:
    assert allowed(cache((topic("orders"), ace(granted))), asked) is result


def test_deny_of_an_implying_operation_does_not_deny_describe() -> None:
    acls = cache((topic("orders"), ace(AclOperation.READ, DENY)), (topic("orders"), ace(AclOperation.WRITE)))
    assert allowed(acls, AclOperation.DESCRIBE)
    assert not allowed(acls, AclOperation.READ)


def test_super_users_bypass_acls() -> None:
    acls = cache((topic("orders"), ace(AclOperation.ALL, DENY, principal="User:*")))
    admin = KafkaPrincipal("User", "admin")
    assert allowed(acls, AclOperation.DELETE, principal=admin, super_users=parse_super_users("User:admin"))
    assert not allowed(acls, AclOperation.DELETE, principal=admin)


def test_only_literal_resources_are_authorized() -> None:
    with pytest.raises(ValueError, match="Only literal resources"):
        authorize(ALICE, "*", AclOperation.READ, topic("o", PREFIXED), [])
