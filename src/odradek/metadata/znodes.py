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

Pure functions and immutable values: safe from any thread.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from odradek.metadata.errors import ZNodeDecodeError

__all__ = [
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
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "IsrChangeNotificationSequenceZNode",
    "IsrChangeNotificationZNode",
    "LeaderAndIsr",
    "PartitionAssignment",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
    "ReassignPartitionsZNode",
    "TopicAssignment",
    "TopicPartition",
    "TopicPartitionLike",
    "TopicPartitionStateZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "ZkData",
]


class TopicPartitionLike(Protocol):
    """Anything with ``topic`` and ``partition`` (the project's ``TopicPartition`` types all fit)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _Reader:
    """Typed access to a JSON object, raising ZNodeDecodeError that names the znode."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ZNodeDecodeError(path, data, f"not UTF-8 JSON ({e})") from None
        self.obj = self.as_object(value, "the value")

    def fail(self, reason: str) -> ZNodeDecodeError:
        return ZNodeDecodeError(self.path, self.data, reason)

    def as_object(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{what} is not a JSON object")
        return value

    def as_int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{what} is not an integer")
        return value

    def as_int_list(self, value: Any, what: str) -> list[int]:
        if not isinstance(value, list):
            raise self.fail(f"{what} is not a JSON array")
        return [self.as_int(v, f"an element of {what}") for v in value]

    def int(self, key: str, obj: dict[str, Any] | None = None) -> int:
        return self.as_int(self.required(key, obj), f"'{key}'")

    def str(self, key: str, obj: dict[str, Any] | None = None) -> str:
        value = self.required(key, obj)
        if not isinstance(value, str):
            raise self.fail(f"'{key}' is not a string")
        return value

    def int_text(self, key: str) -> int:
        """An integer written as a JSON string (Kafka's timestamps) or a number."""
        value = self.required(key)
        try:
            return int(value) if isinstance(value, str) else self.as_int(value, f"'{key}'")
        except ValueError:
            raise self.fail(f"'{key}' is not a decimal integer") from None

    def required(self, key: str, obj: dict[str, Any] | None = None) -> Any:
        source = self.obj if obj is None else obj
        if key not in source:
            raise self.fail(f"missing key '{key}'")
        return source[key]


def _decode_long(path: str, data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ZNodeDecodeError(path, data, "not a decimal integer") from None


# -- /controller, /controller_epoch -------------------------------------------------------------------


class ControllerZNode:
    """Ephemeral ``/controller``: ``{"version":1,"brokerid":3,"timestamp":"1403061802981"}``."""

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        ts = _now_ms() if timestamp_ms is None else timestamp_ms
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(ts)})

    @staticmethod
    def decode(data: bytes) -> int:
        """The controller's broker id."""
        return _Reader(ControllerZNode.path(), data).int("brokerid")


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
        return _decode_long(ControllerEpochZNode.path(), data)


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
    protocols; missing names map to themselves. ``timestamp_ms`` is the broker's start time.
    ``version`` selects the JSON written: 1 is the seeds' five keys; 4 (the default, Kafka 0.10 to
    2.6) adds ``endpoints``, ``listener_security_protocol_map`` and ``rack``.
    """

    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...] = ()
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = field(default_factory=_now_ms)
    version: int = 4

    def effective_endpoints(self) -> tuple[str, ...]:
        return self.endpoints or (f"PLAINTEXT://{self.host}:{self.port}",)

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

    Version 1 (the seeds): ``{"version":1,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1452068227537"}``.
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
            "timestamp": str(info.timestamp_ms),
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
        return _dumps(value)

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        r = _Reader(BrokerIdZNode.path(broker_id), data)
        version = r.int("version")
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
            broker_id=broker_id,
            host=host or "",
            port=port,
            endpoints=endpoints,
            listener_security_protocol_map=protocol_map,
            rack=rack if isinstance(rack, str) else None,
            jmx_port=r.as_int(r.obj.get("jmx_port", -1), "'jmx_port'"),
            timestamp_ms=r.int_text("timestamp") if "timestamp" in r.obj else 0,
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
    topic_id: str | None = None
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
        topic_id: str | None = None,
        adding_replicas: Mapping[int, Sequence[int]] | None = None,
        removing_replicas: Mapping[int, Sequence[int]] | None = None,
    ) -> bytes:
        if topic_id is None and not adding_replicas and not removing_replicas:
            return _dumps({"version": 1, "partitions": _partition_map(assignment)})
        value: dict[str, object] = {
            "version": 2,
            "partitions": _partition_map(assignment),
            "adding_replicas": _partition_map(adding_replicas or {}),
            "removing_replicas": _partition_map(removing_replicas or {}),
        }
        if topic_id is not None:
            value["topic_id"] = topic_id
        return _dumps(value)

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicAssignment:
        r = _Reader(TopicZNode.path(topic), data)

        def partitions(key: str) -> dict[int, list[int]]:
            raw = r.as_object(r.obj.get(key) or {}, f"'{key}'")
            result: dict[int, list[int]] = {}
            for p, replicas in raw.items():
                if not p.isdigit():
                    raise r.fail(f"partition id {p!r} in '{key}' is not a number")
                result[int(p)] = r.as_int_list(replicas, f"the replicas of partition {p}")
            return dict(sorted(result.items()))

        topic_id = r.obj.get("topic_id")
        return TopicAssignment(
            topic=topic,
            partitions=partitions("partitions"),
            topic_id=topic_id if isinstance(topic_id, str) else None,
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
        return _dumps(
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
        r = _Reader(TopicPartitionStateZNode.path(tp), data)
        return LeaderAndIsr(
            leader=r.int("leader"),
            leader_epoch=r.int("leader_epoch"),
            isr=r.as_int_list(r.required("isr"), "'isr'"),
            controller_epoch=r.int("controller_epoch"),
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
        partitions = [
            {"topic": a.topic, "partition": a.partition, "replicas": list(a.replicas)} for a in assignments
        ]
        return _dumps({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(data: bytes) -> list[PartitionAssignment]:
        r = _Reader(ReassignPartitionsZNode.path(), data)
        raw = r.required("partitions")
        if not isinstance(raw, list):
            raise r.fail("'partitions' is not a JSON array")
        result = []
        for entry in raw:
            obj = r.as_object(entry, "a 'partitions' entry")
            replicas = r.as_int_list(r.required("replicas", obj), "'replicas'")
            result.append(PartitionAssignment(r.str("topic", obj), r.int("partition", obj), tuple(replicas)))
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


# -- /config -----------------------------------------------------------------------------------------------


class ConfigType:
    """Kafka's ``ConfigType``: the entity types under ``/config``."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    ALL = (TOPIC, CLIENT, USER, BROKER, IP)


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """Persistent ``/config/<type>/<name>`` (``/config/topics/t``, ``/config/brokers/0``):
    ``{"version":1,"config":{"retention.ms":"1000"}}``; values are strings."""

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"/config/{entity_type}/{entity_name}"

    @staticmethod
    def encode(configs: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in configs.items()}})

    @staticmethod
    def decode(entity_type: str, entity_name: str, data: bytes) -> dict[str, str]:
        """The overrides; empty for empty data (Kafka tolerates a null znode value)."""
        if not data:
            return {}
        r = _Reader(ConfigEntityZNode.path(entity_type, entity_name), data)
        config = r.as_object(r.obj.get("config") or {}, "'config'")
        for key, value in config.items():
            if not isinstance(value, str):
                raise r.fail(f"config value of {key!r} is not a string")
        return dict(config)


