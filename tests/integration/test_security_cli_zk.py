"""``odradek configs --zookeeper`` and ``odradek acls --authorizer-properties zookeeper.connect=`` as
subprocesses against a real Apache ZooKeeper: the znodes read back in Kafka's exact format, a SCRAM
credential made by the tool authenticating through the SCRAM server, and a broker-side cache and
authorizer following the tool's changes through the change notices."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import re

import pytest

from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.config_entities import ZkConfigManager
from odradek.metadata.scram_credentials import CredentialCache
from odradek.metadata.zookeeper import ZooKeeperStore
from odradek.security.acl import (
    ANY_BINDING_FILTER,
    ANY_ENTRY_FILTER,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import SaslAuthenticationError
from odradek.security.sasl.scram import ScramSaslClient, ScramSaslServer

from .cli_support import odradek
from .process_support import BrokerProcess
from .zk_support import eventually, run

pytestmark = pytest.mark.zookeeper

CREDENTIAL = re.compile(
    r"salt=([A-Za-z0-9+/=]+),stored_key=([A-Za-z0-9+/=]+),server_key=([A-Za-z0-9+/=]+),iterations=(\d+)"
)


def scram_login(cache: CredentialCache, mechanism: str, user: str, password: str) -> bool:
    server = ScramSaslServer(mechanism, cache.lookup(mechanism))
    client = ScramSaslClient(mechanism, user, password)
    challenge = b""
    try:
        while (response := client.evaluate_challenge(challenge)) is not None:
            challenge = server.evaluate_response(response)
    except SaslAuthenticationError:
        return False
    return server.complete and client.complete


def test_configs_scram_credentials_in_kafka_format(zookeeper_connect: str) -> None:
    add = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]"
    done = odradek(
        "configs", "--zookeeper", zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name", "alice",
        "--add-config", add,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Completed updating config for entity: user-principal 'alice'."

    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect) as zk:
            data, _ = await zk.get("/config/users/alice")
            assert re.fullmatch(
                rb'\{"version":1,"config":\{"SCRAM-SHA-256":"[^"]+","SCRAM-SHA-512":"[^"]+"\}\}', data
            ), data
            config = json.loads(data)["config"]
            for mechanism, key_bytes, iterations in (("SCRAM-SHA-256", 32, 8192), ("SCRAM-SHA-512", 64, 4096)):
                m = CREDENTIAL.fullmatch(config[mechanism])
                assert m is not None, config[mechanism]
                assert len(base64.b64decode(m[2])) == len(base64.b64decode(m[3])) == key_bytes
                assert int(m[4]) == iterations
                assert re.fullmatch(rb"[0-9a-z]+", base64.b64decode(m[1]))  # Kafka's base-36 salt text
            assert b"alice-secret" not in data
            notices = await zk.get_children("/config/changes")
            body, _ = await zk.get(f"/config/changes/{notices[-1]}")
            assert body == b'{"version":2,"entity_path":"users/alice"}'

            cache = CredentialCache()
            manager = ZkConfigManager(zk, {"users": cache.process_config_changes})
            await manager.startup()
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                assert scram_login(cache, mechanism, "alice", "alice-secret")
                assert not scram_login(cache, mechanism, "alice", "wrong-secret")
            assert not scram_login(cache, "SCRAM-SHA-256", "mallory", "alice-secret")

            # a second tool run: the broker-side cache follows through /config/changes
            bob = await asyncio.to_thread(
                odradek, "configs", "--zookeeper", zookeeper_connect, "--alter", "--user", "bob",
                "--add-config", "SCRAM-SHA-256=[password=bob-pw]",
            )  # fmt: skip
            assert bob.returncode == 0, bob.stderr
            await eventually(lambda: "bob" in cache.users())
            assert scram_login(cache, "SCRAM-SHA-256", "bob", "bob-pw")
            gone = await asyncio.to_thread(
                odradek, "configs", "--zookeeper", zookeeper_connect, "--alter", "--user", "alice",
                "--delete-config", "SCRAM-SHA-256,SCRAM-SHA-512",
            )  # fmt: skip
            assert gone.returncode == 0, gone.stderr
            await eventually(lambda: "alice" not in cache.users())
            assert await zk.exists("/config/users/alice") is None  # emptied: removed as Kafka does
            await manager.shutdown()

    run(scenario)

    described = odradek("configs", "--zookeeper", zookeeper_connect, "--describe", "--entity-type", "users")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines()[2:] == ["Configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096"]
    refused = odradek("configs", "--zookeeper", zookeeper_connect, "--describe", "--entity-type", "topics")
    assert refused.returncode == 1 and "with a --zookeeper argument" in refused.stderr


def test_acls_in_kafka_format_followed_by_a_broker(zookeeper_connect: str) -> None:
    auth = ["acls", "--authorizer-properties", f"zookeeper.connect={zookeeper_connect}"]

    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect) as zk:
            broker = AclAuthorizer(zk, {"super.users": "User:admin"})
            await broker.start()
            alice = KafkaPrincipal.user("alice")
            assert not broker.authorize(alice, "10.1.1.1", AclOperation.READ, ResourceType.TOPIC, "orders")

            added = await asyncio.to_thread(
                odradek, *auth, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"
            )
            assert added.returncode == 0, added.stderr
            assert added.stdout.splitlines()[:2] == [
                "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: ",
                " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
            ]
            data, _ = await zk.get("/kafka-acl/Topic/orders")
            assert data == (
                b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
            )
            notices = await zk.get_children("/kafka-acl-changes")
            assert (await zk.get(f"/kafka-acl-changes/{notices[-1]}"))[0] == b"TOPIC:orders"
            await eventually(
                lambda: broker.authorize(alice, "10.1.1.1", AclOperation.READ, ResourceType.TOPIC, "orders")
            )
            assert broker.authorize(alice, "10.1.1.1", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")

            prefixed = await asyncio.to_thread(
                odradek, *auth, "--add", "--allow-principal", "User:app", "--producer", "--topic", "logs-",
                "--resource-pattern-type", "PREFIXED",
            )  # fmt: skip
            assert prefixed.returncode == 0, prefixed.stderr
            body = json.loads((await zk.get("/kafka-acl-extended/prefixed/Topic/logs-"))[0])
            assert sorted(e["operation"] for e in body["acls"]) == ["Create", "Describe", "Write"]
            extended = await zk.get_children("/kafka-acl-extended-changes")
            assert json.loads((await zk.get(f"/kafka-acl-extended-changes/{extended[-1]}"))[0]) == {
                "version": 1, "resourceType": "TOPIC", "name": "logs-", "patternType": "PREFIXED",
            }  # fmt: skip
            app = KafkaPrincipal.user("app")
            await eventually(lambda: broker.authorize(app, "h", AclOperation.WRITE, ResourceType.TOPIC, "logs-web"))

            denied = await asyncio.to_thread(
                odradek, *auth, "--add", "--deny-principal", "User:alice", "--operation", "All", "--topic", "orders"
            )
            assert denied.returncode == 0, denied.stderr
            await eventually(
                lambda: not broker.authorize(alice, "10.1.1.1", AclOperation.READ, ResourceType.TOPIC, "orders")
            )

            listed = await asyncio.to_thread(odradek, *auth, "--list", "--topic", "orders")
            assert listed.returncode == 0, listed.stderr
            assert "(principal=User:alice, host=*, operation=ALL, permissionType=DENY)" in listed.stdout

            kept = await asyncio.to_thread(odradek, *auth, "--remove", "--topic", "orders", stdin="")  # EOF: no
            assert kept.returncode == 0 and await zk.exists("/kafka-acl/Topic/orders") is not None
            removed = await asyncio.to_thread(odradek, *auth, "--remove", "--force", "--topic", "orders")
            assert removed.returncode == 0, removed.stderr
            assert await zk.exists("/kafka-acl/Topic/orders") is None
            orders = AclBindingFilter(
                ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL), ANY_ENTRY_FILTER
            )
            await eventually(lambda: not broker.acls(orders))
            assert broker.acls(ANY_BINDING_FILTER)  # the prefixed ones stay
            await broker.close()

    run(scenario)


def test_configs_with_a_running_broker(zookeeper_connect: str, tmp_path: pathlib.Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"broker.id": "0", "zookeeper.connect": zookeeper_connect}).start()
    try:
        zk = ["configs", "--zookeeper", zookeeper_connect]
        refused = odradek(*zk, "--alter", "--broker", "0", "--add-config", "follower.replication.throttled.rate=5")
        assert refused.returncode == 1 and "broker 0 is running" in refused.stderr
        bs = ["configs", "--bootstrap-server", broker.bootstrap_servers]
        created = odradek("topics", "--bootstrap-server", broker.bootstrap_servers, "--create", "--topic", "t")
        assert created.returncode == 0, created.stderr
        altered = odradek(
            *bs, "--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1000"
        )
        assert altered.returncode == 0, altered.stderr
        assert altered.stdout.strip() == "Completed updating config for topic t."
        described = odradek(*bs, "--describe", "--entity-type", "topics", "--entity-name", "t")
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == "Dynamic configs for topic t are:"
        assert lines[1].startswith(
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000"
        )
        assert len(lines) == 2
        deleted = odradek(*bs, "--alter", "--topic", "t", "--delete-config", "retention.ms")
        assert deleted.returncode == 0, deleted.stderr
        again = odradek(*bs, "--alter", "--topic", "t", "--delete-config", "retention.ms")
        assert again.returncode == 1 and "Invalid config(s): retention.ms" in again.stderr
        default = odradek(
            *bs, "--alter", "--broker-defaults", "--add-config", "follower.replication.throttled.rate=100"
        )
        assert default.returncode == 0, default.stderr
        assert default.stdout.strip() == "Completed updating default config for brokers in the cluster."
        shown = odradek(*bs, "--describe", "--entity-type", "brokers", "--entity-default")
        assert shown.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:"
        assert "  follower.replication.throttled.rate=100 sensitive=false" in shown.stdout
        users = odradek(*bs, "--describe", "--entity-type", "users")
        assert users.returncode == 0 and users.stdout == ""  # no SCRAM user yet
        scram = "SCRAM-SHA-512=[password=bob-secret]"
        made = odradek(*bs, "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", scram)
        assert made.returncode == 0, made.stderr
        users = odradek(*bs, "--describe", "--entity-type", "users")
        assert (
            users.stdout.strip()
            == "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096"
        )
    finally:
        broker.stop()
