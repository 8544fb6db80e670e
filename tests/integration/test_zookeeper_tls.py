"""ZooKeeper over TLS (KIP-515's ``zookeeper.ssl.*``) against Debian's ZooKeeper 3.8 serving only a
``secureClientPort`` (Netty, client certificates required, SASL DIGEST-MD5 too): three broker
processes (two with PEM stores, one with PKCS12 key and trust stores) create a topic, serve
produce and consume, and fail over after kill -9 of the controller; a wrong CA fails at start-up
within ``zookeeper.connection.timeout.ms`` saying why; the ZooKeeper tools take
``--zk-tls-config-file``; ``zookeeper-security-migration`` sets and removes Kafka's ACLs, after
which brokers restarted with ``zookeeper.set.acl=true`` keep working.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pathlib
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.cli import configs, console_producer, consumer_groups, zk, zk_security_migration
from odradek.cli.cluster import LocalCluster
from odradek.metadata.errors import NoAuthError, StoreUnavailableError
from odradek.metadata.zookeeper import ZooKeeperStore
from odradek.security.zookeeper_auth import ALL, READ, ZkAcl, ZkSaslCredentials
from odradek.security.zookeeper_tls import zk_tls_config
from odradek.testing_zk import ServerTls, ZooKeeperServer
from unit import security_support as certs

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(240)]

NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"
STORE_PASSWORD = "store-secret"
ZK_LOGIN = ZkSaslCredentials("broker", "zk-secret")
JAAS = """Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required username="broker" password="zk-secret";
};
"""
TOPIC = "tls-orders"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The ZooKeeper server's PEM key store, the CA, two brokers' PEM key stores, a third broker's
    PKCS12 key and trust stores, a tool's and an intruder's PEM key stores, another CA, a JAAS file."""
    d = tmp_path_factory.mktemp("zk-tls")
    ca, server = certs.ca(), certs.server()
    texts = {
        "server.pem": server.key_pem() + server.cert_pem() + ca.cert_pem(),
        "ca.pem": ca.cert_pem(),
        "other-ca.pem": certs.other_ca().cert_pem(),
        "jaas.conf": JAAS,
    }
    for name in ("broker-1", "broker-2", "tool", "intruder"):
        identity = certs.client(name)
        password = STORE_PASSWORD if name == "broker-2" else None  # an encrypted PEM key
        texts[f"{name}.pem"] = identity.key_pem(password) + identity.cert_pem()
    for name, text in texts.items():
        (d / name).write_text(text)
    (d / "broker-3.p12").write_bytes(certs.client("broker-3").pkcs12(STORE_PASSWORD, ca))
    encryption = serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
    (d / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca.cert], encryption))
    return {name: str(d / name) for name in [*texts, "broker-3.p12", "truststore.p12"]}


def tls_props(files: dict[str, str], keystore: str = "tool.pem", ca: str = "ca.pem") -> dict[str, str]:
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": NETTY,
        "zookeeper.ssl.keystore.location": files[keystore],
        "zookeeper.ssl.truststore.location": files[ca],
    }


