"""The schema registry a broker serves (``schema.registry.listener``), driven by confluent-kafka's
SchemaRegistryClient and its Avro, JSON and Protobuf serializers producing and consuming through
the broker, and by raw REST calls for Confluent's API details."""

from __future__ import annotations

import base64
import json
import pathlib
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from tests.integration.schema_registry_support import avro_record, call, compile_proto

from odradek.server.runner import BrokerRunner

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("sr-broker")), {"schema.registry.listener": "http://127.0.0.1:0"}
    ).start()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture(scope="module")
def url(broker: BrokerRunner) -> str:
    assert broker.broker is not None and broker.broker.schema_registry is not None
    return broker.broker.schema_registry.url


@pytest.fixture(scope="module")
def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def _subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _round_trip(broker: BrokerRunner, topic: str, serialize: Any, deserialize: Any, values: list[Any]) -> list[Any]:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for v in values:
        producer.produce(topic, value=serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(15) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(out) == len(values):
                break
    finally:
        consumer.close()
    return out


def test_avro_serializer_round_trip(broker: BrokerRunner, client: SchemaRegistryClient) -> None:
    topic = f"avro-{uuid.uuid4().hex[:6]}"
    schema = avro_record("User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}])
    values = [{"name": f"u{i}", "age": i} for i in range(5)]
    out = _round_trip(broker, topic, AvroSerializer(client, schema), AvroDeserializer(client), values)
    assert out == values
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "User"


def test_json_serializer_round_trip(broker: BrokerRunner, client: SchemaRegistryClient) -> None:
    topic = f"json-{uuid.uuid4().hex[:6]}"
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        }
    )
    values = [{"id": i, "tags": ["a"] * i} for i in range(4)]
    out = _round_trip(
        broker, topic, JSONSerializer(schema, client), JSONDeserializer(schema, schema_registry_client=client), values
    )
    assert out == values
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def test_protobuf_serializer_round_trip(
    broker: BrokerRunner, client: SchemaRegistryClient, tmp_path: pathlib.Path
) -> None:
    module = compile_proto(
        tmp_path,
        f"order_{uuid.uuid4().hex[:6]}",
        'syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
        "message Order { string id = 1; int64 cents = 2; repeated string items = 3;\n"
        "  google.protobuf.Timestamp at = 4; }\n",
    )
    topic = f"proto-{uuid.uuid4().hex[:6]}"
    values = [module.Order(id=f"o{i}", cents=100 * i, items=["x"] * i) for i in range(3)]
    serializer = ProtobufSerializer(module.Order, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(module.Order, {"use.deprecated.format": False})
    out = _round_trip(broker, topic, serializer, deserializer, values)
    assert out == values
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # the serialized format answers the FileDescriptorProto a deserializer builds its pool from
    status, body = call(
        client._rest_client.base_urls[0], "GET", f"/schemas/ids/{registered.schema_id}?format=serialized"
    )
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body["schema"]))
    assert status == 200 and body["schemaType"] == "PROTOBUF"
    assert [m.name for m in fdp.message_type] == ["Order"] and fdp.package == "shop"


def test_same_schema_same_id_across_subjects(client: SchemaRegistryClient) -> None:
    schema = avro_record("Same", [{"name": "a", "type": "long"}])
    first = client.register_schema(_subject(), Schema(schema, "AVRO"))
    formatted = json.dumps(json.loads(schema), indent=4)  # only formatting differs
    again = client.register_schema(_subject(), Schema(formatted, "AVRO"))
    assert again == first
    with_default = avro_record("Same", [{"name": "a", "type": "long", "default": 0}])
    assert client.register_schema(_subject(), Schema(with_default, "AVRO")) != first


