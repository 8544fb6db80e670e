"""Kafka's ZooKeeper layout (``kafka.zk.ZkData``): one class per znode, with ``path``/``encode``/``decode``.

Every value is compact UTF-8 JSON (``{"version":1,...}``, no spaces, as Jackson writes it) unless the
class says otherwise; decimal text znodes (``/controller_epoch``, consumer offsets) hold the number
in ASCII. ``decode`` raises :class:`~odradek.metadata.errors.ZNodeDecodeError` naming the znode path
for bytes that are not valid UTF-8 JSON of the documented shape. Decoders accept every version Kafka
wrote (0.9 to 3.x) and ignore unknown keys.

::

    /brokers/ids/<id>                    BrokerIdZNode        ephemeral  broker registration
    /brokers/topics/<t>                  TopicZNode                      partition -> replicas
    /brokers/topics/<t>/partitions/<p>/state  TopicPartitionStateZNode   leader, ISR, epochs
    /brokers/seqid                       BrokerSequenceIdZNode
    /controller                          ControllerZNode      ephemeral  {"version":1,"brokerid":..}
    /controller_epoch                    ControllerEpochZNode            "7"
    /admin/reassign_partitions           ReassignPartitionsZNode
    /admin/delete_topics/<t>             DeleteTopicsTopicZNode          (empty) topic marked for deletion
    /config/<type>/<name>                ConfigEntityZNode               {"version":1,"config":{...}}
    /config/changes/config_change_<seq>  ConfigEntityChangeNotificationSequenceZNode
    /consumers/<g>/ids/<consumer id>     ConsumerIdZNode      ephemeral
    /consumers/<g>/owners/<t>/<p>        ConsumerOwnerZNode   ephemeral  "<consumer id>-<thread>"
    /consumers/<g>/offsets/<t>/<p>       ConsumerOffsetZNode             "42"
    /isr_change_notification/isr_change_<seq>  IsrChangeNotificationSequenceZNode
    /cluster/id                          ClusterIdZNode                  {"version":"1","id":".."}
    /latest_producer_id_block            ProducerIdBlockZNode

The ``/config`` and notification znodes live in :mod:`odradek.metadata.config_znodes`, the
``/consumers`` ones in :mod:`odradek.metadata.consumer_znodes`; all are re-exported here.
Pure functions and immutable values: safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.metadata.codec import (
    JsonReader,
    TopicPartition,
    TopicPartitionLike,
    decode_long,
    dumps_json,
    now_ms,
    uuid_from_kafka_string,
    uuid_to_kafka_string,
)
from odradek.metadata.config_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ConfigType,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
)
from odradek.metadata.consumer_znodes import (
    ConsumerIdsZNode,
    ConsumerIdZNode,
    ConsumerOffsetZNode,
    ConsumerOwnerZNode,
    ConsumersZNode,
)

__all__ = [
    "LEADER_DURING_DELETE",
    "NO_LEADER",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "BrokerInfo",
    "BrokerSequenceIdZNode",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityTypeZNode",
    "ConfigEntityZNode",
    "ConfigType",
    "ConsumerIdZNode",
    "ConsumerIdsZNode",
    "ConsumerOffsetZNode",
    "ConsumerOwnerZNode",
    "ConsumersZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "IsrChangeNotificationSequenceZNode",
    "IsrChangeNotificationZNode",
    "LeaderAndIsr",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "PartitionAssignment",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
    "ReassignPartitionsZNode",
    "TopicAssignment",
    "TopicPartition",
    "TopicPartitionLike",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "ZkData",
]


# -- /controller, /controller_epoch -------------------------------------------------------------------


class ControllerZNode:
    """Ephemeral ``/controller``: ``{"version":1,"brokerid":3,"timestamp":"1403061802981"}``."""

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        ts = now_ms() if timestamp_ms is None else timestamp_ms
        return dumps_json({"version": 1, "brokerid": broker_id, "timestamp": str(ts)})

    @staticmethod
    def decode(data: bytes) -> int:
        """The controller's broker id."""
        return JsonReader(ControllerZNode.path(), data).get_int("brokerid")


class ControllerEpochZNode:
    """Persistent ``/controller_epoch``: the epoch as decimal text (``"7"``); 1 for the first controller."""

    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        return decode_long(ControllerEpochZNode.path(), data)


# -- /brokers ------------------------------------------------------------------------------------------


class BrokerIdsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/ids"


class BrokerSequenceIdZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/seqid"


