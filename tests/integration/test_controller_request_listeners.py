"""The controller's requests replayed by a client: refused with CLUSTER_AUTHORIZATION_FAILED and
nothing applied.

Without an authorizer, LeaderAndIsr, UpdateMetadata, StopReplica and WriteTxnMarkers are served
only on the inter-broker listener (beyond Kafka); with one, they need CLUSTER_ACTION whatever the
listener. After each refusal the records stay readable and the leader stays.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import KafkaConnection
from odradek.controller.messages import controlled_shutdown, update_metadata
from odradek.controller.requests import UpdateMetadataRequest
from odradek.errors import ErrorCode
from odradek.server.runner import BrokerRunner

from .authz_support import (
    CLUSTER_ACTION,
    TWO_LISTENERS,
    endpoint,
    leader_and_isr_replay,
    revoke,
    start_with_acls,
    update_metadata_replay,
)

TOPIC = "precious"
RECORDS = 20


def _leader_and_isr(conn: KafkaConnection) -> Any:
    return leader_and_isr_replay(conn, TOPIC)


def _update_metadata(conn: KafkaConnection) -> Any:
    return update_metadata_replay(conn, TOPIC)


async def _send(address: tuple[str, int], build: Callable[[KafkaConnection], Any]) -> Any:
    async with KafkaConnection(address[0], address[1], request_timeout_ms=5000) as conn:
        return await conn.send(build(conn))


def _fill(runner: BrokerRunner) -> None:
    admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": runner.bootstrap_servers})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"r{i}".encode())
    assert producer.flush(15) == 0


def _assert_unchanged(runner: BrokerRunner) -> None:
    meta = AdminClient({"bootstrap.servers": runner.bootstrap_servers}).list_topics(timeout=10)
    assert meta.topics[TOPIC].partitions[0].leader == 0
    consumer = Consumer(
        {"bootstrap.servers": runner.bootstrap_servers, "group.id": "check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        for _ in range(40):
            values += [m.value() for m in consumer.consume(RECORDS, 0.5) if m.error() is None]
            if len(values) >= RECORDS:
                break
        assert values == [f"r{i}".encode() for i in range(RECORDS)]
    finally:
        consumer.close()


def test_controller_requests_on_a_client_listener_are_refused(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    runner = odradek_broker_factory(None, TWO_LISTENERS)
    _fill(runner)
    external = endpoint(runner, "EXTERNAL")
    response = asyncio.run(_send(external, _leader_and_isr))
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert [p.error_code for t in response.topics for p in t.partition_errors] == [
        ErrorCode.cluster_authorization_failed
    ]
    response = asyncio.run(_send(external, _update_metadata))
    assert response.error_code == ErrorCode.cluster_authorization_failed
    _assert_unchanged(runner)

    # the same UpdateMetadata on the inter-broker listener is served (here: an older controller's, refused as stale)
    stale = asyncio.run(
        _send(
            endpoint(runner, "INTERNAL"),
            lambda conn: update_metadata.encode(
                UpdateMetadataRequest(7, 0, [], {}, {}, set()), conn.version_for(6, max_version=8), "INTERNAL"
            ),
        )
    )
    assert stale.error_code in (ErrorCode.none, ErrorCode.stale_controller_epoch)


def test_with_an_authorizer_controller_requests_need_cluster_action_on_any_listener(
    odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any
) -> None:
    from odradek.security.acl import AclOperation, ResourceType

    from .authz_support import acl, cluster_acl, grant

    runner = start_with_acls(odradek_broker_factory, str(tmp_path / "b"), [cluster_acl(AclOperation.CREATE)])
    grant(runner, acl(ResourceType.TOPIC, TOPIC, AclOperation.ALL))
    _fill(runner)
    revoke(runner, CLUSTER_ACTION)
    for listener in ("INTERNAL", "EXTERNAL"):
        response = asyncio.run(_send(endpoint(runner, listener), _leader_and_isr))
        assert response.error_code == ErrorCode.cluster_authorization_failed
        response = asyncio.run(_send(endpoint(runner, listener), _update_metadata))
        assert response.error_code == ErrorCode.cluster_authorization_failed
    _assert_unchanged(runner)


def test_controller_requests_with_an_older_broker_epoch_are_refused(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    runner = odradek_broker_factory(None, TWO_LISTENERS)
    _fill(runner)
    assert runner.broker is not None and runner.broker.controller is not None
    epoch = runner.broker.broker_epoch
    assert epoch > 0
    assert runner.broker.controller.ctx.live_brokers[0].epoch == epoch  # what the controller sends
    internal = endpoint(runner, "INTERNAL")

    def leader_and_isr(broker_epoch: int) -> Callable[[KafkaConnection], Any]:
        def build(conn: KafkaConnection) -> Any:
            request = _leader_and_isr(conn)
            return dataclasses.replace(request, broker_epoch=broker_epoch)

        return build

    response = asyncio.run(_send(internal, leader_and_isr(epoch - 1)))
    assert response.error_code == ErrorCode.stale_broker_epoch
    assert [p.error_code for t in response.topics for p in t.partition_errors] == [ErrorCode.stale_broker_epoch]

    def update(broker_epoch: int, controller_epoch: int) -> Callable[[KafkaConnection], Any]:
        def build(conn: KafkaConnection) -> Any:
            request = UpdateMetadataRequest(7, controller_epoch, [], {}, {}, {TOPIC})
            return update_metadata.encode(request, conn.version_for(6, 5, 8), "INTERNAL", broker_epoch)

        return build

    assert asyncio.run(_send(internal, update(epoch - 1, 1000))).error_code == ErrorCode.stale_broker_epoch
    # the current epoch passes that check (the controller epoch 0 is then refused as stale)
    assert asyncio.run(_send(internal, update(epoch, 0))).error_code == ErrorCode.stale_controller_epoch

    def shutdown(conn: KafkaConnection) -> Any:
        return controlled_shutdown.encode(0, conn.version_for(controlled_shutdown.API_KEY, 2), epoch - 1)

    answer = asyncio.run(_send(internal, shutdown))
    assert answer.error_code == ErrorCode.stale_broker_epoch and not answer.remaining_partitions
    assert 0 not in runner.broker.controller.ctx.shutting_down
    _assert_unchanged(runner)


def test_transaction_markers_travel_on_the_inter_broker_listener(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    """WriteTxnMarkers is held to the inter-broker listener: with the clients' listener first,
    a transaction still commits and its records become readable to read_committed consumers."""
    runner = odradek_broker_factory(None, TWO_LISTENERS)
    admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": runner.bootstrap_servers, "transactional.id": "markers"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"committed")
    producer.commit_transaction(15)
    consumer = Consumer(
        {
            "bootstrap.servers": runner.bootstrap_servers,
            "group.id": "rc",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        for _ in range(40):
            values += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
            if values:
                break
        assert values == [b"committed"]
    finally:
        consumer.close()