class ConfigEntityChangeNotificationZNode:
    @staticmethod
    def path() -> str:
        return "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """Persistent sequential ``/config/changes/config_change_<10 digits>``:
    ``{"version":2,"entity_path":"topics/t"}``."""

    SEQUENCE_NUMBER_PREFIX = "config_change_"

    @staticmethod
    def create_path() -> str:
        return f"/config/changes/{ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX}"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(path: str, data: bytes) -> str:
        """The changed entity, ``<type>/<name>``."""
        return _Reader(path, data).str("entity_path")


# -- /isr_change_notification, /cluster, /latest_producer_id_block --------------------------------------------


class IsrChangeNotificationZNode:
    @staticmethod
    def path() -> str:
        return "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    """Persistent sequential ``/isr_change_notification/isr_change_<seq>``:
    ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``."""

    SEQUENCE_NUMBER_PREFIX = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        return f"/isr_change_notification/isr_change_{sequence_number}"

    @staticmethod
    def encode(partitions: Iterable[TopicPartitionLike]) -> bytes:
        entries = [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]
        return _dumps({"version": 1, "partitions": entries})

    @staticmethod
    def decode(path: str, data: bytes) -> set[TopicPartition]:
        r = _Reader(path, data)
        raw = r.required("partitions")
        if not isinstance(raw, list):
            raise r.fail("'partitions' is not a JSON array")
        result = set()
        for entry in raw:
            obj = r.as_object(entry, "a 'partitions' entry")
            result.add(TopicPartition(r.str("topic", obj), r.int("partition", obj)))
        return result


class ClusterIdZNode:
    """Persistent ``/cluster/id``: ``{"version":"1","id":"<22 chars>"}`` (``version`` is a string)."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return _Reader(ClusterIdZNode.path(), data).str("id")


