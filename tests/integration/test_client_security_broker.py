"""odradek's own client and tools against a real broker's TLS and SASL listeners: the producer and
consumer over SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), mutual TLS with a PEM key store, a
refused login, and ``odradek topics`` / ``console-producer`` / ``console-consumer`` with their
client properties files."""

from __future__ import annotations

import asyncio
import io
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.cli import console_consumer, console_producer, topics
from odradek.client.consumer import Consumer
from odradek.client.errors import KafkaAuthenticationError
from odradek.client.producer import Producer
from odradek.client.security import ClientSecurity
from odradek.storage.topic_partition import TopicPartition
from odradek.testing import BrokerRunner

from .security_support import address, secure_broker, write_certificates


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("client-certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]) -> Iterator[BrokerRunner]:
    with secure_broker(str(tmp_path_factory.mktemp("client-secure-broker")), paths) as runner:
        yield runner


def jaas(mechanism: str, user: str, password: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}";'


def sasl_ssl(paths: dict[str, str], mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas(mechanism, user, password),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
    }


def round_trip(bootstrap: str, security: ClientSecurity, count: int = 20) -> list[bytes]:
    topic = f"secure-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        async with Producer(bootstrap, security=security) as producer:
            for i in range(count):
                await producer.send(topic, f"record-{i}".encode(), partition=0)
        async with Consumer(bootstrap, auto_offset_reset="earliest", security=security) as consumer:
            await consumer.assign([TopicPartition(topic, 0)])
            values: list[bytes] = []
            for _ in range(50):
                values += [r.value or b"" for r in await consumer.poll(500)]
                if len(values) >= count:
                    break
            return values

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-256", "scram-user", "scram-secret"),
        ("SCRAM-SHA-512", "scram-user", "scram-secret"),
        ("PLAIN", "alice", "alice-secret"),
    ],
)
def test_producer_and_consumer_over_sasl_ssl(
    broker: BrokerRunner, paths: dict[str, str], mechanism: str, user: str, password: str
) -> None:
    security = ClientSecurity.from_properties(sasl_ssl(paths, mechanism, user, password))
    assert round_trip(address(broker, "SASL_SSL"), security) == [f"record-{i}".encode() for i in range(20)]


def test_sasl_plaintext_and_mutual_tls(broker: BrokerRunner, paths: dict[str, str]) -> None:
    sasl_plaintext = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas("PLAIN", "alice", "alice-secret"),
        }
    )
    assert len(round_trip(address(broker, "SASL_PLAINTEXT"), sasl_plaintext, 5)) == 5
    mutual = ClientSecurity.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": paths["ca"],
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": paths["client_keystore"],
        }
    )
    assert len(round_trip(address(broker, "MTLS"), mutual, 5)) == 5


def test_wrong_password_raises_the_brokers_message(broker: BrokerRunner, paths: dict[str, str]) -> None:
    security = ClientSecurity.from_properties(sasl_ssl(paths, "SCRAM-SHA-256", "scram-user", "wrong"))

    async def run() -> None:
        async with Producer(address(broker, "SASL_SSL"), security=security) as producer:
            await producer.partitions_for("anything")

    with pytest.raises(KafkaAuthenticationError) as info:
        asyncio.run(run())
    assert "SASL_AUTHENTICATION_FAILED" in str(info.value)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in str(info.value)


def properties(path: pathlib.Path, props: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_tools_with_client_properties_files(
    broker: BrokerRunner, paths: dict[str, str], tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = address(broker, "SASL_SSL")
    config = properties(tmp_path / "client.properties", sasl_ssl(paths, "SCRAM-SHA-512", "admin", "admin-secret"))
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create = ["--bootstrap-server", bootstrap, "--command-config", config, "--create", "--topic", topic]
    assert topics.main([*create, "--partitions", "1"]) == 0
    assert topics.main(["--bootstrap-server", bootstrap, "--command-config", config, "--list"]) == 0
    assert topic in capsys.readouterr().out.split()
    produce = ["--bootstrap-server", bootstrap, "--topic", topic, "--producer.config", config]
    assert console_producer.main(produce, stdin=io.StringIO("one\ntwo\n")) == 0
    out = io.BytesIO()
    consume: list[Any] = ["--bootstrap-server", bootstrap, "--topic", topic, "--consumer.config", config]
    assert console_consumer.main([*consume, "--from-beginning", "--max-messages", "2"], stdout=out) == 0
    assert out.getvalue().splitlines() == [b"one", b"two"]
    # without the file the SASL_SSL port refuses the tool, in one line
    capsys.readouterr()
    assert topics.main(["--bootstrap-server", bootstrap, "--list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is it a TLS listener" in err


def test_reauthentication_keeps_the_connection(tmp_path: pathlib.Path, paths: dict[str, str]) -> None:
    """A broker with connections.max.reauth.ms closes a connection whose session ended; odradek's
    client re-authenticates on it before then (KIP-368) and keeps using it."""
    reauth = {"listener.name.sasl_ssl.connections.max.reauth.ms": "600"}
    with secure_broker(str(tmp_path / "reauth-broker"), paths, **reauth) as runner:
        security = ClientSecurity.from_properties(sasl_ssl(paths, "PLAIN", "alice", "alice-secret"))

        async def run() -> None:
            async with Producer(address(runner, "SASL_SSL"), security=security) as producer:
                await producer.send("reauth", b"first", partition=0)
                (conn,) = [c for c in producer.cluster._connections.values() if not c.closed]
                assert conn.session_lifetime_ms == 600
                for i in range(4):
                    await asyncio.sleep(0.35)
                    await producer.send("reauth", f"after-{i}".encode(), partition=0)
                assert not conn.closed
                assert [c for c in producer.cluster._connections.values() if not c.closed] == [conn]

        asyncio.run(run())
