"""Bad input fails fast with a message that says what to change; nothing hangs."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytestmark = pytest.mark.spark

UNREACHABLE = "127.0.0.1:1"


def _load(spark: Any, options: dict[str, str], stream: bool = False) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = reader.format("odradek")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t", "startingOffset": "earliest"},
            "Unknown option(s) for the odradek source: 'startingoffset'",
        ),
        (
            {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t", "assign": '{"t":[0]}'},
            "Only one of the following options can be specified for Kafka source",
        ),
        (
            {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t", "subscribePattern": "t.*"},
            "Only one of the following options can be specified for Kafka source",
        ),
        (
            {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t", "kafka.auto.offset.reset": "earliest"},
            "Kafka option 'auto.offset.reset' is not supported",
        ),
        (
            {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t", "kafka.value.deserializer": "x"},
            "Kafka option 'value.deserializer' is not supported",
        ),
        ({"subscribe": "t"}, "Option 'kafka.bootstrap.servers' must be specified"),
    ],
)
def test_bad_options_fail_at_load(spark: Any, options: dict[str, str], message: str) -> None:
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        _load(spark, options)
    assert message in str(info.value)
    # refused when the options are read, not after a connection timeout (the first case also pays
    # for the source's registration in the JVM, 10.3 s once with the suite's other workers running)
    assert time.monotonic() - started < 30


def test_batch_only_and_stream_only_rules(spark: Any) -> None:
    base = {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t"}
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries on Kafka"):
        _load(spark, {**base, "startingOffsets": "latest"}).collect()
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        query = _load(spark, {**base, "endingOffsets": "latest"}, stream=True).writeStream.format("noop").start()
        query.awaitTermination(30)


def test_custom_schema_is_rejected(spark: Any) -> None:
    reader = spark.read.format("odradek").schema("value string").option("kafka.bootstrap.servers", UNREACHABLE)
    with pytest.raises(Exception, match="Kafka source has a fixed schema and cannot be set with a custom one"):
        reader.option("subscribe", "t").load().collect()


def test_unreachable_broker_fails_fast_in_batch(spark: Any) -> None:
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        _load(spark, {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t"}).collect()
    assert "Cannot connect to the Kafka cluster at '127.0.0.1:1'" in str(info.value)
    assert time.monotonic() - started < 15


def test_unreachable_broker_fails_fast_in_stream(spark: Any, tmp_path: Any) -> None:
    started = time.monotonic()
    frame = _load(spark, {"kafka.bootstrap.servers": UNREACHABLE, "subscribe": "t"}, stream=True)
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    with pytest.raises(Exception) as info:
        query.awaitTermination(60)
    assert "Cannot connect to the Kafka cluster at '127.0.0.1:1'" in str(info.value)
    assert time.monotonic() - started < 20


def test_unreachable_broker_fails_fast_on_write(spark: Any) -> None:
    started = time.monotonic()
    frame = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception) as info:
        frame.write.format("odradek").option("kafka.bootstrap.servers", UNREACHABLE).option("topic", "t").mode(
            "append"
        ).save()
    assert "Cannot connect to the Kafka cluster at '127.0.0.1:1'" in str(info.value)
    assert time.monotonic() - started < 15


def test_write_column_rules(spark: Any) -> None:
    writer = spark.createDataFrame([("k",)], "key string").write.format("odradek")
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        writer.option("kafka.bootstrap.servers", UNREACHABLE).mode("append").save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        writer.option("kafka.bootstrap.servers", UNREACHABLE).option("topic", "t").mode("append").save()
    frame = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception, match="value attribute unsupported type int"):
        frame.write.format("odradek").option("kafka.bootstrap.servers", UNREACHABLE).option("topic", "t").mode(
            "append"
        ).save()
    with pytest.raises(Exception, match=r"Kafka option 'key\.serializer' is not supported"):
        spark.createDataFrame([("v",)], "value string").write.format("odradek").option(
            "kafka.bootstrap.servers", UNREACHABLE
        ).option("kafka.key.serializer", "x").option("topic", "t").mode("append").save()


def test_discovery_module_exports_the_source() -> None:
    import pyspark_odradek

    assert pyspark_odradek.DefaultSource.name() == "odradek"
