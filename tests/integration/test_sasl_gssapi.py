"""SASL/GSSAPI with a real MIT KDC: a 2-broker cluster on a real ZooKeeper, Kerberos everywhere.

The module starts Debian's ``krb5kdc`` for a realm of its own (:class:`odradek.testing_kdc.KerberosKdc`)
with principals for the brokers (``kafka/127.0.0.1``: clients ask for ``kafka@<host connected to>``)
and clients (``alice``, ``mallory/admin``), and keytabs for each. The brokers' only listener,
inter-broker included, is SASL_PLAINTEXT with GSSAPI: the controller's requests and replica
fetchers log in with the listener's keytab. ``sasl.kerberos.principal.to.local.rules`` maps
``<user>@REALM`` to ``<user>`` and ``kafka/<host>@REALM`` to ``kafka`` (the super user) and nothing
else, so ``mallory/admin`` authenticates with Kerberos but is refused by the rules. Kafka's
AclAuthorizer grants ``alice`` the ``krb-`` topics and groups only.

Clients: kafka-python and aiokafka (``gssapi``, default credentials from ``KRB5_CLIENT_KTNAME``),
Debian's kcat (librdkafka with Cyrus SASL, ``kinit`` from the keytab), odradek's own client and
tools (``--command-config``; KIP-368 re-authentication over SASL_SSL on a broker of its own), and
raw frames for the legacy SaslHandshake v0 path and for garbage, stale, replayed and mutated tokens
(``make fuzz`` runs the ``mutated`` tests at ten times the suite's size). A ticket for a service
the KDC does not know fails in the client, before any broker sees it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import shutil
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAuthorizationFailedError

from odradek.client.connection import KafkaAuthenticationError, KafkaConnection
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode
from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl import SaslAuthenticationError
from odradek.security.sasl.gssapi import GssapiSaslClient, KeytabLogin
from odradek.security.sasl.gssapi_config import gssapi_acceptor
from odradek.testing import BrokerRunner, LocalCluster
from odradek.testing_kdc import KerberosKdc
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek
from .limits_support import recv_frame
from .security_support import write_certificates

pytestmark = pytest.mark.zookeeper

KCAT = shutil.which("kcat")
FUZZ_CONNECTIONS = max(100, int(os.environ.get("ODRADEK_FUZZ_FRAMES", "100000")) // 1000)
"""Mutated GSSAPI logins on the wire (``make fuzz`` sets ODRADEK_FUZZ_FRAMES=1000000: 1000)."""
FUZZ_SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261128"))
CLOCKSKEW_S = 2
"""The realm's krb5.conf ``clockskew``: a token older than this is refused."""
RULES = "RULE:[1:$1@$0](.*@ODRADEK\\.TEST)s/@.*//,RULE:[2:$1@$0](kafka@ODRADEK\\.TEST)s/@.*//"


@pytest.fixture(scope="module")
def kdc() -> Iterator[KerberosKdc]:
    with KerberosKdc(clockskew_s=CLOCKSKEW_S) as server:
        assert server.base_dir is not None
        server.add_principal("kafka/127.0.0.1", "kafka/localhost", "alice", "mallory/admin")
        server.add_principal("brief", max_life=f"{CLOCKSKEW_S} seconds")
        server.keytab(server.base_dir / "brief.keytab", ["brief"])
        server.keytab(server.base_dir / "kafka.keytab", ["kafka/127.0.0.1"])
        server.keytab(server.base_dir / "alice.keytab", ["alice"])
        server.keytab(server.base_dir / "mallory.keytab", ["mallory/admin"])
        saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME")}
        os.environ.update(server.client_environ(server.base_dir / "alice.keytab", "alice"))
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    assert server.base_dir is None  # the KDC is gone and its directory removed


def keytab(kdc: KerberosKdc, name: str) -> str:
    assert kdc.base_dir is not None
    return str(kdc.base_dir / f"{name}.keytab")


@pytest.fixture(scope="module")
def stale_token(kdc: KerberosKdc) -> tuple[bytes, float]:
    """An AP-REQ of ``brief`` (tickets of CLOCKSKEW_S seconds) made before the cluster starts, and
    when it was made: by the time a test sends it, ticket and authenticator are out of date."""
    login = KeytabLogin(f"brief@{kdc.realm}", keytab(kdc, "brief"))
    token = GssapiSaslClient("kafka", "127.0.0.1", login.initiator_credentials()).evaluate_challenge(b"")
    assert token
    return token, time.monotonic()