def test_compatibility_levels_refuse_with_409(url: str, client: SchemaRegistryClient) -> None:
    subject = _subject()
    v1 = avro_record("R", [{"name": "a", "type": "int"}])
    v2 = avro_record("R", [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    client.register_schema(subject, Schema(v1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema(subject, Schema(v2, "AVRO"))
    assert info.value.http_status_code == 409 and info.value.error_code == 409
    assert client.test_compatibility(subject, Schema(v2, "AVRO")) is False
    status, body = call(url, "POST", f"/compatibility/subjects/{subject}/versions/latest?verbose=true", {"schema": v2})
    assert (
        status == 200 and body["is_compatible"] is False and "READER_FIELD_MISSING_DEFAULT_VALUE" in body["messages"][0]
    )
    assert client.set_compatibility(subject, "FORWARD") == {"compatibility": "FORWARD"}
    assert client.get_compatibility(subject) == "FORWARD"
    client.register_schema(subject, Schema(v2, "AVRO"))  # adding a field is forward compatible
    v3 = avro_record("R", [{"name": "b", "type": "string"}])  # removing a field without default: not
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema(subject, Schema(v3, "AVRO"))
    assert info.value.http_status_code == 409
    status, body = call(url, "GET", f"/config/{_subject()}")
    assert (status, body["error_code"]) == (404, 40408)
    status, body = call(url, "PUT", "/config/x", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    status, body = call(url, "DELETE", f"/config/{subject}")
    assert status == 200 and body["compatibilityLevel"] == "FORWARD"
    assert call(url, "GET", "/config")[1] == {"compatibilityLevel": "BACKWARD"}


def test_transitive_compares_with_every_version(client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.set_compatibility(subject, "BACKWARD_TRANSITIVE")
    client.register_schema(subject, Schema(avro_record("T", [{"name": "a", "type": "int"}]), "AVRO"))
    client.register_schema(
        subject,
        Schema(avro_record("T", [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}]), "AVRO"),
    )
    # reads v2's data but not v1's (b has no default): refused only transitively
    v3 = Schema(avro_record("T", [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]), "AVRO")
    with pytest.raises(SchemaRegistryError):
        client.register_schema(subject, v3)
    client.set_compatibility(subject, "BACKWARD")
    assert client.register_schema(subject, v3) > 0


def test_versions_lookup_and_deletes(url: str, client: SchemaRegistryClient) -> None:
    subject = _subject()
    s1 = avro_record("D", [{"name": "a", "type": "int"}])
    s2 = avro_record("D", [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}])
    id1 = client.register_schema(subject, Schema(s1, "AVRO"))
    id2 = client.register_schema(subject, Schema(s2, "AVRO"))
    found = client.lookup_schema(subject, Schema(s1, "AVRO"))
    assert (found.version, found.schema_id) == (1, id1)
    assert call(url, "GET", f"/schemas/ids/{id2}/versions")[1] == [{"subject": subject, "version": 2}]
    assert call(url, "GET", f"/subjects/{subject}/versions/1/schema")[1] == json.loads(s1)
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert call(url, "GET", f"/subjects/{subject}/versions?deleted=true")[1] == [1, 2]
    assert call(url, "GET", f"/subjects/{subject}/versions/1")[1]["error_code"] == 40402
    assert call(url, "DELETE", f"/subjects/{subject}/versions/1")[1]["error_code"] == 40406
    assert call(url, "DELETE", f"/subjects/{subject}/versions/2?permanent=true")[1]["error_code"] == 40407
    assert call(url, "DELETE", f"/subjects/{subject}?permanent=true")[1]["error_code"] == 40405
    client.set_compatibility(subject, "NONE")
    assert client.delete_subject(subject) == [2]
    assert call(url, "GET", f"/config/{subject}")[1]["error_code"] == 40408  # went with the subject
    assert subject not in client.get_subjects()
    assert subject in call(url, "GET", "/subjects?deleted=true")[1]
    assert call(url, "DELETE", f"/subjects/{subject}")[1]["error_code"] == 40404
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert call(url, "GET", f"/subjects/{subject}/versions")[1]["error_code"] == 40401
    assert call(url, "GET", f"/schemas/ids/{id1}")[1]["error_code"] == 40403


def test_references_metadata_and_rule_set_round_trip(url: str, client: SchemaRegistryClient) -> None:
    base = _subject()
    address = json.dumps(
        {"type": "record", "name": "Address", "namespace": "x", "fields": [{"name": "city", "type": "string"}]}
    )
    client.register_schema(base, Schema(address, "AVRO"))
    person = json.dumps(
        {"type": "record", "name": "Person", "namespace": "x", "fields": [{"name": "home", "type": "x.Address"}]}
    )
    subject = _subject()
    body = {
        "schema": person,
        "references": [{"name": "x.Address", "subject": base, "version": 1}],
        "metadata": {"properties": {"owner": "team-a"}},
        "ruleSet": {
            "domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "true"}]
        },
    }
    status, answer = call(url, "POST", f"/subjects/{subject}/versions", body)
    assert status == 200
    status, got = call(url, "GET", f"/subjects/{subject}/versions/latest")
    assert got["references"] == body["references"] and got["metadata"] == body["metadata"]
    assert got["ruleSet"] == body["ruleSet"] and got["id"] == answer["id"]
    assert call(url, "GET", f"/subjects/{base}/versions/1/referencedby")[1] == [answer["id"]]
    latest = client.get_latest_with_metadata(subject, {"owner": "team-a"})
    assert latest.schema_id == answer["id"] and latest.version == 1
    with pytest.raises(SchemaRegistryError) as info:
        client.get_latest_with_metadata(subject, {"owner": "team-b"})
    assert info.value.error_code == 40403
    assert call(url, "DELETE", f"/subjects/{base}/versions/1")[1]["error_code"] == 42206
    bad = {**body, "references": [{"name": "x.Address", "subject": "nope", "version": 1}]}
    assert call(url, "POST", f"/subjects/{_subject()}/versions", bad)[1]["error_code"] == 42201


def test_json_and_protobuf_compatibility_through_the_api(url: str) -> None:
    subject = _subject()
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert (
        call(url, "POST", f"/subjects/{subject}/versions", {"schemaType": "JSON", "schema": json.dumps(closed)})[0]
        == 200
    )
    narrower = {**closed, "properties": {}}  # removes a property from a closed content model
    status, body = call(
        url, "POST", f"/subjects/{subject}/versions", {"schemaType": "JSON", "schema": json.dumps(narrower)}
    )
    assert (status, body["error_code"]) == (409, 409)
    proto = _subject()
    p1 = 'syntax = "proto3"; message M { int32 a = 1; string b = 2; }'
    p2 = 'syntax = "proto3"; message M { int64 a = 1; string c = 3; }'  # wire-compatible, field removed
    p3 = 'syntax = "proto3"; message M { string a = 1; }'
    assert call(url, "POST", f"/subjects/{proto}/versions", {"schemaType": "PROTOBUF", "schema": p1})[0] == 200
    assert call(url, "POST", f"/subjects/{proto}/versions", {"schemaType": "PROTOBUF", "schema": p2})[0] == 200
    assert call(url, "POST", f"/subjects/{proto}/versions", {"schemaType": "PROTOBUF", "schema": p3})[0] == 409


def test_modes(url: str) -> None:
    subject = _subject()
    schema = {"schema": avro_record("M", [{"name": "a", "type": "int"}])}
    assert call(url, "GET", "/mode")[1] == {"mode": "READWRITE"}
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "READONLY"})[1] == {"mode": "READONLY"}
    status, body = call(url, "POST", f"/subjects/{subject}/versions", schema)
    assert (status, body["error_code"]) == (422, 42205)
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert call(url, "DELETE", f"/mode/{subject}")[1] == {"mode": "READONLY"}
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "IMPORT"})[1] == {"mode": "IMPORT"}
    status, body = call(url, "POST", f"/subjects/{subject}/versions", schema)  # IMPORT needs an id
    assert (status, body["error_code"]) == (422, 42205)
    status, body = call(url, "POST", f"/subjects/{_subject()}/versions", {**schema, "id": 778})  # and IMPORT mode
    assert (status, body["error_code"]) == (422, 42205)
    status, body = call(url, "POST", f"/subjects/{subject}/versions", {**schema, "id": 777, "version": 3})
    assert status == 200 and body["id"] == 777
    assert call(url, "GET", f"/subjects/{subject}/versions")[1] == [3]


