"""security.inter.broker.protocol and inter.broker.listener.name are checked as Kafka checks them."""

from __future__ import annotations

import pytest

from odradek.errors import InvalidConfigError
from odradek.server.config import KafkaConfig


@pytest.mark.parametrize(
    ("props", "listener"),
    [
        ({}, "PLAINTEXT"),
        (
            {"listeners": "INTERNAL://:1,PLAINTEXT://:2", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"},
            "INTERNAL",
        ),
        ({"listeners": "A://:1,PLAINTEXT://:2", "security.inter.broker.protocol": "PLAINTEXT"}, "PLAINTEXT"),
        (
            {
                "listeners": "A://:1,B://:2",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
                "inter.broker.listener.name": "b",
            },
            "B",
        ),
    ],
)
def test_the_inter_broker_listener(props: dict[str, str], listener: str) -> None:
    assert KafkaConfig(props).inter_broker_listener_name == listener


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"security.inter.broker.protocol": "SSL"}, "odradek serves PLAINTEXT only"),
        ({"security.inter.broker.protocol": "PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT"}, "Only one of"),
        ({"inter.broker.listener.name": "OTHER"}, "must be a listener name defined in advertised.listeners"),
        ({"listeners": "SSL://:9093"}, "uses security protocol SSL"),
    ],
)
def test_anything_but_plaintext_between_brokers_is_a_config_error(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        KafkaConfig(props)
