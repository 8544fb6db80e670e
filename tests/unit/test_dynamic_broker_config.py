"""Dynamic broker configs: validation, precedence, reconfiguration and the password encoder."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from odradek.errors import InvalidConfigError
from odradek.security.password_encoder import PasswordEncoder
from odradek.server.config import KafkaConfig
from odradek.server.dynamic_config import (
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_EFFECTS,
    NEW_CONNECTIONS,
    NO_EFFECT,
    DynamicBrokerConfig,
    is_password_config,
    validate_configs,
)
from odradek.server.reconfigurable import DynamicListenerConfig, ReconfigureWith, changed_listeners

SECRET = {"password.encoder.secret": "s3cret"}


def with_listeners(dynamic: DynamicBrokerConfig, securities: Callable[[], Mapping[str, Any]] = dict) -> None:
    """Register the listeners' reconfigurable, as the broker does (validation only: no socket)."""
    dynamic.listeners = DynamicListenerConfig(lambda: dynamic.current, securities)
    dynamic.add_reconfigurable(dynamic.listeners)


JAAS = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


# --- password encoder -------------------------------------------------------------------------


def test_password_encoder_round_trip_and_kafka_fields() -> None:
    encoder = PasswordEncoder("secret")
    encoded = encoder.encode("päss:word")
    fields = dict(item.split(":", 1) for item in encoded.split(","))
    assert set(fields) == {
        "keyFactoryAlgorithm",
        "cipherAlgorithm",
        "keyLength",
        "salt",
        "iterations",
        "encryptedPassword",
        "passwordLength",
        "initializationVector",
    }
    assert (fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"]) == (
        "PBKDF2WithHmacSHA512",
        "AES/CBC/PKCS5Padding",
    )
    assert (fields["keyLength"], fields["iterations"], fields["passwordLength"]) == ("128", "4096", "9")
    assert len(base64.b64decode(fields["salt"])) == 256
    assert encoder.decode(encoded) == "päss:word"
    assert encoder.encode("päss:word") != encoded  # fresh salt and IV each time


def test_password_encoder_is_pbkdf2_sha512_and_aes_cbc() -> None:
    """Decrypt by hand with the stored parameters: what Kafka's decoder does."""
    fields = dict(item.split(":", 1) for item in PasswordEncoder("k").encode("hello").split(","))
    key = hashlib.pbkdf2_hmac("sha512", b"k", base64.b64decode(fields["salt"]), 4096, dklen=16)
    iv = base64.b64decode(fields["initializationVector"])
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    padded = decryptor.update(base64.b64decode(fields["encryptedPassword"])) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    assert unpadder.update(padded) + unpadder.finalize() == b"hello"


def test_password_encoder_refuses_a_wrong_secret_and_garbage() -> None:
    encoded = PasswordEncoder("right").encode("a-password-of-some-length")
    with pytest.raises(InvalidConfigError, match="Password could not be decoded"):
        PasswordEncoder("wrong").decode(encoded)
    with pytest.raises(InvalidConfigError, match="Password could not be decoded"):
        PasswordEncoder("right").decode("not an encoded value")
    sha1 = PasswordEncoder("right", "PBKDF2WithHmacSHA1", iterations=1024, key_length=256)
    assert PasswordEncoder("right").decode(sha1.encode("x")) == "x"  # the stored parameters win


# --- validation -------------------------------------------------------------------------------


def test_read_only_keys_are_refused_with_kafkas_text() -> None:
    with pytest.raises(InvalidConfigError) as err:
        validate_configs({"log.dirs": "/x", "broker.id": "3", "log.retention.ms": "5"}, per_broker=True)
    assert str(err.value) == "Cannot update these configs dynamically: Set(broker.id, log.dirs)"
    assert "log.retention.hours" not in DYNAMIC_BROKER_CONFIGS  # a lower synonym is not dynamic in Kafka
    validate_configs({"no.such.key": "1"}, per_broker=False)  # unknown keys pass, as in Kafka


def test_security_and_per_broker_keys() -> None:
    with pytest.raises(InvalidConfigError, match=r"only per-listener using the listener prefix: Set\(ssl.keystore"):
        validate_configs({"ssl.keystore.location": "/k.jks"}, per_broker=True)
    prefixed = {"listener.name.ssl.ssl.keystore.location": "/k.jks"}
    validate_configs(prefixed, per_broker=True)
    with pytest.raises(InvalidConfigError, match=r"broker id must be specified: Set\(listener.name.ssl"):
        validate_configs(prefixed, per_broker=False)
    with pytest.raises(InvalidConfigError, match=r"broker id must be specified: Set\(listeners\)"):
        validate_configs({"listeners": "PLAINTEXT://:9092"}, per_broker=False)
    validate_configs({"listener.name.external.max.connections": "5", "max.connections": "9"}, per_broker=False)


