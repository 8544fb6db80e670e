"""Authorization with real clients: a broker running Kafka's AclAuthorizer, an allow/deny matrix
per API family (produce, consume and groups, metadata, transactions and idempotence, admin), deny
over allow, prefixed ACLs, Metadata and ListGroups filtered to what the principal may describe.

Every client is ``User:ANONYMOUS`` (PLAINTEXT); see :mod:`authz_support`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from odradek.security.acl import AclOperation, ResourceType
from odradek.server.runner import BrokerRunner

from .authz_support import acl, cluster_acl, grant, start_with_acls

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any) -> BrokerRunner:
    """CREATE on the cluster (topics are made by the tests), nothing else beyond CLUSTER_ACTION."""
    return start_with_acls(odradek_broker_factory, str(tmp_path / "authz"), [cluster_acl(AclOperation.CREATE)])


def _admin(broker: BrokerRunner) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(broker: BrokerRunner, *names: str, partitions: int = 1) -> None:
    admin = _admin(broker)  # kept alive until the futures resolve
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=10)
    for future in futures.values():
        future.result(15)


def _produce(broker: BrokerRunner, topic: str, value: bytes = b"v", **extra: Any) -> KafkaError | None:
    """Produce one record; the delivery error (None when delivered)."""
    errors: list[KafkaError | None] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 5000, "retries": 0, **extra}
    )
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    assert errors, "no delivery report"
    return errors[0]


def _consumer(broker: BrokerRunner, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _poll_one(consumer: Consumer, timeout_s: float = 10.0) -> Any:
    """The first message or error event within ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            return msg
    raise AssertionError("nothing polled")


def test_produce_needs_write_and_consume_needs_topic_and_group_read(broker: BrokerRunner) -> None:
    _create(broker, "orders")
    error = _produce(broker, "orders")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(TOPIC, "orders", WRITE))
    assert _produce(broker, "orders", b"first") is None

    grant(broker, acl(TOPIC, "orders", READ))
    consumer = _consumer(broker, "billing")
    try:
        consumer.subscribe(["orders"])
        msg = _poll_one(consumer)
        assert msg.error() is not None and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    grant(broker, acl(GROUP, "billing", READ))
    consumer = _consumer(broker, "billing")
    try:
        consumer.subscribe(["orders"])
        msg = _poll_one(consumer, 20)
        while msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF:
            msg = _poll_one(consumer)
        assert msg.error() is None and msg.value() == b"first"
        consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()


def test_deny_wins_over_allow_and_prefixed_acls_cover_a_prefix(broker: BrokerRunner) -> None:
    _create(broker, "logs-app", "logs-secret", "other")
    grant(
        broker,
        acl(TOPIC, "logs-", AclOperation.ALL, prefixed=True),
        acl(TOPIC, "logs-secret", WRITE, deny=True),
    )
    assert _produce(broker, "logs-app") is None
    denied = _produce(broker, "logs-secret")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    unrelated = _produce(broker, "other")
    assert unrelated is not None and unrelated.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_lists_only_the_topics_the_principal_may_describe(broker: BrokerRunner) -> None:
    _create(broker, "visible", "hidden", "readable")
    grant(broker, acl(TOPIC, "visible", DESCRIBE), acl(TOPIC, "readable", READ))  # READ implies DESCRIBE
    admin = _admin(broker)
    assert set(admin.list_topics(timeout=10).topics) == {"visible", "readable"}
    answer = admin.list_topics(topic="hidden", timeout=10).topics["hidden"]
    assert answer.error is not None and answer.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_list_groups_shows_only_described_groups_and_describe_needs_describe(broker: BrokerRunner) -> None:
    _create(broker, "events")
    grant(broker, acl(TOPIC, "events", READ), acl(GROUP, "grp-", READ, prefixed=True))
    for group in ("grp-1", "grp-2"):
        consumer = _consumer(broker, group)
        try:
            consumer.commit(offsets=[TopicPartition("events", 0, 0)], asynchronous=False)
        finally:
            consumer.close()
    admin = _admin(broker)
    listed = admin.list_consumer_groups().result(10)
    assert {g.group_id for g in listed.valid} == {"grp-1", "grp-2"}
    grant(broker, acl(GROUP, "grp-2", DESCRIBE, deny=True))
    listed = admin.list_consumer_groups().result(10)
    assert {g.group_id for g in listed.valid} == {"grp-1"}
    with pytest.raises(KafkaException) as raised:
        admin.describe_consumer_groups(["grp-2"])["grp-2"].result(10)
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert admin.describe_consumer_groups(["grp-1"])["grp-1"].result(10).group_id == "grp-1"


def test_transactional_id_needs_write_and_idempotence_is_allowed_by_a_topic_write(broker: BrokerRunner) -> None:
    _create(broker, "payments")
    grant(broker, acl(TOPIC, "payments", WRITE))
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(10)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    grant(broker, acl(TXN, txn_id, WRITE))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("payments", b"paid")
    producer.commit_transaction(10)

    # an idempotent producer's InitProducerId: no IDEMPOTENT_WRITE, but WRITE on some topic (Kafka 3.x)
    assert _produce(broker, "payments", b"once", **{"enable.idempotence": True, "retries": 5}) is None


def test_admin_apis_refuse_without_their_acl_and_change_nothing(broker: BrokerRunner) -> None:
    _create(broker, "keep")
    admin = _admin(broker)
    with pytest.raises(KafkaException) as raised:
        admin.delete_topics(["keep"], operation_timeout=10)["keep"].result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as raised:
        admin.create_partitions([NewPartitions("keep", 3)])["keep"].result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    with pytest.raises(KafkaException) as raised:
        admin.describe_configs([broker_resource])[broker_resource].result(10)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    topic_resource = ConfigResource(ConfigResource.Type.TOPIC, "keep")
    with pytest.raises(KafkaException) as raised:
        admin.describe_configs([topic_resource])[topic_resource].result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    grant(broker, acl(TOPIC, "keep", DESCRIBE))
    meta = admin.list_topics(timeout=10).topics["keep"]
    assert len(meta.partitions) == 1  # create_partitions changed nothing
    grant(broker, acl(TOPIC, "keep", AclOperation.ALTER_CONFIGS), acl(TOPIC, "keep", AclOperation.DELETE))
    configs = admin.describe_configs([topic_resource])[topic_resource].result(10)  # implied by ALTER_CONFIGS
    assert "retention.ms" in configs
    admin.delete_topics(["keep"], operation_timeout=10)["keep"].result(10)
    assert "keep" not in admin.list_topics(timeout=10).topics


def test_kafka_python_sees_topic_authorization_failed(broker: BrokerRunner) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    _create(broker, "kp")
    grant(broker, acl(TOPIC, "kp", DESCRIBE))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0, max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("kp", b"nope").get(10)
        grant(broker, acl(TOPIC, "kp", WRITE))
        assert producer.send("kp", b"yes").get(10).offset == 0
    finally:
        producer.close(5)
