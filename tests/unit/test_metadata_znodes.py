"""The znode codecs write exactly the JSON of SEEDS.md section 1 and Kafka's ZkData, and read it back."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.metadata.codec import uuid_from_kafka_string, uuid_to_kafka_string
from odradek.metadata.errors import ZNodeDecodeError
from odradek.metadata.znodes import (
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ConsumerIdZNode,
    ConsumerOffsetZNode,
    ConsumerOwnerZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    IsrChangeNotificationSequenceZNode,
    LeaderAndIsr,
    PartitionAssignment,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartition,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkData,
)


def test_broker_registration_version_1_is_the_seeds_shape() -> None:
    info = BrokerInfo(id=3, host="h1", port=9092, timestamp=1452068227537, version=1)
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert BrokerIdZNode.encode(info) == (
        b'{"version":1,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1452068227537"}'
    )
    decoded = BrokerIdZNode.decode(3, BrokerIdZNode.encode(info))
    assert decoded == info
    assert decoded.endpoint_map() == {"PLAINTEXT": ("h1", 9092)}


def test_broker_registration_version_4_keeps_the_seeds_keys_and_adds_kafkas() -> None:
    info = BrokerInfo(
        id=1,
        host="h1",
        port=9092,
        endpoints=["PLAINTEXT://h1:9092", "REPLICATION://h1:9093"],
        listener_security_protocol_map={"REPLICATION": "SSL"},
        rack="r1",
        timestamp=1452068227537,
    )
    raw = BrokerIdZNode.encode(info)
    assert raw == (
        b'{"version":4,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1452068227537",'
        b'"endpoints":["PLAINTEXT://h1:9092","REPLICATION://h1:9093"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"SSL"},"rack":"r1"}'
    )
    decoded = BrokerIdZNode.decode(1, raw)
    assert decoded.endpoints == ("PLAINTEXT://h1:9092", "REPLICATION://h1:9093")
    assert decoded.rack == "r1" and decoded.timestamp == 1452068227537
    assert decoded.endpoint_map()["REPLICATION"] == ("h1", 9093)


def test_broker_registration_written_by_kafka_2x_decodes() -> None:
    raw = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://k1:9092"],'
        b'"jmx_port":9999,"features":{},"host":"k1","timestamp":"1600000000000","port":9092,"version":5}'
    )
    info = BrokerIdZNode.decode(7, raw)
    assert (info.id, info.host, info.port, info.jmx_port, info.version) == (7, "k1", 9092, 9999, 5)


def test_topic_assignment_is_the_seeds_shape() -> None:
    assert TopicZNode.path("t") == "/brokers/topics/t"
    raw = TopicZNode.encode({1: [2, 1], 0: [1, 2]})
    assert raw == b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}'
    decoded = TopicZNode.decode("t", raw)
    assert decoded.partitions == {0: [1, 2], 1: [2, 1]} and decoded.topic_id is None


def test_topic_assignment_with_topic_id_is_kafka_2_8_version_2() -> None:
    topic_id = uuid.uuid4()
    raw = TopicZNode.encode({0: [1]}, topic_id)
    value = json.loads(raw)
    assert value == {
        "version": 2,
        "partitions": {"0": [1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": uuid_to_kafka_string(topic_id),
    }
    assert TopicZNode.decode("t", raw).topic_id == topic_id


def test_kafka_uuid_strings() -> None:
    value = uuid.UUID("1d3e9a7f-0000-4000-8000-00000000abcd")
    text = uuid_to_kafka_string(value)
    assert len(text) == 22 and "=" not in text
    assert uuid_from_kafka_string(text) == value
    assert uuid_from_kafka_string(str(value)) == value


def test_partition_state_is_the_seeds_shape() -> None:
    tp = TopicPartition("t", 0)
    state = LeaderAndIsr(leader=0, leader_epoch=0, isr=[0, 1, 2], controller_epoch=20)
    assert TopicPartitionStateZNode.path(tp) == "/brokers/topics/t/partitions/0/state"
    raw = TopicPartitionStateZNode.encode(state)
    assert raw == b'{"controller_epoch":20,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}'
    decoded = TopicPartitionStateZNode.decode(tp, raw, zk_version=5)
    assert decoded == LeaderAndIsr(0, 0, (0, 1, 2), 20, zk_version=5)
    moved = decoded.new_leader_and_isr(1, [1, 2], controller_epoch=21)
    assert (moved.leader, moved.leader_epoch, moved.isr, moved.zk_version) == (1, 1, (1, 2), 5)


def test_controller_and_epoch() -> None:
    raw = ControllerZNode.encode(3, 1403061802981)
    assert raw == b'{"version":1,"brokerid":3,"timestamp":"1403061802981"}'
    assert ControllerZNode.decode(raw) == 3
    assert ControllerEpochZNode.encode(20) == b"20"
    assert ControllerEpochZNode.decode(b"20") == 20


def test_consumer_znodes() -> None:
    assert ConsumerOffsetZNode.path("g", "t", 2) == "/consumers/g/offsets/t/2"
    assert ConsumerOffsetZNode.encode(42) == b"42"
    assert ConsumerOffsetZNode.decode("g", "t", 2, b"42") == 42
    assert ConsumerOwnerZNode.path("g", "t", 2) == "/consumers/g/owners/t/2"
    raw = ConsumerIdZNode.encode({"t": 2}, timestamp_ms=1)
    assert raw == b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1"}'
    assert ConsumerIdZNode.decode("g", "c", raw) == {"t": 2}
    consumer_id = ConsumerIdZNode.new_consumer_id("g", "host1")
    assert consumer_id.startswith("g_host1-") and len(consumer_id.rsplit("-", 1)[1]) == 8


def test_reassignment_is_the_seeds_shape() -> None:
    raw = ReassignPartitionsZNode.encode([PartitionAssignment("yqtopic01", 0, (0, 1, 2))])
    assert raw == b'{"version":1,"partitions":[{"topic":"yqtopic01","partition":0,"replicas":[0,1,2]}]}'
    assert ReassignPartitionsZNode.decode(raw) == [PartitionAssignment("yqtopic01", 0, (0, 1, 2))]
    assert ReassignPartitionsZNode.path() == "/admin/reassign_partitions"
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"


def test_config_znodes() -> None:
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    raw = ConfigEntityZNode.encode({"retention.ms": "1000"})
    assert raw == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert ConfigEntityZNode.decode("topics", "t", raw) == {"retention.ms": "1000"}
    assert ConfigEntityZNode.decode("topics", "t", b"") == {}
    assert ConfigEntityChangeNotificationSequenceZNode.create_path() == "/config/changes/config_change_"
    assert ConfigEntityChangeNotificationSequenceZNode.encode("topics/t") == (b'{"version":2,"entity_path":"topics/t"}')


def test_cluster_id_isr_change_and_producer_id_block() -> None:
    assert ClusterIdZNode.encode("abc") == b'{"version":"1","id":"abc"}'
    assert ClusterIdZNode.decode(b'{"version":"1","id":"abc"}') == "abc"
    raw = IsrChangeNotificationSequenceZNode.encode([TopicPartition("t", 1)])
    assert raw == b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'
    assert IsrChangeNotificationSequenceZNode.decode("/x", raw) == {TopicPartition("t", 1)}
    block = ProducerIdBlock(0, 0, 999)
    raw = ProducerIdBlockZNode.encode(block)
    assert raw == b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert ProducerIdBlockZNode.decode(raw) == block
    assert ProducerIdBlockZNode.decode(b"") is None


def test_persistent_paths() -> None:
    paths = ZkData.persistent_paths()
    for path in (
        "/consumers",
        "/admin/delete_topics",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/config/topics",
        "/config/brokers",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/cluster",
    ):
        assert path in paths


@pytest.mark.parametrize(
    ("decode", "data", "fragment"),
    [
        (lambda d: BrokerIdZNode.decode(1, d), b"{not json", "/brokers/ids/1: not UTF-8 JSON"),
        (lambda d: BrokerIdZNode.decode(1, d), b'{"version":1,"port":"x"}', "'port' is not an integer"),
        (lambda d: TopicZNode.decode("t", d), b'{"version":1,"partitions":{"a":[1]}}', "/brokers/topics/t"),
        (lambda d: TopicZNode.decode("t", d), b"[1,2]", "not a JSON object"),
        (
            lambda d: TopicPartitionStateZNode.decode(TopicPartition("t", 0), d),
            b'{"leader":0}',
            "/brokers/topics/t/partitions/0/state: missing key 'leader_epoch'",
        ),
        (ControllerZNode.decode, b'{"version":1}', "/controller: missing key 'brokerid'"),
        (ControllerEpochZNode.decode, b"x", "/controller_epoch: not a decimal integer"),
        (lambda d: ConfigEntityZNode.decode("topics", "t", d), b'{"config":{"a":1}}', "/config/topics/t"),
        (lambda d: BrokerIdZNode.decode(1, d), b"\xff\xfe", "/brokers/ids/1"),
    ],
)
def test_bad_data_names_the_path(decode: object, data: bytes, fragment: str) -> None:
    with pytest.raises(ZNodeDecodeError) as info:
        decode(data)  # type: ignore[operator]
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)
