"""``zookeeper.ssl.*`` (KIP-515) to an ``ssl.SSLContext``: PEM and PKCS12 stores, Kafka's rules
(the Netty client socket with TLS), ZooKeeper's system properties from ``KAFKA_OPTS``, every bad
value refused naming its key; the TLS context then completes a handshake with a server that
requires a client certificate (memory BIOs, no sockets)."""

from __future__ import annotations

import pathlib
import ssl

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.errors import InvalidConfigError
from odradek.security.tls import create_ssl_context
from odradek.security.zookeeper_tls import NETTY_SOCKET, load_zk_tls_config_file, zk_tls_config
from odradek.zkclients.consumer_connector import ConsumerConfig

from . import security_support as certs

PASSWORD = "store-secret"


@pytest.fixture
def files(tmp_path: pathlib.Path) -> dict[str, str]:
    client, ca = certs.client("broker-1"), certs.ca()
    (tmp_path / "client.pem").write_text(client.key_pem() + client.cert_pem())
    (tmp_path / "encrypted.pem").write_text(client.key_pem(PASSWORD) + client.cert_pem())
    (tmp_path / "client.p12").write_bytes(client.pkcs12(PASSWORD, ca))
    (tmp_path / "ca.pem").write_text(ca.cert_pem())
    encryption = serialization.BestAvailableEncryption(PASSWORD.encode())
    (tmp_path / "trust.p12").write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca.cert], encryption))
    (tmp_path / "server.pem").write_text(certs.server().key_pem() + certs.server().cert_pem())
    return {p.name: str(p) for p in tmp_path.iterdir()}


def base(files: dict[str, str], keystore: str = "client.pem") -> dict[str, str]:
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": NETTY_SOCKET,
        "zookeeper.ssl.keystore.location": files[keystore],
        "zookeeper.ssl.truststore.location": files["ca.pem"],
    }


def zookeeper_server(files: dict[str, str]) -> ssl.SSLContext:
    """ZooKeeper's secure port: its certificate, client certificates required."""
    return create_ssl_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": files["server.pem"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": files["ca.pem"],
            "ssl.client.auth": "required",
        },
        server_side=True,
    )


def test_pem_and_pkcs12_stores_give_a_context_that_handshakes(files: dict[str, str]) -> None:
    variants = [
        base(files),
        {**base(files, "encrypted.pem"), "zookeeper.ssl.keystore.password": PASSWORD},
        {
            **base(files, "client.p12"),
            "zookeeper.ssl.keystore.password": PASSWORD,
            "zookeeper.ssl.truststore.location": files["trust.p12"],
            "zookeeper.ssl.truststore.password": PASSWORD,
        },
        {
            **base(files, "client.p12"),
            "zookeeper.ssl.keystore.type": "pkcs12",
            "zookeeper.ssl.keystore.password": PASSWORD,
        },
    ]
    for props in variants:
        context = zk_tls_config(props).ssl_context()
        assert context is not None and context.check_hostname
        server_side, client_side = certs.handshake(zookeeper_server(files), context, "127.0.0.1")
        assert server_side.getpeercert() is not None  # the client presented its certificate
        assert client_side.version() == "TLSv1.2"  # ZooKeeper's default zookeeper.ssl.protocol


def test_protocols_and_hostname_verification(files: dict[str, str]) -> None:
    context = zk_tls_config({**base(files), "zookeeper.ssl.protocol": "TLS"}).ssl_context()
    assert context is not None and context.maximum_version == ssl.TLSVersion.TLSv1_3
    context = zk_tls_config({**base(files), "zookeeper.ssl.enabled.protocols": "TLSv1.3"}).ssl_context()
    assert context is not None and context.minimum_version == ssl.TLSVersion.TLSv1_3
    for value, check in (("https", True), ("", False), ("none", False)):
        props = {**base(files), "zookeeper.ssl.endpoint.identification.algorithm": value}
        context = zk_tls_config(props).ssl_context()
        assert context is not None and context.check_hostname is check
    context = zk_tls_config({**base(files), "zookeeper.ssl.endpoint.identification.algorithm": ""}).ssl_context()
    assert context is not None
    certs.handshake(zookeeper_server(files), context, "not-the-server-name")  # no check asked for
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        certs.handshake(zookeeper_server(files), zk_tls_config(base(files)).ssl_context(), "not-the-server-name")  # type: ignore[arg-type]


