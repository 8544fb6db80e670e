"""Config admin APIs against a real broker, through confluent-kafka's AdminClient and odradek's own client.

DescribeConfigs (topic and broker resources, sources, synonyms, documentation, every version),
AlterConfigs and IncrementalAlterConfigs, and their effect as later requests and the broker's
logs see it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
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
    assert retention.synonyms == [("retention.ms", "1000", 1), ("log.retention.hours", "168", 5)]
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
                Resource.broker(0): {"log.retention.ms": "1"},
            }
        ),
    )
    assert errors[Resource.topic("ac-1")].error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert errors[Resource.topic("ac-missing")].error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert errors[Resource.broker(0)].error_code == ErrorCode.invalid_request  # type: ignore[union-attr]
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
                Resource.broker(0): [AlterConfigOp("log.retention.ms", AlterConfigOp.SET, "1")],
            }
        ),
    )
    assert errors[Resource.topic("iac-1")].error_code == ErrorCode.invalid_config  # type: ignore[union-attr]
    assert errors[Resource.topic("iac-missing")].error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert errors[Resource.broker(0)].error_code == ErrorCode.invalid_request  # type: ignore[union-attr]
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