def write_properties(path: pathlib.Path, props: dict[str, str], extra: str = "some.other.key=ignored\n") -> str:
    """A properties file; a tool's ``--zk-tls-config-file`` ignores ``extra``'s unknown key."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()) + extra)
    return str(path)


@pytest.fixture(scope="module")
def zookeeper(files: dict[str, str]) -> Iterator[ZooKeeperServer]:
    probe = ssl.create_default_context(cafile=files["ca.pem"])
    probe.load_cert_chain(files["tool.pem"])
    tls = ServerTls(files["server.pem"], files["ca.pem"], probe=probe)
    with ZooKeeperServer(sasl_users={"broker": "zk-secret"}, tls=tls) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, files: dict[str, str], odradek_cluster_module: Callable[..., LocalCluster]
) -> LocalCluster:
    """Three brokers; the cluster factory is set up after ZooKeeper so it stops its brokers before it."""
    common = {
        **tls_props(files, "broker-1.pem"),
        "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS",  # the server certificate names 127.0.0.1
        "zookeeper.jaas.config.file": files["jaas.conf"],
        "zookeeper.session.timeout.ms": "4000",  # the killed controller's session ends sooner
    }
    per_broker = {
        2: {
            "zookeeper.ssl.keystore.location": files["broker-2.pem"],
            "zookeeper.ssl.keystore.password": STORE_PASSWORD,
        },
        3: {
            "zookeeper.ssl.keystore.location": files["broker-3.p12"],
            "zookeeper.ssl.keystore.type": "PKCS12",
            "zookeeper.ssl.keystore.password": STORE_PASSWORD,
            "zookeeper.ssl.truststore.location": files["truststore.p12"],
            "zookeeper.ssl.truststore.type": "PKCS12",
            "zookeeper.ssl.truststore.password": STORE_PASSWORD,
        },
    }
    return odradek_cluster_module(
        3, overrides=common, zookeeper_connect=zookeeper.chroot_connect(), broker_overrides=per_broker
    )


def in_zookeeper(
    connect: str, files: dict[str, str], action: Callable[[ZooKeeperStore], Awaitable[Any]], **store: Any
) -> Any:
    """``action`` on a fresh TLS session (the tool's certificate unless ``tls`` is given)."""
    store.setdefault("tls", zk_tls_config(tls_props(files)).ssl_context())

    async def run() -> Any:
        async with ZooKeeperStore(connect, session_timeout_ms=6000, **store) as s:
            return await action(s)

    return asyncio.run(run())


def controller(cluster: LocalCluster) -> int:
    data = cluster.read_znode("/controller")
    return int(json.loads(data)["brokerid"]) if data else -1


def produce_and_consume(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "unused",  # partitions assigned by hand: no group coordinator involved
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while not set(values) <= set(seen) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert set(values) <= set(seen)


def create_topic(cluster: LocalCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert cluster.wait_until(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30)
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=15)[topic].result(30)
    cluster.wait_until(lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == 3, 15)


def test_brokers_with_pem_and_pkcs12_stores_run_on_the_tls_port(
    cluster: LocalCluster, zookeeper: ZooKeeperServer, files: dict[str, str]
) -> None:
    assert zookeeper.plain_port == 0  # the ensemble has no plain port: the brokers reach it over TLS
    ids = in_zookeeper(cluster.zookeeper_connect, files, lambda s: s.get_children("/brokers/ids"))
    assert sorted(ids) == ["1", "2", "3"]
    create_topic(cluster, TOPIC)
    produce_and_consume(cluster, TOPIC, [b"tls-%d" % i for i in range(20)])
    for broker in cluster.brokers.values():
        log = broker.log_path.read_text(errors="replace")
        assert "use_ssl: True" in log and "connected to ZooKeeper" in log, broker.log_tail()


def test_the_controller_fails_over_over_tls(cluster: LocalCluster) -> None:
    first = cluster.wait_until(lambda: controller(cluster) if controller(cluster) > 0 else None, 15)
    cluster.kill9(first)
    second = cluster.wait_until(lambda: (c := controller(cluster)) > 0 and c != first and c, 20)
    assert second in cluster.alive_ids()
    produce_and_consume(cluster, TOPIC, [b"after-failover-%d" % i for i in range(10)])
    cluster.restart(first)
    cluster.wait_until(lambda: cluster.read_znode(f"/brokers/ids/{first}") is not None, 20)


def test_a_wrong_ca_fails_at_start_up_saying_why(
    zookeeper: ZooKeeperServer, files: dict[str, str], tmp_path: pathlib.Path
) -> None:
    props = {
        **tls_props(files, "broker-1.pem", ca="other-ca.pem"),
        "zookeeper.connect": zookeeper.chroot_connect(),
        "zookeeper.connection.timeout.ms": "1000",
        "broker.id": "9",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
    }
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "broker",
            write_properties(tmp_path / "server.properties", props, ""),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 1, result.stderr
    assert f"cannot reach ZooKeeper at {props['zookeeper.connect']} within 1000 ms" in result.stderr
    assert "TLS handshake with 127.0.0.1:" in result.stderr
    assert "certificate verify failed" in result.stderr
    assert time.monotonic() - started < 20


def test_tools_take_a_zk_tls_config_file(
    cluster: LocalCluster,
    files: dict[str, str],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tls_file = write_properties(tmp_path / "zk-tls.properties", tls_props(files))
    connect = cluster.zookeeper_connect
    assert zk.main(["--zookeeper", connect, "--zk-tls-config-file", tls_file, "ls", "/brokers/topics"]) == 0
    assert TOPIC in capsys.readouterr().out.split()
    # SCRAM credentials by ZooKeeper, logged in with SASL too: the znode is the brokers' (sasl:broker)
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={files['jaas.conf']}")
    users = [
        "--zookeeper",
        connect,
        "--zk-tls-config-file",
        tls_file,
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
    ]
    assert configs.main([*users, "--alter", "--add-config", "SCRAM-SHA-256=[password=alice-secret]"]) == 0
    capsys.readouterr()
    assert configs.main([*users, "--describe"]) == 0
    assert "SCRAM-SHA-256=iterations=4096" in capsys.readouterr().out
    acls = _acls(cluster, files, "/config/users/alice")
    assert ZkAcl(ALL, "sasl", "broker") in acls and not any(a.scheme == "world" for a in acls)
    monkeypatch.delenv("KAFKA_OPTS")
    # the ZooKeeper producer finds the leaders over TLS; the ZooKeeper consumer groups are listed over TLS
    lines = io.StringIO("".join(f"zk-producer-{i}\n" for i in range(5)))
    assert (
        console_producer.main(["--zookeeper", connect, "--zk-tls-config-file", tls_file, "--topic", TOPIC], lines) == 0
    )
    in_zookeeper(connect, files, lambda s: s.create("/consumers/readers/ids", makepath=True), sasl=ZK_LOGIN)
    capsys.readouterr()
    assert consumer_groups.main(["--zookeeper", connect, "--zk-tls-config-file", tls_file, "--list"]) == 0
    assert "readers" in capsys.readouterr().out.split()
    # without the file the TLS port answers nothing a plain client understands
    assert zk.main(["--zookeeper", connect, "--timeout-ms", "1000", "ls", "/"]) == 1
    assert "cannot reach ZooKeeper" in capsys.readouterr().err
    wrong = write_properties(tmp_path / "wrong.properties", tls_props(files, ca="other-ca.pem"))
    assert zk.main(["--zookeeper", connect, "--timeout-ms", "1000", "--zk-tls-config-file", wrong, "ls", "/"]) == 1
    assert "certificate verify failed" in capsys.readouterr().err


def _acls(cluster: LocalCluster, files: dict[str, str], path: str) -> list[ZkAcl]:
    return in_zookeeper(cluster.zookeeper_connect, files, lambda s: s.get_acls(path), sasl=ZK_LOGIN)  # type: ignore[no-any-return]


def test_the_migration_tool_secures_kafkas_znodes_and_brokers_keep_working(
    cluster: LocalCluster,
    files: dict[str, str],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    connect = cluster.zookeeper_connect
    tls_file = write_properties(tmp_path / "zk-tls.properties", tls_props(files))
    open_acl = [ZkAcl(ALL, "world", "anyone")]
    assert _acls(cluster, files, f"/brokers/topics/{TOPIC}") == open_acl
    in_zookeeper(connect, files, lambda s: s.create("/consumers/old-group", makepath=True))

    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={files['jaas.conf']}")
    argv = ["--zookeeper.connect", connect, "--zk-tls-config-file", tls_file]
    assert zk_security_migration.main(["--zookeeper.acl", "secure", *argv]) == 0, capsys.readouterr()
    tool = "x509", "CN=tool,OU=eng,O=Acme,C=US"
    creator = [ZkAcl(ALL, "sasl", "broker"), ZkAcl(ALL, *tool)]
    for path in ("/", f"/brokers/topics/{TOPIC}", f"/brokers/topics/{TOPIC}/partitions/0/state", "/brokers/ids/1"):
        assert sorted(_acls(cluster, files, path), key=repr) == sorted(
            [*creator, ZkAcl(READ, "world", "anyone")], key=repr
        )
    for path in ("/config/users", "/config/brokers"):
        assert sorted(_acls(cluster, files, path), key=repr) == sorted(creator, key=repr), path
    assert _acls(cluster, files, "/consumers/old-group") == open_acl  # outside Kafka's secure paths
    assert _acls(cluster, files, "/feature") != open_acl  # created by the tool, as Kafka's

    # an intruder's certificate is trusted by ZooKeeper but is not the creator: it reads, changes nothing
    intruder = zk_tls_config(tls_props(files, "intruder.pem")).ssl_context()
    with pytest.raises(NoAuthError):
        in_zookeeper(connect, files, lambda s: s.set(f"/brokers/topics/{TOPIC}", b"{}"), tls=intruder)
    assert in_zookeeper(connect, files, lambda s: s.exists("/controller"), tls=intruder) is not None

    # the brokers restarted with zookeeper.set.acl=true keep working, and create secure znodes
    for broker_id in cluster.brokers:  # a rolling restart, as Kafka's procedure
        cluster.broker(broker_id).props["zookeeper.set.acl"] = "true"
        cluster.restart(broker_id)
    create_topic(cluster, "tls-secured")
    produce_and_consume(cluster, "tls-secured", [b"secured-%d" % i for i in range(10)])
    acls = _acls(cluster, files, "/brokers/topics/tls-secured")
    assert ZkAcl(ALL, "sasl", "broker") in acls and ZkAcl(READ, "world", "anyone") in acls
    assert not any(a.perms == ALL and a.scheme == "world" for a in acls)

    # and back: unsecure opens every znode again
    capsys.readouterr()
    assert zk_security_migration.main(["--zookeeper.acl", "unsecure", *argv]) == 0
    for path in ("/", f"/brokers/topics/{TOPIC}", "/brokers/topics/tls-secured", "/config/users"):
        assert _acls(cluster, files, path) == open_acl, path


def test_the_migration_tool_refuses_without_authentication_and_checks_paths(
    zookeeper: ZooKeeperServer,
    files: dict[str, str],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    empty = zookeeper.chroot_connect()
    no_keystore = {k: v for k, v in tls_props(files).items() if "keystore" not in k}
    tls_only = write_properties(tmp_path / "trust-only.properties", no_keystore)
    argv = ["--zookeeper.acl", "secure", "--zookeeper.connect", empty, "--zk-tls-config-file", tls_only]
    assert zk_security_migration.main(argv) == 1
    err = capsys.readouterr().err
    assert "ERROR: No JAAS configuration file has been specified and no TLS client certificate" in err
    assert "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location" in err

    tls_file = write_properties(tmp_path / "zk-tls.properties", tls_props(files))
    argv = ["--zookeeper.connect", empty, "--zk-tls-config-file", tls_file]
    assert zk_security_migration.main(["--zookeeper.acl", "secure", "--enable.path.check", *argv]) == 1
    out = capsys.readouterr().out
    assert "Warning: The following secure root paths do not exist in ZooKeeper: /admin,/brokers," in out
    assert "Exit the command." in out
    assert in_zookeeper(empty, files, lambda s: s.exists("/brokers")) is None  # nothing changed
    assert zk_security_migration.main(["--zookeeper.acl", "bogus", *argv]) == 1

    # authenticated by the certificate alone: x509 is the creator
    assert zk_security_migration.main(["--zookeeper.acl", "secure", *argv]) == 0
    acls = in_zookeeper(empty, files, lambda s: s.get_acls("/brokers"))
    assert sorted(acls, key=repr) == sorted(
        [ZkAcl(ALL, "x509", "CN=tool,OU=eng,O=Acme,C=US"), ZkAcl(READ, "world", "anyone")], key=repr
    )
    assert in_zookeeper(empty, files, lambda s: s.exists("/controller")) is None  # only a controller makes it


def test_failures_on_the_tls_port_are_bounded_and_named(zookeeper: ZooKeeperServer, files: dict[str, str]) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"within 1000 ms$"):  # a plain client: no TLS answer to quote
        asyncio.run(ZooKeeperStore(zookeeper.connect_string, connection_timeout_ms=1000).start())
    no_certificate = zk_tls_config({k: v for k, v in tls_props(files).items() if "keystore" not in k})
    with pytest.raises(StoreUnavailableError, match="the server refused this client's certificate, or none was sent"):
        asyncio.run(
            ZooKeeperStore(
                zookeeper.connect_string, connection_timeout_ms=1000, tls=no_certificate.ssl_context()
            ).start()
        )
    tls13 = zk_tls_config({**tls_props(files), "zookeeper.ssl.protocol": "TLSv1.3"})  # ZooKeeper 3.8 serves TLSv1.2
    with pytest.raises(StoreUnavailableError, match="no TLS version in common with the server"):
        asyncio.run(
            ZooKeeperStore(zookeeper.connect_string, connection_timeout_ms=1000, tls=tls13.ssl_context()).start()
        )
    assert time.monotonic() - started < 15