def test_bad_settings_are_refused_naming_the_key(files: dict[str, str], tmp_path: pathlib.Path) -> None:
    b = base(files)
    cases: list[tuple[dict[str, str], str]] = [
        ({**b, "zookeeper.clientCnxnSocket": ""}, "zookeeper.clientCnxnSocket must be " + NETTY_SOCKET),
        ({**b, "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNIO"}, "it is org.apache"),
        ({**b, "zookeeper.ssl.ocsp.enable": "true"}, "zookeeper.ssl.ocsp.enable: certificate revocation"),
        ({**b, "zookeeper.ssl.crl.enable": "true"}, "zookeeper.ssl.crl.enable"),
        ({**b, "zookeeper.ssl.keystore.type": "JKS"}, "zookeeper.ssl.keystore.type: JKS stores are Java's"),
        ({**b, "zookeeper.ssl.keystore.location": files["client.p12"]}, "zookeeper.ssl.keystore.password"),
        (
            {**base(files, "encrypted.pem"), "zookeeper.ssl.keystore.password": "wrong"},
            "zookeeper.ssl.keystore.password",
        ),
        ({**b, "zookeeper.ssl.keystore.location": str(tmp_path / "x.store")}, "unable to auto-detect"),
        ({**b, "zookeeper.ssl.truststore.location": str(tmp_path / "none.pem")}, "zookeeper.ssl.truststore.location"),
        ({**b, "zookeeper.ssl.protocol": "TLSv1.1"}, "zookeeper.ssl.enabled.protocols"),
        ({**b, "zookeeper.ssl.cipher.suites": "TLS_NOPE"}, "zookeeper.ssl.cipher.suites"),
        ({**b, "zookeeper.ssl.client.enable": "maybe"}, "zookeeper.ssl.client.enable"),
    ]
    for props, message in cases:
        with pytest.raises(InvalidConfigError, match=message.replace(".", r"\.")):
            zk_tls_config(props).ssl_context()
    assert zk_tls_config({**b, "zookeeper.ssl.client.enable": "false"}).ssl_context() is None
    assert zk_tls_config({}, {}).ssl_context() is None
    assert "store-secret" not in repr(zk_tls_config({**b, "zookeeper.ssl.keystore.password": PASSWORD}))


def test_unset_keys_come_from_zookeepers_system_properties(files: dict[str, str]) -> None:
    opts = " ".join(
        [
            "-Xmx1g -Dzookeeper.client.secure=true",
            f"-Dzookeeper.clientCnxnSocket={NETTY_SOCKET}",
            "-Dzookeeper.ssl.hostnameVerification=false",
            f"-Dzookeeper.ssl.keyStore.location={files['client.p12']}",
            f"-Dzookeeper.ssl.keyStore.password={PASSWORD}",
            f"-Dzookeeper.ssl.trustStore.location={files['ca.pem']}",
            "-Dzookeeper.ssl.enabledProtocols=TLSv1.2,TLSv1.3",
        ]
    )
    config = zk_tls_config({}, {"KAFKA_OPTS": opts})
    assert config.client_enable and config.client_auth_enabled and not config.hostname_verification
    assert config.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert config.keystore_location == files["client.p12"]
    assert isinstance(config.ssl_context(), ssl.SSLContext)
    # a key that is set wins over its system property
    assert not zk_tls_config({"zookeeper.ssl.client.enable": "false"}, {"KAFKA_OPTS": opts}).client_enable


def test_a_tools_config_file_keeps_only_the_zookeeper_tls_keys(files: dict[str, str], tmp_path: pathlib.Path) -> None:
    path = tmp_path / "zk-tls.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in base(files).items()) + "# a comment\nbroker.id=7\nfoo=bar\n")
    config = load_zk_tls_config_file(str(path), {})
    assert config.client_auth_enabled and config.keystore_location == files["client.pem"]
    with pytest.raises(InvalidConfigError, match="cannot read the ZooKeeper TLS configuration file"):
        load_zk_tls_config_file(str(tmp_path / "missing.properties"), {})


def test_the_old_consumers_properties_may_hold_the_zookeeper_tls_keys(files: dict[str, str]) -> None:
    config = ConsumerConfig.from_properties(
        "readers", "127.0.0.1:2281", {**base(files), "auto.offset.reset": "smallest"}
    )
    assert isinstance(config.zookeeper_tls, ssl.SSLContext) and config.auto_offset_reset == "smallest"
    assert ConsumerConfig.from_properties("readers", "127.0.0.1:2181", {}).zookeeper_tls is None
    with pytest.raises(InvalidConfigError, match=r"zookeeper\.clientCnxnSocket must be"):
        ConsumerConfig.from_properties("readers", "127.0.0.1:2281", {"zookeeper.ssl.client.enable": "true"})