@dataclass(frozen=True)
class ProducerIdBlock:
    """Producer ids ``block_start..block_end`` (inclusive) handed to ``broker_id``."""

    broker_id: int
    block_start: int
    block_end: int


class ProducerIdBlockZNode:
    """Persistent ``/latest_producer_id_block``:
    ``{"version":1,"broker":0,"block_start":"0","block_end":"999"}``; empty before the first block."""

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": block.broker_id,
                "block_start": str(block.block_start),
                "block_end": str(block.block_end),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock | None:
        if not data:
            return None
        r = _Reader(ProducerIdBlockZNode.path(), data)
        return ProducerIdBlock(r.int("broker"), r.int_text("block_start"), r.int_text("block_end"))


class LogDirEventNotificationZNode:
    @staticmethod
    def path() -> str:
        return "/log_dir_event_notification"


# -- /consumers (the ZooKeeper-coordinated consumer of seed 004) ------------------------------------------------


class ConsumerIdsZNode:
    @staticmethod
    def path(group: str) -> str:
        return f"/consumers/{group}/ids"


class ConsumerIdZNode:
    """Ephemeral ``/consumers/<g>/ids/<consumer id>``:
    ``{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1452068227537"}``."""

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"/consumers/{group}/ids/{consumer_id}"

    @staticmethod
    def new_consumer_id(group: str, host: str) -> str:
        """Kafka's default id: ``<group>_<host>-<epoch ms>-<first 8 hex digits of a UUID>``."""
        return f"{group}_{host}-{_now_ms()}-{uuid.uuid4().hex[:8]}"

    @staticmethod
    def encode(subscription: Mapping[str, int], pattern: str = "static", timestamp_ms: int | None = None) -> bytes:
        ts = _now_ms() if timestamp_ms is None else timestamp_ms
        return _dumps({"version": 1, "subscription": dict(subscription), "pattern": pattern, "timestamp": str(ts)})

    @staticmethod
    def decode(group: str, consumer_id: str, data: bytes) -> dict[str, int]:
        """The subscription: topic -> number of consumer threads."""
        r = _Reader(ConsumerIdZNode.path(group, consumer_id), data)
        raw = r.as_object(r.required("subscription"), "'subscription'")
        return {topic: r.as_int(n, f"the thread count of {topic!r}") for topic, n in raw.items()}


class ConsumerOwnerZNode:
    """Ephemeral ``/consumers/<g>/owners/<t>/<p>``: text ``<consumer id>-<thread index>``."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/owners/{topic}/{partition}"


class ConsumerOffsetZNode:
    """Persistent ``/consumers/<g>/offsets/<t>/<p>``: the next offset to consume, decimal text."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode("ascii")

    @staticmethod
    def decode(group: str, topic: str, partition: int, data: bytes) -> int:
        return _decode_long(ConsumerOffsetZNode.path(group, topic, partition), data)


class ZkData:
    """Layout-wide constants (Kafka's ``object ZkData``)."""

    @staticmethod
    def persistent_paths() -> list[str]:
        """Persistent znodes every broker creates at start-up (Kafka's ``PersistentZkPaths``, plus /cluster)."""
        return [
            "/consumers",
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
