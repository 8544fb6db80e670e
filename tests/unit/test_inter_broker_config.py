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
        (
            {
                "listeners": "A://:1,PLAINTEXT://:2",
                "listener.security.protocol.map": "A:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "PLAINTEXT",
        ),
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
        ({"security.inter.broker.protocol": "SSL"}, "must be a listener name defined in advertised.listeners"),
        ({"security.inter.broker.protocol": "PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT"}, "Only one of"),
        ({"inter.broker.listener.name": "OTHER"}, "must be a listener name defined in advertised.listeners"),
        (
            {"listeners": "SASL_SSL://:9093", "sasl.enabled.mechanisms": "PLAIN"},
            "sasl.mechanism.inter.broker.protocol must be included",
        ),
        ({"listeners": "INTERNAL://:9093"}, "No security protocol defined for listener INTERNAL"),
        (
            {
                "listeners": "A://:1,B://:2",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
                "control.plane.listener.name": "A",
            },
            "must be different from inter.broker.listener.name",
        ),
        ({"listener.name.a.log.retention.ms": "5"}, "cannot be set per listener"),
        ({"listener.name.a.ssl.client.auth.x": "5"}, "cannot be set per listener"),
    ],
)
def test_inter_broker_and_listener_config_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        KafkaConfig(props)


def test_listeners_with_every_security_protocol() -> None:
    config = KafkaConfig(
        {
            "listeners": "SASL_SSL://:1,INTERNAL://:2,EXTERNAL://:3",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT,EXTERNAL:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms": "scram-sha-512",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": "m required;",
            "listener.name.external.ssl.client.auth": "required",
        }
    )
    assert config.inter_broker_security_protocol == "SASL_PLAINTEXT"
    assert config.sasl_enabled_mechanisms("INTERNAL") == ["SCRAM-SHA-512"]
    assert config.sasl_enabled_mechanisms("SASL_SSL") == ["PLAIN"]
    assert config.for_listener("EXTERNAL")["ssl.client.auth"] == "required"
    assert config.for_listener("INTERNAL")["scram-sha-512.sasl.jaas.config"] == "m required;"
    assert config.listener_security_protocol("EXTERNAL") == "SSL"


def test_broker_source_address_reaches_every_inter_broker_connection() -> None:
    from odradek.client.security import inter_broker_client_security
    from odradek.server.listeners import controller_listener

    bound = KafkaConfig({"odradek.broker.source.address": "127.0.0.3"})
    assert inter_broker_client_security(bound).source_address == "127.0.0.3"
    assert inter_broker_client_security(KafkaConfig({})).source_address is None
    plane = KafkaConfig(
        {
            "listeners": "PLAINTEXT://:1,CONTROL://:2",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT",
            "control.plane.listener.name": "CONTROL",
            "odradek.broker.source.address": "127.0.0.3",
        }
    )
    name, security = controller_listener(plane, inter_broker_client_security(plane))
    assert (name, security.source_address) == ("CONTROL", "127.0.0.3")