def test_broker_side_schema_id_validation(broker: BrokerRunner, client: SchemaRegistryClient) -> None:
    topic = f"validated-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "true"})])
    futures[topic].result(10)
    schema = avro_record("V", [{"name": "a", "type": "int"}])
    serializer = AvroSerializer(client, schema)
    other_id = client.register_schema(_subject(), Schema(avro_record("O", [{"name": "o", "type": "long"}]), "AVRO"))
    results: list[tuple[str, Any]] = []

    def report(name: str) -> Any:
        return lambda err, msg: results.append((name, err))

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    good = serializer({"a": 1}, SerializationContext(topic, MessageField.VALUE))  # registers <topic>-value
    producer.produce(topic, value=good, on_delivery=report("good"))
    producer.flush(10)  # one record per batch: a refusal fails the whole batch
    producer.produce(topic, value=b"plain text", on_delivery=report("no header"))
    producer.flush(10)
    producer.produce(topic, value=b"\x00" + struct.pack(">i", 99999) + b"\x02", on_delivery=report("unknown id"))
    producer.flush(10)
    producer.produce(topic, value=b"\x00" + struct.pack(">i", other_id) + b"\x02", on_delivery=report("other subject"))
    producer.flush(10)
    producer.produce(topic, value=None, key=b"k", on_delivery=report("null"))
    producer.flush(10)
    errors = dict(results)
    assert errors["good"] is None
    for name in ("no header", "unknown id", "other subject", "null"):
        assert errors[name] is not None and errors[name].code() == KafkaError.INVALID_RECORD, name
    # a topic without the config takes anything
    producer.produce(f"plain-{topic}", value=b"plain text", on_delivery=report("unvalidated"))
    producer.flush(10)
    assert dict(results)["unvalidated"] is None


