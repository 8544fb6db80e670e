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
mechanism (``bench/auth_cost.py``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER unsecured and
JWKS-validated, GSSAPI against a throwaway KDC; a PLAINTEXT baseline), ``--auth-seconds`` each (0
skips it and the KDC; ``--messages 0`` skips the throughput part).

    python bench/security_bench.py [--messages 100000] [--size 1024] [--auth-seconds 5]
"""

from __future__ import annotations

import argparse
import contextlib
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
from odradek.client.security import ClientSecurity
from odradek.security.sasl.oauthbearer_login import OAuthBearerSaslClient
from odradek.security.sasl.plain import PlainSaslClient
from odradek.security.sasl.scram import ScramSaslClient
from odradek.testing_kdc import KerberosKdc
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


def kerberos_overrides(kdc: KerberosKdc) -> dict[str, str]:
    """The AUTH listener's GSSAPI JAAS entry (the broker's keytab for ``kafka/127.0.0.1``, written
    to the KDC's directory); the KDC's ``krb5.conf`` goes into this process's environment, which
    the broker process inherits."""
    assert kdc.base_dir is not None
    kdc.add_principal(auth_cost.KERBEROS_SERVICE, "bench")
    keytab = kdc.keytab(kdc.base_dir / "kafka.keytab", [auth_cost.KERBEROS_SERVICE])
    os.environ.update(kdc.environ)
    return {
        "listener.name.auth.gssapi.sasl.jaas.config": (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{keytab}" principal="{auth_cost.KERBEROS_SERVICE}@{kdc.realm}";'
        )
    }


def measure_authentication(
    plain_port: int, auth_port: int, jwt_port: int, issuer: OidcIssuer, kdc: KerberosKdc, seconds: float
) -> dict[str, Any]:
    """Connections per second per mechanism (``bench/auth_cost.py``)."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
    upserts = [
        UserScramCredentialUpsertion("bench", ScramCredentialInfo(mechanism, 4096), b"bench-secret")
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    admin.alter_user_scram_credentials(upserts)["bench"].result(30)
    time.sleep(1)  # the credential cache follows /config/changes
    unsecured = issuer.mint("bench", algorithm="none", lifetime_s=3600)
    signed = issuer.mint("bench", lifetime_s=3600)
    assert kdc.base_dir is not None
    client_keytab = kdc.keytab(kdc.base_dir / "bench.keytab", ["bench"])
    kerberos = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.keytab": str(client_keytab),
            "sasl.kerberos.principal": f"bench@{kdc.realm}",
        }
    )
    cases: dict[str, tuple[int, Any]] = {
        "PLAINTEXT": (plain_port, None),
        "PLAIN": (auth_port, lambda: PlainSaslClient("bench", "bench-secret")),
        "SCRAM-SHA-256": (auth_port, lambda: ScramSaslClient("SCRAM-SHA-256", "bench", "bench-secret")),
        "SCRAM-SHA-512": (auth_port, lambda: ScramSaslClient("SCRAM-SHA-512", "bench", "bench-secret")),
        "OAUTHBEARER-unsecured": (auth_port, lambda: OAuthBearerSaslClient(unsecured)),
        "OAUTHBEARER-JWKS": (jwt_port, lambda: OAuthBearerSaslClient(signed)),
        "GSSAPI": (auth_port, lambda: kerberos.sasl_client("127.0.0.1")),
    }
    out: dict[str, Any] = {}
    for name, (port, new_client) in cases.items():
        log(f"authentication: {name} for {seconds} s")
        out[name] = auth_cost.rate(seconds, functools.partial(auth_cost.connect_once, port, new_client))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    args = parser.parse_args()
    payload = os.urandom(args.size)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp, contextlib.ExitStack() as stack:
        keystore, trust = write_keystores(Path(tmp))
        kdc = stack.enter_context(KerberosKdc()) if args.auth_seconds > 0 else None
        gssapi_listener = kerberos_overrides(kdc) if kdc is not None else {}
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
            "listener.name.auth.sasl.enabled.mechanisms": (
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER" + (",GSSAPI" if gssapi_listener else "")
            ),
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
            **gssapi_listener,
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
            if kdc is not None:
                authentication = measure_authentication(plain_port, auth_port, jwt_port, issuer, kdc, args.auth_seconds)
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
