"""SCRAM credentials in /config/users: the broker's cache following changes, and the data of
AlterUserScramCredentials / DescribeUserScramCredentials with Kafka's per-user errors."""

from __future__ import annotations

import hashlib
import json

from odradek.errors import ErrorCode
from odradek.metadata.config_entities import ZkConfigManager, alter_entity_config, fetch_entity_config
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.scram_credentials import (
    AlterUserScramCredentialsResult,
    CredentialCache,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    upsert_password_credentials,
)
from odradek.security.sasl import SaslAuthenticationError
from odradek.security.sasl.scram import MECHANISMS, ScramCredential, ScramSaslClient, ScramSaslServer

from .metadata_support import run, settle

SHA256, SHA512 = 1, 2


def authenticates(cache: CredentialCache, mechanism: str, user: str, password: str) -> bool:
    server = ScramSaslServer(mechanism, cache.lookup(mechanism))
    client = ScramSaslClient(mechanism, user, password)
    try:
        challenge = b""
        while True:
            response = client.evaluate_challenge(challenge)
            if response is None:
                return server.complete
            challenge = server.evaluate_response(response)
    except SaslAuthenticationError:
        return False


def upsertion(name: str, mechanism: int, password: str, iterations: int = 4096) -> ScramCredentialUpsertion:
    salt = b"salt-" + name.encode()
    hash_name = MECHANISMS["SCRAM-SHA-256" if mechanism == SHA256 else "SCRAM-SHA-512"].hash_name
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, max(iterations, 1))
    return ScramCredentialUpsertion(name, mechanism, iterations, salt, salted)


def test_stored_as_kafka_and_followed_by_a_broker_cache() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        tool, broker = tree.session(), tree.session()
        await alter_entity_config(tool, "users", "alice", {"producer_byte_rate": "100"})  # a quota already there
        config = await upsert_password_credentials(tool, "alice", {"SCRAM-SHA-256": ("alice-secret", 8192)})
        raw = json.loads((await tool.get("/config/users/alice"))[0])
        assert raw["version"] == 1 and set(raw["config"]) == {"producer_byte_rate", "SCRAM-SHA-256"}
        credential = ScramCredential.from_string(raw["config"]["SCRAM-SHA-256"])
        assert credential.iterations == 8192 and config == raw["config"]
        assert raw["config"]["SCRAM-SHA-256"].startswith("salt=") and "alice-secret" not in json.dumps(raw)

        cache = CredentialCache()
        manager = ZkConfigManager(broker, {"users": cache.process_config_changes})
        await manager.startup()
        assert cache.users() == ["alice"]
        assert authenticates(cache, "SCRAM-SHA-256", "alice", "alice-secret")
        assert not authenticates(cache, "SCRAM-SHA-256", "alice", "wrong")
        assert not authenticates(cache, "SCRAM-SHA-512", "alice", "alice-secret")

        await upsert_password_credentials(tool, "User:bob b", {"SCRAM-SHA-512": ("pw", 4096)})
        assert await tool.exists("/config/users/User%3Abob%20b") is not None
        await upsert_password_credentials(tool, "alice", {}, ["SCRAM-SHA-256"])
        await settle()
        assert cache.users() == ["User:bob b"]
        assert authenticates(cache, "SCRAM-SHA-512", "User:bob b", "pw")
        assert cache.credential("alice", "SCRAM-SHA-256") is None
        assert await fetch_entity_config(tool, "users", "alice") == {"producer_byte_rate": "100"}
        cache.process_config_changes("<default>", {"SCRAM-SHA-256": credential.to_string()})
        cache.process_config_changes("bob/clients/c", {"SCRAM-SHA-256": credential.to_string()})
        assert cache.users() == ["User:bob b"]
        await manager.shutdown()

    run(scenario)