@pytest.fixture(scope="module")
def cluster(
    kdc: KerberosKdc,
    stale_token: tuple[bytes, float],
    zookeeper_server: ZooKeeperServer,
    odradek_cluster_module: Callable[..., LocalCluster],
) -> LocalCluster:
    connect = f"{zookeeper_server.connect_string}/gssapi-{uuid.uuid4().hex[:8]}"
    acls = ("acls", "--authorizer-properties", f"zookeeper.connect={connect}", "--add")
    acls += ("--allow-principal", "User:alice")
    for extra in (
        ("--operation", "All", "--topic", "krb-", "--group", "krb-", "--resource-pattern-type", "prefixed"),
        ("--operation", "Create", "--cluster"),
    ):
        result = odradek(*acls, *extra)
        assert result.returncode == 0, result.stderr
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{keytab(kdc, "kafka")}" principal="kafka/127.0.0.1@{kdc.realm}";'
    )
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules": RULES,
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
        "authorizer.class.name": ACL_AUTHORIZER_CLASS,
        "super.users": "User:kafka",
        "connection.failed.authentication.delay.ms": "0",
    }
    return odradek_cluster_module(brokers=2, overrides=overrides, zookeeper_connect=connect)


def kafka_python_config(cluster: LocalCluster) -> dict[str, object]:
    return {
        "bootstrap_servers": cluster.bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
        "request_timeout_ms": 15000,
    }


def wait_full_isr(cluster: LocalCluster, topic: str, partitions: int) -> None:
    def full() -> bool:
        for p in range(partitions):
            data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/{p}/state")
            if data is None or len(json.loads(data)["isr"]) != 2:
                return False
        return True

    cluster.wait_until(full, 30, message=f"{topic} never had 2 in-sync replicas (replication over GSSAPI)")


def create_topic(cluster: LocalCluster, topic: str, partitions: int = 2) -> None:
    admin = KafkaAdminClient(**kafka_python_config(cluster))
    try:
        admin.create_topics([NewTopic(topic, partitions, 2)])
    finally:
        admin.close()
    wait_full_isr(cluster, topic, partitions)


def test_kafka_python_produces_and_consumes_on_a_replicated_topic(cluster: LocalCluster) -> None:
    create_topic(cluster, "krb-kp")
    producer = KafkaProducer(acks="all", **kafka_python_config(cluster))  # type: ignore[arg-type]
    for i in range(50):
        producer.send("krb-kp", f"v{i}".encode(), key=str(i).encode(), partition=i % 2)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        group_id="krb-group", auto_offset_reset="earliest", consumer_timeout_ms=8000, **kafka_python_config(cluster)
    )  # type: ignore[arg-type]
    consumer.subscribe(["krb-kp"])
    values = set()
    deadline = time.monotonic() + 30
    while len(values) < 50 and time.monotonic() < deadline:
        for batch in consumer.poll(500).values():
            values.update(r.value for r in batch)
    consumer.commit()
    committed = consumer.committed(TopicPartition("krb-kp", 0))
    consumer.close()
    assert values == {f"v{i}".encode() for i in range(50)}
    assert committed == 25


def test_aiokafka_produces_and_consumes(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(cluster, "krb-aio", 1)
    sasl: dict[str, Any] = {
        "bootstrap_servers": cluster.bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
    }

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **sasl)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("krb-aio", f"aio {i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("krb-aio", auto_offset_reset="earliest", **sasl)
        await consumer.start()
        values: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(values) < 20 and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(r.value for r in batch if r.value is not None)
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [f"aio {i}".encode() for i in range(20)]


def test_acls_apply_to_the_mapped_principal(cluster: LocalCluster) -> None:
    producer = KafkaProducer(max_block_ms=10000, **kafka_python_config(cluster))  # type: ignore[arg-type]
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("secret-data", b"x").get(15)
    finally:
        producer.close(timeout=5)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make test installs it)")
