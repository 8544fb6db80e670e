"""The controller's requests replayed by a client: refused with CLUSTER_AUTHORIZATION_FAILED and
nothing applied.

Without an authorizer, LeaderAndIsr, UpdateMetadata, StopReplica and WriteTxnMarkers are served
only on the inter-broker listener (beyond Kafka); with one, they need CLUSTER_ACTION whatever the
listener. After each refusal the records stay readable and the leader stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import KafkaConnection
from odradek.controller.messages import update_metadata
from odradek.controller.requests import UpdateMetadataRequest
from odradek.errors import ErrorCode
from odradek.protocol.inter_broker_messages import request_class
from odradek.protocol.messages import nested
from odradek.server.runner import BrokerRunner

from .authz_support import CLUSTER_ACTION, TWO_LISTENERS, endpoint, revoke, start_with_acls

TOPIC = "precious"
RECORDS = 20


def _leader_and_isr(conn: KafkaConnection) -> Any:
    """A LeaderAndIsr from a made-up controller with a far newer epoch making broker 7 leader."""
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
    topic = nested(cls, "LeaderAndIsrTopicState")(topic_name=TOPIC, topic_id=None, partition_states=(state,))
    return cls(controller_id=7, controller_epoch=1000, type=0, topic_states=(topic,), live_leaders=())


def _update_metadata(conn: KafkaConnection) -> Any:
    """An UpdateMetadata deleting the topic and every live broker from the metadata cache."""
    version = conn.version_for(6, max_version=8)
    request = UpdateMetadataRequest(7, 1000, [], {}, {}, {TOPIC})
    return update_metadata.encode(request, version, "INTERNAL")


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
