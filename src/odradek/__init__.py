"""odradek: a Kafka-compatible distributed commit log.

Brokers speak the Kafka wire protocol, partitions are Kafka-format segment files with
sparse offset and time indexes, and metadata lives in a ZooKeeper-layout store (an embedded
one for a single broker, Apache ZooKeeper for a cluster).
"""

__version__ = "0.1.0"
