"""One local Spark session for the whole test session, plus small Kafka helpers.

Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), set before the JVM starts.
Brokers come from the ``odradek_broker`` fixture (one fresh broker per test).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from odradek.spark.pipeline import spark_session

    session = spark_session(
        "local[2]",
        shuffle_partitions=2,
        app_name="odradek-tests",
        jvm_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = True
    yield session
    session.stop()
