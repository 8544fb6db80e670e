"""Security benchmark: 1 KiB messages over PLAINTEXT and over SASL_SSL, same client, same broker.

One odradek broker process (``bench/common.py``) with two listeners: ``PLAINTEXT`` and
``SASL_SSL`` (SASL/PLAIN, a PEM key store made at start with the test suite's certificate helpers;
TLS 1.3, OpenSSL's default suite). For each protocol, on a fresh one-partition topic:

- **produce**: ``--messages`` messages of ``--size`` bytes with confluent-kafka (``acks=1``,
  ``linger.ms`` 5, ``batch.size`` 1 MB, no compression); the rate runs from the first
  ``produce()`` to the end of ``flush()`` (one message is produced and flushed first, so
  connection set-up and authentication are not timed);
- **consume**: read the topic back from offset 0 (``assign``, no group) until every message
  arrived; the rate runs from the first message to the last. Over PLAINTEXT the broker sends
  fetched records with ``sendfile``; over TLS it copies them through the TLS transport.

One JSON document goes to stdout: ``msgs_per_s`` and ``mb_per_s`` per protocol and workload, and
``sasl_ssl_vs_plaintext`` (the SASL_SSL rate over the PLAINTEXT rate;
the target is >= 0.6); then ``authentication``: new authenticated connections per second for each
mechanism (``bench/auth_cost.py``: PLAIN, SCRAM-SHA-256, OAUTHBEARER unsecured and JWKS-validated,
against a PLAINTEXT baseline), ``--auth-seconds`` each (0 skips it; ``--messages 0`` skips the
throughput part).

    python bench/security_bench.py [--messages 100000] [--size 1024] [--auth-seconds 5]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

import auth_cost
from common import OdradekBroker, free_port, log, machine_info
from odradek.testing_oidc import OidcIssuer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from unit import security_support as certs

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def write_keystores(directory: Path) -> tuple[str, str]:
    """(the broker's PEM key store, the CA's PEM) written to ``directory``."""
    server, ca = certs.server(), certs.ca()
    keystore, trust = directory / "broker.pem", directory / "ca.pem"
    keystore.write_text(server.key_pem() + server.cert_pem() + ca.cert_pem())
    trust.write_text(ca.cert_pem())
    return str(keystore), str(trust)


def produce(config: dict[str, str], topic: str, messages: int, payload: bytes) -> dict[str, float]:
    producer = Producer({**config, "acks": "1", "linger.ms": "5", "batch.size": "1000000", "compression.type": "none"})
    producer.produce(topic, payload)
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    assert remaining == 0, f"{remaining} messages not delivered"
    return {"seconds": elapsed, "msgs_per_s": messages / elapsed, "mb_per_s": messages * len(payload) / elapsed / 1e6}


def consume(config: dict[str, str], topic: str, messages: int, size: int) -> dict[str, float]:
    consumer = Consumer(
        {
            **config,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": "false",
            "queued.min.messages": "10000000",
            "queued.max.messages.kbytes": "2000000",
            "fetch.wait.max.ms": "100",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    first = last = 0.0
    deadline = time.monotonic() + 300
    try:
        while received < messages and time.monotonic() < deadline:
            batch = consumer.consume(10000, 1.0)
            good = [m for m in batch if not m.error()]
            if good and not first:
                first = time.perf_counter()
            received += len(good)
            last = time.perf_counter()
    finally:
        consumer.close()
    assert received >= messages, f"consumed {received} of {messages}"
    elapsed = max(last - first, 1e-9)
    return {"seconds": elapsed, "msgs_per_s": messages / elapsed, "mb_per_s": messages * size / elapsed / 1e6}


def measure_authentication(
    plain_port: int, auth_port: int, jwt_port: int, issuer: OidcIssuer, seconds: float
) -> dict[str, Any]:
    """Connections per second per mechanism (``bench/auth_cost.py``)."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
    upsert = UserScramCredentialUpsertion(
        "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bench-secret"
    )
    admin.alter_user_scram_credentials([upsert])["bench"].result(30)
    time.sleep(1)  # the credential cache follows /config/changes
    unsecured = issuer.mint("bench", algorithm="none", lifetime_s=3600)
    signed = issuer.mint("bench", lifetime_s=3600)
    scram_first, scram_respond = auth_cost.scram_exchange("bench", "bench-secret")
    cases: dict[str, tuple[int, str | None, Any, Any]] = {
        "PLAINTEXT": (plain_port, None, lambda: b"", lambda _c: b""),
        "PLAIN": (auth_port, "PLAIN", lambda: b"\0bench\0bench-secret", lambda _c: b""),
        "SCRAM-SHA-256": (auth_port, "SCRAM-SHA-256", scram_first, scram_respond),
        "OAUTHBEARER-unsecured": (
            auth_port, "OAUTHBEARER", lambda: auth_cost.oauthbearer_message(unsecured), lambda _c: b""
        ),
        "OAUTHBEARER-JWKS": (jwt_port, "OAUTHBEARER", lambda: auth_cost.oauthbearer_message(signed), lambda _c: b""),
    }  # fmt: skip
    out: dict[str, Any] = {}
    for name, (port, mechanism, first, respond) in cases.items():
        log(f"authentication: {name} for {seconds} s")
        out[name] = auth_cost.rate(seconds, functools.partial(auth_cost.connect_once, port, mechanism, first, respond))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    args = parser.parse_args()
    payload = os.urandom(args.size)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        keystore, trust = write_keystores(Path(tmp))
        plain_port, sasl_port, auth_port, jwt_port = free_port(), free_port(), free_port(), free_port()
        issuer = OidcIssuer(None)  # http: the JWKS is fetched at start only
        overrides = {
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_port},"
                f"AUTH://127.0.0.1:{auth_port},JWT://127.0.0.1:{jwt_port}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,AUTH:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "listener.name.auth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
            "listener.name.auth.plain.sasl.jaas.config": JAAS,
            "listener.name.auth.oauthbearer.sasl.jaas.config": f"{auth_cost.LOGIN_MODULE} required;",
            "listener.name.jwt.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.jwt.oauthbearer.sasl.jaas.config": f"{auth_cost.LOGIN_MODULE} required;",
            "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": auth_cost.VALIDATOR,
            "listener.name.jwt.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
            "listener.name.jwt.oauthbearer.sasl.oauthbearer.expected.audience": issuer.audience,
            "listener.name.jwt.oauthbearer.sasl.oauthbearer.expected.issuer": issuer.url,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
        }
        clients = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain_port}"},
            "SASL_SSL": {
                "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": trust,
                "sasl.mechanism": "PLAIN",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            },
        }
        results: dict[str, Any] = {}
        authentication: dict[str, Any] = {}
        with OdradekBroker(overrides=overrides, port=plain_port).start():
            if args.auth_seconds > 0:
                authentication = measure_authentication(plain_port, auth_port, jwt_port, issuer, args.auth_seconds)
            for protocol, config in clients.items():
                if args.messages <= 0:
                    break
                topic = f"security-bench-{protocol.lower()}"
                log(f"{protocol}: producing {args.messages} x {args.size} B")
                produced = produce(config, topic, args.messages, payload)
                log(f"{protocol}: consuming")
                consumed = consume(config, topic, args.messages + 1, args.size)
                results[protocol] = {"produce": produced, "consume": consumed}
        issuer.close()
    ratio = {
        workload: results["SASL_SSL"][workload]["msgs_per_s"] / results["PLAINTEXT"][workload]["msgs_per_s"]
        for workload in ("produce", "consume")
        if results
    }
    document = {
        "benchmark": "security",
        "messages": args.messages,
        "size": args.size,
        "results": results,
        "sasl_ssl_vs_plaintext": ratio,
        "target": 0.6,
        "authentication": authentication,
        "machine": machine_info(),
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