def test_kcat_produces_and_consumes(cluster: LocalCluster, kdc: KerberosKdc, tmp_path: Path) -> None:
    create_topic(cluster, "krb-kcat", 1)
    assert KCAT is not None
    options = [
        "-b", cluster.bootstrap_servers, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
        "-X", "sasl.kerberos.service.name=kafka", "-X", f"sasl.kerberos.keytab={keytab(kdc, 'alice')}",
        "-X", f"sasl.kerberos.principal=alice@{kdc.realm}",
        "-X", "sasl.kerberos.kinit.cmd=kinit -t %{sasl.kerberos.keytab} -k %{sasl.kerberos.principal}",
    ]  # fmt: skip
    env = {**os.environ, **kdc.environ, "KRB5CCNAME": f"FILE:{tmp_path / 'kcat.ccache'}"}
    env.pop("KRB5_CLIENT_KTNAME", None)  # kcat logs in through its kinit command

    def kcat(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [KCAT, *options, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    kcat("-P", "-t", "krb-kcat", "-K", ":", stdin="".join(f"k{i}:kcat {i}\n" for i in range(20)))
    rows = kcat("-C", "-t", "krb-kcat", "-e", "-o", "beginning", "-f", "%k|%s\\n").strip().splitlines()
    assert rows == [f"k{i}|kcat {i}" for i in range(20)]


def test_odradek_client_and_the_unmapped_principal(cluster: LocalCluster, kdc: KerberosKdc) -> None:
    def security(name: str) -> ClientSecurity:
        return ClientSecurity.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "sasl.kerberos.keytab": keytab(kdc, name.split("/")[0]),
                "sasl.kerberos.principal": f"{name}@{kdc.realm}",
            }
        )

    async def connect(name: str) -> int:
        port = next(iter(cluster.brokers.values())).port
        async with KafkaConnection("127.0.0.1", port, request_timeout_ms=10000, security=security(name)) as conn:
            return conn.session_lifetime_ms

    assert asyncio.run(connect("alice")) == 0
    with pytest.raises(KafkaAuthenticationError, match=r"SASL_AUTHENTICATION_FAILED.*SASL mechanism GSSAPI"):
        asyncio.run(connect("mallory/admin"))
    logs = "\n".join(b.log_tail(400) for b in cluster.brokers.values())
    assert f"No rules apply to mallory/admin@{kdc.realm}" in logs
    assert "Traceback" not in logs


# --- raw frames ---------------------------------------------------------------------------------


def _frame(api_key: int, version: int, **fields: object) -> bytes:
    schema = api_schema(api_key, version)
    return encode_request(schema, 7, "gss-test", build(schema.request_type, **fields))


def _authenticate(sock: socket.socket, token: bytes) -> tuple[int, str | None, bytes]:
    sock.sendall(_frame(36, 2, auth_bytes=token))
    body = recv_frame(sock)
    assert body is not None, "connection closed before the SaslAuthenticate answer"
    _, response = decode_response(36, 2, body)
    return int(response.error_code), response.error_message, bytes(response.auth_bytes)


def _open(cluster: LocalCluster, version: int) -> socket.socket:
    port = next(iter(cluster.brokers.values())).port
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(_frame(17, version, mechanism="GSSAPI"))
    answer = recv_frame(sock)
    assert answer is not None
    assert int(decode_response(17, version, answer)[1].error_code) == 0
    return sock


def _client(kdc: KerberosKdc, service: str = "kafka") -> GssapiSaslClient:
    login = KeytabLogin(f"alice@{kdc.realm}", keytab(kdc, "alice"))
    return GssapiSaslClient(service, "127.0.0.1", login.initiator_credentials())


def test_legacy_handshake_v0_exchanges_raw_tokens(cluster: LocalCluster, kdc: KerberosKdc) -> None:
    """SaslHandshake v0, then raw size-prefixed tokens: AP-REQ -> AP-REP, the empty token (a frame
    of size 0) -> the wrapped offer, the wrapped answer -> nothing (Kafka's null challenge)."""
    client = _client(kdc)
    with _open(cluster, 0) as sock:
        token = client.evaluate_challenge(b"")
        for _ in range(2):
            assert token is not None and not client.complete
            sock.sendall(struct.pack(">i", len(token)) + token)
            challenge = recv_frame(sock)
            assert challenge, "the broker closed a valid v0 exchange"
            token = client.evaluate_challenge(challenge)
        assert client.complete and token
        sock.sendall(struct.pack(">i", len(token)) + token)
        sock.sendall(_frame(3, 1, topics=[]))  # Metadata: the first answer after the last token
        answer = recv_frame(sock)
        assert answer is not None and struct.unpack_from(">i", answer)[0] == 7
        _, metadata = decode_response(3, 1, answer)
        assert {b.port for b in metadata.brokers} == {b.port for b in cluster.brokers.values()}


