"""DescribeAcls, CreateAcls, DeleteAcls, DescribeUserScramCredentials and
AlterUserScramCredentials through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: the ACLs they write decide the next request, the SCRAM credentials land in
``/config/users/<user>`` in Kafka's format, and each API needs its cluster permission.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.security.acl import ANY_BINDING_FILTER
from odradek.security.acl import AclOperation as Op
from odradek.security.sasl.scram import ScramCredential
from odradek.server.runner import BrokerRunner

from .authz_support import ANONYMOUS, CLUSTER_ACTION, TWO_LISTENERS, cluster_acl, revoke, start_with_acls


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any) -> BrokerRunner:
    """ANONYMOUS may ALTER (and so DESCRIBE) the cluster: manage ACLs and SCRAM users."""
    return start_with_acls(odradek_broker_factory, str(tmp_path / "acl"), [cluster_acl(Op.ALTER)])


def _admin(broker: BrokerRunner) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _binding(
    name: str, operation: AclOperation, pattern: ResourcePatternType = ResourcePatternType.LITERAL
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, ANONYMOUS, "*", operation, AclPermissionType.ALLOW)


def _read_znode(broker: BrokerRunner, path: str) -> Any:
    assert broker.broker is not None
    store = broker.broker.zk.store
    data, _stat = broker.call(lambda: store.get(path))
    return json.loads(data)


async def _describe_scram(broker: BrokerRunner, users: tuple[str, ...]) -> Any:
    async with KafkaConnection("127.0.0.1", broker.port, request_timeout_ms=5000) as conn:
        rb = conn.builder(50)
        return await conn.send(rb(users=tuple(rb.make("UserName", name=u) for u in users)))


def test_create_describe_delete_acls_with_confluent_kafka(broker: BrokerRunner) -> None:
    admin = _admin(broker)
    bindings = [
        _binding("orders", AclOperation.READ),
        _binding("logs-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(10) is None
    assert _read_znode(broker, "/kafka-acl/Topic/orders") == {
        "version": 1,
        "acls": [{"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert _read_znode(broker, "/kafka-acl-extended/prefixed/Topic/logs-")["acls"][0]["operation"] == "Write"

    any_topic = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    described = admin.describe_acls(any_topic).result(10)
    assert sorted((b.name, b.resource_pattern_type, b.operation) for b in described) == [
        ("logs-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
        ("orders", ResourcePatternType.LITERAL, AclOperation.READ),
    ]
    prefixed_only = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.PREFIXED, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    deleted = admin.delete_acls([prefixed_only])[prefixed_only].result(10)
    assert [(b.name, b.operation) for b in deleted] == [("logs-", AclOperation.WRITE)]
    assert [b.name for b in admin.describe_acls(any_topic).result(10)] == ["orders"]


def test_acl_apis_need_cluster_alter_and_describe(broker: BrokerRunner) -> None:
    admin = _admin(broker)
    revoke(broker, cluster_acl(Op.ALTER))
    assert broker.broker is not None and broker.broker.authorizer is not None
    assert broker.broker.authorizer.acls(ANY_BINDING_FILTER) == [CLUSTER_ACTION]
    with pytest.raises(KafkaException) as raised:
        for future in admin.create_acls([_binding("x", AclOperation.READ)]).values():
            future.result(10)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DescribeAcls: librdkafka drops the response's top-level error, kafka-python returns it
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient
    from kafka.admin import ResourcePatternFilter as KpPatternFilter
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    kp_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        any_acl = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            KpPatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_admin.describe_acls(any_acl)
    finally:
        kp_admin.close()
    # DescribeUserScramCredentials refused (asked on the wire: confluent-kafka 2.16 crashes the
    # process on this response's top-level error)
    response = asyncio.run(_describe_scram(broker, ("alice",)))
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert [(r.user, r.error_code) for r in response.results] == [("alice", ErrorCode.cluster_authorization_failed)]


def test_acl_apis_without_an_authorizer_answer_security_disabled(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    runner = odradek_broker_factory(None, TWO_LISTENERS)
    admin = _admin(runner)
    with pytest.raises(KafkaException) as raised:
        for future in admin.create_acls([_binding("x", AclOperation.READ)]).values():
            future.result(10)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_kafka_python_admin_creates_lists_and_deletes_acls(broker: BrokerRunner) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        pattern = ResourcePattern(KpResourceType.GROUP, "billing", ACLResourcePatternType.LITERAL)
        created = admin.create_acls([ACL(ANONYMOUS, "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        acl_filter = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.GROUP, None, ACLResourcePatternType.ANY),
        )
        acls, error = admin.describe_acls(acl_filter)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.operation) for a in acls] == [("billing", ACLOperation.READ)]
        ((_, deleted, _),) = admin.delete_acls([acl_filter])
        assert [a.resource_pattern.resource_name for a in deleted] == ["billing"]
        assert admin.describe_acls(acl_filter)[0] == []
    finally:
        admin.close()


def test_scram_credentials_altered_and_described_in_kafkas_format(broker: BrokerRunner) -> None:
    admin = _admin(broker)
    upserts = [
        UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret", b"salt-of-alice"
        ),
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw512"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        assert future.result(10) is None
    stored = _read_znode(broker, "/config/users/alice")
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    credential = ScramCredential.from_string(stored["config"]["SCRAM-SHA-256"])
    assert credential.iterations == 8192 and credential.salt == b"salt-of-alice"

    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(10)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    everyone = admin.describe_user_scram_credentials().result(10)
    assert sorted(everyone) == ["alice", "bob"]

    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["alice"].result(10)
    assert set(_read_znode(broker, "/config/users/alice")["config"]) == {"SCRAM-SHA-256"}
    too_few = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")
    with pytest.raises(KafkaException) as raised:
        admin.alter_user_scram_credentials([too_few])["carol"].result(10)
    assert raised.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
