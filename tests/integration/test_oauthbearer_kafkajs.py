"""KafkaJS re-authenticating OAUTHBEARER sessions (KIP-368) against an OpenID Connect issuer.

The broker validates tokens against the issuer's JWKS (https); the issuer's tokens for the
``kafkajs`` client live 3 s, so each session the broker grants ends with its token. KafkaJS
(``js/kafkajs_reauth.js``; the package is installed by ``make venv`` into ``.venv/node``, pinned)
fetches tokens from the token endpoint and pauses between sends longer than a session: its
connections re-authenticate with fresh tokens rather than being closed. A raw connection that
does not re-authenticate is closed at its first request after the token's expiry (the same
check as ``test_oauthbearer_oidc``, here beside the client that does it right).

Skipped, with the reason, when ``node`` or the installed KafkaJS is missing.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.server.runner import BrokerRunner
from odradek.testing_oidc import OidcIssuer, oidc_issuer

from .oidc_support import sasl_exchange, validating_listener
from .security_support import address, write_certificates

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE_MODULES = pathlib.Path(os.environ.get("ODRADEK_NODE_MODULES", ROOT / ".venv" / "node" / "node_modules"))
SCRIPT = pathlib.Path(__file__).with_name("js") / "kafkajs_reauth.js"
TOKEN_LIFETIME_S = 3

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (Debian's nodejs)"),
    pytest.mark.skipif(
        not (NODE_MODULES / "kafkajs").is_dir(),
        reason=f"KafkaJS is not installed in {NODE_MODULES} (make venv installs it with npm)",
    ),
]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("kafkajs-certs"))


@pytest.fixture(scope="module")
def issuer(certificates: dict[str, str]) -> Iterator[OidcIssuer]:
    with oidc_issuer(certificates["server"]) as issuer:
        issuer.register("kafkajs", "kafkajs-secret", lifetime_s=TOKEN_LIFETIME_S)
        yield issuer


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, issuer: OidcIssuer, certificates: dict[str, str]
) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("kafkajs-broker")),
        {
            "listeners": "OIDC://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "OIDC:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            **validating_listener("oidc", issuer, certificates["ca"]),
            "sasl.oauthbearer.clock.skew.seconds": "0",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
        },
    ).start()
    try:
        yield runner
    finally:
        runner.stop()


def test_kafkajs_re_authenticates_sessions_that_outlive_their_tokens(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    rounds = 4
    env = {
        **os.environ,
        "NODE_PATH": str(NODE_MODULES),
        "BROKERS": address(broker, "OIDC"),
        "TOKEN_URL": issuer.token_url,
        "CA_FILE": certificates["ca"],
        "CLIENT_ID": "kafkajs",
        "CLIENT_SECRET": "kafkajs-secret",
        "TOPIC": "kafkajs-reauth",
        "ROUNDS": str(rounds),
        "PAUSE_MS": str(int(TOKEN_LIFETIME_S * 1000 * 0.8)),
        "THRESHOLD_MS": "1500",
    }
    result = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and lines, (result.stdout[-3000:], result.stderr[-3000:])
    report = json.loads(lines[-1])
    assert report["sent"] == [f"m{i}" for i in range(rounds)]
    # each pause outlives the session: fresh tokens, authenticated again on the open connections
    assert report["tokens"] >= rounds and report["authenticated"] > report["connecting"], report
    consumer = Consumer({"bootstrap.servers": address(broker, "INTERNAL"), "group.id": "check"})
    try:
        consumer.assign([TopicPartition("kafkajs-reauth", 0, 0)])
        values: list[bytes] = []
        for _ in range(20):
            values += [m.value() or b"" for m in consumer.consume(10, 0.5) if not m.error()]
            if len(values) >= rounds:
                break
        assert values == [f"m{i}".encode() for i in range(rounds)]
    finally:
        consumer.close()


def test_a_session_not_re_authenticated_is_closed(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    token = issuer.mint("raw", lifetime_s=2)
    port = int(address(broker, "OIDC").rsplit(":", 1)[1])
    assert sasl_exchange(port, token, hold_s=0.1).answered_after_hold
    assert sasl_exchange(port, issuer.mint("raw", lifetime_s=2), hold_s=2.5).answered_after_hold is False
