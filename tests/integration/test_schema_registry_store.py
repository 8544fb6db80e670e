"""A standalone registry (as ``odradek schema-registry`` runs it) beside a broker: recovery of
every schema from ``_schemas`` after a restart, Confluent's record format in the topic, unknown
key types skipped, and bad input answered with Confluent's error codes while nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from tests.integration.schema_registry_support import V1, avro_record, call, wait_until

from odradek.schema_registry.server import RegistryConfig, RegistryServer
from odradek.server.runner import BrokerRunner

pytestmark = pytest.mark.timeout(120)
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("sr-store"))).start()
    try:
        yield runner
    finally:
        runner.stop()


def _start(broker: BrokerRunner) -> RegistryServer:
    config = RegistryConfig(broker.bootstrap_servers, "http://127.0.0.1:0", max_request_bytes=LIMIT)
    return RegistryServer(config).start()


@pytest.fixture(scope="module")
def registry(broker: BrokerRunner) -> Iterator[RegistryServer]:
    server = _start(broker)
    try:
        yield server
    finally:
        server.stop()


def _end_offset(broker: BrokerRunner) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "peek"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition("_schemas", 0), timeout=10)[1])
    finally:
        consumer.close()


def _records(broker: BrokerRunner) -> list[tuple[bytes | None, bytes | None]]:
    end = _end_offset(broker)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition("_schemas", 0, 0)])
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        while len(out) < end:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def test_topic_holds_confluents_records_and_a_restart_recovers_them(broker: BrokerRunner) -> None:
    first = _start(broker)
    client = SchemaRegistryClient({"url": first.url})
    ids = {}
    for i in range(5):
        subject = f"rec-{i}"
        ids[subject] = client.register_schema(
            subject, Schema(avro_record(f"R{i}", [{"name": "a", "type": "int"}]), "AVRO")
        )
    client.set_compatibility("rec-0", "NONE")
    client.delete_version("rec-1", 1)
    first.stop()
    records = _records(broker)
    keys = [json.loads(k) for k, _ in records if k is not None]
    assert {"keytype": "SCHEMA", "subject": "rec-0", "version": 1, "magic": 1} in keys
    assert {"keytype": "CONFIG", "subject": "rec-0", "magic": 0} in keys
    raw_key = json.dumps({"keytype": "SCHEMA", "subject": "rec-2", "version": 1, "magic": 1}, separators=(",", ":"))
    value = json.loads(next(v for k, v in records if k == raw_key.encode()) or b"")
    assert value["subject"] == "rec-2" and value["id"] == ids["rec-2"] and value["deleted"] is False
    # a key type this registry does not know, a key that is not JSON: skipped, not fatal
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(
        "_schemas", key=b'{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}', value=b"{}"
    )
    producer.produce("_schemas", key=b"\xff garbage", value=b"\x00")
    assert producer.flush(10) == 0
    second = _start(broker)
    try:
        client = SchemaRegistryClient({"url": second.url})
        assert sorted(client.get_subjects()) == ["rec-0", "rec-2", "rec-3", "rec-4"]
        for subject in ("rec-0", "rec-2", "rec-3", "rec-4"):
            assert client.get_latest_version(subject).schema_id == ids[subject]
        assert client.get_compatibility("rec-0") == "NONE"
        assert call(second.url, "GET", "/subjects/rec-1/versions?deleted=true")[1] == [1]
        new_id = client.register_schema("rec-5", Schema(avro_record("R5", [{"name": "b", "type": "int"}]), "AVRO"))
        assert new_id == max(ids.values()) + 1
    finally:
        second.stop()


def test_bad_input_gets_confluents_codes_and_writes_nothing(broker: BrokerRunner, registry: RegistryServer) -> None:
    url = registry.url
    good = {"schema": avro_record("G", [{"name": "a", "type": "int"}])}
    assert call(url, "POST", "/subjects/bad-base/versions", good)[0] == 200
    before = _end_offset(broker)
    cases: list[tuple[tuple[int, int], tuple[int, object]]] = [
        ((400, 400), call(url, "POST", "/subjects/bad/versions", content=b'{"schema": ')),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schema": '{"type": "recrod"}'})),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schema": "not json"})),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schema": "{}", "schemaType": "XML"})),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schemaType": "JSON", "schema": '{"type": 12}'})),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schemaType": "PROTOBUF", "schema": "message {"})),
        ((422, 42201), call(url, "POST", "/subjects/bad/versions", {"schema": ""})),
        ((400, 400), call(url, "POST", "/subjects/bad/versions", [1, 2])),
        ((415, 415), call(url, "POST", "/subjects/bad/versions", good, headers={"Content-Type": "text/plain"})),
        ((406, 406), call(url, "GET", "/subjects", headers={"Accept": "text/html"})),
        ((404, 40401), call(url, "GET", "/subjects/unknown/versions")),
        ((404, 40401), call(url, "GET", "/subjects/unknown/versions/1")),
        ((404, 40402), call(url, "GET", "/subjects/bad-base/versions/7")),
        ((422, 42202), call(url, "GET", "/subjects/bad-base/versions/0")),
        ((422, 42202), call(url, "GET", "/subjects/bad-base/versions/two")),
        ((404, 40403), call(url, "GET", "/schemas/ids/9999")),
        ((404, 40403), call(url, "GET", "/schemas/ids/x")),
        ((404, 40401), call(url, "POST", "/subjects/unknown", good)),
        ((404, 40403), call(url, "POST", "/subjects/bad-base", {"schema": avro_record("H", [])})),
        ((404, 40401), call(url, "DELETE", "/subjects/unknown")),
        ((404, 404), call(url, "GET", "/no/such/path")),
        ((405, 405), call(url, "PATCH", "/subjects")),
        ((413, 413), call(url, "POST", "/subjects/bad/versions", {"schema": "x" * (LIMIT + 1)})),
    ]
    for (status, code), (got_status, body) in cases:
        assert (got_status, body["error_code"]) == (status, code), body  # type: ignore[index]
    # a chunked body (no Content-Length) is cut off as soon as it passes the limit
    chunks = (b"x" * 8192 for _ in range(LIMIT // 8192 + 4))
    answer = httpx.post(url + "/subjects/bad/versions", content=chunks, headers={"Content-Type": V1}, timeout=10)
    assert answer.status_code == 413 and answer.json()["error_code"] == 413
    assert answer.headers["content-type"].startswith(V1)
    assert _end_offset(broker) == before
    assert "bad" not in SchemaRegistryClient({"url": url}).get_subjects()


def test_content_types(registry: RegistryServer) -> None:
    url = registry.url
    for kind in (V1, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"):
        status, _ = call(url, "POST", "/subjects/ct/versions", {"schema": '"string"'}, headers={"Content-Type": kind})
        assert status == 200
    answer = httpx.get(url + "/subjects", headers={"Accept": "application/json"})
    assert answer.headers["content-type"].startswith("application/json")
    answer = httpx.get(url + "/subjects")
    assert answer.headers["content-type"].startswith(V1)
    assert call(url, "GET", "/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]


def test_cli_serves_the_api(broker: BrokerRunner) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "schema-registry",
            "--bootstrap-server",
            broker.bootstrap_servers,
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("schema registry listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert wait_until(lambda: call(url, "GET", "/subjects")[0] == 200, 20, "the CLI registry")
        assert "rec-0" in call(url, "GET", "/subjects")[1]
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