@dataclass(frozen=True)
class BrokerInfo:
    """A broker registration (``/brokers/ids/<id>``).

    ``endpoints`` are Kafka's connection strings ``LISTENER://host:port``; empty means the single
    ``PLAINTEXT://host:port``. ``listener_security_protocol_map`` maps listener names to security
    protocols; missing names map to themselves. ``timestamp`` is the broker's start time in ms
    since the epoch (the znode's ``"timestamp"``). ``version`` selects the JSON written: 1 is the
    seeds' five keys; 4 (the default, Kafka 0.10 to 2.6) adds ``endpoints``,
    ``listener_security_protocol_map`` and ``rack``. ``id`` is Kafka's ``Broker.id``.
    """

    id: int
    host: str
    port: int
    endpoints: Sequence[str] = ()
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    rack: str | None = None
    jmx_port: int = -1
    timestamp: int = field(default_factory=now_ms)
    version: int = 4
    epoch: int = field(default=-1, compare=False)
    """Kafka's broker epoch (KIP-380): the czxid of the registration znode, read with it; -1 when
    not known. Not part of the JSON."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(self.endpoints))

    def effective_endpoints(self) -> tuple[str, ...]:
        return tuple(self.endpoints) or (f"PLAINTEXT://{self.host}:{self.port}",)

    def endpoint_map(self) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port), parsed from :meth:`effective_endpoints`."""
        result: dict[str, tuple[str, int]] = {}
        for endpoint in self.effective_endpoints():
            listener, _, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            result[listener] = (host.strip("[]"), int(port))
        return result


class BrokerIdZNode:
    """Ephemeral ``/brokers/ids/<id>``.

    Version 1 (the seeds):
    ``{"version":1,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1452068227537"}``.
    Version 4: the same keys, then ``"endpoints":["PLAINTEXT://h1:9092"]``,
    ``"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}`` and, when set, ``"rack":"r1"``.
    """

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        value: dict[str, object] = {
            "version": info.version,
            "host": info.host,
            "port": info.port,
            "jmx_port": info.jmx_port,
            "timestamp": str(info.timestamp),
        }
        if info.version >= 2:
            value["endpoints"] = list(info.effective_endpoints())
        if info.version >= 4:
            listeners = [e.partition("://")[0] for e in info.effective_endpoints()]
            value["listener_security_protocol_map"] = {
                name: info.listener_security_protocol_map.get(name, name) for name in listeners
            }
        if info.version >= 3 and info.rack is not None:
            value["rack"] = info.rack
        if info.version >= 5:
            value["features"] = {}
        return dumps_json(value)

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        r = JsonReader(BrokerIdZNode.path(broker_id), data)
        version = r.get_int("version")
        if version < 1:
            raise r.fail(f"unsupported registration version {version}")
        host = r.obj.get("host")
        if host is not None and not isinstance(host, str):
            raise r.fail("'host' is not a string")
        port = r.as_int(r.obj.get("port", -1), "'port'")
        endpoints: tuple[str, ...] = ()
        protocol_map: dict[str, str] = {}
        if version >= 2:
            raw = r.required("endpoints")
            if not isinstance(raw, list) or not all(isinstance(e, str) and "://" in e for e in raw):
                raise r.fail("'endpoints' is not a list of LISTENER://host:port strings")
            endpoints = tuple(raw)
            raw_map = r.obj.get("listener_security_protocol_map") or {}
            protocol_map = {str(k): str(v) for k, v in r.as_object(raw_map, "the protocol map").items()}
        rack = r.obj.get("rack")
        info = BrokerInfo(
            id=broker_id,
            host=host or "",
            port=port,
            endpoints=endpoints,
            listener_security_protocol_map=protocol_map,
            rack=rack if isinstance(rack, str) else None,
            jmx_port=r.as_int(r.obj.get("jmx_port", -1), "'jmx_port'"),
            timestamp=r.get_int_text("timestamp") if "timestamp" in r.obj else 0,
            version=version,
        )
        try:
            info.endpoint_map()
        except ValueError:
            raise r.fail("an endpoint has no numeric port") from None
        return info


class TopicsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/topics"


@dataclass(frozen=True)
class PartitionAssignment:
    """The replicas of one partition, first = preferred leader (a ``/admin/reassign_partitions`` entry)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class TopicAssignment:
    """The value of ``/brokers/topics/<t>``: partition -> replicas, plus Kafka 2.4+'s optional keys."""

    topic: str
    partitions: Mapping[int, Sequence[int]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)


def _partition_map(assignment: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(assignment[p]) for p in sorted(assignment)}


class TopicZNode:
    """Persistent ``/brokers/topics/<t>``: ``{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}``.

    With a ``topic_id`` (or adding/removing replicas) Kafka 2.8's version 2 is written:
    ``{"version":2,"partitions":{..},"adding_replicas":{},"removing_replicas":{},"topic_id":"<base64>"}``.
    """

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(
        assignment: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID | None = None,
        adding_replicas: Mapping[int, Sequence[int]] | None = None,
        removing_replicas: Mapping[int, Sequence[int]] | None = None,
    ) -> bytes:
        if topic_id is None and not adding_replicas and not removing_replicas:
            return dumps_json({"version": 1, "partitions": _partition_map(assignment)})
        value: dict[str, object] = {
            "version": 2,
            "partitions": _partition_map(assignment),
            "adding_replicas": _partition_map(adding_replicas or {}),
            "removing_replicas": _partition_map(removing_replicas or {}),
        }
        if topic_id is not None:
            value["topic_id"] = uuid_to_kafka_string(topic_id)
        return dumps_json(value)

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicAssignment:
        r = JsonReader(TopicZNode.path(topic), data)

        def partitions(key: str) -> dict[int, list[int]]:
            raw = r.as_object(r.obj.get(key) or {}, f"'{key}'")
            result: dict[int, list[int]] = {}
            for p, replicas in raw.items():
                if not p.isdigit():
                    raise r.fail(f"partition id {p!r} in '{key}' is not a number")
                result[int(p)] = r.as_int_list(replicas, f"the replicas of partition {p}")
            return dict(sorted(result.items()))

        raw_id = r.obj.get("topic_id")
        topic_id = None
        if raw_id is not None:
            try:
                topic_id = uuid_from_kafka_string(r.as_str(raw_id, "'topic_id'"))
            except ValueError:
                raise r.fail(f"'topic_id' {raw_id!r} is not a Kafka UUID") from None
        return TopicAssignment(
            topic=topic,
            partitions=partitions("partitions"),
            topic_id=topic_id,
            adding_replicas=partitions("adding_replicas"),
            removing_replicas=partitions("removing_replicas"),
        )