def test_alter_user_scram_credentials_errors_and_merge() -> None:
    async def scenario() -> None:
        store = EmbeddedStore(None).session()
        await alter_entity_config(store, "users", "dave", {"consumer_byte_rate": "1"})
        results = await alter_user_scram_credentials(
            store,
            [
                upsertion("", SHA256, "x"),
                upsertion("u-unknown", 9, "x"),
                upsertion("u-few", SHA256, "x", iterations=4095),
                upsertion("u-many", SHA512, "x", iterations=16385),
                upsertion("u-dup", SHA256, "x"),
                upsertion("u-dup", SHA256, "y"),
                upsertion("dave", SHA256, "dave-pw"),
                upsertion("erin", SHA512, "erin-pw", iterations=16384),
            ],
            [ScramCredentialDeletion("frank", SHA256), ScramCredentialDeletion("u-del-unknown", 0)],
        )
        by_user = {r.user: r for r in results}
        assert by_user[""] == AlterUserScramCredentialsResult(
            "", ErrorCode.unacceptable_credential, "Username must not be empty"
        )
        assert by_user["u-unknown"].error_code == ErrorCode.unsupported_sasl_mechanism
        assert by_user["u-del-unknown"].error_message == "Unknown SCRAM mechanism"
        assert by_user["u-few"] == AlterUserScramCredentialsResult(
            "u-few", ErrorCode.unacceptable_credential, "Too few iterations"
        )
        assert by_user["u-many"].error_message == "Too many iterations"
        assert by_user["u-dup"].error_code == ErrorCode.duplicate_resource
        assert by_user["frank"] == AlterUserScramCredentialsResult(
            "frank", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        )
        assert by_user["dave"].error_code == by_user["erin"].error_code == ErrorCode.none
        assert [r.user for r in results][-2:] == ["dave", "erin"]  # successes last
        assert len(results) == 9
        for user in ("u-few", "u-dup", "frank"):
            assert await store.exists(f"/config/users/{user}") is None
        dave = await fetch_entity_config(store, "users", "dave")
        assert dave["consumer_byte_rate"] == "1" and "SCRAM-SHA-256" in dave
        cache = CredentialCache()
        await cache.load(store)
        assert authenticates(cache, "SCRAM-SHA-256", "dave", "dave-pw")
        assert authenticates(cache, "SCRAM-SHA-512", "erin", "erin-pw")
        assert not authenticates(cache, "SCRAM-SHA-512", "erin", "dave-pw")

        # deleting one mechanism and upserting the other in one request
        results = await alter_user_scram_credentials(
            store, [upsertion("erin", SHA256, "new")], [ScramCredentialDeletion("erin", SHA512)]
        )
        assert results == [AlterUserScramCredentialsResult("erin")]
        assert set(await fetch_entity_config(store, "users", "erin")) == {"SCRAM-SHA-256"}

    run(scenario)


def test_describe_user_scram_credentials() -> None:
    async def scenario() -> None:
        store = EmbeddedStore(None).session()
        await upsert_password_credentials(store, "zed", {"SCRAM-SHA-512": ("a", 5000), "SCRAM-SHA-256": ("b", 4096)})
        await upsert_password_credentials(store, "amy", {"SCRAM-SHA-256": ("c", 4096)})
        await alter_entity_config(store, "users", "quota-only", {"producer_byte_rate": "1"})
        everyone = await describe_user_scram_credentials(store, None)
        assert everyone.error_code == ErrorCode.none
        assert [(r.user, r.credential_infos) for r in everyone.results] == [
            ("amy", [(SHA256, 4096)]),
            ("zed", [(SHA256, 4096), (SHA512, 5000)]),
        ]
        some = await describe_user_scram_credentials(store, ["zed", "", "twice", "quota-only", "twice"])
        assert [(r.user, r.error_code) for r in some.results] == [
            ("zed", ErrorCode.none),
            ("", ErrorCode.resource_not_found),
            ("twice", ErrorCode.duplicate_resource),
            ("quota-only", ErrorCode.resource_not_found),
        ]
        assert some.results[3].error_message == (
            "Attempt to describe a user credential that does not exist: quota-only"
        )

    run(scenario)