def test_garbage_replayed_stale_and_misdirected_tokens_are_refused(
    cluster: LocalCluster, kdc: KerberosKdc, stale_token: tuple[bytes, float]
) -> None:
    expected = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"
    garbage = [b"", b"\x60\x82\xff\xff", b"\x00" * 100, os.urandom(700), b"\x60\x0b\x06\x09\x2a\x86\x48\x86\xf7"]
    for token in garbage:
        with _open(cluster, 1) as sock:
            code, message, _ = _authenticate(sock, token)
            assert (code, message) == (ErrorCode.sasl_authentication_failed, expected), token[:8]
            assert recv_frame(sock) is None  # then closed
    first = _client(kdc).evaluate_challenge(b"")
    assert first
    with _open(cluster, 1) as sock:
        assert _authenticate(sock, first)[0] == 0
    with _open(cluster, 1) as sock:  # the same authenticator again: a replay, retriable in Kafka
        sock.sendall(_frame(36, 2, auth_bytes=first))
        assert recv_frame(sock) is None  # closed unanswered, so the client connects again
    token, made_at = stale_token
    time.sleep(max(0.0, made_at + CLOCKSKEW_S + 1.5 - time.monotonic()))
    with _open(cluster, 1) as sock:  # a ticket and authenticator past their time
        assert _authenticate(sock, token)[0] == ErrorCode.sasl_authentication_failed
    other = _client(kdc, "zookeeper")  # a ticket for another service: the KDC has no such principal
    with pytest.raises(Exception, match=r"not found|Server"):
        other.evaluate_challenge(b"")
    logs = "\n".join(b.log_tail(400) for b in cluster.brokers.values())
    assert "GSS initiate failed" in logs and "replay" in logs.lower()
    assert "Clock skew too great" in logs or "expired" in logs
    assert "Traceback" not in logs
    assert all(b.alive() for b in cluster.brokers.values())


