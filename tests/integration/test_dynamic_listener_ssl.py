"""Listener-prefixed dynamic keys with real TLS: a broker's SSL key store is rotated through
``odradek configs --alter`` (AlterConfigs) without a restart. A key store that cannot be loaded is
refused before it is stored; the new certificate (issued by another CA, its key encrypted with a
password stored encrypted) is what new confluent-kafka clients see, while a connection opened
before keeps working; a key store rewritten in place is reloaded by the next AlterConfigs of the
broker; DescribeConfigs lists the prefixed keys with synonyms, passwords as null."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from odradek.cli import configs
from odradek.server.runner import BrokerRunner
from unit import security_support as certs

KEY_PASSWORD = "rotated-key-secret"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("rotate-certs")
    old, ca, new_ca = certs.server(), certs.ca(), certs.other_ca()
    new = certs.server_signed_by(new_ca)
    files = {
        "old": old.key_pem() + old.cert_pem() + ca.cert_pem(),
        "new": new.key_pem(KEY_PASSWORD) + new.cert_pem() + new_ca.cert_pem(),
        "ca": ca.cert_pem(),
        "new_ca": new_ca.cert_pem(),
        "broken": "not a key store\n",
    }
    for name, text in files.items():
        (directory / f"{name}.pem").write_text(text)
    return {name: str(directory / f"{name}.pem") for name in files}


@pytest.fixture(scope="module")
def broker(tls_files: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls_files["old"],
        "password.encoder.secret": "encoder-secret",
    }
    runner = BrokerRunner(str(tmp_path_factory.mktemp("rotate-broker")), overrides).start()
    try:
        yield runner
    finally:
        runner.stop()


def _ssl_bootstrap(runner: BrokerRunner) -> str:
    assert runner.broker is not None
    port = next(e.port for e in runner.broker.endpoints if e.listener == "SSL")
    return f"127.0.0.1:{port}"


def _connects(runner: BrokerRunner, ca: str, timeout: float = 8.0) -> bool:
    """Whether a new client trusting only ``ca`` gets metadata (a refusal is only known at the
    timeout: librdkafka retries the handshake, so negative checks pass a short one)."""
    admin = AdminClient(
        {"bootstrap.servers": _ssl_bootstrap(runner), "security.protocol": "SSL", "ssl.ca.location": ca}
    )
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


def _alter(runner: BrokerRunner, *pairs: str) -> int:
    return configs.main(
        [
            "--bootstrap-server",
            runner.bootstrap_servers,
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--add-config",
            ",".join(pairs),
        ]
    )


def test_a_rotated_keystore_serves_new_connections_without_a_restart(
    broker: BrokerRunner, tls_files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    old_client = Producer(
        {"bootstrap.servers": _ssl_bootstrap(broker), "security.protocol": "SSL", "ssl.ca.location": tls_files["ca"]}
    )
    old_client.produce("rotated", b"before")
    assert old_client.flush(15) == 0
    assert not _connects(broker, tls_files["new_ca"], timeout=2)

    prefix = "listener.name.ssl."
    assert _alter(broker, f"{prefix}ssl.keystore.location={tls_files['broken']}") == 1
    err = capsys.readouterr().err
    assert "Validation of dynamic config update of SSLFactory failed" in err
    assert _connects(broker, tls_files["ca"])  # nothing was stored or applied

    assert (
        _alter(broker, f"{prefix}ssl.keystore.location={tls_files['new']}", f"{prefix}ssl.key.password={KEY_PASSWORD}")
        == 0
    )
    capsys.readouterr()
    assert _connects(broker, tls_files["new_ca"])  # a client trusting only the new CA
    assert not _connects(broker, tls_files["ca"], timeout=2)
    old_client.produce("rotated", b"after")  # the connection opened before keeps its session
    assert old_client.flush(15) == 0

    assert broker.broker is not None and broker.loop is not None
    zk = broker.broker.zk
    stored = asyncio.run_coroutine_threadsafe(zk.get_entity_configs("brokers", "0"), broker.loop).result(10)
    assert stored[f"{prefix}ssl.keystore.location"] == tls_files["new"]
    assert stored[f"{prefix}ssl.key.password"] not in ("", KEY_PASSWORD)  # encrypted

    # a key store rewritten in place is reloaded by an AlterConfigs of the broker, even one that
    # changes nothing (Kafka's reloadUpdatedFilesWithoutConfigChange)
    back = certs.server_signed_by(certs.ca())
    pathlib.Path(tls_files["new"]).write_text(back.key_pem(KEY_PASSWORD) + back.cert_pem() + certs.ca().cert_pem())
    assert _connects(broker, tls_files["new_ca"])  # nothing reloaded yet
    same = (f"{prefix}ssl.keystore.location={tls_files['new']}", f"{prefix}ssl.key.password={KEY_PASSWORD}")
    assert _alter(broker, *same) == 0
    assert _connects(broker, tls_files["ca"])
    assert not _connects(broker, tls_files["new_ca"], timeout=2)

    assert (
        configs.main(
            [
                "--bootstrap-server",
                broker.bootstrap_servers,
                "--describe",
                "--entity-type",
                "brokers",
                "--entity-name",
                "0",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"{prefix}ssl.keystore.location={tls_files['new']} sensitive=false" in out
    assert f"{prefix}ssl.key.password=null sensitive=true" in out
