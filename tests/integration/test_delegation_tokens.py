"""Delegation tokens (KIP-48, KIP-373) on a 2-broker cluster on a real ZooKeeper whose only listener
is SASL_SSL (SCRAM), with Kafka's AclAuthorizer and ``delegation.token.secret.key``.

``alice`` creates a token with ``odradek delegation-tokens`` on broker 1 (renewer ``bob``); the
token lands at ``/delegation_token/tokens/<id>`` in Kafka's JSON with a ``token_change_``
notification, and broker 2 learns it: odradek's client logs in there with SCRAM and
``tokenauth=true`` (no installed client sends that extension: librdkafka, kafka-python and aiokafka
have no SCRAM extensions) as ``User:alice``, produces and consumes, and may not manage tokens from
that session. ``bob`` renews it, ``carol`` may not (owner mismatch), an unknown HMAC is not found, a
token past its max life is expired and swept from ZooKeeper; an immediate expiry ends logins on
the other broker. Describe shows a principal its own tokens, the ones an ACL on the
``DelegationToken`` resource lets it describe and, with DescribeTokens on ``User:alice``, alice's;
CreateTokens on ``User:alice`` lets ``dave`` create tokens owned by alice.

A second, single in-process broker on the embedded store (listeners PLAINTEXT, one-way SSL,
SASL_PLAINTEXT) refuses token requests on PLAINTEXT and one-way TLS, keeps its tokens under the
same znodes, and a broker with no secret answers DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client.connection import KafkaConnection
from odradek.client.consumer import Consumer
from odradek.client.delegation_tokens import create_token, describe_tokens, expire_token, renew_token
from odradek.client.errors import KafkaAuthenticationError
from odradek.client.producer import Producer
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.security.principal import KafkaPrincipal
from odradek.storage.topic_partition import TopicPartition
from odradek.testing import BrokerRunner, LocalCluster
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek, odradek_ok
from .security_support import (
    address,
    create_scram_users,
    sasl_ssl_cluster_overrides,
    seed_sasl_ssl_cluster,
    write_certificates,
)

pytestmark = pytest.mark.zookeeper

SECRET = "token-signing-secret"
USERS = ("alice", "bob", "carol", "dave")
TOPIC = "dt-events"
ALICE, BOB, CAROL, DAVE = (KafkaPrincipal.user(u) for u in USERS)


def scram_jaas(user: str, password: str, token: bool = False) -> str:
    extra = ' tokenauth="true"' if token else ""
    return (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}"'
        f"{extra};"
    )


def security(paths: dict[str, str], user: str, password: str | None = None, *, token: bool = False) -> ClientSecurity:
    return ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": paths["ca"],
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": scram_jaas(user, password or f"{user}-secret", token),
        }
    )


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("dt-certs"))


@pytest.fixture(scope="module")
def command_configs(tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("dt-configs")
    out = {}
    for user in USERS:
        path = directory / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={paths['ca']}\n"
            "sasl.mechanism=SCRAM-SHA-256\n"
            f"sasl.jaas.config={scram_jaas(user, f'{user}-secret')}\n"
        )
        out[user] = str(path)
    return out


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperServer,
    odradek_cluster_module: Callable[..., LocalCluster],
    paths: dict[str, str],
) -> Iterator[LocalCluster]:
    connect = f"{zookeeper_server.connect_string}/dt-{uuid.uuid4().hex[:8]}"
    seed_sasl_ssl_cluster(connect, USERS, ["SCRAM-SHA-256", "SCRAM-SHA-512"], granted="alice", prefix="dt-")
    overrides = {
        **sasl_ssl_cluster_overrides(paths),
        "delegation.token.secret.key": SECRET,
        "delegation.token.expiry.check.interval.ms": "500",
        "connection.failed.authentication.delay.ms": "0",
    }
    yield odradek_cluster_module(brokers=2, overrides=overrides, zookeeper_connect=connect)


def bootstrap(cluster: LocalCluster, index: int) -> str:
    broker_id = sorted(cluster.brokers)[index]
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


def parse_created(stdout: str) -> tuple[str, str]:
    """(token id, base64 HMAC) from the tool's output."""
    match = re.search(r"Created delegation token with tokenId : (\S+)", stdout)
    assert match, stdout
    token_id = match.group(1)
    row = [line for line in stdout.splitlines() if line.startswith(token_id)]
    assert len(row) == 1, stdout
    return token_id, row[0].split()[1]


