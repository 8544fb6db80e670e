"""Mutated traffic against a SASL_PLAINTEXT listener: before, during and after authentication.

A broker process with a SASL_PLAINTEXT listener (PLAIN from the listener's JAAS, SCRAM users in
``/config/users``, OAUTHBEARER with Kafka's unsecured validator) and a PLAINTEXT inter-broker
listener. Four runs, sized by ``ODRADEK_FUZZ_FRAMES`` / ``ODRADEK_FUZZ_SEED`` like the
client-traffic fuzzer (``make fuzz``),
a twentieth of its frames per run (each frame before authentication costs a connection):

- **before authentication**: mutated SaslHandshake, SaslAuthenticate and ApiVersions frames,
  each on a fresh connection. Only ApiVersions and a SaslHandshake that decodes may be answered;
  everything else must close the connection with no answer;
- **during authentication**: a valid SaslHandshake v1 for PLAIN (or OAUTHBEARER), then a mutated
  token frame. A frame that decodes as SaslAuthenticate v0-v2 is answered (success, OAUTHBEARER's
  JSON challenge or Kafka's error); any other frame closes the connection unanswered;
- **after authentication**: the recorded client corpus and the one recorded over authenticated
  SASL_PLAINTEXT connections (``tests/data/client_frames_sasl``, with the clients' SaslHandshake
  and SaslAuthenticate frames), mutated, on authenticated connections (the fuzzer's own oracle
  applies unchanged: SASL frames after authentication are answered with Kafka's errors).

Afterwards the broker is alive, its log holds no traceback, its RSS stayed bounded, and a
client still authenticates and round-trips records.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, encode_request, parse_request_header, peek_api
from odradek.protocol.messages import build
from odradek.security.sasl.oauthbearer import ClientInitialResponse
from odradek.security.sasl.scram import ScramSaslClient

from .fuzz_support import SASL_CORPUS, Mutator, load_corpus, run_fuzz
from .process_support import BrokerProcess, free_port

FRAMES = int(os.environ.get("ODRADEK_FUZZ_FRAMES", "100000")) // 20
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261125"))
RSS_BOUND_BYTES = 300 * 1024 * 1024
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'

pytestmark = pytest.mark.timeout(max(300, FRAMES // 1000 * 10))


def _request(api_key: int, version: int, correlation_id: int = 1, **fields: Any) -> bytes:
    schema = api_schema(api_key, version)
    return encode_request(schema, correlation_id, "fuzz", build(schema.request_type, **fields))


def _sasl_corpus() -> list[bytes]:
    scram_first = ScramSaslClient("SCRAM-SHA-256", "alice", "x").evaluate_challenge(b"") or b""
    frames = [_request(18, v, client_software_name="fuzz", client_software_version="1") for v in range(4)]
    mechanisms = ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI")
    frames += [_request(17, v, mechanism=m) for v in (0, 1) for m in mechanisms]
    tokens = (b"\0alice\0alice-secret", scram_first, _oauthbearer_initial_response(), b"\x01")
    frames += [_request(36, v, auth_bytes=t) for v in (0, 1, 2) for t in tokens]
    return frames


def _oauthbearer_initial_response() -> bytes:
    """RFC 7628's initial response with an unsecured JWT for alice and a SASL extension."""
    parts = ({"alg": "none"}, {"sub": "alice", "iat": 1, "exp": 4102444800, "scope": "kafka"})
    token = ".".join(base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=").decode() for p in parts) + "."
    return ClientInitialResponse(token, "", {"traceId": "fuzz"}).to_bytes()


def _decodes(body: bytes, api_key: int, versions: tuple[int, int]) -> bool:
    try:
        key, version, _ = peek_api(body)
        if key != api_key or not versions[0] <= version <= versions[1]:
            return False
        schema = api_schema(key, version)
        header = parse_request_header(body, schema.flexible)
        decode_request(schema, body, header.size)
    except (InvalidRequestError, UnsupportedVersionError):
        return False
    return True


def _predict_first(body: bytes) -> str:
    """The first frame on a SASL listener: ApiVersions or SaslHandshake answered, else closed."""
    try:
        key, version, _ = peek_api(body)
    except InvalidRequestError:
        return "close"
    if key == ApiKey.API_VERSIONS:
        return "answer" if not 0 <= version <= 4 or _decodes(body, key, (0, 4)) else "close"
    return "answer" if _decodes(body, ApiKey.SASL_HANDSHAKE, (0, 1)) else "close"


async def _outcome(port: int, prefix: bytes, frame: bytes) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if prefix:
            writer.write(prefix)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
        writer.write(frame)
        try:
            data = await asyncio.wait_for(reader.read(4), 2.0)
        except ConnectionError:
            return "close"
        return "answer" if data else "close"
    finally:
        writer.close()


async def _fuzz_exchange(port: int, frames: int, seed: int, stage: str) -> list[str]:
    mutator = Mutator(_sasl_corpus(), seed)
    mismatches: list[str] = []
    mechanism = "OAUTHBEARER" if stage == "during-oauthbearer" else "PLAIN"
    prefix = _request(17, 1, mechanism=mechanism) if stage.startswith("during") else b""
    budget = [frames]

    async def worker() -> None:
        while budget[0] > 0:
            budget[0] -= 1
            frame = mutator.next_frame()
            (size,) = struct.unpack_from(">i", frame, 0)
            body = frame[4:]
            if size <= 0 or size > 524288 or size != len(body):
                expected = "close" if size <= 0 or size > 524288 else None
            elif stage == "before":
                expected = _predict_first(body)
            else:
                expected = "answer" if _decodes(body, ApiKey.SASL_AUTHENTICATE, (0, 2)) else "close"
            got = await _outcome(port, prefix, frame)
            if expected is not None and got != expected:
                mismatches.append(f"{stage}: {got}, expected {expected}: {frame[:64].hex()}")

    await asyncio.gather(*(worker() for _ in range(8)))
    return mismatches


async def _authenticated(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for request in (_request(17, 1, mechanism="PLAIN"), _request(36, 1, 2, auth_bytes=b"\0alice\0alice-secret")):
        writer.write(request)
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
    return reader, writer


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("fuzz-sasl") / "data")
    proc.overrides = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{proc.port},PLAINTEXT://127.0.0.1:{free_port()}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    proc.start()
    yield proc
    proc.stop()


def _sample_rss(broker: BrokerProcess, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set() and broker.alive():
        peak[0] = max(peak[0], broker.rss_bytes())
        stop.wait(0.1)


@pytest.mark.parametrize("stage", ["before", "during", "during-oauthbearer"])
def test_mutated_sasl_exchange(broker: BrokerProcess, stage: str) -> None:
    mismatches = asyncio.run(_fuzz_exchange(broker.port, FRAMES, SEED, stage))
    assert broker.alive(), broker.log_text()[-3000:]
    assert mismatches == [], mismatches[:20]
    assert "Traceback" not in broker.log_text()


def test_mutated_traffic_after_authentication(broker: BrokerProcess) -> None:
    stop, peak = threading.Event(), [broker.rss_bytes()]
    sampler = threading.Thread(target=_sample_rss, args=(broker, stop, peak), daemon=True)
    sampler.start()
    try:
        sasl_corpus = load_corpus(SASL_CORPUS)
        assert any(peek_api(f[4:])[0] == ApiKey.SASL_AUTHENTICATE for f in sasl_corpus)
        corpus = load_corpus() + sasl_corpus
        stats = asyncio.run(
            run_fuzz(broker.port, FRAMES, SEED, workers=8, connect=lambda: _authenticated(broker.port), corpus=corpus)
        )
    finally:
        stop.set()
        sampler.join()
    assert broker.alive(), broker.log_text()[-3000:]
    assert stats.mismatches == [], stats.mismatches[:20]
    assert stats.closed > FRAMES // 4 and stats.answered > FRAMES // 20, stats
    assert peak[0] < RSS_BOUND_BYTES
    log = broker.log_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 300 : log.index("Traceback") + 3000]
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    admin = AdminClient(config)
    admin.create_topics([NewTopic("after-fuzz", 1, 1)])["after-fuzz"].result(30)
    producer = Producer({**config, "linger.ms": "5"})
    values = [random.randbytes(32) for _ in range(20)]
    for value in values:
        producer.produce("after-fuzz", value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "after-fuzz", "enable.auto.commit": "false"})
    consumer.assign([TopicPartition("after-fuzz", 0, 0)])
    got: list[bytes] = []
    for _ in range(40):
        got += [m.value() or b"" for m in consumer.consume(100, 0.5) if not m.error()]
        if len(got) >= len(values):
            break
    consumer.close()
    assert got == values
