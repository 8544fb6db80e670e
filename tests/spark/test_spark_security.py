"""A Spark batch read and write over SASL_SSL with the Java client's keys, as a job written for
Spark's Kafka source sets them (SCRAM-SHA-512, a PEM trust store)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from spark_helpers import create_topic, produce

from integration.security_support import SCRAM_USERS, address, secure_broker, write_certificates

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    paths = write_certificates(tmp_path_factory.mktemp("spark-certs"))
    with secure_broker(str(tmp_path_factory.mktemp("spark-secure-broker")), paths) as runner:
        yield runner, paths


def security_options(paths: dict[str, str]) -> dict[str, str]:
    password = SCRAM_USERS["scram-user"]
    return {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="scram-user" password="{password}";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": paths["ca"],
    }


def test_batch_read_and_write_over_sasl_ssl(spark: Any, broker: tuple[Any, dict[str, str]]) -> None:
    runner, paths = broker
    plaintext, secure = address(runner, "PLAINTEXT"), address(runner, "SASL_SSL")
    create_topic(plaintext, "secure-in", 2)
    produce(plaintext, "secure-in", ({"value": f"v{i}".encode(), "partition": i % 2} for i in range(10)))
    options = {"kafka.bootstrap.servers": secure, **security_options(paths)}
    rows = spark.read.format("odradek").options(subscribe="secure-in", **options).load().collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(f"v{i}".encode() for i in range(10))

    create_topic(plaintext, "secure-out", 1)
    frame = spark.createDataFrame([(f"w{i}",) for i in range(5)], ["value"])
    frame.write.format("odradek").mode("append").options(topic="secure-out", **options).save()
    back = spark.read.format("odradek").options(subscribe="secure-out", **options).load().collect()
    assert sorted(bytes(r["value"]) for r in back) == [f"w{i}".encode() for i in range(5)]


def test_wrong_password_fails_the_query_naming_the_cluster(spark: Any, broker: tuple[Any, dict[str, str]]) -> None:
    runner, paths = broker
    options = {"kafka.bootstrap.servers": address(runner, "SASL_SSL"), **security_options(paths)}
    options["kafka.sasl.jaas.config"] = options["kafka.sasl.jaas.config"].replace(SCRAM_USERS["scram-user"], "nope")
    options["kafka.default.api.timeout.ms"] = "5000"
    with pytest.raises(Exception, match=r"(?i)authentication|SASL"):
        spark.read.format("odradek").options(subscribe="secure-in", **options).load().collect()