def test_values_are_checked_by_type_and_range() -> None:
    with pytest.raises(InvalidConfigError, match=r"leader\.replication\.throttled\.rate"):
        validate_configs({"leader.replication.throttled.rate": "-5"}, per_broker=True)
    with pytest.raises(InvalidConfigError, match=r"message\.max\.bytes"):
        validate_configs({"message.max.bytes": "big"}, per_broker=False)


def test_effects_table_covers_every_dynamic_key() -> None:
    assert set(DYNAMIC_EFFECTS) == DYNAMIC_BROKER_CONFIGS
    assert DYNAMIC_EFFECTS["num.io.threads"] == NO_EFFECT
    assert DYNAMIC_EFFECTS["log.retention.ms"] != NO_EFFECT
    assert is_password_config(JAAS) and is_password_config("listener.name.ssl.ssl.key.password")
    assert not is_password_config("log.retention.ms")


def test_a_listener_key_store_is_loaded_before_it_is_stored(tmp_path: pathlib.Path) -> None:
    """Kafka's ``SslFactory.validateReconfiguration``: the listener's security is built from the
    would-be config; a store that cannot be loaded is refused with Kafka's text."""
    from unit import security_support as certs

    good, broken = tmp_path / "broker.pem", tmp_path / "broken.pem"
    good.write_text(certs.server().key_pem() + certs.server().cert_pem())
    broken.write_text("not a key store")
    static = KafkaConfig(
        {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(good),
        }
    )
    dynamic = DynamicBrokerConfig(static)
    with_listeners(dynamic)
    with pytest.raises(
        InvalidConfigError, match=r"^Validation of dynamic config update of SSLFactory failed: .*keystore"
    ):
        dynamic.validate({"listener.name.ssl.ssl.keystore.location": str(broken)}, per_broker=True)
    rotated = {"listener.name.ssl.ssl.keystore.location": str(good), "listener.name.ssl.ssl.client.auth": "required"}
    dynamic.validate(rotated, per_broker=True)
    new = KafkaConfig({**static.originals, **rotated})
    assert changed_listeners(static, new) == ["SSL"]  # only the SSL listener is rebuilt
    assert changed_listeners(static, KafkaConfig({**static.originals, "log.retention.ms": "5"})) == []
    assert DYNAMIC_EFFECTS["ssl.keystore.location"] == NEW_CONNECTIONS


def test_a_rotated_certificate_keeps_the_subject_and_names_unless_allowed(tmp_path: pathlib.Path) -> None:
    """Kafka's ``CertificateEntries.ensureCompatible``: compared with the key store in use."""
    from cryptography.x509.oid import NameOID

    from odradek.server.listener_security import listener_security
    from unit import security_support as certs

    def write(name: str, identity: certs.Identity) -> str:
        path = tmp_path / name
        path.write_text(identity.key_pem() + identity.cert_pem())
        return str(path)

    old, same = write("old.pem", certs.server()), write("same.pem", certs.server_signed_by(certs.other_ca()))
    renamed = write("renamed.pem", certs._issue(certs.name((NameOID.COMMON_NAME, "broker-2")), certs.ca()))
    props = {"broker.id": "0", "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM"}
    static = KafkaConfig({**props, "ssl.keystore.location": old})
    dynamic = DynamicBrokerConfig(static)
    in_use = {"SSL": listener_security(static, "SSL", None)}
    with_listeners(dynamic, lambda: in_use)
    key = "listener.name.ssl.ssl.keystore.location"
    dynamic.validate({key: same}, per_broker=True)  # another issuer, same subject and names
    with pytest.raises(InvalidConfigError) as err:
        dynamic.validate({key: renamed}, per_broker=True)
    assert str(err.value) == (
        "Validation of dynamic config update of SSLFactory failed: Keystore DistinguishedName does not match:  "
        "existing={alias=kafka, DN=CN=broker-1}, new={alias=kafka, DN=CN=broker-2}"
    )
    allow_dn = {key: renamed, "listener.name.ssl.ssl.allow.dn.changes": "true"}
    with pytest.raises(InvalidConfigError) as err:  # it also has none of the old names
        dynamic.validate(allow_dn, per_broker=True)
    assert str(err.value).endswith(
        "Keystore SubjectAltNames do not match:  "
        "existing={alias=kafka, SAN=[[2, localhost], [7, 127.0.0.1]]}, new={alias=kafka, SAN=[]}"
    )
    dynamic.validate({**allow_dn, "listener.name.ssl.ssl.allow.san.changes": "true"}, per_broker=True)


