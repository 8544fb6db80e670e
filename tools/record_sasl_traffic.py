"""Record real Kafka clients' request frames over authenticated SASL_PLAINTEXT connections.

Run from the repository root:

    .venv/bin/python tools/record_sasl_traffic.py            # every client, then README.md
    .venv/bin/python tools/record_sasl_traffic.py --clients aiokafka

The broker, the recording proxy, the frame selection and the file format are those of
``tools/record_traffic.py``; here the clients' listener (advertised on the proxy's port) is
SASL_PLAINTEXT with PLAIN (``alice``/``alice-secret`` from the listener's JAAS), SCRAM-SHA-256 /
SCRAM-SHA-512 (``scram-user``/``scram-secret`` in ``/config/users``) and OAUTHBEARER (Kafka's
unsecured validator; confluent-kafka's built-in unsecured tokens, kafka-python's and aiokafka's
token providers handing an unsecured JWT for ``alice`` with a SASL extension), so each recorded
connection starts with SaslHandshake and SaslAuthenticate frames (KIP-152) carrying PLAIN's token,
SCRAM's client-first and client-final messages or OAUTHBEARER's initial response, then the
client's requests. Each client (confluent-kafka,
kafka-python, aiokafka) runs a short workload once per mechanism: metadata, create a topic,
produce, consume in a group and commit. Output: ``tests/data/client_frames_sasl/<client>.bin`` and
its ``README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import logging
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from record_traffic import (  # the sibling tool, imported from its folder
    HOST,
    MAX_FILE_BYTES,
    RecordedConnection,
    RecordingProxy,
    bound_port,
    render_summary,
    select_frames,
    write_corpus,
)

from odradek.cli.cluster import free_port
from odradek.metadata.scram_credentials import upsert_password_credentials
from odradek.server.runner import BrokerRunner

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "data" / "client_frames_sasl"
CLIENTS = ("confluent_kafka", "kafka_python", "aiokafka")
MECHANISMS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("scram-user", "scram-secret")}
MECHANISMS["SCRAM-SHA-512"] = MECHANISMS["SCRAM-SHA-256"]
MECHANISMS["OAUTHBEARER"] = ("alice", "")
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
RECORDS = 30

log = logging.getLogger("record_sasl_traffic")


def _names(client: str, mechanism: str) -> tuple[str, str]:
    tag = f"{client.replace('_', '-')}-{mechanism.lower()}"
    return f"{tag}-data", f"{tag}-group"


def unsecured_token(principal: str, lifetime_s: int = 3600) -> str:
    """An unsecured JWS (``alg: none``) as Kafka's unsecured login makes it."""
    now = int(time.time())
    parts = ({"alg": "none"}, {"sub": principal, "iat": now, "exp": now + lifetime_s, "scope": "kafka"})
    encoded = [base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=").decode() for p in parts]
    return ".".join(encoded) + "."


def _python_sasl(mechanism: str, token_provider: Any) -> dict[str, Any]:
    """kafka-python's and aiokafka's SASL options for ``mechanism``."""
    user, password = MECHANISMS[mechanism]
    if mechanism == "OAUTHBEARER":
        return {"sasl_mechanism": mechanism, "sasl_oauth_token_provider": token_provider}
    return {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}


def run_confluent_kafka(bootstrap: str, mechanism: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    user, password = MECHANISMS[mechanism]
    topic, group = _names("confluent_kafka", mechanism)
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        base.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"})
    else:
        base.update({"sasl.username": user, "sasl.password": password})
    admin = AdminClient(dict(base))
    admin.list_topics(timeout=10)
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(15)
    producer = Producer({**base, "linger.ms": 5, "compression.type": "lz4"})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i % 5}".encode())
    producer.flush(15)
    consumer = Consumer({**base, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < RECORDS and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(RECORDS, 0.5) if m.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()


def run_kafka_python(bootstrap: str, mechanism: str) -> None:
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:  # kafka-python 2
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_token(MECHANISMS[mechanism][0])

        def extensions(self) -> dict[str, str]:
            return {"traceId": "kafka-python"}

    topic, group = _names("kafka_python", mechanism)
    sasl: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        **_python_sasl(mechanism, Provider()),
    }
    kafka_python_workload(sasl, topic, group)


def kafka_python_workload(sasl: dict[str, Any], topic: str, group: str) -> None:
    """kafka-python's workload with the connection options ``sasl`` (bootstrap, protocol, mechanism):
    create ``topic`` (2 partitions), produce RECORDS gzip records, consume them in ``group`` and commit
    (shared with record_gssapi_traffic.py)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(**sasl)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    producer = KafkaProducer(linger_ms=5, compression_type="gzip", **sasl)
    for i in range(RECORDS):
        producer.send(topic, f"v{i}".encode(), key=f"k{i % 5}".encode())
    producer.flush(15)
    producer.close(5)
    consumer = KafkaConsumer(
        topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000, **sasl
    )
    for seen, _ in enumerate(consumer, 1):
        if seen >= RECORDS:
            break
    consumer.commit()
    consumer.close()


def run_aiokafka(bootstrap: str, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return unsecured_token(MECHANISMS[mechanism][0])

        def extensions(self) -> dict[str, str]:
            return {"traceId": "aiokafka"}

    topic, group = _names("aiokafka", mechanism)
    sasl: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        **_python_sasl(mechanism, Provider()),
    }

    async def workload() -> None:
        admin = AIOKafkaAdminClient(**sasl)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 2, 1)])
        await admin.close()
        producer = AIOKafkaProducer(linger_ms=5, compression_type="gzip", **sasl)
        await producer.start()
        for i in range(RECORDS):
            await producer.send(topic, f"v{i}".encode(), key=f"k{i % 5}".encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **sasl
        )
        await consumer.start()
        seen = 0
        deadline = time.monotonic() + 30
        while seen < RECORDS and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            seen += sum(len(b) for b in batches.values())
        await consumer.commit()
        await consumer.stop()

    asyncio.run(workload())


WORKLOADS: dict[str, Callable[[str, str], None]] = {
    "confluent_kafka": run_confluent_kafka,
    "kafka_python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def sasl_broker_config(proxy_port: int, mechanisms: str, jaas_prefix: str, jaas: str) -> dict[str, str]:
    """A broker config whose clients' listener is SASL_PLAINTEXT on an ephemeral port, advertised on
    the recording proxy's ``proxy_port``, with ``sasl.enabled.mechanisms=mechanisms`` and the JAAS
    config ``jaas`` under ``<jaas_prefix>.sasl.jaas.config``; replication goes over a PLAINTEXT
    listener on a free port (shared with record_gssapi_traffic.py)."""
    replication_port = free_port()
    return {
        "listeners": f"SASL_PLAINTEXT://{HOST}:0,REPLICATION://{HOST}:{replication_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://{HOST}:{proxy_port},REPLICATION://{HOST}:{replication_port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "sasl.enabled.mechanisms": mechanisms,
        f"{jaas_prefix}.sasl.jaas.config": jaas,
        "group.initial.rebalance.delay.ms": "0",
    }


def finish_recording(
    proxy: RecordingProxy, label: str, next_label: str, max_bytes: int
) -> tuple[list[RecordedConnection], list[bytes]]:
    """Wait for the connections labelled ``label`` to go idle (closing them after 15 s), label new
    ones ``next_label``, and return those connections with the frames kept from them (at most
    ``max_bytes``; shared with record_gssapi_traffic.py)."""
    gc.collect()
    if not proxy.wait_idle(15):
        proxy.close_all()
        proxy.wait_idle(5)
    proxy.label = next_label
    conns = [c for c in proxy.connections if c.label == label]
    return conns, select_frames(conns, max_bytes)


def record(clients: list[str], out_dir: pathlib.Path, max_bytes: int) -> list[str]:
    """Run each client's workload per mechanism through the proxy; one corpus file per client."""
    failures: list[str] = []
    proxy = RecordingProxy()
    proxy_port = proxy.start()
    with tempfile.TemporaryDirectory(prefix="odradek-record-sasl-") as data_dir:
        runner = BrokerRunner(
            data_dir, sasl_broker_config(proxy_port, ",".join(MECHANISMS), "listener.name.sasl_plaintext.plain", JAAS)
        )
        try:
            runner.start()
            store = runner.broker.store if runner.broker else None
            assert store is not None
            user, password = MECHANISMS["SCRAM-SHA-256"]
            runner.call(
                lambda: upsert_password_credentials(
                    store, user, {"SCRAM-SHA-256": (password, 4096), "SCRAM-SHA-512": (password, 4096)}
                )
            )
            time.sleep(1)  # the credential cache follows /config/changes
            proxy.upstream = (HOST, bound_port(runner))
            bootstrap = f"{HOST}:{proxy_port}"
            for client in clients:
                proxy.label = client
                for mechanism in MECHANISMS:
                    try:
                        WORKLOADS[client](bootstrap, mechanism)
                        log.info("%s: %s workload done", client, mechanism)
                    except Exception as exc:
                        failures.append(f"{client} ({mechanism}): {type(exc).__name__}: {exc}")
                        log.exception("%s: %s workload failed", client, mechanism)
                conns, frames = finish_recording(proxy, client, "after-" + client, max_bytes)
                if frames:
                    write_corpus(out_dir / f"{client}.bin", frames)
                    log.info("%s: %d connections, %d frames kept", client, len(conns), len(frames))
                else:
                    failures.append(f"{client}: no frames recorded")
        finally:
            runner.stop()
            proxy.stop()
    return failures


def sasl_summary(summary: str) -> str:
    """``record_traffic``'s README text, worded for this folder (shared with record_gssapi_traffic.py)."""
    summary = summary.replace(
        "talking to an odradek broker",
        "authenticated with SASL (PLAIN, SCRAM, OAUTHBEARER, GSSAPI) to an odradek broker",
    )
    summary = summary.replace(
        "Generated by `tools/record_traffic.py` (see its docstring)",
        "Generated by `tools/record_sasl_traffic.py` and, for `kafka_python_gssapi.bin` (a KDC of its own),\n"
        "`tools/record_gssapi_traffic.py` (see their docstrings)",
    )
    summary = summary.replace("tools/record_traffic.py", "tools/record_sasl_traffic.py")
    return summary.replace(";\nthis page only: `.venv/bin/python tools/record_sasl_traffic.py --summary`.", ".")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES // 4, help="cap per corpus file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("odradek", "kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    out_dir: pathlib.Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = record(args.clients, out_dir, args.max_bytes)
    summary = sasl_summary(render_summary(out_dir))
    (out_dir / "README.md").write_text(summary)
    print(summary)
    for failure in failures:
        print(f"step failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
