"""Apache Spark integration: the ``odradek`` PySpark data source and the demo pipeline.

``format("odradek")`` reads and writes Kafka topics with the options, row schema and offset JSON
of Spark's own Kafka connector (``docs/spark.md``). It talks to brokers with confluent-kafka, so
it works against any Kafka-compatible cluster, odradek or not.

This package is the only part of odradek that imports pyspark and pyarrow, and it does so
lazily: ``import odradek.spark`` costs nothing until :func:`register` or the data source class
is used. Install the ``spark`` extra (``pyspark>=4.2,<5``, ``pyarrow``, ``confluent-kafka``).

Two ways to make the format available to a session:

* ``odradek.spark.register(spark)``;
* nothing at all: Spark imports every top-level ``pyspark_*`` module at its first data-source
  lookup, and odradek ships ``pyspark_odradek`` exporting the source as ``DefaultSource``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SHORT_NAME", "register"]

SHORT_NAME = "odradek"


def register(spark: Any) -> None:
    """Register the ``odradek`` format with ``spark`` (a ``SparkSession``); idempotent."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
