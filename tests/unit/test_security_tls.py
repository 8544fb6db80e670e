"""SSLContext from Kafka's ssl.* keys: real handshakes between a server and a client context over
memory BIOs, with certificates made at test time."""

from __future__ import annotations

import pathlib
import ssl
from typing import Any

import pytest

from odradek.security.listener_config import jaas_config_key, listener_config
from odradek.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper
from odradek.security.tls import SslConfigError, create_ssl_context, openssl_cipher_list

from . import security_support as certs
from .security_support import handshake


def pem_truststore() -> dict[str, Any]:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.ca().cert_pem()}


def inline_keystore(identity: certs.Identity) -> dict[str, Any]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": identity.key_pem(),
        "ssl.keystore.certificate.chain": identity.cert_pem(),
    }


def server_ctx(**extra: Any) -> ssl.SSLContext:
    return create_ssl_context({**inline_keystore(certs.server()), **pem_truststore(), **extra}, server_side=True)


def client_ctx(**extra: Any) -> ssl.SSLContext:
    return create_ssl_context({**pem_truststore(), **extra}, server_side=False)


def test_pem_file_keystore_and_truststore(tmp_path: pathlib.Path) -> None:
    keystore = tmp_path / "broker.pem"
    keystore.write_text(certs.server().key_pem() + certs.server().cert_pem() + certs.ca().cert_pem())
    truststore = tmp_path / "ca.pem"
    truststore.write_text(certs.ca().cert_pem())
    server = create_ssl_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}, server_side=True)
    client = create_ssl_context(
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(truststore)}, server_side=False
    )
    srv, cli = handshake(server, client)
    assert srv.getpeercert(binary_form=True) is None  # ssl.client.auth=none asks for no certificate
    assert cli.version() == "TLSv1.3"
    peer = cli.getpeercert()
    assert peer is not None and ("DNS", "localhost") in peer["subjectAltName"]


def test_inline_pem_single_line_as_kafka_accepts() -> None:
    # Kafka's PEM parser accepts blanks in place of newlines (a properties file value on one line).
    one_line = certs.server().cert_pem().replace("\n", " ")
    server = create_ssl_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": certs.server().key_pem().replace("\n", " "),
            "ssl.keystore.certificate.chain": one_line,
        },
        server_side=True,
    )
    handshake(server, client_ctx())


def test_encrypted_pem_key_needs_the_key_password() -> None:
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": certs.server().key_pem(password="s3cret"),
        "ssl.keystore.certificate.chain": certs.server().cert_pem(),
    }
    handshake(create_ssl_context({**props, "ssl.key.password": "s3cret"}, server_side=True), client_ctx())
    # a key password set for a key that is not encrypted is not needed (Kafka would refuse the key)
    unneeded = {**inline_keystore(certs.server()), "ssl.key.password": "s3cret"}
    handshake(create_ssl_context(unneeded, server_side=True), client_ctx())
    with pytest.raises(SslConfigError) as missing:
        create_ssl_context(props, server_side=True)
    assert missing.value.key == "ssl.key.password"
    with pytest.raises(SslConfigError) as wrong:
        create_ssl_context({**props, "ssl.key.password": "nope"}, server_side=True)
    assert wrong.value.key == "ssl.key.password"


def test_pkcs12_keystore_and_truststore_with_passwords(tmp_path: pathlib.Path) -> None:
    keystore = tmp_path / "broker.p12"
    keystore.write_bytes(certs.server().pkcs12("store-pw", ca=certs.ca()))
    truststore = tmp_path / "trust.p12"
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    truststore.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [certs.ca().cert], serialization.BestAvailableEncryption(b"trust-pw")
        )
    )
    server = create_ssl_context(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "store-pw",
            "ssl.key.password": "store-pw",
        },
        server_side=True,
    )
    trust = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(truststore)}
    client = create_ssl_context({**trust, "ssl.truststore.password": "trust-pw"}, server_side=False)
    handshake(server, client)
    with pytest.raises(SslConfigError) as bad:
        create_ssl_context(
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore), "ssl.keystore.password": "x"},
            server_side=True,
        )
    assert bad.value.key == "ssl.keystore.password"
    with pytest.raises(SslConfigError) as no_password:
        create_ssl_context({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore)}, server_side=True)
    assert "key store password is not specified" in str(no_password.value)
    with pytest.raises(SslConfigError):
        create_ssl_context({**trust, "ssl.truststore.password": "wrong"}, server_side=False)