def _mutations(token: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    for _ in range(count):
        data = bytearray(token)
        kind = rng.randrange(4)
        if kind == 0 and data:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:  # truncate
            del data[rng.randrange(len(data) + 1) :]
        elif kind == 2 and data:  # a DER length made huge
            data[min(len(data) - 1, rng.randrange(4))] = 0xFF
        else:  # random bytes appended
            data += os.urandom(rng.randint(1, 64))
        yield bytes(data)


def test_mutated_tokens_at_every_stage_raise_authentication_errors(kdc: KerberosKdc) -> None:
    """The acceptor itself, fed mutated copies of real tokens at each of its three stages: every
    one ends in SaslAuthenticationError (or, for a harmless mutation, a normal step), nothing else."""
    acceptor = gssapi_acceptor(
        lambda key: ["DEFAULT"],
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        f'keyTab="{keytab(kdc, "kafka")}" principal="kafka/127.0.0.1@{kdc.realm}";',
        jaas_key="sasl.jaas.config",
    )
    rng = random.Random(FUZZ_SEED)
    outcomes = {"refused": 0, "accepted": 0}
    for stage in (0, 1, 2):
        for _ in range(3):
            client, server = _client(kdc), acceptor.sasl_server()
            tokens = [client.evaluate_challenge(b"")]
            for _ in range(stage):
                assert tokens[-1] is not None
                tokens.append(client.evaluate_challenge(server.evaluate_response(tokens[-1])))
            good = tokens[-1]
            assert good is not None
            for mutated in _mutations(good, rng, max(40, FUZZ_CONNECTIONS // 10)):
                probe = acceptor.sasl_server()
                try:
                    replay = _client(kdc) if stage else None
                    if replay is not None:  # bring a fresh exchange to the same stage first
                        token = replay.evaluate_challenge(b"")
                        for _ in range(stage):
                            assert token is not None
                            token = replay.evaluate_challenge(probe.evaluate_response(token))
                    probe.evaluate_response(mutated)
                    outcomes["accepted"] += 1
                except SaslAuthenticationError:
                    outcomes["refused"] += 1
    assert outcomes["refused"] > 300


def test_mutated_gssapi_tokens_on_the_wire(cluster: LocalCluster, kdc: KerberosKdc) -> None:
    """``make fuzz``'s GSSAPI stage: fresh AP-REQs (a new authenticator each, one cached service
    ticket), mutated, each in a SaslAuthenticate v2 on its own connection. Each is answered (Kafka's
    error, or success for a harmless mutation) or closed unanswered (a retriable Kerberos error);
    the brokers stay up with no traceback in their logs."""
    login = KeytabLogin(f"alice@{kdc.realm}", keytab(kdc, "alice"))
    credentials = login.initiator_credentials()
    rng = random.Random(FUZZ_SEED)
    outcomes = {"refused": 0, "accepted": 0, "closed": 0}
    for _ in range(FUZZ_CONNECTIONS):
        token = GssapiSaslClient("kafka", "127.0.0.1", credentials).evaluate_challenge(b"")
        assert token
        mutated = next(_mutations(token, rng, 1))
        with _open(cluster, 1) as sock:
            sock.sendall(_frame(36, 2, auth_bytes=mutated))
            body = recv_frame(sock)
            if body is None:
                outcomes["closed"] += 1
                continue
            code = int(decode_response(36, 2, body)[1].error_code)
            assert code in (ErrorCode.none, ErrorCode.sasl_authentication_failed)
            outcomes["accepted" if code == ErrorCode.none else "refused"] += 1
    assert outcomes["refused"] >= FUZZ_CONNECTIONS // 2, outcomes
    logs = "\n".join(b.log_tail(2000) for b in cluster.brokers.values())
    assert "Traceback" not in logs
    assert all(b.alive() for b in cluster.brokers.values())


def test_confluent_kafka_wheels_have_no_gssapi() -> None:
    """What docs/security.md tells users: PyPI's confluent-kafka cannot log in with Kerberos."""
    from confluent_kafka import KafkaException, Producer

    with pytest.raises(KafkaException, match="No provider for SASL mechanism GSSAPI"):
        Producer(
            {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}
        )


def test_odradek_client_reauthenticates_with_kerberos_over_tls(
    kdc: KerberosKdc,
    odradek_broker_factory: Callable[..., BrokerRunner],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """GSSAPI over SASL_SSL, and KIP-368: a broker whose sessions last 600 ms; odradek's client logs
    in again (a new GSS context) on the same connection before each session ends, so it stays open."""
    paths = write_certificates(tmp_path / "certs")
    runner = odradek_broker_factory(
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "GSSAPI",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": paths["server"],
            "listener.name.sasl_ssl.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{keytab(kdc, "kafka")}" principal="kafka/127.0.0.1@{kdc.realm}";'
            ),
            "listener.name.sasl_ssl.connections.max.reauth.ms": "600",
        }
    )
    assert runner.broker is not None
    (endpoint,) = [e for e in runner.broker.endpoints if e.listener == "SASL_SSL"]
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": paths["ca"],
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'keyTab="{keytab(kdc, "alice")}" principal="alice@{kdc.realm}";'
            ),
        }
    )

    async def run() -> None:
        async with KafkaConnection(endpoint.host, endpoint.port, request_timeout_ms=10000, security=security) as conn:
            assert conn.session_lifetime_ms == 600
            metadata = conn.builder(3, 1, 1)
            for _ in range(5):
                await asyncio.sleep(0.3)
                response = await conn.send(metadata(topics=[]))
                assert [b.port for b in response.brokers] == [endpoint.port]
            assert not conn.closed

    caplog.set_level(logging.INFO, logger="odradek.security.sasl.gssapi")
    asyncio.run(run())
    logins = [r for r in caplog.records if f"authenticationID=alice@{kdc.realm}" in r.getMessage()]
    assert len(logins) >= 3  # the first login and at least two re-authentications


def test_odradek_tools_log_in_with_a_command_config(cluster: LocalCluster, kdc: KerberosKdc, tmp_path: Path) -> None:
    """``--command-config`` files with a Krb5LoginModule entry: the brokers' own principal (the super
    user) creates a topic alice may not describe; alice's listing shows hers only."""

    def config(name: str, principal: str) -> str:
        path = tmp_path / f"{name}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
            "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'keyTab="{keytab(kdc, name)}" principal="{principal}@{kdc.realm}";\n'
        )
        return str(path)

    admin, alice = config("kafka", "kafka/127.0.0.1"), config("alice", "alice")
    topics = ("topics", "--bootstrap-server", cluster.bootstrap_servers, "--command-config")
    created = odradek(*topics, admin, "--create", "--topic", "hidden-krb", "--partitions", "1")
    assert created.returncode == 0, created.stderr
    create_topic(cluster, "krb-cli", 1)
    listed = {name: odradek(*topics, path, "--list") for name, path in (("admin", admin), ("alice", alice))}
    assert all(r.returncode == 0 for r in listed.values()), [r.stderr for r in listed.values()]
    assert {"hidden-krb", "krb-cli"} <= set(listed["admin"].stdout.split())
    assert "krb-cli" in listed["alice"].stdout.split() and "hidden-krb" not in listed["alice"].stdout