def test_import_keeps_ids_and_refuses_to_overwrite_one(url: str) -> None:
    subject = _subject()
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "IMPORT"})[0] == 200
    first = {"schema": avro_record("I", [{"name": "a", "type": "int"}]), "id": 9001, "version": 1}
    assert call(url, "POST", f"/subjects/{subject}/versions", first)[1]["id"] == 9001
    other = {"schema": avro_record("J", [{"name": "b", "type": "int"}]), "id": 9001, "version": 2}
    status, body = call(url, "POST", f"/subjects/{subject}/versions", other)
    assert (status, body["error_code"]) == (422, 42205)
    # ids handed out afterwards continue after the imported one
    assert call(url, "DELETE", f"/mode/{subject}")[0] == 200
    fresh = call(url, "POST", f"/subjects/{_subject()}/versions", {"schema": avro_record("K", [])})[1]
    assert fresh["id"] > 9001


def test_subjects_named_like_import_paths(url: str, client: SchemaRegistryClient) -> None:
    dep_subject = f"dir-{uuid.uuid4().hex[:6]}/money.proto"
    dep = 'syntax = "proto3";\npackage m;\nmessage Money { int64 cents = 1; }\n'
    dep_id = client.register_schema(dep_subject, Schema(dep, "PROTOBUF"))  # sent URL-encoded
    assert dep_subject in client.get_subjects()
    assert client.get_latest_version(dep_subject).schema_id == dep_id
    assert client.get_versions(dep_subject) == [1]
    main = f'syntax = "proto3";\nimport "{dep_subject}";\nmessage Order {{ m.Money total = 1; }}\n'
    refs = [SchemaReference(dep_subject, dep_subject, 1)]
    main_id = client.register_schema(_subject(), Schema(main, "PROTOBUF", refs))
    assert call(url, "GET", f"/subjects/{dep_subject.replace('/', '%2F')}/versions/1/referencedby")[1] == [main_id]
    assert client.set_compatibility(dep_subject, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(dep_subject) == "NONE"
    assert client.test_compatibility(dep_subject, Schema(dep, "PROTOBUF")) is True


PROTO_WRITTEN = """syntax = "proto3";
package norm;
// formatting, comments, the order of fields, options and imports, and relative type names differ
import "google/protobuf/timestamp.proto";
message Order { option deprecated = true;
  map<string, Line> lines = 3; string id = 1 [deprecated = true, json_name = "orderId"];
  google.protobuf.Timestamp at = 2;
  message Line { int32 qty = 2; string sku = 1; } }
"""
PROTO_REORDERED = """syntax = "proto3"; package norm; import "google/protobuf/timestamp.proto";
message Order { .google.protobuf.Timestamp at = 2; string id = 1 [json_name = "orderId", deprecated = true];
  map<string, .norm.Order.Line> lines = 3; option deprecated = true;
  message Line { int32 qty = 2; string sku = 1; } }
"""
PROTO_NORMAL = """syntax = "proto3";
package norm;

import "google/protobuf/timestamp.proto";

message Order {
  option deprecated = true;
  string id = 1 [deprecated = true, json_name = "orderId"];
  .google.protobuf.Timestamp at = 2;
  map<string, .norm.Order.Line> lines = 3;
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
}
"""


def test_protobuf_normalize_stores_the_normal_form_under_one_id(url: str, client: SchemaRegistryClient) -> None:
    subject = _subject()
    first = client.register_schema(subject, Schema(PROTO_WRITTEN, "PROTOBUF"), normalize_schemas=True)
    assert client.get_schema(first).schema_str == PROTO_NORMAL
    assert call(url, "GET", f"/schemas/ids/{first}")[1]["schema"] == PROTO_NORMAL
    # an equivalent schema written differently is the same schema: same id, no new version
    assert client.register_schema(subject, Schema(PROTO_REORDERED, "PROTOBUF"), normalize_schemas=True) == first
    assert client.get_versions(subject) == [1]
    found = client.lookup_schema(subject, Schema(PROTO_REORDERED, "PROTOBUF"), normalize_schemas=True)
    assert (found.schema_id, found.version) == (first, 1)
    assert client.test_compatibility(subject, Schema(PROTO_REORDERED, "PROTOBUF"), normalize=True) is True
    # without normalize the text is kept as sent: the reordered descriptor is another schema
    body = {"schemaType": "PROTOBUF", "schema": PROTO_REORDERED}
    assert call(url, "POST", f"/subjects/{subject}", body)[1]["error_code"] == 40403  # (the client caches lookups)
    assert call(url, "POST", f"/subjects/{subject}?normalize=true", body)[1]["id"] == first
    other = client.register_schema(_subject(), Schema(PROTO_REORDERED, "PROTOBUF"))
    assert other != first and client.get_schema(other).schema_str == PROTO_REORDERED
    # the subject's config asks for it as well as the request flag does
    configured = _subject()
    assert call(url, "PUT", f"/config/{configured}", {"normalize": True})[0] == 200
    status, body = call(
        url, "POST", f"/subjects/{configured}/versions", {"schemaType": "PROTOBUF", "schema": PROTO_WRITTEN}
    )
    assert (status, body["id"]) == (200, first)
    assert call(url, "GET", f"/subjects/{configured}/versions/1")[1]["schema"] == PROTO_NORMAL
    status, body = call(url, "POST", f"/subjects/{configured}", {"schemaType": "PROTOBUF", "schema": PROTO_REORDERED})
    assert (status, body["version"]) == (200, 1)


def test_protobuf_serializer_with_normalize_schemas(
    broker: BrokerRunner, client: SchemaRegistryClient, tmp_path: pathlib.Path
) -> None:
    module = compile_proto(tmp_path, f"norm_{uuid.uuid4().hex[:6]}", PROTO_WRITTEN)
    topic = f"proto-norm-{uuid.uuid4().hex[:6]}"
    values = [module.Order(id=f"o{i}", lines={"a": module.Order.Line(sku="s", qty=i)}) for i in range(3)]
    conf = {"use.deprecated.format": False, "normalize.schemas": True}
    serializer = ProtobufSerializer(module.Order, client, conf)
    deserializer = ProtobufDeserializer(module.Order, {"use.deprecated.format": False})
    assert _round_trip(broker, topic, serializer, deserializer, values) == values
    # the serializer sent its base64 descriptor; the registry stored the normal form of it
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_str == PROTO_NORMAL
    assert registered.schema.references == []  # well-known types are not registered by the serializer


def test_protobuf_serializer_registers_its_imports(
    broker: BrokerRunner, client: SchemaRegistryClient, tmp_path: pathlib.Path
) -> None:
    package = f"pkg{uuid.uuid4().hex[:6]}"
    (tmp_path / package).mkdir()
    dep = compile_proto(
        tmp_path, f"{package}/money", f'syntax = "proto3";\npackage {package};\nmessage Money {{ int64 cents = 1; }}\n'
    )
    main = compile_proto(
        tmp_path,
        f"{package}_order",
        f'syntax = "proto3";\npackage {package};\nimport "{package}/money.proto";\n'
        "message Order { string id = 1; Money total = 2; }\n",
    )
    topic = f"proto-ref-{uuid.uuid4().hex[:6]}"
    values = [main.Order(id=f"o{i}", total=dep.Money(cents=i)) for i in range(3)]
    serializer = ProtobufSerializer(main.Order, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(main.Order, {"use.deprecated.format": False})
    assert _round_trip(broker, topic, serializer, deserializer, values) == values
    assert f"{package}/money.proto" in client.get_subjects()  # the import, registered under its path
    registered = client.get_latest_version(f"{topic}-value")
    assert [r.name for r in registered.schema.references] == [f"{package}/money.proto"]


def test_the_console_shows_subjects_versions_and_schemas_escaped(broker: BrokerRunner, url: str) -> None:
    """``odradek ui --schema-registry-url`` against this registry: the subject is listed, its two
    versions too, and a schema whose doc holds markup is shown as text."""
    import httpx

    from odradek.console.app import ConsoleConfig

    from .console_support import ConsoleServer

    subject = _subject()
    fields = [{"name": "a", "type": "string"}]
    first = {"type": "record", "name": "R", "doc": "<script>alert(1)</script>", "fields": fields}
    second = {**first, "fields": [*fields, {"name": "b", "type": "int", "default": 0}]}
    for schema in (first, second):
        answer = httpx.post(
            f"{url}/subjects/{subject}/versions",
            json={"schema": json.dumps(schema)},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
    console = ConsoleServer(ConsoleConfig(broker.bootstrap_servers, schema_registry_url=url)).start()
    try:
        listed = httpx.get(console.url + "/registry", timeout=10)
        assert listed.status_code == 200 and subject in listed.text
        page = httpx.get(console.url + f"/registry/{subject}?version=1", timeout=10)
        assert page.status_code == 200, page.text[:500]
        assert "<script>alert(1)</script>" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert '"b"' not in page.text.replace("&#34;", '"')  # version 1 has no field b
        latest = httpx.get(console.url + f"/registry/{subject}", timeout=10)
        assert latest.status_code == 200 and '"b"' in latest.text.replace("&#34;", '"')
        assert httpx.get(console.url + f"/registry/{subject}?version=x", timeout=10).status_code == 400
    finally:
        console.stop()
