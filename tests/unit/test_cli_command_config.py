"""Every tool that connects to brokers reads Kafka's client properties file (``--command-config``;
``--producer.config`` / ``--consumer.config`` for the console tools) and hands its security to
odradek's client. No broker is needed: a trust store of Java's type is refused when the client
builds its TLS context, which happens before any socket is opened, and a SASL protocol without
credentials is refused when the file is read."""

from __future__ import annotations

import io
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from odradek.cli import (
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    leader_election,
    log_dirs,
    reassign_partitions,
    topics,
    transactions,
)
from odradek.client.security import ClientSecurity
from odradek.metadata.znodes import BrokerInfo
from odradek.zkclients.broker_partition_info import client_endpoint
from odradek.zkclients.consumer_connector import ConsumerConfig

B = "127.0.0.1:1"
TOOLS: dict[str, tuple[Callable[..., int], list[str], str]] = {
    "topics": (topics.main, ["--bootstrap-server", B, "--list"], "--command-config"),
    "consumer-groups": (consumer_groups.main, ["--bootstrap-server", B, "--list"], "--command-config"),
    "leader-election": (
        leader_election.main,
        ["--bootstrap-server", B, "--election-type", "preferred", "--all-topic-partitions"],
        "--command-config",
    ),
    "log-dirs": (log_dirs.main, ["--bootstrap-server", B, "--describe"], "--command-config"),
    "reassign-partitions": (reassign_partitions.main, ["--bootstrap-server", B, "--list"], "--command-config"),
    "transactions": (transactions.main, ["--bootstrap-server", B, "--command-config", "{}", "list"], ""),
    "configs": (
        configs.main,
        ["--bootstrap-server", B, "--describe", "--entity-type", "topics", "--entity-name", "t"],
        "--command-config",
    ),
    "console-producer": (console_producer.main, ["--bootstrap-server", B, "--topic", "t"], "--producer.config"),
    "console-producer (Kafka 4)": (
        console_producer.main,
        ["--bootstrap-server", B, "--topic", "t"],
        "--command-config",
    ),
    "console-consumer": (console_consumer.main, ["--bootstrap-server", B, "--topic", "t"], "--consumer.config"),
}


def properties(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def run_tool(name: str, config: str) -> int:
    main, argv, flag = TOOLS[name]
    argv = [a.replace("{}", config) for a in argv] + ([flag, config] if flag else [])
    extra: dict[str, Any] = {}
    if main is console_producer.main:
        extra["stdin"] = io.StringIO("")
    if main is console_consumer.main:
        extra["stdout"] = io.BytesIO()
    return main(argv, **extra)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_the_file_reaches_the_clients_connections(
    name: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = properties(tmp_path, "security.protocol=SSL\nssl.truststore.location=/etc/kafka/client.truststore.jks\n")
    assert run_tool(name, config) == 1
    err = capsys.readouterr().err
    assert "ssl.truststore.type" in err and "JKS stores are Java's format" in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize("name", ["topics", "console-consumer"])
def test_sasl_without_credentials_is_named(
    name: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_tool(name, properties(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")) == 1
    assert "needs the client's credentials: sasl.jaas.config" in capsys.readouterr().err


def test_missing_file_is_one_line(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_tool("topics", str(tmp_path / "absent.properties")) == 1
    err = capsys.readouterr().err
    assert "absent.properties" in err and "--command-config" in err and err.count("\n") == 1


def test_console_property_overrides_the_file(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--consumer-property security.protocol=PLAINTEXT`` wins over the file's SSL: no TLS error,
    the (absent) broker is what fails."""
    config = properties(tmp_path, "security.protocol=SSL\nssl.truststore.location=/x.jks\n")
    argv = ["--bootstrap-server", B, "--topic", "t", "--consumer.config", config]
    argv += ["--consumer-property", "security.protocol=PLAINTEXT"]
    assert console_consumer.main(argv, stdout=io.BytesIO()) == 1
    err = capsys.readouterr().err
    assert "connection refused" in err and "ssl" not in err


# --- the ZooKeeper clients -------------------------------------------------------------------------


def test_zookeeper_consumer_takes_the_security_keys() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    config = ConsumerConfig.from_properties(
        "g",
        "zk:2181",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas,
            "auto.commit.enable": "false",
        },
    )
    assert config.security == ClientSecurity("SASL_PLAINTEXT", (), "PLAIN", "u", "p")
    assert config.auto_commit_enable is False
    with pytest.raises(ValueError, match=r"unknown consumer property 'bootstrap\.servers'"):
        ConsumerConfig.from_properties("g", "zk:2181", {"bootstrap.servers": "x"})


def test_zookeeper_clients_pick_the_listener_of_their_protocol() -> None:
    info = BrokerInfo(
        id=1,
        host="h",
        port=9092,
        endpoints=["INTERNAL://h:9093", "PLAINTEXT://h:9092", "EXTERNAL://h:9094", "SASL_SSL://h:9095"],
        listener_security_protocol_map={
            "INTERNAL": "SASL_SSL",
            "PLAINTEXT": "PLAINTEXT",
            "EXTERNAL": "SASL_SSL",
            "SASL_SSL": "SASL_SSL",
        },
    )
    assert client_endpoint(info, "SASL_SSL") == ("h", 9095)  # the listener named like the protocol
    assert client_endpoint(info, "PLAINTEXT") == ("h", 9092)
    assert client_endpoint(info, "SSL") == ("h", 9092)  # none speaks SSL: PLAINTEXT, as before
    internal_first = BrokerInfo(
        id=1,
        host="h",
        port=9093,
        endpoints=["INTERNAL://h:9093", "EXTERNAL://h:9094"],
        listener_security_protocol_map={"INTERNAL": "SSL", "EXTERNAL": "SASL_SSL"},
    )
    assert client_endpoint(internal_first, "SASL_SSL") == ("h", 9094)


def test_zookeeper_producer_and_consumer_connect_with_the_security() -> None:
    from odradek.zkclients.consumer_connector import ZookeeperConsumerConnector
    from odradek.zkclients.producer import Producer as ZkProducer

    security = ClientSecurity.from_properties({"security.protocol": "SSL"})
    producer = ZkProducer(zookeeper_connect="zk:2181", security=security)
    assert producer.broker_partition_info.security is security
    config = ConsumerConfig.from_properties("g", "zk:2181", {"security.protocol": "SSL"})
    connector = ZookeeperConsumerConnector(config, {"t": 1})
    assert connector.info.security == security and connector.consumer.cluster is connector.info