async def _with_connection(address_: str, sec: ClientSecurity, action: Callable[[KafkaConnection], Any]) -> Any:
    host, port = address_.rsplit(":", 1)
    async with KafkaConnection(host, int(port), security=sec, request_timeout_ms=10000) as conn:
        return await action(conn)


def call(address_: str, sec: ClientSecurity, action: Callable[[KafkaConnection], Any]) -> Any:
    return asyncio.run(_with_connection(address_, sec, action))


def error_of(address_: str, sec: ClientSecurity, action: Callable[[KafkaConnection], Any]) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(address_, sec, action)
    return raised.value.error_code


def wait_until(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def can_log_in(address_: str, paths: dict[str, str], token_id: str, token_hmac: str) -> bool:
    try:
        call(address_, security(paths, token_id, token_hmac, token=True), lambda conn: asyncio.sleep(0))
        return True
    except KafkaAuthenticationError:
        return False


@pytest.fixture(scope="module")
def alice_token(cluster: LocalCluster, command_configs: dict[str, str]) -> tuple[str, str, str]:
    """(id, base64 HMAC, the tool's output) of alice's token (renewer bob), made on broker 1."""
    result = odradek_ok(
        "delegation-tokens", "--bootstrap-server", bootstrap(cluster, 0), "--command-config", command_configs["alice"],
        "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob",
    )  # fmt: skip
    token_id, token_hmac = parse_created(result.stdout)
    return token_id, token_hmac, result.stdout


def test_create_with_the_tool_writes_kafkas_znodes(cluster: LocalCluster, alice_token: tuple[str, str, str]) -> None:
    token_id, token_hmac, stdout = alice_token
    assert stdout.startswith("Calling create token operation with renewers :[User:bob] , max-life-time-period :-1\n")
    header = stdout.splitlines()[3]
    assert header.split() == ["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", token_id)
    expected = hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
    assert base64.b64decode(token_hmac) == expected
    data = cluster.read_znode(f"/delegation_token/tokens/{token_id}")
    assert data is not None
    stored = json.loads(data)
    assert {k: stored[k] for k in ("version", "owner", "tokenRequester", "renewers", "tokenId")} == {
        "version": 3,
        "owner": "User%3Aalice",
        "tokenRequester": "User%3Aalice",
        "renewers": ["User%3Abob"],
        "tokenId": token_id,
    }
    assert stored["maxTimestamp"] - stored["issueTimestamp"] == 7 * 24 * 3600 * 1000
    assert stored["expiryTimestamp"] - stored["issueTimestamp"] == 24 * 3600 * 1000
    assert SECRET not in data.decode() and token_hmac not in data.decode()

    async def changes() -> list[str]:
        from odradek.metadata.zookeeper import ZooKeeperStore

        store = ZooKeeperStore(cluster.zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=5000)
        await store.start()
        try:
            names = await store.get_children("/delegation_token/token_changes")
            return [(await store.get(f"/delegation_token/token_changes/{n}"))[0].decode() for n in names]
        finally:
            await store.close()

    assert token_id in asyncio.run(changes())


def test_token_logs_in_on_the_other_broker_as_its_owner(
    cluster: LocalCluster, paths: dict[str, str], alice_token: tuple[str, str, str]
) -> None:
    token_id, token_hmac, _ = alice_token
    other = bootstrap(cluster, 1)
    wait_until(lambda: can_log_in(other, paths, token_id, token_hmac))
    token_security = security(paths, token_id, token_hmac, token=True)
    wrong = security(paths, token_id, base64.b64encode(b"x" * 64).decode(), token=True)
    assert not can_log_in(other, paths, token_id, base64.b64encode(b"x" * 64).decode())
    assert wrong.sasl_token_auth
    # the id is no user: without tokenauth the same password is refused
    with pytest.raises(KafkaAuthenticationError):
        call(other, security(paths, token_id, token_hmac), lambda conn: asyncio.sleep(0))
    # SCRAM-SHA-512 works with the token as well
    sha512 = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": paths["ca"],
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": scram_jaas(token_id, token_hmac, True),
        }
    )
    call(other, sha512, lambda conn: asyncio.sleep(0))

    async def produce_and_consume() -> list[bytes]:
        async with Producer(other, security=token_security) as producer:
            await producer.send(TOPIC, b"via-token")
        async with Consumer(other, security=token_security, auto_offset_reset="earliest") as consumer:
            await consumer.assign([TopicPartition(TOPIC, 0)])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                records = await consumer.poll(1000)
                if records:
                    return [r.value for r in records]
        return []

    assert asyncio.run(produce_and_consume()) == [b"via-token"]

    # a token-authenticated session may not manage tokens
    async def refused(conn: KafkaConnection) -> list[ErrorCode]:
        codes = []
        for action in (
            lambda: create_token(conn),
            lambda: describe_tokens(conn),
            lambda: renew_token(conn, base64.b64decode(token_hmac)),
            lambda: expire_token(conn, base64.b64decode(token_hmac), 1000),
        ):
            try:
                await action()
                codes.append(ErrorCode.none)
            except KafkaError as exc:
                codes.append(exc.error_code)
        return codes

    assert call(other, token_security, refused) == [ErrorCode.delegation_token_request_not_allowed] * 4