# --- precedence and reconfiguration -----------------------------------------------------------


def test_broker_value_beats_default_beats_static_and_only_changes_reconfigure() -> None:
    dynamic = DynamicBrokerConfig(KafkaConfig({"broker.id": "1", "log.retention.hours": "24"}))
    calls: list[tuple[object, object]] = []
    dynamic.add_reconfigurable(
        ReconfigureWith(
            {"log.retention.ms"}, lambda old, new: calls.append((old.log_retention_ms, new.log_retention_ms))
        )
    )
    assert dynamic.current.log_retention_ms == 24 * 3600 * 1000

    async def scenario() -> None:
        await dynamic.process_config_changes("<default>", {"log.retention.ms": "1000"})
        await dynamic.process_config_changes("1", {"log.retention.ms": "2000"})
        await dynamic.process_config_changes("2", {"log.retention.ms": "3000"})  # another broker's: ignored
        await dynamic.process_config_changes("<default>", {"log.retention.ms": "1500", "num.io.threads": "4"})
        await dynamic.process_config_changes("1", {})

    run(scenario())
    assert calls == [(86400000, 1000), (1000, 2000), (2000, 1500)]
    assert dynamic.current["num.io.threads"] == 4
    assert dynamic.current.log_config_defaults()["retention.ms"] == 1500
    assert dynamic.static.log_retention_ms == 24 * 3600 * 1000  # server.properties untouched


def test_an_invalid_combination_is_refused_before_writing_and_kept_out_when_stored() -> None:
    dynamic = DynamicBrokerConfig(KafkaConfig({"broker.id": "0"}))
    with pytest.raises(InvalidConfigError):
        dynamic.validate({"listeners": "NOPE://:1"}, per_broker=True)
    run(dynamic.process_config_changes("0", {"listeners": "NOPE://:1", "log.retention.ms": "7"}))
    assert dynamic.current is dynamic.static  # the stored set does not load: nothing applied


def test_passwords_are_encrypted_with_the_secret_and_refused_without_it() -> None:
    plain = DynamicBrokerConfig(KafkaConfig({"broker.id": "0"}))
    with pytest.raises(InvalidConfigError, match="Password encoder secret not configured"):
        plain.to_persistent({JAAS: "x"}, per_broker=True)
    secured = DynamicBrokerConfig(KafkaConfig({"broker.id": "0", **SECRET}))
    with pytest.raises(InvalidConfigError, match="Password config can be defined only at broker level"):
        secured.to_persistent({JAAS: "x"}, per_broker=False)
    stored = secured.to_persistent({JAAS: "x", "max.connections": "9"}, per_broker=True)
    assert stored["max.connections"] == "9" and "encryptedPassword:" in stored[JAAS]
    assert secured.from_persistent(stored) == {JAAS: "x", "max.connections": "9"}
    rotated = DynamicBrokerConfig(
        KafkaConfig({"broker.id": "0", "password.encoder.secret": "new", "password.encoder.old.secret": "s3cret"})
    )
    assert rotated.from_persistent(stored)[JAAS] == "x"
    assert plain.from_persistent(stored) == {"max.connections": "9"}  # undecodable: left out