def mapped_principal(srv: ssl.SSLObject, rules: str | None = None) -> KafkaPrincipal:
    return SslPrincipalMapper(rules).principal(srv.getpeercert(binary_form=True))


def test_mutual_tls_required() -> None:
    server = server_ctx(**{"ssl.client.auth": "required"})
    srv, _ = handshake(server, client_ctx(**inline_keystore(certs.client())))
    assert mapped_principal(srv) == KafkaPrincipal("User", "CN=alice,OU=eng,O=Acme,C=US")
    assert mapped_principal(srv, "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT") == KafkaPrincipal("User", "alice")
    with pytest.raises(ssl.SSLError):
        handshake(server, client_ctx())


def test_mutual_tls_requested_and_none() -> None:
    requested = server_ctx(**{"ssl.client.auth": "requested"})
    srv, _ = handshake(requested, client_ctx())
    assert mapped_principal(srv) == ANONYMOUS
    srv, _ = handshake(requested, client_ctx(**inline_keystore(certs.client())))
    assert mapped_principal(srv) == KafkaPrincipal("User", "CN=alice,OU=eng,O=Acme,C=US")
    srv, _ = handshake(server_ctx(**{"ssl.client.auth": "none"}), client_ctx(**inline_keystore(certs.client())))
    assert mapped_principal(srv) == ANONYMOUS


def test_client_certificate_from_an_untrusted_ca_is_refused() -> None:
    stranger = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": certs.other_ca().key_pem(),
        "ssl.keystore.certificate.chain": certs.other_ca().cert_pem(),
    }
    with pytest.raises(ssl.SSLError):
        handshake(server_ctx(**{"ssl.client.auth": "required"}), client_ctx(**stranger))


def test_endpoint_identification() -> None:
    handshake(server_ctx(), client_ctx(), server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(server_ctx(), client_ctx(), server_hostname="broker.example.com")
    off = client_ctx(**{"ssl.endpoint.identification.algorithm": ""})
    assert off.check_hostname is False and off.verify_mode == ssl.CERT_REQUIRED
    handshake(server_ctx(), off, server_hostname="broker.example.com")
    with pytest.raises(SslConfigError):
        client_ctx(**{"ssl.endpoint.identification.algorithm": "ldaps"})


def test_server_not_signed_by_a_trusted_ca_is_refused() -> None:
    other = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.other_ca().cert_pem()}
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_ctx(), create_ssl_context(other, server_side=False))


def test_jks_is_refused_naming_the_conversion(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "kafka.server.keystore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 64)
    with pytest.raises(SslConfigError) as default_type:
        create_ssl_context({"ssl.keystore.location": str(store), "ssl.keystore.password": "pw"}, server_side=True)
    assert default_type.value.key == "ssl.keystore.type"
    message = str(default_type.value)
    assert "keytool -importkeystore" in message and "-srcstoretype JKS" in message
    assert "-deststoretype PKCS12" in message and str(store) in message
    with pytest.raises(SslConfigError, match="-srcstoretype JKS"):
        create_ssl_context(
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store), "ssl.keystore.password": "pw"},
            server_side=True,
        )
    with pytest.raises(SslConfigError) as trust:
        create_ssl_context({"ssl.truststore.location": str(store)}, server_side=False)
    assert trust.value.key == "ssl.truststore.type"