def test_renew_by_renewer_only_and_seen_by_the_other_broker(
    cluster: LocalCluster,
    paths: dict[str, str],
    command_configs: dict[str, str],
    alice_token: tuple[str, str, str],
) -> None:
    token_id, token_hmac, _ = alice_token
    first, second = bootstrap(cluster, 0), bootstrap(cluster, 1)
    result = odradek_ok(
        "delegation-tokens", "--bootstrap-server", second, "--command-config", command_configs["bob"],
        "--renew", "--hmac", token_hmac, "--renew-time-period", "3600000",
    )  # fmt: skip
    assert result.stdout.startswith(
        f"Calling renew token operation with hmac :{token_hmac} , renew-time-period :3600000"
    )
    assert "Completed renew operation. New expiry date : " in result.stdout

    def expiry_on_first() -> int:
        tokens = call(first, security(paths, "alice"), lambda conn: describe_tokens(conn))
        (token,) = [t for t in tokens if t.info.token_id == token_id]
        return int(token.info.expiry_timestamp - token.info.issue_timestamp)

    wait_until(lambda: expiry_on_first() < 24 * 3600 * 1000)
    refused = odradek(
        "delegation-tokens", "--bootstrap-server", first, "--command-config", command_configs["carol"],
        "--renew", "--hmac", token_hmac, "--renew-time-period", "-1",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "DELEGATION_TOKEN_OWNER_MISMATCH: Specified Principal is not valid Owner/Renewer." in refused.stderr
    unknown = base64.b64encode(b"\x01" * 64)
    assert error_of(first, security(paths, "alice"), lambda c: renew_token(c, base64.b64decode(unknown))) == (
        ErrorCode.delegation_token_not_found
    )
    assert error_of(first, security(paths, "carol"), lambda c: expire_token(c, base64.b64decode(token_hmac))) == (
        ErrorCode.delegation_token_owner_mismatch
    )


def test_describe_is_filtered_by_acls(
    cluster: LocalCluster,
    paths: dict[str, str],
    command_configs: dict[str, str],
    alice_token: tuple[str, str, str],
) -> None:
    token_id, _, _ = alice_token
    first = bootstrap(cluster, 0)

    def ids(user: str, owners: list[KafkaPrincipal] | None = None) -> set[str]:
        return {t.info.token_id for t in call(first, security(paths, user), lambda c: describe_tokens(c, owners))}

    assert token_id in ids("alice") and token_id in ids("bob")  # owner and renewer
    assert token_id not in ids("carol") and token_id not in ids("dave")
    assert ids("alice", []) == set()  # an empty owner list asks for nothing
    assert token_id not in ids("alice", [CAROL])
    acls = ("acls", "--authorizer-properties", f"zookeeper.connect={cluster.zookeeper_connect}", "--add")
    odradek_ok(*acls, "--allow-principal", "User:carol", "--operation", "Describe", "--delegation-token", token_id)
    wait_until(lambda: token_id in ids("carol"))
    odradek_ok(
        *acls, "--allow-principal", "User:dave", "--operation", "DescribeTokens", "--user-principal", "User:alice"
    )
    wait_until(lambda: token_id in ids("dave"))
    result = odradek_ok(
        "delegation-tokens", "--bootstrap-server", first, "--command-config", command_configs["carol"],
        "--describe", "--owner-principal", "User:alice",
    )  # fmt: skip
    assert result.stdout.startswith("Calling describe token operation for owners: [User:alice]\n")
    assert "Total number of tokens : 1" in result.stdout
    (row,) = [line for line in result.stdout.splitlines() if line.startswith(token_id)]
    assert row.split()[2:5] == ["User:alice", "User:alice", "[User:bob]"]


def test_create_for_another_owner_needs_create_tokens(
    cluster: LocalCluster, paths: dict[str, str], command_configs: dict[str, str]
) -> None:
    first = bootstrap(cluster, 0)
    assert error_of(first, security(paths, "dave"), lambda c: create_token(c, owner=ALICE)) == (
        ErrorCode.delegation_token_authorization_failed
    )
    acls = ("acls", "--authorizer-properties", f"zookeeper.connect={cluster.zookeeper_connect}", "--add")
    odradek_ok(*acls, "--allow-principal", "User:dave", "--operation", "CreateTokens", "--user-principal", "User:alice")

    def create() -> Any:
        try:
            return call(first, security(paths, "dave"), lambda c: create_token(c, owner=ALICE, max_lifetime_ms=60000))
        except KafkaError:
            return None

    wait_until(lambda: (token := create()) is not None and bool(token))
    token = create()
    assert (token.info.owner, token.info.token_requester) == (ALICE, DAVE)
    assert token.info.max_timestamp - token.info.issue_timestamp == 60000
    stored = json.loads(cluster.read_znode(f"/delegation_token/tokens/{token.info.token_id}") or b"{}")
    assert (stored["owner"], stored["tokenRequester"]) == ("User%3Aalice", "User%3Adave")
    group = KafkaPrincipal("Group", "ops")
    assert error_of(first, security(paths, "alice"), lambda c: create_token(c, renewers=[group])) == (
        ErrorCode.invalid_principal_type
    )


def test_expire_ends_logins_everywhere_and_expired_tokens_are_swept(
    cluster: LocalCluster, paths: dict[str, str], command_configs: dict[str, str]
) -> None:
    first, second = bootstrap(cluster, 0), bootstrap(cluster, 1)
    token = call(first, security(paths, "alice"), lambda c: create_token(c))
    token_id, token_hmac = token.info.token_id, base64.b64encode(token.hmac).decode()
    wait_until(lambda: can_log_in(second, paths, token_id, token_hmac))
    result = odradek_ok(
        "delegation-tokens", "--bootstrap-server", first, "--command-config", command_configs["alice"],
        "--expire", "--hmac", token_hmac, "--expiry-time-period", "-1",
    )  # fmt: skip
    assert "Completed expire operation. New expiry date : " in result.stdout
    assert cluster.read_znode(f"/delegation_token/tokens/{token_id}") is None
    wait_until(lambda: not can_log_in(second, paths, token_id, token_hmac))
    assert error_of(second, security(paths, "alice"), lambda c: renew_token(c, token.hmac)) == (
        ErrorCode.delegation_token_not_found
    )
    # a token past its max life: renewing it is refused, and the sweep removes it from ZooKeeper
    short = call(first, security(paths, "alice"), lambda c: create_token(c, max_lifetime_ms=200))
    assert short.info.expiry_timestamp == short.info.max_timestamp == short.info.issue_timestamp + 200
    time.sleep(0.3)
    codes = []
    for action in (lambda c: renew_token(c, short.hmac), lambda c: expire_token(c, short.hmac, 1000)):
        try:
            codes.append(call(second, security(paths, "alice"), action))
        except KafkaError as exc:
            codes.append(exc.error_code)
    assert all(c in (ErrorCode.delegation_token_expired, ErrorCode.delegation_token_not_found) for c in codes)
    wait_until(lambda: cluster.read_znode(f"/delegation_token/tokens/{short.info.token_id}") is None)
    assert short.info.token_id not in {
        t.info.token_id for t in call(second, security(paths, "alice"), lambda c: describe_tokens(c))
    }


# --- one broker on the embedded store ---------------------------------------------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("dt-embedded")),
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": paths["server"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": paths["ca"],
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "delegation.token.master.key": SECRET,  # the deprecated alias
        },
    ).start()
    try:
        create_scram_users(runner, {"alice": "alice-secret"})
        yield runner
    finally:
        runner.stop()


def plain_security(protocol: str, paths: dict[str, str], user: str = "alice", password: str = "alice-secret") -> Any:
    props = {"security.protocol": protocol}
    if protocol == "SSL":
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": paths["ca"]})
    if protocol.startswith("SASL"):
        props.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": scram_jaas(user, password)})
    return ClientSecurity.from_properties(props)


def test_token_requests_are_refused_on_plaintext_and_one_way_tls(embedded: BrokerRunner, paths: dict[str, str]) -> None:
    for listener in ("PLAINTEXT", "SSL"):
        sec = plain_security(listener, paths)
        at = address(embedded, listener)
        assert error_of(at, sec, lambda c: create_token(c)) == ErrorCode.delegation_token_request_not_allowed
        assert error_of(at, sec, lambda c: describe_tokens(c)) == ErrorCode.delegation_token_request_not_allowed
        assert error_of(at, sec, lambda c: renew_token(c, b"x")) == ErrorCode.delegation_token_request_not_allowed
        assert error_of(at, sec, lambda c: expire_token(c, b"x")) == ErrorCode.delegation_token_request_not_allowed

    async def versions(conn: KafkaConnection) -> dict[int, tuple[int, int]]:
        return {k: conn.api_versions[k] for k in range(38, 42)}

    assert call(address(embedded, "PLAINTEXT"), plain_security("PLAINTEXT", paths), versions) == {
        ApiKey.CREATE_DELEGATION_TOKEN: (0, 3),
        ApiKey.RENEW_DELEGATION_TOKEN: (0, 2),
        ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2),
        ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 3),
    }


def test_embedded_store_keeps_tokens_under_kafkas_znodes(embedded: BrokerRunner, paths: dict[str, str]) -> None:
    at = address(embedded, "SASL_PLAINTEXT")
    token = call(at, plain_security("SASL_PLAINTEXT", paths), lambda c: create_token(c, renewers=[BOB]))
    broker = embedded.broker
    assert broker is not None and broker.store is not None
    store = broker.store
    data, _ = embedded.call(lambda: store.get(f"/delegation_token/tokens/{token.info.token_id}"))
    assert json.loads(data)["renewers"] == ["User%3Abob"]
    children = embedded.call(lambda: store.get_children("/delegation_token/token_changes"))
    assert children and all(name.startswith("token_change_") for name in children)
    token_login = plain_security("SASL_PLAINTEXT", paths, token.info.token_id, base64.b64encode(token.hmac).decode())
    token_login = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": scram_jaas(token.info.token_id, base64.b64encode(token.hmac).decode(), True),
        }
    )

    async def lifetime(conn: KafkaConnection) -> int:
        return conn.session_lifetime_ms

    # KIP-368: the token's expiry (1 day from now) bounds the session though sessions do not expire here
    remaining = token.info.expiry_timestamp - time.time() * 1000
    assert remaining - 60_000 < call(at, token_login, lifetime) <= remaining
    assert call(at, plain_security("SASL_PLAINTEXT", paths), lifetime) == 0
    expiry = call(at, plain_security("SASL_PLAINTEXT", paths), lambda c: expire_token(c, token.hmac, -1))
    assert abs(expiry - time.time() * 1000) < 60_000
    with pytest.raises(KafkaAuthenticationError):
        call(at, token_login, lambda c: asyncio.sleep(0))
    # past its max life (no sweep for an hour here): renew and a timed expiry are refused as
    # expired, an immediate expiry still removes it
    alice = plain_security("SASL_PLAINTEXT", paths)
    short = call(at, alice, lambda c: create_token(c, max_lifetime_ms=100))
    time.sleep(0.25)
    assert error_of(at, alice, lambda c: renew_token(c, short.hmac, 60_000)) == ErrorCode.delegation_token_expired
    assert error_of(at, alice, lambda c: expire_token(c, short.hmac, 60_000)) == ErrorCode.delegation_token_expired
    call(at, alice, lambda c: expire_token(c, short.hmac, -1))
    assert error_of(at, alice, lambda c: renew_token(c, short.hmac)) == ErrorCode.delegation_token_not_found


