"""``odradek configs --zookeeper`` and ``odradek acls --authorizer-properties`` against an injected
in-memory store: Kafka's options, output lines and znodes."""

from __future__ import annotations

import asyncio
import io
import json
import sys

import pytest

from odradek.cli import acls, configs
from odradek.cli.configs import parse_add_config
from odradek.metadata.embedded import EmbeddedSession, EmbeddedStore
from odradek.metadata.scram_credentials import CredentialCache
from odradek.security.sasl.scram import ScramCredential, ScramSaslClient, ScramSaslServer

ZK = ["--zookeeper", "zk:2181"]
AUTH = ["--authorizer-properties", "zookeeper.connect=zk:2181"]


@pytest.fixture
def store() -> EmbeddedSession:
    return EmbeddedStore(None).session()


def read(store: EmbeddedSession, path: str) -> bytes:
    return asyncio.run(store.get(path))[0]


def test_add_config_syntax() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a,b],SCRAM-SHA-512=[password=x]") == {
        "SCRAM-SHA-256": "iterations=8192,password=a,b",
        "SCRAM-SHA-512": "password=x",
    }
    assert parse_add_config("a=1, b = 2,c=") == {"a": "1", "b": "2", "c": ""}


def test_configs_scram_users(store: EmbeddedSession, capsys: pytest.CaptureFixture[str]) -> None:
    add = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]"
    argv = [*ZK, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", add]
    assert configs.main(argv, store=store) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.",
        "Use --bootstrap-server instead to specify a broker to connect to.",
        "Completed updating config for entity: user-principal 'alice'.",
    ]
    body = json.loads(read(store, "/config/users/alice"))
    assert body["version"] == 1 and list(body["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert ScramCredential.from_string(body["config"]["SCRAM-SHA-256"]).iterations == 8192
    assert ScramCredential.from_string(body["config"]["SCRAM-SHA-512"]).iterations == 4096
    assert b"alice-secret" not in read(store, "/config/users/alice")
    assert json.loads(read(store, "/config/changes/config_change_0000000000")) == {
        "version": 2,
        "entity_path": "users/alice",
    }

    cache = CredentialCache()
    asyncio.run(cache.load(store))
    server = ScramSaslServer("SCRAM-SHA-256", cache.lookup("SCRAM-SHA-256"))
    client = ScramSaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    first = client.evaluate_challenge(b"")
    assert first is not None
    final = client.evaluate_challenge(server.evaluate_response(first))
    assert final is not None
    client.evaluate_challenge(server.evaluate_response(final))
    assert server.complete and client.complete

    assert configs.main([*ZK, "--describe", "--entity-type", "users"], store=store) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096"
    )
    assert configs.main([*ZK, "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-512"], store=store) == 0
    assert list(json.loads(read(store, "/config/users/alice"))["config"]) == ["SCRAM-SHA-256"]
    capsys.readouterr()

    assert configs.main([*ZK, "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-512"], store=store) == 1
    assert capsys.readouterr().err.strip() == "Invalid config(s): SCRAM-SHA-512"
    assert (
        configs.main(
            [*ZK, "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"], store=store
        )
        == 1
    )
    assert "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256" in capsys.readouterr().err
    assert configs.main([*ZK, "--alter", "--user", "bob", "--add-config", "producer_byte_rate=1"], store=store) == 1
    err = capsys.readouterr().err
    assert "only supported for SCRAM credential updates" in err
    assert configs.main([*ZK, "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[pw=x]"], store=store) == 1
    assert "Invalid credential property SCRAM-SHA-256=pw=x" in capsys.readouterr().err
    assert configs.main([*ZK, "--describe", "--entity-type", "topics"], store=store) == 1
    assert capsys.readouterr().err.strip() == (
        "Invalid entity type topics, the entity type must be one of users, brokers with a --zookeeper argument"
    )
    assert configs.main([*ZK, "--describe", "--alter", "--entity-type", "users"], store=store) == 1
    assert configs.main(["--bootstrap-server", "h:1", "--describe", "--entity-type", "clients"], store=store) == 1
    assert "h:1" in capsys.readouterr().err  # client quotas are asked from the brokers (none here)


def test_configs_brokers_only_while_down(store: EmbeddedSession, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*ZK, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.cleaner.threads=2"]
    assert configs.main(argv, store=store) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Completed updating config for entity: default brokers."
    assert read(store, "/config/brokers/<default>") == b'{"version":1,"config":{"log.cleaner.threads":"2"}}'
    asyncio.run(store.create("/brokers/ids/0", b"{}", makepath=True))
    assert configs.main([*ZK, "--alter", "--broker", "0", "--add-config", "a=b"], store=store) == 1
    assert "broker 0 is running" in capsys.readouterr().err
    assert configs.main([*ZK, "--alter", "--broker", "1", "--add-config", "a=b"], store=store) == 0
    assert configs.main([*ZK, "--describe", "--broker", "1"], store=store) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Configs for brokers '1' are a=b"
    assert configs.main([*ZK, "--alter", "--broker", "x", "--add-config", "a=b"], store=store) == 1


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_acls_add_list_remove(store: EmbeddedSession, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*AUTH, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]
    assert acls.main(argv, store=store) == 0
    captured = capsys.readouterr()
    assert "support for ACL configuration directly through the authorizer is deprecated" in captured.err
    assert _lines(captured.out) == [
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: ",
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
        "",
        "",
    ]
    assert json.loads(read(store, "/kafka-acl/Topic/t")) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert read(store, "/kafka-acl-changes/acl_changes_0000000000") == b"TOPIC:t"

    argv = [*AUTH, "--add", "--allow-principal", "User:app", "--producer", "--topic", "logs-", "--idempotent"]
    assert acls.main([*argv, "--resource-pattern-type", "prefixed"], store=store) == 0
    ops = {e["operation"] for e in json.loads(read(store, "/kafka-acl-extended/prefixed/Topic/logs-"))["acls"]}
    assert ops == {"Write", "Describe", "Create"}
    cluster = json.loads(read(store, "/kafka-acl/Cluster/kafka-cluster"))["acls"]
    assert [e["operation"] for e in cluster] == ["IdempotentWrite"]
    argv = [*AUTH, "--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g"]
    assert acls.main(argv, store=store) == 0
    argv = [*AUTH, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "read"]
    assert acls.main([*argv, "--topic", "t"], store=store) == 0
    assert [e["operation"] for e in json.loads(read(store, "/kafka-acl/Group/g"))["acls"]] == ["Read"]
    capsys.readouterr()

    assert acls.main([*AUTH, "--list", "--topic", "t"], store=store) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
    )
    assert "\t(principal=User:c, host=*, operation=DESCRIBE, permissionType=ALLOW)" in out
    assert "(principal=User:mallory, host=10.0.0.9, operation=READ, permissionType=DENY)" in out
    assert acls.main([*AUTH, "--list", "--topic", "logs-app", "--resource-pattern-type", "match"], store=store) == 0
    assert "name=logs-, patternType=PREFIXED" in capsys.readouterr().out
    assert acls.main([*AUTH, "--list", "--principal", "User:alice"], store=store) == 0
    out = capsys.readouterr().out
    assert out.startswith("ACLs for principal `User:alice`\n") and "User:c" not in out

    argv = [*AUTH, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]
    assert acls.main(argv, store=store) == 0
    assert {e["principal"] for e in json.loads(read(store, "/kafka-acl/Topic/t"))["acls"]} == {"User:c", "User:mallory"}
    real, sys.stdin = sys.stdin, io.StringIO("n\n")
    try:
        assert acls.main([*AUTH, "--remove", "--topic", "t"], store=store) == 0
    finally:
        sys.stdin = real
    assert "Are you sure you want to delete all ACLs for resource filter" in capsys.readouterr().out
    assert asyncio.run(store.exists("/kafka-acl/Topic/t")) is not None  # answered n
    assert acls.main([*AUTH, "--remove", "--force", "--topic", "t"], store=store) == 0
    assert asyncio.run(store.exists("/kafka-acl/Topic/t")) is None


def test_acls_usage_errors(store: EmbeddedSession, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ([*AUTH, "--list", "--add"], "exactly one action"),
        (["--list"], "authorizer-properties"),
        ([*AUTH, "--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
        ([*AUTH, "--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
        (
            [*AUTH, "--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
            "ResourceType GROUP only supports",
        ),
        (
            [*AUTH, "--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            "not valid when adding",
        ),
        ([*AUTH, "--list", "--resource-pattern-type", "nope"], "Unknown resource-pattern-type: nope"),
        (
            [*AUTH, "--add", "--producer", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
            '"[producer]"',
        ),
        ([*AUTH, "--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "With --consumer"),
        ([*AUTH, "--list", "--idempotent"], "--idempotent option is only available"),
    ]
    for argv, message in cases:
        assert acls.main(argv, store=store) == 2, argv
        assert message in capsys.readouterr().err
    assert acls.main([*AUTH, "--add", "--allow-principal", "alice", "--topic", "t"], store=store) == 1
    assert "principalType:principalName" in capsys.readouterr().err
