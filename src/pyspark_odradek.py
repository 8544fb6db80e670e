"""Zero-configuration discovery of the ``odradek`` Spark data source.

At its first data-source lookup Spark imports every top-level module named ``pyspark_*`` and
registers the ``DefaultSource`` it exports under ``DefaultSource.name()``, so
``spark.read.format("odradek")`` works without calling ``odradek.spark.register``.
"""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
