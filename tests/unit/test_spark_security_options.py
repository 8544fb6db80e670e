"""The Spark data source's security options (``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.*`` as Spark's Kafka source takes them): translated to librdkafka's names for
confluent-kafka, and the same options as odradek's client's ClientSecurity (no Spark, no sockets)."""

from __future__ import annotations

import pathlib

import pytest

from odradek.client.security import ClientSecurity
from odradek.spark.driver import client_config
from odradek.spark.kafka_security import librdkafka_params
from odradek.spark.options import parse_sink_options, parse_source_options

from . import security_support as certs

SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="spark" password="sp@rk secret";'
)


def source(tmp_path: pathlib.Path, **kafka: str) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": "127.0.0.1:9093", "subscribe": "t"}
    options.update({f"kafka.{k.replace('_', '.')}": v for k, v in kafka.items()})
    return options


def pem_file(tmp_path: pathlib.Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_sasl_ssl_with_a_pem_truststore(tmp_path: pathlib.Path) -> None:
    ca = pem_file(tmp_path, "ca.pem", certs.ca().cert_pem())
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9093",
        "subscribe": "t",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
        "kafka.ssl.truststore.location": ca,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    opts = parse_source_options(options, "batch")
    conf = client_config(opts.client, "consumer")
    assert {k: conf[k] for k in conf if k.startswith(("ssl.", "sasl.", "security."))} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "sp@rk secret",
        "ssl.ca.location": ca,
        "ssl.endpoint.identification.algorithm": "none",
    }
    security = opts.client.client_security()
    assert security == ClientSecurity.from_properties(opts.client.kafka_params)
    assert (security.security_protocol, security.sasl_mechanism, security.sasl_username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "spark",
    )
    context = security.ssl_context()
    assert context is not None and not context.check_hostname


def test_pkcs12_stores(tmp_path: pathlib.Path) -> None:
    truststore = tmp_path / "trust.p12"
    truststore.write_bytes(certs.server().pkcs12("tpw", ca=certs.ca()))
    keystore = tmp_path / "client.p12"
    keystore.write_bytes(certs.client().pkcs12("kpw"))
    conf = librdkafka_params(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(truststore),
            "ssl.truststore.password": "tpw",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "kpw",
            "ssl.key.password": "kpw",
        }
    )
    assert conf["ssl.ca.pem"].count("BEGIN CERTIFICATE") == 2  # the store's two certificates
    assert certs.ca().cert_pem() in conf["ssl.ca.pem"]
    assert (conf["ssl.keystore.location"], conf["ssl.keystore.password"]) == (str(keystore), "kpw")
    assert conf["ssl.key.password"] == "kpw"
    assert not {"ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type", "ssl.keystore.type"} & set(
        conf
    )
    with pytest.raises(ValueError, match=r"kafka\.ssl\.truststore\.password"):
        librdkafka_params(
            {
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": str(truststore),
                "ssl.truststore.password": "x",
            }
        )


def test_pem_keystores(tmp_path: pathlib.Path) -> None:
    both = pem_file(tmp_path, "client.pem", certs.client().key_pem() + certs.client().cert_pem())
    conf = librdkafka_params({"ssl.keystore.type": "PEM", "ssl.keystore.location": both})
    assert conf == {"ssl.certificate.location": both, "ssl.key.location": both}
    inline = librdkafka_params(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": certs.client().key_pem(),
            "ssl.keystore.certificate.chain": certs.client().cert_pem(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certs.ca().cert_pem(),
        }
    )
    assert inline == {
        "ssl.key.pem": certs.client().key_pem(),
        "ssl.certificate.pem": certs.client().cert_pem(),
        "ssl.ca.pem": certs.ca().cert_pem(),
    }


def test_store_type_sniffed_when_not_given(tmp_path: pathlib.Path) -> None:
    ca = pem_file(tmp_path, "ca.pem", certs.ca().cert_pem())
    assert librdkafka_params({"ssl.truststore.location": ca}) == {"ssl.ca.location": ca}
    jks = tmp_path / "kafka.truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    with pytest.raises(ValueError, match="keytool -importkeystore"):
        options = source(tmp_path, ssl_truststore_location=str(jks))
        del options["subscribe"]
        parse_sink_options({**options, "topic": "t"})


def test_jks_refused_when_the_options_are_parsed(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"kafka\.ssl\.keystore\.type' is JKS"):
        parse_source_options(
            {**source(tmp_path), "kafka.ssl.keystore.location": "/ks.jks", "kafka.ssl.keystore.type": "jks"}, "batch"
        )


def test_librdkafka_names_pass_and_win() -> None:
    conf = librdkafka_params(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "own",
            "sasl.password": "pw",
            "sasl.jaas.config": SCRAM_JAAS,
            "isolation.level": "read_committed",
        }
    )
    assert conf == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "own",
        "sasl.password": "pw",
        "isolation.level": "read_committed",
    }


def test_java_only_keys_dropped_and_cipher_suites_mapped() -> None:
    conf = librdkafka_params(
        {
            "ssl.protocol": "TLSv1.3",
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
            "ssl.keymanager.algorithm": "SunX509",
            "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        }
    )
    assert conf == {"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}
    assert librdkafka_params({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}) == {}
    assert librdkafka_params({"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}) == {
        "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"
    }


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        ({"sasl.jaas.config": 'Module required username="x"'}, "semi-colon"),
        ({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "kafka.ssl.cipher.suites"),
        ({"ssl.truststore.location": "/ts", "ssl.truststore.type": "BKS"}, "must be PEM or PKCS12"),
    ],
)
def test_bad_security_options_are_named(tmp_path: pathlib.Path, kafka: dict[str, str], message: str) -> None:
    options = {**source(tmp_path), **{f"kafka.{k}": v for k, v in kafka.items()}}
    with pytest.raises(ValueError, match=message):
        parse_source_options(options, "batch")


def test_odradek_client_security_errors_are_value_errors(tmp_path: pathlib.Path) -> None:
    opts = parse_source_options({**source(tmp_path), "kafka.security.protocol": "SASL_SSL"}, "batch")
    with pytest.raises(ValueError, match="GSSAPI"):
        opts.client.client_security()
