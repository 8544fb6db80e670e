"""Config admin APIs against a real broker, through confluent-kafka's AdminClient and odradek's own client.

DescribeConfigs (topic and broker resources, sources, synonyms, documentation, every version),
AlterConfigs and IncrementalAlterConfigs, and their effect as later requests and the broker's
logs see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.client.admin import AlterConfigOp
from odradek.client.admin import ConfigResource as Resource
from odradek.client.admin import NewTopic as OwnNewTopic
from odradek.client.cluster import TopicPartition as TP
from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.server.apis.incremental_alter_configs import apply_operations
from odradek.testing import BrokerRunner

from .admin_support import confluent, create, error_code_of, module_broker, with_admin, with_conn

T = TypeVar("T")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    yield from module_broker(tmp_path_factory, "config-broker")


# --- DescribeConfigs ---------------------------------------------------------------------------


def test_describe_configs_topic_and_broker_with_confluent(broker: BrokerRunner) -> None:
    create(broker, "dc-1", **{"retention.ms": "86400000"})
    res = confluent(broker).describe_configs(
        [ConfigResource(ResourceType.TOPIC, "dc-1"), ConfigResource(ResourceType.BROKER, "0")]
    )
    by_type = {r.restype: f.result(15) for r, f in res.items()}
    topic = by_type[ResourceType.TOPIC]
    assert topic["retention.ms"].value == "86400000"
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert topic["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert topic["cleanup.policy"].value == "delete"
    assert not topic["retention.ms"].is_read_only
    brokers = by_type[ResourceType.BROKER]
    assert brokers["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert brokers["log.dirs"].value == broker.data_dir
    assert brokers["num.network.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    assert brokers["num.network.threads"].value == "3"
    assert brokers["auto.create.topics.enable"].value == "true"
    assert brokers["log.dirs"].is_read_only


def test_describe_configs_synonyms_documentation_and_errors(broker: BrokerRunner) -> None:
    create(broker, "dc-2", **{"retention.ms": "1000"})
    results = with_admin(
        broker,
        lambda a: a.describe_configs(
            [
                Resource.topic("dc-2"),
                Resource.topic("dc-missing"),
                Resource.topic("bad/name"),
                Resource.broker(0),
                Resource.broker(5),
                Resource(8, "0"),
            ],
            keys=["retention.ms", "cleanup.policy", "log.retention.hours", "listeners"],
            include_synonyms=True,
            include_documentation=True,
        ),
    )
    topic = results[Resource.topic("dc-2")]
    assert topic.error is None and sorted(topic.configs) == ["cleanup.policy", "retention.ms"]
    retention = topic.configs["retention.ms"]
    # Kafka's ConfigHelper lists broker synonyms from retention.ms's first broker key on:
    # log.retention.ms has no value (null default), so log.retention.hours=168 is not listed.
    assert retention.synonyms == [("retention.ms", "1000", 1)]
    assert retention.config_type == 5 and retention.documentation
    assert topic.configs["cleanup.policy"].config_type == 7
    assert results[Resource.topic("dc-missing")].error.error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert results[Resource.topic("bad/name")].error.error_code == ErrorCode.invalid_topic_exception  # type: ignore[union-attr]
    broker_configs = results[Resource.broker(0)]
    assert broker_configs.error is None
    assert sorted(broker_configs.configs) == ["listeners", "log.retention.hours"]
    assert broker_configs.configs["listeners"].source == 4
    assert broker_configs.configs["listeners"].synonyms == [
        ("listeners", "PLAINTEXT://127.0.0.1:0", 4),
        ("listeners", "PLAINTEXT://127.0.0.1:9092", 5),
    ]
    assert results[Resource.broker(5)].error.error_code == ErrorCode.invalid_request  # type: ignore[union-attr]
    assert results[Resource(8, "0")].error.error_code == ErrorCode.invalid_request  # type: ignore[union-attr]


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_every_version(broker: BrokerRunner, version: int) -> None:
    create(broker, f"dc-v{version}", **{"max.message.bytes": "5000"})

    async def go(conn: KafkaConnection) -> Any:
        rb = RequestBuilder(32, version)
        resources = (
            rb.make(
                "DescribeConfigsResource", resource_type=2, resource_name=f"dc-v{version}", configuration_keys=None
            ),
            rb.make("DescribeConfigsResource", resource_type=4, resource_name="", configuration_keys=None),
        )
        return await conn.send(rb(resources=resources, include_synonyms=False, include_documentation=False))

    topic, default_broker = with_conn(broker, go).results
    assert topic.error_code == 0 and default_broker.error_code == 0
    entries = {c.name: c for c in topic.configs}
    assert entries["max.message.bytes"].value == "5000" and entries["max.message.bytes"].config_source == 1
    assert entries["flush.ms"].config_source == 5
    assert default_broker.configs == ()


def test_static_broker_config_is_the_source_of_topic_defaults(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    runner = odradek_broker_factory(overrides={"log.retention.ms": "3600000", "num.partitions": "2"})
    create(runner, "static-1")
    res = confluent(runner).describe_configs(
        [ConfigResource(ResourceType.TOPIC, "static-1"), ConfigResource(ResourceType.BROKER, "0")]
    )
    configs = {r.restype: f.result(15) for r, f in res.items()}
    retention = configs[ResourceType.TOPIC]["retention.ms"]
    assert retention.value == "3600000" and retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs[ResourceType.BROKER]["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs[ResourceType.BROKER]["num.partitions"].value == "2"
    created = with_admin(runner, lambda a: a.create_topics([OwnNewTopic("static-defaults")]))
    assert created["static-defaults"].num_partitions == 2


def test_broker_read_only_sources_and_synonyms_as_kafka(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    runner = odradek_broker_factory(overrides={"log.retention.hours": "24", "num.io.threads": "4"})
    res = confluent(runner).describe_configs([ConfigResource(ResourceType.BROKER, "0")])
    configs = next(iter(res.values())).result(15)
    # per-broker and cluster-wide dynamic keys of Kafka 3.9 are not read-only
    for name in ("advertised.listeners", "listeners", "log.retention.ms", "message.max.bytes", "num.io.threads"):
        assert not configs[name].is_read_only, name
    for name in ("broker.id", "log.dirs", "log.retention.hours", "zookeeper.connect", "log.message.format.version"):
        assert configs[name].is_read_only, name
    advertised = configs["advertised.listeners"]
    assert advertised.value is None and advertised.source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.io.threads"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.io.threads"].value == "4"
    assert configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.retention.hours"].value == "24"
    assert configs["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    own = with_admin(
        runner,
        lambda a: a.describe_configs(
            [Resource.broker(0)],
            keys=["log.retention.hours", "log.retention.ms", "log.retention.minutes", "log.segment.bytes"],
            include_synonyms=True,
        ),
    )[Resource.broker(0)].configs
    assert own["log.retention.hours"].synonyms == [
        ("log.retention.hours", "24", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert own["log.retention.ms"].synonyms == [] and own["log.retention.ms"].source == 5
    assert own["log.retention.minutes"].synonyms == [] and own["log.retention.minutes"].value is None
    assert own["log.segment.bytes"].synonyms == [("log.segment.bytes", "1073741824", 5)]
    assert own["log.retention.hours"].read_only and not own["log.retention.ms"].read_only


def test_static_retention_ms_synonyms_for_broker_and_topic(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    runner = odradek_broker_factory(overrides={"log.retention.ms": "3600000"})
    create(runner, "syn-1")
    results = with_admin(
        runner,
        lambda a: a.describe_configs(
            [Resource.broker(0), Resource.topic("syn-1")],
            keys=["log.retention.ms", "log.retention.hours", "retention.ms", "segment.bytes"],
            include_synonyms=True,
        ),
    )
    broker_configs = results[Resource.broker(0)].configs
    assert broker_configs["log.retention.ms"].synonyms == [
        ("log.retention.ms", "3600000", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert broker_configs["log.retention.hours"].synonyms == [("log.retention.hours", "168", 5)]
    topic = results[Resource.topic("syn-1")].configs
    assert topic["retention.ms"].value == "3600000" and topic["retention.ms"].source == 4
    assert topic["retention.ms"].synonyms == [("log.retention.ms", "3600000", 4), ("log.retention.hours", "168", 5)]
    assert topic["segment.bytes"].synonyms == [("log.segment.bytes", "1073741824", 5)]


# --- deprecated and other Kafka 3.9 topic keys ---------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_deprecated_topic_keys_are_accepted_and_described(broker: BrokerRunner) -> None:
    create(
        broker,
        "mfv-1",
        **{"message.format.version": "0.10.2", "message.timestamp.difference.max.ms": "3600000"},
    )
    configs = _topic_configs(broker, "mfv-1")
    assert configs["message.format.version"].value == "0.10.2"
    assert configs["message.format.version"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["message.timestamp.difference.max.ms"].value == "3600000"
    assert configs["message.timestamp.before.max.ms"].value == str(2**63 - 1)
    for name in ("message.downconversion.enable", "compression.zstd.level", "local.retention.ms"):
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value, name
    assert configs["remote.storage.enable"].value == "false"
    assert configs["leader.replication.throttled.replicas"].value == ""

    create(broker, "mfv-2")
    described = with_admin(
        broker,
        lambda a: a.describe_configs(
            [Resource.topic("mfv-2")], keys=["message.format.version", "compression.gzip.level"], include_synonyms=True
        ),
    )[Resource.topic("mfv-2")].configs
    assert described["message.format.version"].value == "3.0-IV1"
    assert described["message.format.version"].synonyms == [("log.message.format.version", "3.0-IV1", 5)]
    assert described["compression.gzip.level"].synonyms == [("compression.gzip.level", "-1", 5)]

    # AlterConfigs (full replacement) and IncrementalAlterConfigs take them too
    admin = confluent(broker)
    fs = admin.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "mfv-2", set_config={"message.format.version": "2.8-IV1"})]
    )
    assert error_code_of(next(iter(fs.values()))) == 0
    assert _topic_configs(broker, "mfv-2")["message.format.version"].value == "2.8-IV1"
    fs = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                "mfv-2",
                incremental_configs=[
                    ConfigEntry("message.format.version", "3.9", incremental_operation=AlterConfigOpType.SET),
                    ConfigEntry("message.downconversion.enable", "false", incremental_operation=AlterConfigOpType.SET),
                    ConfigEntry(
                        "leader.replication.throttled.replicas", "0:0", incremental_operation=AlterConfigOpType.APPEND
                    ),
                ],
            )
        ]
    )
    assert error_code_of(next(iter(fs.values()))) == 0
    configs = _topic_configs(broker, "mfv-2")
    assert configs["message.format.version"].value == "3.9"
    assert configs["message.downconversion.enable"].value == "false"
    assert configs["leader.replication.throttled.replicas"].value == "0:0"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("message.format.version", "9.9"),
        ("message.format.version", "4.0"),
        ("compression.gzip.level", "0"),
        ("compression.zstd.level", "23"),
        ("remote.storage.enable", "true"),
        ("remote.log.copy.disable", "true"),
        ("leader.replication.throttled.replicas", "x:1"),
        ("local.retention.ms", "-3"),
    ],
)
def test_invalid_values_of_kafka_39_topic_keys_are_invalid_config(broker: BrokerRunner, name: str, value: str) -> None:
    fs = confluent(broker).create_topics(
        [NewTopic(f"bad-{name}-{value}".replace(":", "_"), 1, 1, config={name: value})]
    )
    assert error_code_of(next(iter(fs.values()))) == ErrorCode.invalid_config


# --- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------


def _topic_configs(broker: BrokerRunner, name: str) -> dict[str, Any]:
    res = confluent(broker).describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    return dict(next(iter(res.values())).result(15))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_overrides(broker: BrokerRunner) -> None:
    create(broker, "ac-1", **{"retention.ms": "1000"})
    admin = confluent(broker)
    fs = admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-1", set_config={"segment.ms": "600000"})])
    assert error_code_of(next(iter(fs.values()))) == 0
    configs = _topic_configs(broker, "ac-1")
    assert (
        configs["segment.ms"].value == "600000"
        and configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # replaced, so back to the default
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)

    # the broker's logs use the new value
    async def log_segment_ms() -> int:
        assert broker.broker is not None
        return int(broker.broker.replica_manager.get_partition(TP("ac-1", 0)).log.config.segment_ms)

    assert broker.call(log_segment_ms) == 600000

    errors = with_admin(
        broker,
        lambda a: a.alter_configs(
            {
                Resource.topic("ac-1"): {"segment.ms": "soon"},
                Resource.topic("ac-missing"): {"segment.ms": "1"},
                Resource.broker(0): {"log.dirs": "/elsewhere"},  # read-only
            }
        ),
    )
    assert errors[Resource.topic("ac-1")].error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert errors[Resource.topic("ac-missing")].error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    refused = errors[Resource.broker(0)]
    assert refused.error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert str(refused).endswith(
        "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
        "Cannot update these configs dynamically: Set(log.dirs)"
    )
    assert _topic_configs(broker, "ac-1")["segment.ms"].value == "600000"
    # validate_only changes nothing
    ok = with_admin(
        broker, lambda a: a.alter_configs({Resource.topic("ac-1"): {"segment.ms": "5"}}, validate_only=True)
    )
    assert ok == {Resource.topic("ac-1"): None}
    assert _topic_configs(broker, "ac-1")["segment.ms"].value == "600000"


def test_incremental_alter_configs(broker: BrokerRunner) -> None:
    create(broker, "iac-1", **{"retention.ms": "1000", "segment.ms": "700000"})
    admin = confluent(broker)
    fs = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                "iac-1",
                incremental_configs=[
                    ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
                    ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
                    ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
                ],
            )
        ]
    )
    assert error_code_of(next(iter(fs.values()))) == 0
    configs = _topic_configs(broker, "iac-1")
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"
    own = with_admin(
        broker,
        lambda a: a.incremental_alter_configs(
            {Resource.topic("iac-1"): [AlterConfigOp("cleanup.policy", AlterConfigOp.SUBTRACT, "delete")]}
        ),
    )
    assert own == {Resource.topic("iac-1"): None}
    assert _topic_configs(broker, "iac-1")["cleanup.policy"].value == "compact"
    errors = with_admin(
        broker,
        lambda a: a.incremental_alter_configs(
            {
                Resource.topic("iac-1"): [AlterConfigOp("retention.ms", AlterConfigOp.APPEND, "1")],
                Resource.topic("iac-missing"): [AlterConfigOp("retention.ms", AlterConfigOp.SET, "1")],
                Resource.broker(0): [AlterConfigOp("log.dirs", AlterConfigOp.SET, "/elsewhere")],  # read-only
            }
        ),
    )
    assert errors[Resource.topic("iac-1")].error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert errors[Resource.topic("iac-missing")].error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    refused = errors[Resource.broker(0)]
    assert refused.error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert str(refused).endswith(
        "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
        "Cannot update these configs dynamically: Set(log.dirs)"
    )
    dup = with_admin(
        broker,
        lambda a: a.incremental_alter_configs(
            {Resource.topic("iac-1"): [AlterConfigOp("retention.ms", 0, "1"), AlterConfigOp("retention.ms", 1)]}
        ),
    )
    assert dup[Resource.topic("iac-1")].error_code == ErrorCode.invalid_request  # type: ignore[union-attr]
    assert _topic_configs(broker, "iac-1")["retention.ms"].value == "5000"


def test_apply_operations() -> None:
    defaults = {"cleanup.policy": ["delete"]}
    assert apply_operations({}, defaults, [("cleanup.policy", 2, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert apply_operations({"cleanup.policy": "compact"}, defaults, [("cleanup.policy", 2, "compact")]) == {
        "cleanup.policy": "compact"
    }
    assert apply_operations({"a": "1"}, defaults, [("a", 1, None), ("b", 0, "2")]) == {"b": "2"}
    assert apply_operations({}, defaults, [("cleanup.policy", 3, "delete")]) == {"cleanup.policy": ""}
    from odradek.errors import InvalidConfigError, InvalidRequestError

    with pytest.raises(InvalidConfigError):
        apply_operations({}, defaults, [("retention.ms", 2, "1")])
    with pytest.raises(InvalidRequestError):
        apply_operations({}, defaults, [("retention.ms", 9, "1")])
    with pytest.raises(InvalidRequestError):
        apply_operations({}, defaults, [("retention.ms", 0, None)])


def test_replication_throttle_rates_are_dynamic_broker_configs(broker: BrokerRunner) -> None:
    def rates() -> tuple[int, int]:
        async def read() -> tuple[int, int]:
            assert broker.broker is not None
            rm = broker.broker.replica_manager
            return rm.leader_quota.rate, rm.follower_quota.rate

        return broker.call(read)  # type: ignore[no-any-return]

    unlimited = 2**63 - 1
    assert rates() == (unlimited, unlimited)
    leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
    errors = with_admin(
        broker,
        lambda a: a.incremental_alter_configs(
            {
                Resource.broker(0): [AlterConfigOp(leader, AlterConfigOp.SET, "1000")],
                Resource(4, ""): [AlterConfigOp(follower, AlterConfigOp.SET, "2000")],  # cluster default
            }
        ),
    )
    assert errors == {Resource.broker(0): None, Resource(4, ""): None}
    assert rates() == (1000, 2000)
    assert broker.call(lambda: _znode(broker, "/config/brokers/0"))["config"] == {leader: "1000"}
    # a broker's own value beats the cluster default
    with_admin(broker, lambda a: a.alter_configs({Resource.broker(0): {leader: "1000", follower: "3000"}}))
    assert rates() == (1000, 3000)
    described = with_admin(broker, lambda a: a.describe_configs([Resource.broker(0), Resource(4, "")]))
    own = described[Resource.broker(0)].configs
    assert (own[follower].value, own[follower].source) == ("3000", 2)  # DYNAMIC_BROKER_CONFIG
    default = described[Resource(4, "")].configs
    assert list(default) == [follower] and (default[follower].value, default[follower].source) == ("2000", 3)
    bad = with_admin(broker, lambda a: a.alter_configs({Resource.broker(0): {leader: "-5"}}))
    assert bad[Resource.broker(0)].error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    with_admin(broker, lambda a: a.alter_configs({Resource.broker(0): {}, Resource(4, ""): {}}))
    assert rates() == (unlimited, unlimited)


async def _znode(broker: BrokerRunner, path: str) -> Any:
    import json

    assert broker.broker is not None
    data, _ = await broker.broker.zk.store.get(path)
    return json.loads(data)


def test_dynamic_log_defaults_with_confluent_apply_to_topics_without_overrides(broker: BrokerRunner) -> None:
    create(broker, "dyn-1")
    admin = confluent(broker)
    key = ConfigResource(ResourceType.BROKER, "0")
    week = 7 * 24 * 3600 * 1000

    def alter(entries: list[ConfigEntry], validate_only: bool = False) -> None:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)
        admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(timeout=10)

    def alter_default(op: AlterConfigOp) -> None:  # confluent-kafka cannot name the default resource ""
        errors = with_admin(broker, lambda a: a.incremental_alter_configs({Resource(4, ""): [op]}))
        assert errors == {Resource(4, ""): None}

    def segment_ms_of_log() -> int:
        async def read() -> int:
            assert broker.broker is not None
            return int(broker.broker.replica_manager.get_partition(TP("dyn-1", 0)).log.config.segment_ms)

        return broker.call(read)  # type: ignore[no-any-return]

    set_op = AlterConfigOpType.SET
    alter([ConfigEntry("log.roll.ms", "900000", incremental_operation=set_op)], validate_only=True)
    assert segment_ms_of_log() == week  # validate_only: nothing applied
    alter_default(AlterConfigOp("log.roll.ms", AlterConfigOp.SET, "900000"))
    assert segment_ms_of_log() == 900000
    alter([ConfigEntry("log.roll.ms", "800000", incremental_operation=set_op)])
    assert segment_ms_of_log() == 800000  # the broker's own value beats the cluster default
    described = admin.describe_configs([key])[key].result(timeout=10)
    entry = described["log.roll.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "800000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    own = with_admin(broker, lambda a: a.describe_configs([Resource.broker(0)], include_synonyms=True))
    assert own[Resource.broker(0)].configs["log.roll.ms"].synonyms == [  # type: ignore[union-attr]
        ("log.roll.ms", "800000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.roll.ms", "900000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    topic = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "dyn-1")])
    segment = next(iter(topic.values())).result(timeout=10)["segment.ms"]
    assert (segment.value, segment.source) == ("800000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter([ConfigEntry("log.roll.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    alter_default(AlterConfigOp("log.roll.ms", AlterConfigOp.DELETE))
    assert segment_ms_of_log() == week
    with pytest.raises(Exception, match=r"Password encoder secret not configured"):
        alter([ConfigEntry("listener.name.plaintext.plain.sasl.jaas.config", "x", incremental_operation=set_op)])


def test_dynamic_log_cleaner_keys_restart_the_cleaner_with_them(broker: BrokerRunner) -> None:
    """``log.cleaner.*`` set on the broker resource reach the running cleaner (Kafka's
    ``LogCleaner.reconfigure``); deleting them brings the static values back."""
    admin = confluent(broker)

    def alter(value: str | None) -> None:
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        entries = [
            ConfigEntry("log.cleaner.threads", value, incremental_operation=op),
            ConfigEntry("log.cleaner.backoff.ms", value and "250", incremental_operation=op),
        ]
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)
        admin.incremental_alter_configs([resource])[resource].result(timeout=10)

    def cleaner_state() -> tuple[int, int, int]:
        async def read() -> tuple[int, int, int]:
            assert broker.broker is not None and broker.broker.log_cleaner is not None
            cleaner = broker.broker.log_cleaner
            return cleaner.config.num_threads, cleaner.config.backoff_ms, len(cleaner._tasks)

        return broker.call(read)  # type: ignore[no-any-return]

    def settles_at(expected: tuple[int, int, int]) -> bool:
        """The change reaches the cleaner through the config change notification, as in Kafka:
        after the AlterConfigs answer, not before it."""
        deadline = time.monotonic() + 10
        while cleaner_state() != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return cleaner_state() == expected

    assert cleaner_state() == (1, 15000, 1)
    alter("2")
    assert settles_at((2, 250, 2)), cleaner_state()
    alter(None)
    assert settles_at((1, 15000, 1)), cleaner_state()
