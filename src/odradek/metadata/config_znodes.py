"""The ``/config``, ``/isr_change_notification``, ``/latest_producer_id_block`` and
``/log_dir_event_notification`` znodes (part of Kafka's ``ZkData``; re-exported by
:mod:`odradek.metadata.znodes`). Pure functions: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.metadata.codec import JsonReader, TopicPartition, TopicPartitionLike, dumps_json

__all__ = [
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityTypeZNode",
    "ConfigEntityZNode",
    "ConfigType",
    "IsrChangeNotificationSequenceZNode",
    "IsrChangeNotificationZNode",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
]


class ConfigType:
    """Kafka's ``ConfigType``: the entity types under ``/config``."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    GROUP = "groups"
    """Group configs (Kafka 4's ``GROUP`` config resource), by sanitized group id."""
    ALL = (TOPIC, CLIENT, USER, BROKER, IP, GROUP)


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
        return dumps_json({"version": 1, "config": {k: str(v) for k, v in configs.items()}})

    @staticmethod
    def decode(entity_type: str, entity_name: str, data: bytes) -> dict[str, str]:
        """The overrides; empty for empty data (Kafka tolerates a null znode value)."""
        if not data:
            return {}
        r = JsonReader(ConfigEntityZNode.path(entity_type, entity_name), data)
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
        return dumps_json({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(path: str, data: bytes) -> str:
        """The changed entity, ``<type>/<name>``."""
        return JsonReader(path, data).get_str("entity_path")


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
        return dumps_json({"version": 1, "partitions": entries})

    @staticmethod
    def decode(path: str, data: bytes) -> set[TopicPartition]:
        r = JsonReader(path, data)
        raw = r.required("partitions")
        if not isinstance(raw, list):
            raise r.fail("'partitions' is not a JSON array")
        result = set()
        for entry in raw:
            obj = r.as_object(entry, "a 'partitions' entry")
            result.add(TopicPartition(r.get_str("topic", obj), r.get_int("partition", obj)))
        return result


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
        return dumps_json(
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
        r = JsonReader(ProducerIdBlockZNode.path(), data)
        return ProducerIdBlock(r.get_int("broker"), r.get_int_text("block_start"), r.get_int_text("block_end"))


class LogDirEventNotificationZNode:
    @staticmethod
    def path() -> str:
        return "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``: ``{"version":1,"broker":<id>,"event":1}``
    (event 1: LogDirFailure), written by a broker whose log dir went offline; the controller reads
    and deletes it."""

    PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def path() -> str:
        return f"{LogDirEventNotificationZNode.path()}/{LogDirEventNotificationSequenceZNode.PREFIX}"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return dumps_json(
            {"version": 1, "broker": broker_id, "event": LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE}
        )

    @staticmethod
    def decode(path: str, data: bytes) -> int:
        return JsonReader(path, data).get_int("broker")
