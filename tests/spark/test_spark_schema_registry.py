"""Batch reads decoding Confluent-framed Avro values (``valueSchemaRegistry``) with schemas from
the broker's own schema registry."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.spark

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Click",
        "fields": [
            {"name": "user", "type": "string"},
            {"name": "n", "type": "long"},
            {"name": "tag", "type": ["null", "bytes"], "default": None},
        ],
    }
)


def test_framed_avro_values_decode_into_json(spark: Any, odradek_broker_factory: Any) -> None:
    broker = odradek_broker_factory(overrides={"schema.registry.listener": "http://127.0.0.1:0"})
    url = broker.broker.schema_registry.url
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), SCHEMA)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    context = SerializationContext("clicks", MessageField.VALUE)
    for i in range(5):
        value = serializer({"user": f"u{i}", "n": i * 10, "tag": b"\x01" if i == 0 else None}, context)
        producer.produce("clicks", value=value, partition=0)
    producer.produce("clicks", value=b"not framed", partition=0)
    producer.produce("clicks", value=b"\x00\x00\x00\x03\xe7\x02", partition=0)  # unknown id 999
    assert producer.flush(10) == 0
    frame = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", "clicks")
        .option("valueSchemaRegistry", url)
        .load()
    )
    assert frame.columns[-2:] == ["valueSchemaId", "valueJson"]
    rows = frame.orderBy("offset").select("valueSchemaId", "valueJson").collect()
    decoded = [json.loads(r["valueJson"]) for r in rows[:5]]
    assert decoded[0] == {"user": "u0", "n": 0, "tag": "\x01"}
    assert [d["n"] for d in decoded] == [0, 10, 20, 30, 40]
    assert len({r["valueSchemaId"] for r in rows[:5]}) == 1
    assert (rows[5]["valueSchemaId"], rows[5]["valueJson"]) == (None, None)
    assert (rows[6]["valueSchemaId"], rows[6]["valueJson"]) == (999, None)
    with pytest.raises(Exception, match="valueSchemaRegistry"):
        spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers).option(
            "subscribe", "clicks"
        ).option("valueSchemaRegistry", "ftp://x").load().collect()