class TopicPartitionsZNode:
    """``/brokers/topics/<t>/partitions`` (empty); its children are the partition ids."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(tp: TopicPartitionLike) -> str:
        return f"/brokers/topics/{tp.topic}/partitions/{tp.partition}"


NO_LEADER = -1
LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader state, as in its state znode; ``zk_version`` is the znode's version.

    ``leader`` is -1 (``NO_LEADER``) when no replica can lead.
    """

    leader: int
    leader_epoch: int
    isr: Sequence[int]
    controller_epoch: int
    zk_version: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))

    def new_leader_and_isr(self, leader: int, isr: Sequence[int], controller_epoch: int) -> LeaderAndIsr:
        """A new leader (or ISR) elected by a controller: ``leader_epoch`` + 1, same ``zk_version``."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, isr, controller_epoch, self.zk_version)


class TopicPartitionStateZNode:
    """Persistent ``/brokers/topics/<t>/partitions/<p>/state``:
    ``{"controller_epoch":20,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}``."""

    @staticmethod
    def path(tp: TopicPartitionLike) -> str:
        return f"{TopicPartitionZNode.path(tp)}/state"

    @staticmethod
    def encode(state: LeaderAndIsr) -> bytes:
        return dumps_json(
            {
                "controller_epoch": state.controller_epoch,
                "leader": state.leader,
                "version": 1,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
            }
        )

    @staticmethod
    def decode(tp: TopicPartitionLike, data: bytes, zk_version: int = 0) -> LeaderAndIsr:
        r = JsonReader(TopicPartitionStateZNode.path(tp), data)
        return LeaderAndIsr(
            leader=r.get_int("leader"),
            leader_epoch=r.get_int("leader_epoch"),
            isr=r.as_int_list(r.required("isr"), "'isr'"),
            controller_epoch=r.get_int("controller_epoch"),
            zk_version=zk_version,
        )


# -- /admin ----------------------------------------------------------------------------------------------


class ReassignPartitionsZNode:
    """Persistent ``/admin/reassign_partitions``:
    ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1,2]}]}``."""

    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(assignments: Iterable[PartitionAssignment]) -> bytes:
        partitions = [{"topic": a.topic, "partition": a.partition, "replicas": list(a.replicas)} for a in assignments]
        return dumps_json({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(data: bytes) -> list[PartitionAssignment]:
        r = JsonReader(ReassignPartitionsZNode.path(), data)
        raw = r.required("partitions")
        if not isinstance(raw, list):
            raise r.fail("'partitions' is not a JSON array")
        result = []
        for entry in raw:
            obj = r.as_object(entry, "a 'partitions' entry")
            replicas = r.as_int_list(r.required("replicas", obj), "'replicas'")
            result.append(PartitionAssignment(r.get_str("topic", obj), r.get_int("partition", obj), tuple(replicas)))
        return result


class DeleteTopicsZNode:
    """``/admin/delete_topics``: one empty child per topic marked for deletion."""

    @staticmethod
    def path() -> str:
        return "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class ClusterIdZNode:
    """Persistent ``/cluster/id``: ``{"version":"1","id":"<22 chars>"}`` (``version`` is a string)."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return dumps_json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return JsonReader(ClusterIdZNode.path(), data).get_str("id")


class ZkData:
    """Layout-wide constants (Kafka's ``object ZkData``)."""

    @staticmethod
    def persistent_paths() -> list[str]:
        """Persistent znodes every broker creates at start-up: Kafka's ``PersistentZkPaths`` and /cluster."""
        return [
            ConsumersZNode.path(),
            BrokerIdsZNode.path(),
            TopicsZNode.path(),
            ConfigEntityChangeNotificationZNode.path(),
            DeleteTopicsZNode.path(),
            BrokerSequenceIdZNode.path(),
            IsrChangeNotificationZNode.path(),
            ProducerIdBlockZNode.path(),
            LogDirEventNotificationZNode.path(),
            "/cluster",
            *(ConfigEntityTypeZNode.path(t) for t in ConfigType.ALL),
        ]