def test_broker_reconfigurables_apply_log_defaults_connection_limits_and_throttles() -> None:
    from types import SimpleNamespace

    from odradek.server.connection_quotas import ConnectionQuotas
    from odradek.server.dynamic_config import register_broker_reconfigurables
    from odradek.storage import TopicPartition

    updated: list[str] = []
    reloads: list[int] = []

    async def reload_broker_throttles() -> None:
        reloads.append(int(broker.config["leader.replication.throttled.rate"]))

    cleaner_threads: list[int] = []

    async def reconfigure_log_cleaner(_old: KafkaConfig, new: KafkaConfig) -> None:
        cleaner_threads.append(int(new["log.cleaner.threads"]))

    static = KafkaConfig({"broker.id": "0"})
    broker = SimpleNamespace(
        config=static,
        dynamic_config=DynamicBrokerConfig(static),
        log_manager=SimpleNamespace(
            default_config=None,
            reconfigure_default_config=lambda config: setattr(broker.log_manager, "default_config", config),
        ),
        listener_securities={},
        credential_cache=None,
        replica_manager=SimpleNamespace(
            partitions={TopicPartition("t", 0): None, TopicPartition("t", 1): None},
            update_log_config=updated.append,
        ),
        socket_server=SimpleNamespace(quotas=ConnectionQuotas(100, 10, {})),
        controller=SimpleNamespace(
            unclean_leader_election=False,
            set_unclean_leader_election_default=lambda enabled: setattr(
                broker.controller, "unclean_leader_election", enabled
            ),
        ),
        reload_broker_throttles=reload_broker_throttles,
        reconfigure_log_cleaner=reconfigure_log_cleaner,
    )
    register_broker_reconfigurables(broker)  # type: ignore[arg-type]
    stored = {"log.segment.bytes": "1048576", "max.connections.per.ip.overrides": "10.0.0.1:3"}
    run(broker.dynamic_config.process_config_changes("<default>", stored))
    assert broker.config["log.segment.bytes"] == 1048576 and broker.config is broker.dynamic_config.current
    assert broker.log_manager.default_config.segment_bytes == 1048576
    assert updated == ["t"] and not reloads  # once per hosted topic; the throttles did not change
    assert broker.socket_server.quotas.overrides == {"10.0.0.1": 3}
    run(broker.dynamic_config.process_config_changes("0", {"leader.replication.throttled.rate": "500"}))
    assert reloads == [500] and updated == ["t"]
    run(broker.dynamic_config.process_config_changes("0", {"unclean.leader.election.enable": "true"}))
    assert broker.controller.unclean_leader_election is True
    assert not cleaner_threads  # no log.cleaner.* key changed yet
    run(broker.dynamic_config.process_config_changes("0", {"log.cleaner.threads": "3"}))
    assert cleaner_threads == [3]


def test_a_broker_resource_naming_another_broker_is_refused_as_kafka() -> None:
    """Clients send a broker resource to the broker it names; one naming another broker is refused
    (ZkAdminManager) before anything is validated or stored."""
    from types import SimpleNamespace

    from odradek.errors import InvalidRequestError
    from odradek.server.dynamic_config import set_broker_overrides

    stored: list[object] = []
    zk = SimpleNamespace(set_entity_configs=lambda *args: stored.append(args))
    broker = SimpleNamespace(broker_id=0, dynamic_config=DynamicBrokerConfig(KafkaConfig({"broker.id": "0"})), zk=zk)
    with pytest.raises(InvalidRequestError, match=r"^Unexpected broker id, expected 0, but received 1$"):
        run(set_broker_overrides(broker, "1", {"log.retention.ms": "1"}, False))  # type: ignore[arg-type]
    assert stored == []


def test_typed_accessors_check_the_definition() -> None:
    config = KafkaConfig({"broker.id": "3", "num.io.threads": "4", "auto.create.topics.enable": "false"})
    assert config.get_int("num.io.threads") == 4 and config.get_int("broker.id") == 3
    assert config.get_bool("auto.create.topics.enable") is False
    with pytest.raises(TypeError, match=r"auto\.create\.topics\.enable is bool, not int"):
        config.get_int("auto.create.topics.enable")
    with pytest.raises(TypeError, match=r"num\.io\.threads is int, not bool"):
        config.get_bool("num.io.threads")
    with pytest.raises(KeyError, match=r"no\.such\.key is not a broker config key"):
        config.get_int("no.such.key")


def test_a_connection_limit_change_reaches_the_quotas_and_a_bad_override_is_refused_before_any() -> None:
    from odradek.server.connection_quotas import ConnectionQuotas

    dynamic = DynamicBrokerConfig(KafkaConfig({"broker.id": "0"}))
    quotas = ConnectionQuotas(100, 10, {})
    dynamic.add_reconfigurable(quotas)
    applied: list[int] = []
    dynamic.add_reconfigurable(
        ReconfigureWith({"max.connections"}, lambda _o, new: applied.append(new.get_int("max.connections")))
    )
    with pytest.raises(InvalidConfigError):
        dynamic.validate({"max.connections": "5", "max.connections.per.ip.overrides": "nonsense"}, per_broker=True)
    assert applied == [] and quotas.max_connections == 100
    run(
        dynamic.process_config_changes(
            "0", {"max.connections": "5", "listener.name.external.max.connection.creation.rate": "7"}
        )
    )
    assert quotas.max_connections == 5 and applied == [5]
