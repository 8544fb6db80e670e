"""The broker's ZooKeeper login from a JAAS file and Kafka's default znode ACLs."""

from __future__ import annotations

import pathlib

import pytest

from odradek.errors import InvalidConfigError
from odradek.security.zookeeper_auth import (
    CREATOR_ALL,
    OPEN,
    WORLD_READ,
    default_acls,
    java_system_properties,
    parse_jaas_file,
    zookeeper_sasl_credentials,
)

JAAS = """/* a comment */ KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="a}b;c";
};
// the ZooKeeper login
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" password="zk-pw";
};
"""


def test_default_acls_follow_kafkas_zkdata() -> None:
    assert default_acls(False, "/config/users/alice") == (OPEN,)
    assert default_acls(True, "/brokers/ids/1") == (CREATOR_ALL, WORLD_READ)
    assert default_acls(True, "/config") == (CREATOR_ALL, WORLD_READ)
    assert default_acls(True, "/config/users") == (CREATOR_ALL,)
    assert default_acls(True, "/config/users/alice") == (CREATOR_ALL,)
    assert default_acls(True, "/config/brokers/<default>") == (CREATOR_ALL,)
    assert default_acls(True, "/delegation_token/tokens/x") == (CREATOR_ALL,)
    assert default_acls(True, "/consumers") == (OPEN,)
    assert default_acls(True, "/consumers/g") == (CREATOR_ALL, WORLD_READ)


def test_jaas_file_sections_and_kafka_opts() -> None:
    sections = parse_jaas_file(JAAS, source="jaas.conf")
    assert set(sections) == {"KafkaServer", "Client"}
    assert sections["KafkaServer"][0].options["password"] == "a}b;c"
    assert sections["Client"][0].options == {"username": "kafka", "password": "zk-pw"}
    assert java_system_properties("-Xmx1g -Da=1 '-Db=x y' -Dc") == {"a": "1", "b": "x y", "c": ""}
    for broken in ("Client { x required; ", "Client x required; };", "Client { x required; }"):
        with pytest.raises(InvalidConfigError, match=r"jaas\.conf"):
            parse_jaas_file(broken, source="jaas.conf")


def test_credentials_from_the_key_or_kafka_opts(tmp_path: pathlib.Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    opts = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    login = zookeeper_sasl_credentials(None, opts)
    assert login is not None and (login.username, login.password) == ("kafka", "zk-pw")
    assert "zk-pw" not in repr(login)
    assert zookeeper_sasl_credentials(str(jaas), {}) == login
    assert zookeeper_sasl_credentials(None, {}) is None
    assert (
        zookeeper_sasl_credentials(None, {"KAFKA_OPTS": opts["KAFKA_OPTS"] + " -Dzookeeper.sasl.client=false"}) is None
    )
    other = {"KAFKA_OPTS": opts["KAFKA_OPTS"] + " -Dzookeeper.sasl.clientconfig=KafkaServer"}
    assert zookeeper_sasl_credentials(None, other) == type(login)("admin", "a}b;c")
    missing = {"KAFKA_OPTS": opts["KAFKA_OPTS"] + " -Dzookeeper.sasl.clientconfig=Nope"}
    with pytest.raises(InvalidConfigError, match="no section Nope"):
        zookeeper_sasl_credentials(None, missing)
    no_client = tmp_path / "server-only.conf"
    no_client.write_text(JAAS.split("// the ZooKeeper login")[0])
    assert zookeeper_sasl_credentials(str(no_client), {}) is None
    with pytest.raises(InvalidConfigError, match="cannot read the JAAS file"):
        zookeeper_sasl_credentials(str(tmp_path / "absent.conf"), {})
    krb = tmp_path / "krb.conf"
    krb.write_text('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true principal="k"; };')
    with pytest.raises(InvalidConfigError, match="DIGEST-MD5"):
        zookeeper_sasl_credentials(str(krb), {})
