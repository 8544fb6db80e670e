"""create.topic.policy.class.name and alter.config.policy.class.name on a broker, through a real client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.errors import InvalidConfigError
from odradek.server.policies import AlterConfigRequest, CreateTopicRequest, load_policy
from odradek.testing import BrokerRunner


class NoWideTopics:
    """Refuses topics of more than ``max`` partitions (``max`` read from the broker's configuration)."""

    def configure(self, configs: dict[str, Any]) -> None:
        self.max = 3 if configs.get("num.partitions") == 1 else 0

    def validate(self, request: CreateTopicRequest) -> None:
        if (request.num_partitions or 0) > self.max:
            raise ValueError(f"{request.topic}: at most {self.max} partitions")


class NoShortRetention:
    def validate(self, request: AlterConfigRequest) -> None:
        if int(request.configs.get("retention.ms", "86400000")) < 60000:
            raise ValueError(f"retention.ms of {request.resource_name} under a minute")


def test_the_policies_refuse_with_policy_violation(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    broker = odradek_broker_factory(
        overrides={
            "create.topic.policy.class.name": f"{__name__}.NoWideTopics",
            "alter.config.policy.class.name": f"{__name__}:NoShortRetention",
        }
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic("wide", 4, 1), NewTopic("narrow", 3, 1)], operation_timeout=10)
    with pytest.raises(KafkaException) as refused:
        futures["wide"].result(30)
    error = refused.value.args[0]
    assert error.name() == "POLICY_VIOLATION" and "wide: at most 3 partitions" in error.str()
    futures["narrow"].result(30)

    short = ConfigResource("topic", "narrow", set_config={"retention.ms": "1000"})
    with pytest.raises(KafkaException) as altered:
        admin.alter_configs([short])[short].result(30)
    assert altered.value.args[0].name() == "POLICY_VIOLATION"
    long = ConfigResource("topic", "narrow", set_config={"retention.ms": "3600000"})
    admin.alter_configs([long])[long].result(30)


def test_a_policy_that_cannot_be_loaded_is_a_configuration_error() -> None:
    with pytest.raises(InvalidConfigError, match=r"no\.such\.module\.Policy"):
        load_policy("no.such.module.Policy", {})
    with pytest.raises(InvalidConfigError, match="has no validate method"):
        load_policy("builtins.object", {})
