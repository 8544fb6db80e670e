"""ClientSecurity from Kafka's and librdkafka's client keys, the broker's inter-broker security,
and KafkaConnection's SASL exchange against the real server mechanisms (a small SASL listener on
loopback)."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest

from odradek.client import connection as connection_module
from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaAuthenticationError, KafkaConnectionError
from odradek.client.security import (
    PLAINTEXT_SECURITY,
    ClientSecurity,
    inter_broker_client_security,
    inter_broker_security_for,
    read_properties_file,
)
from odradek.errors import ErrorCode, InvalidConfigError
from odradek.protocol.api_keys import ApiKey
from odradek.security.tls import SslConfigError
from unit import security_support as certs
from unit.sasl_fake_broker import FakeSaslBroker, listening

KRB5_JAAS = (
    "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
    'keyTab="/k.keytab" principal="kafka/127.0.0.1@EXAMPLE.COM";'
)
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
)
SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'
)


# --- ClientSecurity.from_properties --------------------------------------------------------------


def test_no_keys_is_plaintext() -> None:
    assert ClientSecurity.from_properties({}) == PLAINTEXT_SECURITY
    assert ClientSecurity.from_properties(None).ssl_context() is None
    assert not PLAINTEXT_SECURITY.uses_ssl and not PLAINTEXT_SECURITY.uses_sasl


def test_sasl_ssl_from_kafka_keys(tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(certs.ca().cert_pem())
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.location": str(ca),
            "ssl.truststore.type": "PEM",
            "client.id": "ignored",
        }
    )
    assert security.security_protocol == "SASL_SSL" and security.uses_ssl and security.uses_sasl
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == (
        "SCRAM-SHA-512",
        "alice",
        "alice-secret",
    )
    assert dict(security.ssl_config) == {"ssl.truststore.location": str(ca), "ssl.truststore.type": "PEM"}
    assert "alice-secret" not in repr(security)
    context = security.ssl_context()
    assert context is not None and context.check_hostname
    assert security.ssl_context() is context  # built once per ssl.* map


def test_librdkafka_names(tmp_path: pathlib.Path) -> None:
    ca, cert, key = tmp_path / "ca.pem", tmp_path / "client.pem", tmp_path / "client.key"
    ca.write_text(certs.ca().cert_pem())
    cert.write_text(certs.client().cert_pem())
    key.write_text(certs.client().key_pem("kp"))
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-secret",
            "ssl.ca.location": str(ca),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    config = dict(security.ssl_config)
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == ("PLAIN", "bob", "bob-secret")
    assert config["ssl.truststore.location"] == str(ca) and config["ssl.truststore.type"] == "PEM"
    assert config["ssl.keystore.type"] == "PEM" and "BEGIN CERTIFICATE" in config["ssl.keystore.certificate.chain"]
    assert config["ssl.endpoint.identification.algorithm"] == ""
    context = security.ssl_context()
    assert context is not None and not context.check_hostname
    # the client certificate really is loaded: a server requiring one accepts the handshake
    server = create_server_context(tmp_path, client_auth="required")
    srv, _ = certs.handshake(server, context)
    assert srv.getpeercert() is not None


def create_server_context(tmp_path: pathlib.Path, client_auth: str = "none") -> Any:
    from odradek.security.tls import create_ssl_context

    store = tmp_path / "server.pem"
    store.write_text(certs.server().key_pem() + certs.server().cert_pem())
    truststore = tmp_path / "server-trust.pem"
    truststore.write_text(certs.ca().cert_pem())
    return create_ssl_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(store),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
            "ssl.client.auth": client_auth,
        },
        server_side=True,
    )


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"security.protocol": "KERBEROS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": PLAIN_JAAS}, "GSSAPI"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": PLAIN_JAAS},
            "OAuthBearerLoginModule expected",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "bob"}, "sasl.password"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "Module required"},
            "semi-colon",
        ),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/x.pem"}, "ssl.key.location"),
    ],
)
def test_bad_keys_are_named(props: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidConfigError, match=named):
        ClientSecurity.from_properties(props)


def test_invalid_ssl_setting_named_when_the_context_is_built() -> None:
    security = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.location": "/nowhere.jks"})
    with pytest.raises(SslConfigError, match=r"ssl\.truststore\.type"):
        security.ssl_context()


def test_ssl_keys_ignored_without_tls() -> None:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.location": "/x",
        }
    )
    assert security.ssl_config == () and security.ssl_context() is None


def test_properties_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# admin client\nsecurity.protocol=SASL_SSL\nsasl.mechanism: SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="a=b";\n'
    )
    props = read_properties_file(str(path))
    assert props["sasl.mechanism"] == "SCRAM-SHA-256"
    security = ClientSecurity.from_properties(props)
    assert (security.sasl_username, security.sasl_password) == ("admin", "a=b")
    with pytest.raises(InvalidConfigError, match=r"--consumer\.config"):
        read_properties_file(str(tmp_path / "missing"), "--consumer.config")


# --- inter-broker ---------------------------------------------------------------------------------


def test_inter_broker_takes_the_listeners_jaas_and_ssl_keys() -> None:
    props = {
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.internal.scram-sha-256.sasl.jaas.config": SCRAM_JAAS.replace("alice", "broker"),
        "sasl.jaas.config": PLAIN_JAAS,
        "ssl.truststore.location": "/everyone.pem",
        "listener.name.internal.ssl.truststore.location": "/internal.pem",
        "listener.name.external.ssl.truststore.location": "/external.pem",
        "ssl.truststore.type": "PEM",
    }
    security = inter_broker_security_for(props, "INTERNAL", "SASL_SSL")
    assert (security.security_protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-256")
    assert (security.sasl_username, security.sasl_password) == ("broker", "broker-secret")
    assert dict(security.ssl_config) == {"ssl.truststore.location": "/internal.pem", "ssl.truststore.type": "PEM"}


def test_inter_broker_falls_back_to_sasl_jaas_config() -> None:
    props = {"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}
    security = inter_broker_security_for(props, "BROKER", "SASL_PLAINTEXT")
    assert (security.sasl_mechanism, security.sasl_username) == ("PLAIN", "alice")
    assert inter_broker_security_for(props, "PLAINTEXT", "PLAINTEXT") == PLAINTEXT_SECURITY


@pytest.mark.parametrize(
    ("props", "named"),
    [
        (
            {"listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS},
            "listener.name.internal.gssapi.sasl.jaas.config",
        ),
        (
            {"listener.name.internal.gssapi.sasl.jaas.config": PLAIN_JAAS},
            "Krb5LoginModule expected for GSSAPI",
        ),
        (
            {"sasl.jaas.config": KRB5_JAAS},
            "Missing configuration sasl.kerberos.service.name",
        ),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "listener.name.internal.plain.sasl.jaas.config"),
        (
            {
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": (
                    'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="x";'
                ),
            },
            'username="..."',
        ),
    ],
)
def test_inter_broker_errors(props: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidConfigError, match=named):
        inter_broker_security_for(props, "INTERNAL", "SASL_SSL")


def test_inter_broker_gssapi_logs_in_with_the_listener_keytab() -> None:
    props = {"sasl.jaas.config": KRB5_JAAS, "listener.name.internal.sasl.kerberos.service.name": "kafka"}
    security = inter_broker_security_for(props, "INTERNAL", "SASL_PLAINTEXT")
    assert (security.sasl_mechanism, security.kerberos_service_name) == ("GSSAPI", "kafka")
    assert security.kerberos is not None
    assert (security.kerberos.principal, security.kerberos.keytab) == ("kafka/127.0.0.1@EXAMPLE.COM", "/k.keytab")


def test_client_gssapi_keys() -> None:
    librdkafka = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.keytab": "/alice.keytab",
            "sasl.kerberos.principal": "alice@EXAMPLE.COM",
        }
    )
    assert librdkafka.kerberos is not None and librdkafka.kerberos.keytab == "/alice.keytab"
    jaas = ClientSecurity.from_properties(
        {"security.protocol": "SASL_SSL", "sasl.jaas.config": KRB5_JAAS.replace(";", ' serviceName="kafka";')}
    )
    assert (jaas.sasl_mechanism, jaas.kerberos_service_name) == ("GSSAPI", "kafka")


def test_inter_broker_from_a_broker_config() -> None:
    from odradek.server.config import KafkaConfig

    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert inter_broker_client_security(config) == PLAINTEXT_SECURITY


# --- the SASL exchange of KafkaConnection ----------------------------------------------------------


def sasl(mechanism: str, password: str = "alice-secret", user: str = "alice") -> ClientSecurity:
    return ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )


def connect(broker: FakeSaslBroker, security: ClientSecurity) -> KafkaConnection:
    async def run() -> KafkaConnection:
        async with listening(broker) as port:
            conn = KafkaConnection("127.0.0.1", port, security=security)
            await conn.connect()
            await conn.close()
            return conn

    return asyncio.run(run())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_authenticates_with_handshake_v1_then_authenticate(mechanism: str) -> None:
    broker = FakeSaslBroker({"alice": "alice-secret"}, session_lifetime_ms=60000)
    conn = connect(broker, sasl(mechanism))
    assert broker.authenticated == "alice"
    rounds = 1 if mechanism == "PLAIN" else 2
    assert (
        broker.seen == [(ApiKey.API_VERSIONS, 3), (ApiKey.SASL_HANDSHAKE, 1)] + [(ApiKey.SASL_AUTHENTICATE, 2)] * rounds
    )
    assert conn.session_lifetime_ms == 60000


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_raises_the_brokers_message(mechanism: str) -> None:
    broker = FakeSaslBroker({"alice": "alice-secret"})
    with pytest.raises(KafkaAuthenticationError) as info:
        connect(broker, sasl(mechanism, password="wrong"))
    assert info.value.error_code == ErrorCode.sasl_authentication_failed
    assert isinstance(info.value, KafkaConnectionError)
    expected = (
        "Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    assert "SASL_AUTHENTICATION_FAILED" in str(info.value) and expected in str(info.value)
    assert broker.authenticated is None


def test_unknown_user_refused() -> None:
    with pytest.raises(KafkaAuthenticationError, match="SCRAM-SHA-512"):
        connect(FakeSaslBroker({"alice": "x"}), sasl("SCRAM-SHA-512", user="mallory"))


def test_mechanism_not_enabled_names_the_enabled_ones() -> None:
    broker = FakeSaslBroker({"alice": "alice-secret"}, enabled=("SCRAM-SHA-512",))
    with pytest.raises(KafkaAuthenticationError, match=r"PLAIN \(UNSUPPORTED_SASL_MECHANISM\).*\[SCRAM-SHA-512\]"):
        connect(broker, sasl("PLAIN"))
    assert (ApiKey.SASL_AUTHENTICATE, 2) not in broker.seen


def test_broker_without_sasl_authenticate() -> None:
    broker = FakeSaslBroker(
        {"alice": "alice-secret"}, versions={ApiKey.API_VERSIONS: (0, 3), ApiKey.SASL_HANDSHAKE: (0, 0)}
    )
    with pytest.raises(KafkaAuthenticationError, match="does not serve SaslHandshake v1"):
        connect(broker, sasl("PLAIN"))
    assert broker.seen == [(ApiKey.API_VERSIONS, 3)]


def test_forged_server_signature_refused() -> None:
    """A broker that does not know the password cannot complete SCRAM: the client checks v=."""
    broker = FakeSaslBroker({"alice": "alice-secret"})
    impostor = FakeSaslBroker({"alice": "something else"})
    broker.credentials["SCRAM-SHA-256"]["alice"] = impostor.credentials["SCRAM-SHA-256"]["alice"]
    with pytest.raises(KafkaAuthenticationError):
        connect(broker, sasl("SCRAM-SHA-256"))


def test_plaintext_connection_sends_no_sasl() -> None:
    broker = FakeSaslBroker({})
    connect(broker, PLAINTEXT_SECURITY)
    assert broker.seen == [(ApiKey.API_VERSIONS, 3)]


EMPTY_METADATA = {"topics": (), "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def test_reauthenticates_before_the_session_ends() -> None:
    """KIP-368: past 85-95 % of the session lifetime the next request is preceded by a new
    SaslHandshake and SaslAuthenticate (no ApiVersions); without it the broker would close."""
    broker = FakeSaslBroker({"alice": "alice-secret"}, session_lifetime_ms=300)
    metadata = connection_module.RequestBuilder(ApiKey.METADATA, 12)

    async def run() -> None:
        async with (
            listening(broker) as port,
            KafkaConnection("127.0.0.1", port, security=sasl("SCRAM-SHA-256")) as conn,
        ):
            await conn.send(metadata(**EMPTY_METADATA))
            assert broker.reauthentications == 0
            await asyncio.sleep(0.3)
            await asyncio.gather(*(conn.send(metadata(**EMPTY_METADATA)) for _ in range(3)))
            assert broker.reauthentications == 1 and broker.authenticated == "alice"

    asyncio.run(run())
    after_first_metadata = broker.seen[broker.seen.index((ApiKey.METADATA, 12)) + 1 :]
    assert after_first_metadata == [
        (ApiKey.SASL_HANDSHAKE, 1),
        (ApiKey.SASL_AUTHENTICATE, 2),
        (ApiKey.SASL_AUTHENTICATE, 2),
        (ApiKey.METADATA, 12),
        (ApiKey.METADATA, 12),
        (ApiKey.METADATA, 12),
    ]


def test_refused_reauthentication_closes_the_connection() -> None:
    broker = FakeSaslBroker({"alice": "alice-secret"}, session_lifetime_ms=100)
    metadata = connection_module.RequestBuilder(ApiKey.METADATA, 12)(**EMPTY_METADATA)

    async def run() -> KafkaConnection:
        async with listening(broker) as port:
            conn = await KafkaConnection("127.0.0.1", port, security=sasl("PLAIN")).connect()
            broker.users["alice"] = "changed"  # the password changed meanwhile
            await asyncio.sleep(0.1)
            with pytest.raises(KafkaAuthenticationError, match="Invalid username or password"):
                await conn.send(metadata)
            return conn

    assert asyncio.run(run()).closed