def test_cipher_suites_are_mapped_from_kafka_names() -> None:
    assert openssl_cipher_list(["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_CBC_SHA"]) == (
        "ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA",
        False,
    )
    assert openssl_cipher_list(["TLS_AES_128_GCM_SHA256"]) == ("", True)
    with pytest.raises(SslConfigError) as unknown:
        openssl_cipher_list(["TLS_ECDH_anon_WITH_RC4_128_SHA"])
    assert unknown.value.key == "ssl.cipher.suites"
    suite = {"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ssl.enabled.protocols": "TLSv1.2"}
    _, cli = handshake(server_ctx(**suite), client_ctx(**{"ssl.enabled.protocols": "TLSv1.2"}))
    assert cli.version() == "TLSv1.2"
    cipher = cli.cipher()
    assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


def test_tls13_only_suites_turn_tls12_off() -> None:
    ctx = server_ctx(**{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(SslConfigError):
        server_ctx(**{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384", "ssl.enabled.protocols": "TLSv1.2"})


def test_enabled_protocols() -> None:
    ctx = client_ctx(**{"ssl.enabled.protocols": "TLSv1.3"})
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(ssl.SSLError):
        handshake(
            server_ctx(**{"ssl.enabled.protocols": "TLSv1.3"}), client_ctx(**{"ssl.enabled.protocols": "TLSv1.2"})
        )
    with pytest.raises(SslConfigError) as old:
        client_ctx(**{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"})
    assert old.value.key == "ssl.enabled.protocols"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"}, "ssl.keystore.certificate.chain"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "x"}, "ssl.keystore.key"),
        ({**inline_keystore(certs.server()), "ssl.keystore.password": "pw"}, "ssl.keystore.password"),
        ({**inline_keystore(certs.server()), "ssl.keystore.type": "PKCS12"}, "ssl.keystore.type"),
        ({**inline_keystore(certs.server()), "ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({**inline_keystore(certs.server()), "ssl.keystore.type": "BCFKS"}, "ssl.keystore.type"),
        ({**inline_keystore(certs.server()), "ssl.engine.factory.class": "com.Example"}, "ssl.engine.factory.class"),
        (
            {**inline_keystore(certs.server()), "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "junk"},
            "ssl.truststore.certificates",
        ),
        (
            {**inline_keystore(certs.server()), **pem_truststore(), "ssl.truststore.password": "pw"},
            "ssl.truststore.password",
        ),
        ({**inline_keystore(certs.server()), "ssl.keystore.location": "/nonexistent"}, "ssl.keystore.location"),
        (
            {
                **inline_keystore(certs.server()),
                "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
            },
            "ssl.keystore.key",
        ),
        ({**inline_keystore(certs.server()), "ssl.keystore.key": "no PEM here"}, "ssl.keystore.key"),
    ],
)
def test_bad_server_configs_name_the_key(props: dict[str, Any], key: str) -> None:
    with pytest.raises(SslConfigError) as error:
        create_ssl_context(props, server_side=True)
    assert error.value.key == key
    assert key in str(error.value)


def test_key_not_matching_the_certificate() -> None:
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": certs.client().key_pem(),
        "ssl.keystore.certificate.chain": certs.server().cert_pem(),
    }
    with pytest.raises(SslConfigError, match="does not match"):
        create_ssl_context(props, server_side=True)


def test_listener_prefixed_keys_override_unprefixed_ones() -> None:
    props = {
        "ssl.client.auth": "none",
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.internal.ssl.client.auth": "requested",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "jaas",
        "broker.id": "1",
    }
    resolved = listener_config(props, "SASL_SSL")
    assert resolved["ssl.client.auth"] == "required"
    assert resolved["broker.id"] == "1"
    assert resolved[jaas_config_key("SCRAM-SHA-256")] == "jaas"
    assert listener_config(props, "PLAINTEXT")["ssl.client.auth"] == "none"
    ctx = create_ssl_context(
        listener_config({**props, **inline_keystore(certs.server()), **pem_truststore()}, "SASL_SSL"), server_side=True
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED
