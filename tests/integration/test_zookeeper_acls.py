"""``zookeeper.set.acl=true`` against the real ZooKeeper: the broker logs in with SASL DIGEST-MD5
from a JAAS ``Client`` section and creates every znode with Kafka's ACLs (``sasl:broker`` ALL and
world READ; ``/config/users``... creator ALL only); an unauthenticated session can read the
public znodes but change none, and cannot read SCRAM credentials.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.errors import InvalidConfigError
from odradek.metadata.errors import NoAuthError
from odradek.metadata.scram_credentials import upsert_password_credentials
from odradek.metadata.zookeeper import ZooKeeperStore
from odradek.security.zookeeper_auth import ALL, READ, ZkAcl, ZkSaslCredentials
from odradek.server.config import KafkaConfig
from odradek.server.runner import BrokerRunner
from odradek.testing_zk import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

BROKER_ONLY = [ZkAcl(ALL, "sasl", "broker")]
PUBLIC = [ZkAcl(ALL, "sasl", "broker"), ZkAcl(READ, "world", "anyone")]
JAAS = """// the broker's login to ZooKeeper
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required username="x" password="y";
};
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required username="broker" password="zk-secret";
};
"""


@pytest.fixture(scope="module")
def secure_zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(sasl_users={"broker": "zk-secret"}) as server:
        yield server


@pytest.fixture(scope="module")
def broker(
    secure_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerRunner, str]]:
    directory = tmp_path_factory.mktemp("zk-acl")
    jaas = directory / "jaas.conf"
    jaas.write_text(JAAS)
    connect = secure_zookeeper.chroot_connect("/secure")
    runner = BrokerRunner(
        str(directory / "data"),
        {"zookeeper.connect": connect, "zookeeper.set.acl": "true", "zookeeper.jaas.config.file": str(jaas)},
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 1)], operation_timeout=10)["t"].result(15)
        store = runner.broker.store if runner.broker else None
        assert store is not None
        runner.call(lambda: upsert_password_credentials(store, "alice", {"SCRAM-SHA-256": ("alice-secret", 4096)}))
        yield runner, connect
    finally:
        runner.stop()


def _anonymous(
    connect: str, action: Callable[[ZooKeeperStore], Awaitable[Any]], sasl: ZkSaslCredentials | None = None
) -> Any:
    async def run() -> Any:
        async with ZooKeeperStore(connect, session_timeout_ms=6000, sasl=sasl) as store:
            return await action(store)

    return asyncio.run(run())


def _acls(connect: str, path: str) -> list[ZkAcl]:
    """Reading ACLs needs READ or ADMIN: as the broker's user."""
    return _anonymous(connect, lambda s: s.get_acls(path), ZkSaslCredentials("broker", "zk-secret"))  # type: ignore[no-any-return]


def test_the_brokers_znodes_carry_kafkas_acls(
    broker: tuple[BrokerRunner, str], secure_zookeeper: ZooKeeperServer
) -> None:
    _, connect = broker
    public = ("/brokers/ids/0", "/brokers/topics/t", "/brokers/topics/t/partitions/0/state", "/controller")
    public += ("/controller_epoch", "/config", "/config/topics/t", "/config/changes", "/cluster/id")
    for path in public:
        assert _acls(connect, path) == PUBLIC, path
        assert _anonymous(connect, lambda s, p=path: s.exists(p)) is not None
    for path in ("/config/users", "/config/users/alice", "/config/brokers"):
        assert _acls(connect, path) == BROKER_ONLY, path
    assert _acls(secure_zookeeper.connect_string, "/secure") == PUBLIC


def test_an_unauthenticated_session_reads_public_znodes_and_changes_nothing(broker: tuple[BrokerRunner, str]) -> None:
    _, connect = broker
    data, _ = _anonymous(connect, lambda s: s.get("/brokers/topics/t"))
    assert b"partitions" in data
    attempts: list[Callable[[ZooKeeperStore], Awaitable[Any]]] = [
        lambda s: s.set("/controller", b'{"version":1,"brokerid":7,"timestamp":"0"}'),
        lambda s: s.delete("/controller"),
        lambda s: s.create("/brokers/topics/evil", b"{}"),
        lambda s: s.set("/brokers/topics/t/partitions/0/state", b"{}"),
        lambda s: s.create("/admin/delete_topics/t"),
        lambda s: s.get("/config/users/alice"),
        lambda s: s.get_children("/config/users"),
    ]
    for attempt in attempts:
        with pytest.raises(NoAuthError):
            _anonymous(connect, attempt)
    assert _anonymous(connect, lambda s: s.exists("/brokers/topics/evil")) is None
    runner, _ = broker
    admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
    assert "t" in admin.list_topics(timeout=10).topics


def test_set_acl_without_a_login_is_refused_at_start(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    config = KafkaConfig({"zookeeper.connect": "127.0.0.1:2181", "zookeeper.set.acl": "true"})
    with pytest.raises(InvalidConfigError, match=r"zookeeper\.set\.acl is true"):
        _ = config.zookeeper_sasl
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g -Djava.security.auth.login.config={jaas}")
    login = config.zookeeper_sasl
    assert login is not None and login.username == "broker"
