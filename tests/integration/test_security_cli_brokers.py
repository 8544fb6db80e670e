"""``odradek acls --bootstrap-server`` and ``odradek configs --bootstrap-server --entity-type
users`` against a broker with the authorizer: Kafka's output lines, the ACLs effective, the SCRAM
credential stored in Kafka's format and matching the password given to the tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from odradek.cli import acls, configs
from odradek.security.acl import AclOperation
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl.scram import ScramCredential, mechanism
from odradek.server.runner import BrokerRunner

from .authz_support import cluster_acl, start_with_acls

RESOURCE = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any) -> BrokerRunner:
    # ALTER: ACLs and SCRAM credentials; ALTER_CONFIGS (implies DESCRIBE_CONFIGS): client quotas
    acls = [cluster_acl(AclOperation.ALTER), cluster_acl(AclOperation.ALTER_CONFIGS)]
    return start_with_acls(odradek_broker_factory, str(tmp_path / "cli"), acls)


def _authorized(broker: BrokerRunner, user: str, operation: AclOperation, topic: str) -> bool:
    from odradek.security.acl import ResourceType

    assert broker.broker is not None and broker.broker.authorizer is not None
    return broker.broker.authorizer.authorize(
        KafkaPrincipal.parse(user), "127.0.0.1", operation, ResourceType.TOPIC, topic
    )


def test_acls_add_list_remove_through_the_brokers(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    add = [*bs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"]
    assert acls.main(add) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"Adding ACLs for resource `{RESOURCE}`: \n")
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out.out
    assert "deprecated" not in out.err
    assert _authorized(broker, "User:alice", AclOperation.READ, "orders")

    producer = [*bs, "--add", "--allow-principal", "User:app", "--producer", "--topic", "logs-"]
    assert acls.main([*producer, "--resource-pattern-type", "prefixed"]) == 0
    capsys.readouterr()
    assert _authorized(broker, "User:app", AclOperation.WRITE, "logs-today")

    assert acls.main([*bs, "--list", "--topic", "orders"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(f"Current ACLs for resource `{RESOURCE}`: \n")
    assert "User:app" not in listed

    assert acls.main([*bs, "--remove", "--force", "--topic", "orders"]) == 0
    capsys.readouterr()
    assert not _authorized(broker, "User:alice", AclOperation.READ, "orders")
    assert acls.main([*bs, "--list", "--topic", "orders"]) == 0
    assert capsys.readouterr().out == ""


def test_acls_through_brokers_refused_without_cluster_alter(
    odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = start_with_acls(odradek_broker_factory, str(tmp_path / "no-alter"), [])
    bs = ["--bootstrap-server", runner.bootstrap_servers]
    assert acls.main([*bs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]) == 0
    assert "Error while adding ACLs: Cluster authorization failed." in capsys.readouterr().out
    assert acls.main([*bs, "--list"]) == 1
    assert "Cluster authorization failed." in capsys.readouterr().err


def test_configs_users_scram_through_the_brokers(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    user = ["--entity-type", "users", "--entity-name", "alice"]
    add = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-512]"
    assert configs.main([*bs, "--alter", *user, "--add-config", add]) == 0
    assert capsys.readouterr().out.strip() == "Completed updating config for user alice."

    assert broker.broker is not None
    store = broker.broker.zk.store
    data, _ = broker.call(lambda: store.get("/config/users/alice"))
    stored = json.loads(data)
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    credential = ScramCredential.from_string(stored["config"]["SCRAM-SHA-256"])
    sha256 = mechanism("SCRAM-SHA-256")
    assert credential.iterations == 8192
    assert credential.server_key == sha256.server_key(sha256.salted_password("alice-secret", credential.salt, 8192))

    assert configs.main([*bs, "--describe", *user]) == 0
    assert capsys.readouterr().out.strip() == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    )
    assert configs.main([*bs, "--alter", *user, "--delete-config", "SCRAM-SHA-512"]) == 0
    capsys.readouterr()
    assert configs.main([*bs, "--describe", "--entity-type", "users"]) == 0
    assert capsys.readouterr().out.strip() == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
    )
    assert configs.main([*bs, "--alter", *user, "--add-config", "consumer_byte_rate=1024"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "Completed updating config for user alice."
    assert configs.main([*bs, "--describe", *user]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
    ]
