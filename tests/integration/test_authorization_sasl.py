"""Authorization with real SASL principals: a broker whose clients' listener is SASL_PLAINTEXT
(SCRAM-SHA-256), Kafka's AclAuthorizer, ``super.users=User:admin``.

``alice`` is granted READ/WRITE/DESCRIBE on topic ``t`` and READ on group ``g``; ``bob`` nothing;
``admin`` is a super user and creates ACLs through the brokers' CreateAcls. The SCRAM users and
the ACLs are written to the broker's embedded store before it starts. The broker's own
controller requests travel on a PLAINTEXT ``INTERNAL`` listener (``User:ANONYMOUS``, granted
CLUSTER_ACTION).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as Type
from odradek.server.runner import BrokerRunner

from .authz_support import CLUSTER_ACTION, acl, grant, revoke, start_scram_acl_broker
from .security_support import address

USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
TOPIC, GROUP = "t", "g"
ALICE, BOB = "User:alice", "User:bob"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    data_dir = str(tmp_path_factory.mktemp("authz-sasl"))
    bindings = [
        CLUSTER_ACTION,
        acl(Type.TOPIC, TOPIC, Op.READ, principal=ALICE),
        acl(Type.TOPIC, TOPIC, Op.WRITE, principal=ALICE),
        acl(Type.TOPIC, TOPIC, Op.DESCRIBE, principal=ALICE),
        acl(Type.GROUP, GROUP, Op.READ, principal=ALICE),
    ]
    runner = start_scram_acl_broker(data_dir, USERS, bindings)
    try:
        admin = AdminClient(_config(runner, "admin"))
        admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic("other", 1, 1)], operation_timeout=10)[TOPIC].result(15)
        yield runner
    finally:
        runner.stop()


def _config(runner: BrokerRunner, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(runner, "SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _produce(runner: BrokerRunner, user: str, value: bytes, topic: str = TOPIC) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**_config(runner, user), "message.timeout.ms": 5000, "retries": 0})
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    assert errors, "no delivery report"
    return errors[0]


def _first_event(runner: BrokerRunner, user: str, group: str, timeout_s: float = 20.0) -> Any:
    """The first record or error (other than end-of-partition) a consumer of ``t`` in ``group`` sees."""
    consumer = Consumer(
        {
            **_config(runner, user),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or (msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF):
                continue
            if msg.error() is None:
                consumer.commit(msg, asynchronous=False)
            return msg
        raise AssertionError("nothing polled")
    finally:
        consumer.close()


def test_alice_produces_and_consumes_in_her_group(broker: BrokerRunner) -> None:
    assert _produce(broker, "alice", b"from-alice") is None
    msg = _first_event(broker, "alice", GROUP)
    assert msg.error() is None and msg.value() == b"from-alice"


def test_bob_is_refused_and_does_not_see_the_topic(broker: BrokerRunner) -> None:
    error = _produce(broker, "bob", b"from-bob")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    bob_admin = AdminClient(_config(broker, "bob"))
    assert TOPIC not in bob_admin.list_topics(timeout=10).topics
    answer = bob_admin.list_topics(topic=TOPIC, timeout=10).topics[TOPIC]
    assert answer.error is not None and answer.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a consumer group: Kafka checks the group (FindCoordinator, JoinGroup) before the topic
    msg = _first_event(broker, "bob", GROUP)
    assert msg.error() is not None
    assert msg.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # alice sees the topic she may describe, and not the one she may not
    topics = AdminClient(_config(broker, "alice")).list_topics(timeout=10).topics
    assert TOPIC in topics and "other" not in topics


def test_alice_in_another_group_is_refused_the_group(broker: BrokerRunner) -> None:
    msg = _first_event(broker, "alice", "not-g")
    assert msg.error() is not None and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_deny_from_her_host_overrides_alices_allow(broker: BrokerRunner) -> None:
    elsewhere = acl(Type.TOPIC, TOPIC, Op.WRITE, principal=ALICE, deny=True, host="10.9.9.9")
    grant(broker, elsewhere)
    assert _produce(broker, "alice", b"still-allowed") is None
    here = acl(Type.TOPIC, TOPIC, Op.WRITE, principal=ALICE, deny=True, host="127.0.0.1")
    grant(broker, here)
    try:
        error = _produce(broker, "alice", b"denied")
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        revoke(broker, here, elsewhere)
    assert _produce(broker, "alice", b"allowed-again") is None


def test_the_super_user_creates_acls_that_take_effect_at_once(broker: BrokerRunner) -> None:
    alice_admin = AdminClient(_config(broker, "alice"))
    binding = AclBinding(
        ResourceType.TOPIC,
        "other",
        ResourcePatternType.LITERAL,
        ALICE,
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    # alice may not alter the cluster's ACLs
    with pytest.raises(KafkaException) as raised:
        alice_admin.create_acls([binding])[binding].result(10)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    error = _produce(broker, "alice", b"x", topic="other")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    admin = AdminClient(_config(broker, "admin"))
    assert admin.create_acls([binding])[binding].result(10) is None
    assert _produce(broker, "alice", b"now-allowed", topic="other") is None
    assert _produce(broker, "bob", b"x", topic="other") is not None


def test_kafka_python_with_scram_principals(broker: BrokerRunner) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    def producer(user: str) -> Any:
        return KafkaProducer(
            bootstrap_servers=address(broker, "SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
            retries=0,
            max_block_ms=5000,
        )

    alice = producer("alice")
    try:
        assert alice.send(TOPIC, b"kafka-python").get(10).offset >= 0
    finally:
        alice.close(5)
    bob = producer("bob")
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            bob.send(TOPIC, b"nope").get(10)
    finally:
        bob.close(5)