def test_without_a_secret_tokens_are_disabled(
    odradek_broker_factory: Callable[..., BrokerRunner], paths: dict[str, str]
) -> None:
    runner = odradek_broker_factory(
        None,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        },
    )
    create_scram_users(runner, {"alice": "alice-secret"})
    at, sec = address(runner, "SASL_PLAINTEXT"), plain_security("SASL_PLAINTEXT", paths)
    assert error_of(at, sec, lambda c: create_token(c)) == ErrorCode.delegation_token_auth_disabled
    assert error_of(at, sec, lambda c: describe_tokens(c)) == ErrorCode.delegation_token_auth_disabled
    assert error_of(at, sec, lambda c: renew_token(c, b"x" * 64)) == ErrorCode.delegation_token_auth_disabled
    assert error_of(at, sec, lambda c: expire_token(c, b"x" * 64)) == ErrorCode.delegation_token_auth_disabled


def test_tokens_survive_a_restart_and_a_wrong_secret_does_not_match(
    odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any, paths: dict[str, str]
) -> None:
    """A broker loads its tokens from the store at start-up and makes their HMACs again from the
    secret: a restart keeps logins working; a broker with another secret derives other HMACs."""
    data_dir = str(tmp_path / "restarted")
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "delegation.token.secret.key": SECRET,
    }
    runner = odradek_broker_factory(data_dir, overrides)
    create_scram_users(runner, {"alice": "alice-secret"})
    sec = plain_security("SASL_PLAINTEXT", paths)
    token = call(address(runner, "SASL_PLAINTEXT"), sec, lambda c: create_token(c, renewers=[BOB]))
    password = base64.b64encode(token.hmac).decode()
    login = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": scram_jaas(token.info.token_id, password, True),
        }
    )
    runner.stop()
    runner = odradek_broker_factory(data_dir, overrides)
    at = address(runner, "SASL_PLAINTEXT")
    call(at, login, lambda c: asyncio.sleep(0))
    (described,) = call(at, sec, lambda c: describe_tokens(c))
    assert described.info == token.info and described.hmac == token.hmac
    runner.stop()
    runner = odradek_broker_factory(data_dir, {**overrides, "delegation.token.secret.key": "another-secret"})
    with pytest.raises(KafkaAuthenticationError):
        call(address(runner, "SASL_PLAINTEXT"), login, lambda c: asyncio.sleep(0))
